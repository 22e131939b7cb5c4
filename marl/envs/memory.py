"""``RecallEnv``: a batched multi-agent task that only a policy with memory can solve.

Each agent is shown a cue (one of ``n_cues``) at the first step of an episode, then
``delay`` blank observations, then a query; its reward is 1 if its action at the query
step names its cue, 0 otherwise (the other steps' actions do not count). A memoryless
policy sees the same query observation whatever the cue, so it scores ``1 / n_cues`` per
agent at best, as the random and the no-op policies do; a recurrent policy can score 1.
It is the catalogue's ``marl/recall`` task (``tasks/marl/recall.yaml``), built for
testing and comparing recurrent models in seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from marl.envs.common import EnvBase, make_done_spec, reset_where, seed_generator, set_done_flags
from marl.groups import GroupMap
from marl.specs import Categorical, Composite, Unbounded

__all__ = ["RecallEnv"]


def _batch(num_envs: int | Sequence[int] | None) -> torch.Size:
    if num_envs is None:
        return torch.Size([])
    return torch.Size([num_envs] if isinstance(num_envs, int) else list(num_envs))


class RecallEnv(EnvBase):
    """Remember a cue over ``delay`` blank steps, then name it (one group, ``"agent"``).

    Observation per agent (``n_cues + 1`` features): the cue's one-hot at the first step
    (zeros after), and a last feature that is 1 at the query step. Action: the cue's
    index (``Categorical(n_cues)``). Episodes last ``delay + 2`` steps and terminate.

    Args:
        num_envs: env batch size (``None``: one unbatched env).
        n_agents: agents, each with its own cue.
        n_cues: cue values (the memoryless score is ``1 / n_cues``).
        delay: blank steps between the cue and the query.
        device: device of the tensors.
        seed: optional seed.

    Examples:
        >>> env = RecallEnv(num_envs=2, n_agents=2, n_cues=3, delay=1, seed=0)
        >>> td = env.rollout(3)
        >>> td["agent", "observation"].shape, td["next", "done"][:, -1, 0].tolist()
        (torch.Size([2, 3, 2, 4]), [True, True])
        >>> td["agent", "observation"][0, 1:, :, :3].abs().sum().item()  # blank after the cue
        0.0
    """

    def __init__(
        self,
        num_envs: int | Sequence[int] | None = None,
        n_agents: int = 2,
        n_cues: int = 3,
        delay: int = 2,
        device: Any = None,
        seed: int | None = None,
        group_map: Any = None,
    ) -> None:
        for name, value, low in (
            ("n_agents", n_agents, 1),
            ("n_cues", n_cues, 2),
            ("delay", delay, 0),
        ):
            if not isinstance(value, int) or value < low:
                raise ValueError(f"RecallEnv: {name} must be an int >= {low}, got {value!r}")
        if group_map is not None:
            raise ValueError("RecallEnv has one group, 'agent': group_map cannot be changed")
        names = [f"agent_{i}" for i in range(n_agents)]
        super().__init__(
            batch_size=_batch(num_envs), device=device, group_map=GroupMap.by_prefix(names)
        )
        self.n_agents, self.n_cues, self.delay = n_agents, n_cues, delay
        b, d, n = self.batch_size, self.device, n_agents
        self.observation_spec = Composite(
            {
                "agent": Composite(
                    {"observation": Unbounded((*b, n, n_cues + 1), device=d)}, shape=(*b, n)
                )
            },
            shape=b,
        )
        self.action_spec = Composite(
            {"agent": Composite({"action": Categorical(n_cues, (*b, n), device=d)}, shape=(*b, n))},
            shape=b,
        )
        self.reward_spec = Composite(
            {"agent": Composite({"reward": Unbounded((*b, n, 1), device=d)}, shape=(*b, n))},
            shape=b,
        )
        self.done_spec = make_done_spec(b, d)
        self._gen = torch.Generator()
        self.set_seed(seed)
        self._t = torch.zeros(b, dtype=torch.long)
        self._cue = torch.zeros((*b, n), dtype=torch.long)

    def _observe(self) -> TensorDict:
        b = self.batch_size
        first = (self._t == 0)[..., None, None]
        cue = torch.nn.functional.one_hot(self._cue, self.n_cues).float() * first
        query = (self._t == self.delay + 1)[..., None, None].float().expand(*b, self.n_agents, 1)
        obs = torch.cat([cue, query], -1)
        return TensorDict(
            {"agent": TensorDict({"observation": obs}, batch_size=(*b, self.n_agents))},
            batch_size=b,
        ).to(self.device)

    def _flags(self, out: TensorDict, done: torch.Tensor) -> None:
        set_done_flags(out, done.reshape(*self.batch_size, 1).to(self.device))

    def _reset(self, td: TensorDictBase | None) -> TensorDictBase:
        b = self.batch_size
        where = reset_where(td, b)
        cue = torch.randint(0, self.n_cues, (*b, self.n_agents), generator=self._gen)
        self._cue = torch.where(where[..., None], cue, self._cue)
        self._t = torch.where(where, torch.zeros_like(self._t), self._t)
        out = self._observe()
        self._flags(out, torch.zeros(b, dtype=torch.bool))
        return out

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        action = td.get(("agent", "action")).long().cpu()
        query = (self._t == self.delay + 1)[..., None]
        reward = ((action == self._cue) & query).float()[..., None]
        self._t = self._t + 1
        out = self._observe()
        out.set(("agent", "reward"), reward.to(self.device))
        self._flags(out, self._t > self.delay + 1)
        return out

    def _set_seed(self, seed: int | None) -> None:
        seed_generator(self._gen, seed)
