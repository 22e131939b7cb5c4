"""Fast fake envs, pure torch and vectorized, that follow the data layout exactly.

They let every component be tested (and documented) without VMAS or PettingZoo:

- :class:`MultiAgentFakeEnv`: two heterogeneous groups, a global state and
  per-agent done flags. ``"walker"`` (2 agents) has 6-dim observations and
  continuous 2-dim actions; ``"picker"`` (3 agents) has 4-dim observations and
  discrete actions (5 choices) with an action mask.
- :class:`SingleAgentFakeEnv`: the single-agent layout, continuous or discrete.

Both are learnable: the reward is highest when the action matches a target
that the observation reveals, so they double as smoke tests for algorithms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from marl.envs.common import EnvBase, make_done_spec, reset_where, seed_generator, set_done_flags
from marl.groups import GroupMap
from marl.specs import Bounded, Categorical, Composite, Unbounded

__all__ = ["MultiAgentFakeEnv", "SingleAgentFakeEnv"]


def _batch(num_envs: int | Sequence[int] | None) -> torch.Size:
    if num_envs is None:
        return torch.Size([])
    if isinstance(num_envs, int):
        return torch.Size([num_envs])
    return torch.Size(num_envs)


class MultiAgentFakeEnv(EnvBase):
    """Two heterogeneous groups with per-agent horizons, a global state and masks.

    - ``walker`` (2 agents): observation ``[6]`` whose first two entries are a
      target in ``[-1, 1]``; action ``[2]`` in ``[-1, 1]``; reward
      ``-||action - target||^2``.
    - ``picker`` (3 agents): observation ``[4]`` one-hot of a target in
      ``0..3``; action in ``0..4`` with an ``action_mask`` that always allows the
      target and never allows 4; reward 1 for the target, -1 for an illegal
      action, 0 otherwise.
    - Each agent ends after its own random horizon in ``[min_steps, max_steps]``
      (then its ``done`` is True and its reward 0); the env is done when every
      agent is.
    - ``"state"`` ``[8]``: both groups' targets and the episode progress.

    Args:
        num_envs: env batch size (``None`` for an unbatched env).
        min_steps: shortest agent horizon.
        max_steps: longest agent horizon.
        device: device of the tensors.
        seed: optional seed.

    Examples:
        >>> env = MultiAgentFakeEnv(num_envs=4, seed=0)
        >>> td = env.rollout(5)
        >>> td["next", "picker", "reward"].shape, td["walker", "action"].shape
        (torch.Size([4, 5, 3, 1]), torch.Size([4, 5, 2, 2]))
    """

    N_WALKERS = 2
    N_PICKERS = 3
    N_CHOICES = 5

    def __init__(
        self,
        num_envs: int | Sequence[int] | None = None,
        min_steps: int = 5,
        max_steps: int = 10,
        device: Any = None,
        seed: int | None = None,
    ) -> None:
        if not 1 <= min_steps <= max_steps:
            raise ValueError(f"need 1 <= min_steps <= max_steps, got {min_steps}, {max_steps}")
        walkers = [f"walker_{i}" for i in range(self.N_WALKERS)]
        pickers = [f"picker_{i}" for i in range(self.N_PICKERS)]
        super().__init__(
            batch_size=_batch(num_envs),
            device=device,
            group_map=GroupMap.by_prefix(walkers + pickers),
        )
        self.min_steps, self.max_steps = min_steps, max_steps
        b, d = self.batch_size, self.device
        nw, npk = self.N_WALKERS, self.N_PICKERS
        self.observation_spec = Composite(
            {
                "walker": Composite(
                    {"observation": Unbounded((*b, nw, 6), device=d)}, shape=(*b, nw)
                ),
                "picker": Composite(
                    {
                        "observation": Unbounded((*b, npk, 4), device=d),
                        "action_mask": Unbounded(
                            (*b, npk, self.N_CHOICES), dtype=torch.bool, device=d
                        ),
                    },
                    shape=(*b, npk),
                ),
                "state": Unbounded((*b, 8), device=d),
            },
            shape=b,
        )
        self.action_spec = Composite(
            {
                "walker": Composite(
                    {"action": Bounded(-1.0, 1.0, (*b, nw, 2), device=d)}, shape=(*b, nw)
                ),
                "picker": Composite(
                    {"action": Categorical(self.N_CHOICES, (*b, npk), device=d)}, shape=(*b, npk)
                ),
            },
            shape=b,
        )
        self.reward_spec = Composite(
            {
                g: Composite({"reward": Unbounded((*b, n, 1), device=d)}, shape=(*b, n))
                for g, n in (("walker", nw), ("picker", npk))
            },
            shape=b,
        )
        done = make_done_spec(b, d)
        for g, n in (("walker", nw), ("picker", npk)):
            done[g] = make_done_spec((*b, n), d)
        self.done_spec = done
        self._gen = torch.Generator()
        self.set_seed(seed)
        self._alloc()

    # ------------------------------------------------------------ dynamics
    def _alloc(self) -> None:
        b = self.batch_size
        self._t = torch.zeros(b, dtype=torch.long)
        self._horizon = torch.zeros((*b, self.N_WALKERS + self.N_PICKERS), dtype=torch.long)
        self._walk_target = torch.zeros((*b, self.N_WALKERS, 2))
        self._pick_target = torch.zeros((*b, self.N_PICKERS), dtype=torch.long)
        self._mask = torch.zeros((*b, self.N_PICKERS, self.N_CHOICES), dtype=torch.bool)

    def _new_targets(self, where: torch.Tensor) -> None:
        b, g = self.batch_size, self._gen
        walk = torch.rand((*b, self.N_WALKERS, 2), generator=g) * 2 - 1
        pick = torch.randint(0, 4, (*b, self.N_PICKERS), generator=g)
        extra = torch.rand((*b, self.N_PICKERS, self.N_CHOICES), generator=g) < 0.5
        extra[..., -1] = False
        mask = extra | torch.nn.functional.one_hot(pick, self.N_CHOICES).bool()
        self._walk_target = torch.where(where[..., None, None], walk, self._walk_target)
        self._pick_target = torch.where(where[..., None], pick, self._pick_target)
        self._mask = torch.where(where[..., None, None], mask, self._mask)

    def _alive(self) -> torch.Tensor:
        return self._t[..., None] < self._horizon

    def _observe(self) -> TensorDict:
        b, d = self.batch_size, self.device
        alive = self._alive()
        alive_w, alive_p = alive[..., : self.N_WALKERS], alive[..., self.N_WALKERS :]
        progress = (self._t.float() / self.max_steps)[..., None]
        walk_obs = torch.cat(
            [
                self._walk_target,
                self._walk_target.pow(2),
                progress[..., None].expand(*b, 2, 1),
                alive_w[..., None].float(),
            ],
            dim=-1,
        )
        pick_obs = torch.nn.functional.one_hot(self._pick_target, 4).float()
        state = torch.cat(
            [self._walk_target.reshape(*b, 4), self._pick_target.float() / 3, progress], dim=-1
        )
        return TensorDict(
            {
                "walker": TensorDict(
                    {"observation": walk_obs * alive_w[..., None]}, batch_size=(*b, self.N_WALKERS)
                ),
                "picker": TensorDict(
                    {
                        "observation": pick_obs * alive_p[..., None],
                        "action_mask": self._mask.clone(),
                    },
                    batch_size=(*b, self.N_PICKERS),
                ),
                "state": state,
            },
            batch_size=b,
        ).to(d)

    def _flags(self, out: TensorDict) -> None:
        b = self.batch_size
        dead = ~self._alive()
        for g, sl in (
            ("walker", slice(0, self.N_WALKERS)),
            ("picker", slice(self.N_WALKERS, None)),
        ):
            set_done_flags(out, dead[..., sl, None].to(self.device), (g,))
        set_done_flags(out, dead.all(-1, keepdim=True).to(self.device).reshape(*b, 1))

    def _reset(self, td: TensorDictBase | None) -> TensorDictBase:
        b = self.batch_size
        where = reset_where(td, b)
        horizon = torch.randint(
            self.min_steps,
            self.max_steps + 1,
            (*b, self.N_WALKERS + self.N_PICKERS),
            generator=self._gen,
        )
        self._horizon = torch.where(where[..., None], horizon, self._horizon)
        self._t = torch.where(where, torch.zeros_like(self._t), self._t)
        self._new_targets(where)
        out = self._observe()
        self._flags(out)
        return out

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        alive = self._alive().to(self.device)
        alive_w = alive[..., : self.N_WALKERS, None]
        alive_p = alive[..., self.N_WALKERS :, None]
        walk_act = td.get(("walker", "action")).clamp(-1, 1)
        walk_r = -(walk_act - self._walk_target.to(self.device)).pow(2).sum(-1, keepdim=True)
        pick_act = td.get(("picker", "action")).long()
        target = self._pick_target.to(self.device)
        legal = self._mask.to(self.device).gather(
            -1, pick_act.clamp(0, self.N_CHOICES - 1)[..., None]
        )
        pick_r = torch.where(
            legal,
            (pick_act == target)[..., None].float(),
            torch.full_like(legal, -1.0, dtype=torch.float32),
        )
        self._t = self._t + 1
        self._new_targets(torch.ones(self.batch_size, dtype=torch.bool))
        out = self._observe()
        out.set(("walker", "reward"), walk_r * alive_w)
        out.set(("picker", "reward"), pick_r * alive_p)
        self._flags(out)
        return out

    def _set_seed(self, seed: int | None) -> None:
        seed_generator(self._gen, seed)


class SingleAgentFakeEnv(EnvBase):
    """A single-agent env with the root layout, continuous or discrete.

    Observation ``[4]``: a random target plus noise. Continuous actions ``[2]``
    in ``[-1, 1]`` earn ``-||action - obs[:2]||^2``; discrete actions (3
    choices) earn 1 when equal to ``argmax(obs[:3])``. Each step terminates
    with probability ``p_terminate``; episodes are truncated at ``max_steps``.

    Args:
        num_envs: env batch size (``None`` for an unbatched env).
        max_steps: truncation horizon.
        discrete: discrete actions instead of continuous ones.
        p_terminate: per-step termination probability.
        dtype: float dtype of observations, rewards and continuous actions.
        device: device of the tensors.
        seed: optional seed.

    Examples:
        >>> env = SingleAgentFakeEnv(num_envs=3, seed=0)
        >>> td = env.rollout(4, break_when_any_done=False)
        >>> td["next", "reward"].shape
        torch.Size([3, 4, 1])
    """

    def __init__(
        self,
        num_envs: int | Sequence[int] | None = None,
        max_steps: int = 20,
        discrete: bool = False,
        p_terminate: float = 0.02,
        dtype: torch.dtype = torch.float32,
        device: Any = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(batch_size=_batch(num_envs), device=device)
        b, d = self.batch_size, self.device
        self.max_steps, self.discrete, self.p_terminate, self.dtype = (
            max_steps,
            discrete,
            p_terminate,
            dtype,
        )
        self.observation_spec = Composite(
            {"observation": Unbounded((*b, 4), dtype=dtype, device=d)}, shape=b
        )
        action = (
            Categorical(3, b, device=d)
            if discrete
            else Bounded(-1.0, 1.0, (*b, 2), dtype=dtype, device=d)
        )
        self.action_spec = Composite({"action": action}, shape=b)
        self.reward_spec = Composite({"reward": Unbounded((*b, 1), dtype=dtype, device=d)}, shape=b)
        self._gen = torch.Generator()
        self.set_seed(seed)
        self._t = torch.zeros(b, dtype=torch.long)
        self._obs = torch.zeros((*b, 4), dtype=dtype)

    def _draw_obs(self) -> torch.Tensor:
        return (torch.rand((*self.batch_size, 4), generator=self._gen) * 2 - 1).to(self.dtype)

    def _reset(self, td: TensorDictBase | None) -> TensorDictBase:
        b = self.batch_size
        where = reset_where(td, b)
        self._t = torch.where(where, torch.zeros_like(self._t), self._t)
        self._obs = torch.where(where[..., None], self._draw_obs(), self._obs)
        return TensorDict({"observation": self._obs.clone()}, batch_size=b).to(self.device)

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        b = self.batch_size
        action = td.get("action").to("cpu")
        if self.discrete:
            reward = (action == self._obs[..., :3].argmax(-1)).to(self.dtype)[..., None]
        else:
            reward = -(action.clamp(-1, 1) - self._obs[..., :2]).pow(2).sum(-1, keepdim=True)
        self._t = self._t + 1
        terminated = (torch.rand(b, generator=self._gen) < self.p_terminate)[..., None]
        truncated = (self._t >= self.max_steps)[..., None] & ~terminated
        self._obs = self._draw_obs()
        return TensorDict(
            {
                "observation": self._obs.clone(),
                "reward": reward.to(self.dtype),
                "terminated": terminated,
                "truncated": truncated,
                "done": terminated | truncated,
            },
            batch_size=b,
        ).to(self.device)

    def _set_seed(self, seed: int | None) -> None:
        seed_generator(self._gen, seed)
