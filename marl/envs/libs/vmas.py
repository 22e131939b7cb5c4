"""`VmasEnv`: vectorized multi-agent simulator (VMAS) scenarios, grouped.

VMAS runs ``num_envs`` copies of a scenario as batched torch tensors on any
device. The wrapper stacks the agents of each group along an agent dim and
keeps the env batch ``[num_envs]`` as the TensorDict batch.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from marl.envs.batched import new_td
from marl.envs.common import EnvBase, make_done_spec
from marl.envs.libs._spaces import space_to_spec, stack_agent_specs
from marl.extras import require
from marl.groups import GroupMap, GroupMapLike
from marl.specs import Composite, OneHot, Unbounded

__all__ = ["VmasEnv"]


def _import_vmas() -> Any:
    return require("vmas", "VmasEnv", "vmas")


def _is_float64(obs: Any) -> bool:
    if isinstance(obs, dict):
        return any(_is_float64(v) for v in obs.values())
    return isinstance(obs, torch.Tensor) and obs.dtype == torch.float64


def _keeps_float64(env: VmasEnv, is_float64: bool) -> bool:
    """Whether a float64 source keeps its dtype."""
    return is_float64 and env.keep_float64


def _to_float32(x: torch.Tensor) -> torch.Tensor:
    return x.float() if x.dtype == torch.float64 else x


def _scenario_names() -> list[str]:
    vmas = _import_vmas()
    names: list[str] = []
    for attr in ("scenarios", "mpe_scenarios", "debug_scenarios"):
        names.extend(getattr(vmas, attr, []))
    return sorted(set(names))


class VmasEnv(EnvBase):
    """A VMAS scenario with batch size ``[num_envs]`` and agents stacked by group.

    Keys (``g`` a group of ``n_g`` agents, ``B = num_envs``):

    - ``(g, "observation")`` ``[B, n_g, *obs]`` (a sub-TensorDict for dict observations);
    - ``(g, "action")``: ``[B, n_g, A]`` continuous, ``[B, n_g]`` categorical or
      ``[B, n_g, n]`` one-hot;
    - ``("next", g, "reward")`` ``[B, n_g, 1]``;
    - ``(g, "info", name)`` ``[B, n_g, *info]``: the scenario's info tensors;
    - ``done``/``terminated``/``truncated``: ``[B, 1]`` at the root, broadcast to
      ``[B, n_g, 1]`` in each group (VMAS agents end together).

    Partial resets (a ``"_reset"`` mask) are vectorized: when more than
    ``loop_reset_threshold`` sub-envs end together, the whole batch is reset in
    one call and the state of the sub-envs that were not meant to restart is
    put back (every tensor whose first dim is ``num_envs`` in the VMAS env,
    its world, entities and scenario is saved and restored). A few sub-envs
    are reset one by one, which is exact and cheap. A custom scenario that
    keeps per-env state outside such tensors (Python lists, batch dim not
    first) should use ``loop_reset_threshold=num_envs``.

    VMAS computes in float32; a custom scenario that returns float64
    observations, rewards or infos has them converted to float32, unless
    ``keep_float64=True`` (then float64 observations keep a float64 spec).

    Args:
        scenario: a VMAS scenario name (e.g. ``"navigation"``) or a
            ``BaseScenario`` instance.
        num_envs: number of vectorized sub-envs.
        device: torch device of the simulation and of every tensor.
        continuous_actions: continuous (True) or discrete actions.
        max_steps: horizon after which VMAS truncates (``None``: no limit).
        group_map: ``None`` (``by_prefix``), a constructor name, a dict or a ``GroupMap``.
        seed: optional seed (VMAS seeds torch, numpy and random globally).
        categorical_actions: discrete actions as indices (True) or one-hot (False).
        loop_reset_threshold: at most this many sub-envs are reset one by one;
            more go through the vectorized reset.
        keep_float64: keep float64 observations, rewards and infos of a custom
            scenario (False: convert them to float32).
        check_actions: check every action before VMAS sees it (NaN/inf,
            out-of-range or non-integer discrete actions; see
            :mod:`marl.envs.action_checks`). Off by default: it costs time per step.
        **scenario_kwargs: scenario arguments (e.g. ``n_agents=3``).

    Raises:
        ImportError: when vmas is not installed.
        ValueError: on an unknown scenario or scenario keyword argument.

    Examples:
        >>> env = VmasEnv("navigation", num_envs=4, n_agents=3, max_steps=10, seed=0)
        >>> td = env.rollout(5)
        >>> td["agent", "observation"].shape, td["next", "agent", "reward"].shape
        (torch.Size([4, 5, 3, 18]), torch.Size([4, 5, 3, 1]))
    """

    def __init__(
        self,
        scenario: Any,
        num_envs: int,
        device: Any = "cpu",
        continuous_actions: bool = True,
        max_steps: int | None = None,
        group_map: GroupMapLike | None = None,
        seed: int | None = None,
        *,
        categorical_actions: bool = True,
        loop_reset_threshold: int = 2,
        keep_float64: bool = False,
        check_actions: bool = False,
        **scenario_kwargs: Any,
    ) -> None:
        vmas = _import_vmas()
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        if isinstance(scenario, str) and scenario not in _scenario_names():
            import difflib

            close = difflib.get_close_matches(scenario, _scenario_names(), n=5)
            raise ValueError(f"unknown VMAS scenario {scenario!r}; closest names: {close}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self._env = vmas.make_env(
                scenario,
                num_envs=num_envs,
                device=device,
                continuous_actions=continuous_actions,
                max_steps=max_steps,
                seed=seed,
                terminated_truncated=True,
                **scenario_kwargs,
            )
        for w in caught:
            if "passed but not used by the scenario" in str(w.message):
                name = scenario if isinstance(scenario, str) else type(scenario).__name__
                raise ValueError(
                    f"unknown keyword argument(s) for VMAS scenario {name!r}: "
                    f"{str(w.message).split(' passed')[0].removeprefix('Scenario kwargs: ')}"
                )
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        agents = [a.name for a in self._env.agents]
        super().__init__(
            batch_size=(num_envs,), device=device, group_map=GroupMap.build(group_map, agents)
        )
        self.scenario_name = scenario if isinstance(scenario, str) else type(scenario).__name__
        self.num_envs = num_envs
        self.continuous_actions = continuous_actions
        self.categorical_actions = categorical_actions
        self.max_steps = max_steps
        self.loop_reset_threshold = loop_reset_threshold
        self.keep_float64 = keep_float64
        self.check_actions = check_actions
        self.agent_names = agents
        index = {a: i for i, a in enumerate(agents)}
        self._groups = [(g, [index[a] for a in members]) for g, members in self.group_map.items()]
        self._make_specs()
        if seed is not None:
            self.set_seed(seed)

    # ------------------------------------------------------------ specs
    def _make_specs(self) -> None:
        env, b, d = self._env, (self.num_envs,), self.device
        obs_raw, info_raw = env.reset(return_observations=True, return_info=True)
        # VMAS's spaces say float32; a float64 scenario keeps float64 only when asked.
        is64 = [_is_float64(o) for o in obs_raw]
        self._float_dtype = torch.float64 if _keeps_float64(self, any(is64)) else torch.float32
        obs_spec = Composite(shape=b, device=d)
        act_spec = Composite(shape=b, device=d)
        rew_spec = Composite(shape=b, device=d)
        done_spec = make_done_spec(b, d)
        self._one_hot: dict[str, bool] = {}
        self._dict_obs: dict[str, bool] = {}
        for g, idx in self._groups:
            names = [self.agent_names[i] for i in idx]
            n = len(idx)
            agents = [env.agents[i] for i in idx]
            obs = stack_agent_specs(
                [
                    space_to_spec(
                        env.observation_space[i],
                        b,
                        device=d,
                        float_dtype=torch.float64 if _keeps_float64(self, is64[i]) else None,
                    )
                    for i in idx
                ],
                names,
                g,
                "observation",
                1,
            )
            act_spaces = [env.get_agent_action_space(a) for a in agents]
            act = stack_agent_specs(
                [
                    space_to_spec(s, b, categorical=self.categorical_actions, device=d)
                    for s in act_spaces
                ],
                names,
                g,
                "action",
                1,
            )
            self._one_hot[g] = isinstance(act, OneHot)
            self._dict_obs[g] = isinstance(obs, Composite)
            group_obs = Composite({"observation": obs}, shape=(*b, n), device=d)
            info = self._info_spec(g, [info_raw[i] for i in idx], names)
            if info is not None:
                group_obs["info"] = info
            obs_spec[g] = group_obs
            act_spec[g] = Composite({"action": act}, shape=(*b, n), device=d)
            reward = Unbounded((*b, n, 1), dtype=self._float_dtype, device=d)
            rew_spec[g] = Composite({"reward": reward}, shape=(*b, n))
            done_spec[g] = make_done_spec((*b, n), d)
        self.observation_spec = obs_spec
        self.action_spec = act_spec
        self.reward_spec = rew_spec
        self.done_spec = done_spec
        self._info_keys = {
            g: list(obs_spec[g, "info"].keys()) if "info" in obs_spec[g] else []
            for g, _ in self._groups
        }
        self._group_batch = {g: torch.Size([self.num_envs, len(idx)]) for g, idx in self._groups}
        self._info_dtypes = {
            g: {k: obs_spec[g, "info", k].dtype for k in keys}
            for g, keys in self._info_keys.items()
        }

    def _info_spec(self, group: str, infos: list[dict], names: list[str]) -> Composite | None:
        first = {k: v for k, v in infos[0].items() if isinstance(v, torch.Tensor)}
        if not first:
            return None
        n, b = len(infos), (self.num_envs,)
        spec = Composite(shape=(*b, n), device=self.device)
        for key, value in first.items():
            for name, other in zip(names[1:], infos[1:]):
                o = other.get(key)
                if not isinstance(o, torch.Tensor) or o.shape != value.shape:
                    shape = None if o is None else tuple(getattr(o, "shape", ()))
                    raise ValueError(
                        f"group {group!r}: info {key!r} of agent {name!r} has shape {shape}, "
                        f"but agent {names[0]!r} has {tuple(value.shape)}; put them in "
                        "different groups"
                    )
            dtype = value.dtype
            if dtype == torch.float64 and not self.keep_float64:
                dtype = torch.float32
            spec[key] = Unbounded((*b, n, *value.shape[1:]), dtype=dtype, device=self.device)
        return spec

    # ------------------------------------------------------------ data
    def _pack(
        self,
        obs: list,
        infos: list,
        rews: list | None = None,
        term: torch.Tensor | None = None,
        trunc: torch.Tensor | None = None,
    ) -> TensorDict:
        """One TensorDict with every group's entries (and the flags after a step)."""
        b, nb = self.batch_size, self.num_envs
        root: dict[str, Any] = {}
        if rews is not None:
            term = term.reshape(nb, 1).bool()
            trunc = trunc.reshape(nb, 1).bool()
            done = term | trunc
            root["done"], root["terminated"], root["truncated"] = done, term, trunc
            # [3, nb, 1]: the three flags at once, broadcast to each group below
            flags = torch.stack([done, term, trunc])
        for g, idx in self._groups:
            n = len(idx)
            gb = self._group_batch[g]
            if self._dict_obs[g]:
                o = torch.stack([TensorDict(obs[i], batch_size=b) for i in idx], dim=1)
                if not self.keep_float64:
                    o = o.apply(_to_float32)
            else:
                o = torch.stack([obs[i] for i in idx], dim=1)
                if o.dtype == torch.float64 and not self.keep_float64:
                    o = o.float()
            group: dict[str, Any] = {"observation": o}
            keys = self._info_keys[g]
            if keys:
                dtypes = self._info_dtypes[g]
                group["info"] = new_td(
                    {k: torch.stack([infos[i][k] for i in idx], dim=1).to(dtypes[k]) for k in keys},
                    gb,
                    self.device,
                )
            if rews is not None:
                reward = torch.stack([rews[i] for i in idx], dim=1).reshape(nb, n, 1)
                group["reward"] = reward.to(self._float_dtype)
                # one copy for the three flags (not three expand-clones): each is a
                # contiguous [nb, n, 1] slice of it, with no memory shared with the root's
                g_flags = flags.unsqueeze(2).expand(3, nb, n, 1).contiguous()
                group["done"], group["terminated"], group["truncated"] = g_flags.unbind(0)
            root[g] = new_td(group, gb, self.device)
        return new_td(root, b, self.device)

    def _reset(self, td: TensorDictBase | None) -> TensorDictBase:
        mask = None if td is None else td.get("_reset", None)
        env = self._env
        if mask is None or bool(mask.all()):
            obs, infos = env.reset(return_observations=True, return_info=True)
        else:
            self._reset_where(mask.reshape(self.num_envs).to(env.device))
            obs, infos = env.get_from_scenario(
                get_observations=True, get_rewards=False, get_infos=True, get_dones=False
            )
        return self._pack(obs, infos)

    def _reset_where(self, mask: torch.Tensor) -> None:
        """Reset the sub-envs where ``mask`` is True, vectorized when there are many."""
        from vmas.simulator.environment import environment as vmas_environment

        with vmas_environment.local_seed(type(self._env).vmas_random_state):
            self._reset_where_unseeded(mask)

    def _reset_where_unseeded(self, mask: torch.Tensor) -> None:
        env = self._env
        index = mask.nonzero().flatten()
        if index.numel() <= self.loop_reset_threshold:
            for i in index.tolist():
                env.scenario.env_reset_world_at(i)
                env.steps[i] = 0
            return
        saved = [(owner, key, value.clone()) for owner, key, value in self._batched_state()]
        env.scenario.env_reset_world_at(env_index=None)
        env.steps = torch.zeros(self.num_envs, device=env.device)
        keep = ~mask
        for owner, key, old in saved:
            current = owner[key] if isinstance(owner, (list, dict)) else getattr(owner, key, None)
            if not isinstance(current, torch.Tensor) or current.shape != old.shape:
                continue
            k = keep.reshape(-1, *([1] * (old.dim() - 1)))
            merged = torch.where(k, old.to(current.dtype), current)
            try:
                current.copy_(merged)
            except RuntimeError:  # e.g. an expanded tensor: replace it instead
                if isinstance(owner, (list, dict)):
                    owner[key] = merged
                else:
                    setattr(owner, key, merged)

    def _batched_state(self) -> Iterator[tuple[Any, Any, torch.Tensor]]:
        """Every tensor with a leading ``num_envs`` dim in the VMAS env, world and scenario."""
        seen: set[int] = set()
        stack: list[Any] = [self._env]
        n = self.num_envs
        # Scenario modules are loaded from files (their __module__ may not start
        # with "vmas"), and user scenarios live anywhere: walk their module too.
        scenario_module = type(self._env.scenario).__module__ or ""
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, dict):
                items = list(obj.items())
            elif isinstance(obj, (list, tuple)):
                items = list(enumerate(obj))
            else:
                module = type(obj).__module__ or ""
                if module.startswith("vmas.simulator.rendering") or not (
                    module.startswith("vmas") or module == scenario_module
                ):
                    continue
                items = list(vars(obj).items()) if hasattr(obj, "__dict__") else []
            for key, value in items:
                if isinstance(value, torch.Tensor):
                    if value.dim() >= 1 and value.shape[0] == n and not isinstance(obj, tuple):
                        yield obj, key, value
                elif isinstance(value, (dict, list, tuple)) or hasattr(value, "__dict__"):
                    if key in ("viewer", "_viewer", "text_lines"):
                        continue
                    stack.append(value)

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        actions: list[torch.Tensor | None] = [None] * len(self.agent_names)
        for g, idx in self._groups:
            a = td.get((g, "action"))
            if self._one_hot[g]:
                a = a.argmax(-1)
            for j, i in enumerate(idx):
                actions[i] = a[:, j]
        obs, rews, term, trunc, infos = self._env.step(actions)
        return self._pack(obs, infos, rews, term, trunc)

    def _set_seed(self, seed: int | None) -> None:
        self._env.seed(seed)

    # ------------------------------------------------------------ extras
    @property
    def vmas_env(self) -> Any:
        """The underlying ``vmas`` environment."""
        return self._env

    def render(self, mode: str = "rgb_array", env_index: int = 0, **kwargs: Any) -> Any:
        """Render one sub-env with VMAS's renderer.

        Args:
            mode: ``"rgb_array"`` (returns an ``[H, W, 3]`` uint8 array) or ``"human"``.
            env_index: which sub-env to draw.
            **kwargs: passed to ``vmas``'s ``render``.

        Returns:
            The frame for ``"rgb_array"``.
        """
        return self._env.render(mode=mode, env_index=env_index, **kwargs)

    def close(self) -> None:
        viewer = getattr(self._env, "viewer", None)
        if viewer is not None:
            viewer.close()
        super().close()
