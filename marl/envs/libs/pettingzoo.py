"""`PettingZooEnv`: PettingZoo tasks, parallel or turn-based (AEC), grouped.

The env is unbatched (batch size ``[]``); use ``SerialEnv``/``ParallelEnv`` to
run several. Agents of a group are stacked along the first dim of the group's
entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from marl.envs.batched import arrays_to_td, env_flag_arrays
from marl.envs.common import make_done_spec
from marl.envs.libs._host_steps import HostStepsEnv
from marl.envs.libs._spaces import (
    numpy_to_torch_dtype,
    space_kind,
    space_to_spec,
    stack_agent_specs,
    to_numpy_action,
)
from marl.envs.libs.pettingzoo_parallel import (
    parallel_step,
    steps_without_discarded_observations,
)
from marl.envs.libs.pettingzoo_tasks import find_task
from marl.extras import require
from marl.groups import GroupMap, GroupMapLike
from marl.specs import Composite, NestedKey, OneHot, TensorSpec, Unbounded

__all__ = ["PettingZooEnv"]

# Tasks whose observations are crops of a pygame screen that is drawn only when the env
# renders: under PettingZoo's default ``render_mode=None`` every observation stays the
# first frame (cooperative_pong's a black one), so nothing can be learnt from the pixels.
# They are built with ``render_mode="rgb_array"`` unless one is given.
_DRAWN_ONLY_WHEN_RENDERING = ("pistonball_v", "cooperative_pong_v")


class PettingZooEnv(HostStepsEnv):
    """A PettingZoo env with agents stacked by group (parallel or AEC API).

    Keys (``g`` a group of ``n_g`` agents):

    - ``(g, "observation")`` ``[n_g, *obs]`` (a sub-TensorDict for dict observations);
    - ``(g, "action_mask")`` ``[n_g, n]`` bool, when observations carry an
      ``"action_mask"`` (an agent with no legal action, e.g. not its turn, gets
      an all-True row so that samplers never fail; its action is ignored);
    - ``(g, "action")``, ``("next", g, "reward")`` ``[n_g, 1]``;
    - ``(g, "done" / "terminated" / "truncated")`` ``[n_g, 1]`` per agent;
    - ``(g, "mask")`` ``[n_g]`` bool (with ``use_mask``): False for agents that
      have left the episode (parallel) or whose turn it is not (AEC);
    - root ``done``/``terminated``/``truncated`` ``[1]``: all agents done (or
      any, with ``done_on_any``); ``truncated`` when an agent ending that step
      was truncated;
    - ``"state"`` with ``return_state=True``.

    float64 observations, states and actions (``knights_archers_zombies``,
    sisl) become float32 specs and data, and rewards are float32, unless
    ``keep_float64=True``: policies and losses compute in float32, and a
    float64 input fails deep inside a network otherwise. Actions go back to the
    env in its own dtype.

    Agents that leave early keep valid entries (zeros) until the episode ends.
    In AEC mode, one ``step`` plays the acting agent's move; the observations
    of every agent are refreshed after it, and turns of agents that are
    already done are played (with ``None``) automatically.

    Args:
        task: a task name, e.g. ``"simple_spread_v3"`` (MPE, from ``mpe2``),
            ``"multiwalker_v9"`` (sisl) or ``"tictactoe_v3"`` (classic); a family
            prefix such as ``"sisl/multiwalker_v9"`` is allowed.
        env: an existing PettingZoo ``ParallelEnv`` or ``AECEnv`` (instead of ``task``).
        parallel: build the parallel API (True) or the AEC API (False) from ``task``.
        group_map: ``None`` (``by_prefix``), a constructor name, a dict or a ``GroupMap``.
        use_mask: write the per-group ``"mask"`` key (always True in AEC mode).
        return_state: add the global ``"state"`` (``env.state()``).
        seed: optional seed.
        done_on_any: end the episode when any agent is done.
        categorical_actions: discrete actions as indices (True) or one-hot (False).
        device: device of the tensors.
        keep_float64: keep float64 observations, states, actions and rewards
            (False: convert them to float32).
        check_actions: check every action before PettingZoo sees it (NaN/inf,
            non-integer or out-of-range discrete actions, illegal ones under the
            action mask; see :mod:`marl.envs.action_checks`). Off by default.
        **kwargs: task arguments (e.g. ``N=3, max_cycles=25``).

    Raises:
        ImportError: when pettingzoo (or the task's package) is missing.
        ValueError: on an unknown task, a bad combination of arguments or an
            env that lacks ``state()`` with ``return_state=True``.

    Examples:
        >>> env = PettingZooEnv("simple_tag_v3", seed=0, max_cycles=10)
        >>> td = env.rollout(4)
        >>> td["adversary", "observation"].shape, td["agent", "observation"].shape
        (torch.Size([4, 3, 16]), torch.Size([4, 1, 14]))
    """

    complete_done_flags = True  # _pack_arrays writes every flag, at the root and per group

    def __init__(
        self,
        task: str | None = None,
        env: Any = None,
        parallel: bool = True,
        group_map: GroupMapLike | None = None,
        use_mask: bool = True,
        return_state: bool = False,
        seed: int | None = None,
        *,
        done_on_any: bool = False,
        categorical_actions: bool = True,
        device: Any = None,
        keep_float64: bool = False,
        check_actions: bool = False,
        **kwargs: Any,
    ) -> None:
        require("pettingzoo", "PettingZooEnv", "pettingzoo")
        from pettingzoo.utils.env import AECEnv, ParallelEnv

        if (task is None) == (env is None):
            raise ValueError("PettingZooEnv needs exactly one of task= or env=")
        if env is None:
            module = find_task(task)
            maker = "parallel_env" if parallel else "env"
            if module.__name__.rpartition(".")[2].startswith(_DRAWN_ONLY_WHEN_RENDERING):
                kwargs.setdefault("render_mode", "rgb_array")
            if not hasattr(module, maker):
                raise ValueError(
                    f"PettingZoo task {task!r} has no {maker}(); it is turn-based: "
                    "pass parallel=False"
                )
            try:
                env = getattr(module, maker)(**kwargs)
            except TypeError as err:
                if "unexpected keyword" not in str(err):
                    raise
                raise ValueError(f"unknown argument for PettingZoo task {task!r}: {err}") from err
        elif kwargs:
            raise ValueError(f"task arguments {sorted(kwargs)} need task=, not env=")
        if isinstance(env, ParallelEnv):
            self.parallel = True
        elif isinstance(env, AECEnv):
            self.parallel = False
        else:
            raise TypeError(
                f"env must be a PettingZoo ParallelEnv or AECEnv, got {type(env).__name__}"
            )
        self._env = env
        # PettingZoo's AEC-to-parallel step observes every agent twice (see parallel_step)
        self._parallel_step = self.parallel and steps_without_discarded_observations(env)
        self.task = task
        agents = list(env.possible_agents)
        super().__init__(batch_size=(), device=device, group_map=GroupMap.build(group_map, agents))
        self.agent_names = agents
        self.use_mask = use_mask or not self.parallel
        self.turn_based = not self.parallel
        self.return_state = return_state
        self.done_on_any = done_on_any
        self._host_options(
            categorical_actions=categorical_actions,
            keep_float64=keep_float64,
            check_actions=check_actions,
            seed=seed,
        )

    # ------------------------------------------------------------ specs
    def _make_specs(self) -> None:
        env, d = self._env, self.device
        obs_spec = Composite(shape=(), device=d)
        act_spec = Composite(shape=(), device=d)
        rew_spec = Composite(shape=(), device=d)
        done_spec = make_done_spec((), d)
        self._obs_layout: dict[str, tuple[bool, list[str]]] = {}
        self._act_kind: dict[str, tuple[bool, Any]] = {}
        self._index_actions: set[str] = set()  # groups whose actions are Discrete indices
        self._zeros: dict[str, dict[str, np.ndarray]] = {}
        for g, members in self.group_map.items():
            n = len(members)
            per_agent = [self._agent_obs_spec(env.observation_space(a)) for a in members]
            obs = stack_agent_specs([p[0] for p in per_agent], members, g, "observation", 0)
            group = Composite({"observation": obs}, shape=(n,), device=d)
            has_mask = per_agent[0][1] is not None
            if has_mask:
                group["action_mask"] = Unbounded((n, per_agent[0][1]), dtype=torch.bool, device=d)
            if self.use_mask:
                group["mask"] = Unbounded((n,), dtype=torch.bool, device=d)
            obs_spec[g] = group
            spaces = [env.action_space(a) for a in members]
            act = stack_agent_specs(
                [
                    space_to_spec(
                        s,
                        (),
                        categorical=self.categorical_actions,
                        device=d,
                        keep_float64=self.keep_float64,
                    )
                    for s in spaces
                ],
                members,
                g,
                "action",
                0,
            )
            act_spec[g] = Composite({"action": act}, shape=(n,), device=d)
            reward = Unbounded((n, 1), dtype=numpy_to_torch_dtype(self._reward_dtype), device=d)
            rew_spec[g] = Composite({"reward": reward}, shape=(n,), device=d)
            done_spec[g] = make_done_spec((n,), d)
            dict_obs = isinstance(obs, Composite)
            keys = list(obs.keys()) if dict_obs else ["observation"]
            self._obs_layout[g] = (dict_obs, keys)
            leaves = obs if dict_obs else {"observation": obs}
            self._zeros[g] = {
                k: np.zeros(tuple(leaves[k].shape[1:]), dtype=_np_dtype(leaves[k].dtype))
                for k in keys
            }
            self._act_kind[g] = (isinstance(act, OneHot), spaces[0])
            if not isinstance(act, OneHot) and all(space_kind(s) == "Discrete" for s in spaces):
                self._index_actions.add(g)
        if self.return_state:
            try:
                space = env.state_space
            except AttributeError as err:
                raise ValueError(
                    f"return_state=True but {type(env.unwrapped).__name__} has no state_space"
                ) from err
            if space is None:
                raise ValueError(
                    f"return_state=True but {type(env.unwrapped).__name__} has no global state"
                )
            obs_spec["state"] = space_to_spec(space, (), device=d, keep_float64=self.keep_float64)
            self._state_np_dtype = _np_dtype(obs_spec["state"].dtype)
        self.observation_spec = obs_spec
        self.action_spec = act_spec
        self.reward_spec = rew_spec
        self.done_spec = done_spec
        self._has_action_mask = {g: "action_mask" in obs_spec[g] for g in self.group_map}
        self._group_sizes = {g: torch.Size([len(m)]) for g, m in self.group_map.items()}
        self._mask_size = {
            g: obs_spec[g, "action_mask"].shape[-1]
            for g in self.group_map
            if self._has_action_mask[g]
        }

    def _agent_obs_spec(self, space: Any) -> tuple[TensorSpec | Composite, int | None]:
        """Spec of one agent's observation, without its action mask (and the mask's size)."""
        spec = space_to_spec(space, (), device=self.device, keep_float64=self.keep_float64)
        if isinstance(spec, Composite) and "action_mask" in spec:
            n = spec["action_mask"].shape[-1]
            rest = {k: spec[k] for k in spec.keys() if k != "action_mask"}
            if list(rest) == ["observation"]:
                return rest["observation"], n
            return Composite(rest, shape=(), device=self.device), n
        return spec, None

    # ------------------------------------------------------------ data
    def _pack_arrays(
        self, raw: dict[str, Any], rewards: dict[str, float] | None, live: set[str]
    ) -> dict[str, Any]:
        """Every group's observations, rewards and flags as nested numpy arrays.

        Agents missing from ``raw`` (they left the episode) get zeros. Few Python
        objects per step (this is the wrapper's hot path): one numpy array per entry
        and group, the per-agent done flags rebuilt only when some agent's flags
        changed. Every array is fresh (outputs never share memory across steps).
        """
        any_done, all_done, ending_trunc = False, True, False
        root: dict[str, Any] = {}
        flags_cache, use_mask = self._flags_cache, self.use_mask
        for g, members in self.group_map.items():
            group = self._group_obs(g, members, raw)
            cached = flags_cache.get(g)
            if cached is None:
                cached = flags_cache[g] = self._group_flags(members)
            flags, g_any, g_all, g_ending_trunc = cached
            any_done = any_done or g_any
            all_done = all_done and g_all
            ending_trunc = ending_trunc or g_ending_trunc
            # a fresh copy per step; sliced in numpy (slicing a tensor costs more)
            flags = flags.copy()
            group["terminated"] = flags[:, 0:1]
            group["truncated"] = flags[:, 1:2]
            group["done"] = flags[:, 2:3]
            if use_mask:
                group["mask"] = np.array([a in live for a in members], bool)
            if rewards is not None:
                r = np.array([rewards.get(a, 0.0) for a in members], self._reward_dtype)
                group["reward"] = r[:, None]
            root[g] = group
        done = any_done if self.done_on_any else all_done
        root.update(env_flag_arrays(done, ending_trunc))
        if self.return_state:
            # np.array copies: the env may update its state array in place
            root["state"] = np.array(self._env.state(), dtype=self._state_np_dtype)
        return root

    def arrays_to_tensordict(self, arrays: dict[str, Any], batch_size: torch.Size) -> TensorDict:
        """The TensorDict of :meth:`step_arrays`' (or a stack of them) numpy arrays.

        Part of the :class:`~marl.envs.HostArrayEnv` contract: ``batch_size`` holds
        the dims stacked in front of every array (``[]`` for this env's own output,
        ``[num_envs]`` for :class:`~marl.envs.SerialEnv`'s stack). The tensors share
        the arrays' memory.
        """
        return arrays_to_td(arrays, batch_size, self._group_sizes, self.device)

    def _group_flags(self, members: list[str]) -> tuple[np.ndarray, bool, bool, bool]:
        """A group's ``[n, 3]`` terminated/truncated/done flags, whether any and all
        of its agents are done, and whether one ending this step was truncated."""
        term, trunc, ending = self._term, self._trunc, self._ending
        te = np.array([term[a] for a in members], bool)
        tr = np.array([trunc[a] for a in members], bool)
        done = te | tr
        flags = np.stack([te, tr, done], axis=1)
        ending_trunc = bool(ending) and any(trunc[a] and a in ending for a in members)
        return flags, bool(done.any()), bool(done.all()), ending_trunc

    def _group_obs(self, g: str, members: list[str], raw: dict[str, Any]) -> dict[str, Any]:
        """``observation`` (and ``action_mask``) of one group, stacked over its agents."""
        dict_obs, keys = self._obs_layout[g]
        zeros = self._zeros[g]
        values = [raw.get(a) for a in members]
        if not dict_obs and not self._has_action_mask[g]:
            z = zeros["observation"]
            # np.array of a list of same-shape arrays stacks and casts in one pass
            # (np.stack then astype costs about twice as much with many agents)
            return {"observation": np.array([z if v is None else v for v in values], z.dtype)}
        group: dict[str, Any] = {}
        dicts = [v if isinstance(v, dict) else {"observation": v} for v in values]
        obs = {
            k: np.array([zeros[k] if v is None else v[k] for v in dicts], dtype=zeros[k].dtype)
            for k in keys
        }
        group["observation"] = obs if dict_obs else obs["observation"]
        if self._has_action_mask[g]:
            n = self._mask_size[g]
            mask = np.array(
                [np.zeros(n, bool) if v is None else v["action_mask"] for v in values], bool
            )
            mask[~mask.any(-1)] = True
            group["action_mask"] = mask
        return group

    def _agent_actions(self, values: Mapping[NestedKey, Any]) -> dict[str, Any]:
        """Each agent's action for PettingZoo, from the ``(g, "action")`` tensors."""
        actions: dict[str, Any] = {}
        for g, members in self.group_map.items():
            one_hot, space = self._act_kind[g]
            value = values[g, "action"]
            if g in self._index_actions and value.dtype == torch.int64 and not value.is_cuda:
                # Discrete indices: iterating the array yields np.int64 scalars (copies),
                # as to_numpy_action(...)[j] does, without its conversions
                actions.update(zip(members, value.numpy()))
                continue
            a = to_numpy_action(value, space, one_hot)
            if isinstance(a, np.ndarray):
                # iterating an array yields what a[j] gives, without one index call per agent
                actions.update(zip(members, a))
            else:
                for j, agent in enumerate(members):
                    actions[agent] = _agent_row(a, j)
        return actions

    # ------------------------------------------------------------ reset / step

    def reset_arrays(self) -> dict[str, Any]:
        """Reset; the first observations and flags as nested numpy arrays.

        Part of the :class:`~marl.envs.HostArrayEnv` contract (with :meth:`step_arrays`
        and :meth:`arrays_to_tensordict`), which lets :class:`~marl.envs.SerialEnv` stack
        several envs' arrays and build one TensorDict a step.
        """
        seed, self._seed_next = self._seed_next, None
        env = self._env
        self._term = dict.fromkeys(self.agent_names, False)
        self._trunc = dict.fromkeys(self.agent_names, False)
        self._ending: set[str] = set()
        # per group: the done flags (see _group_flags), dropped whenever they change
        self._flags_cache: dict[str, tuple[np.ndarray, bool, bool, bool]] = {}
        if self.parallel:
            raw, _ = env.reset(seed=seed)
            live = set(env.agents)
        else:
            env.reset(seed=seed)
            self._skip_dead_turns()
            raw = {a: env.observe(a) for a in env.agents}
            live = {env.agent_selection} if env.agents else set()
        return self._pack_arrays(raw, None, live)

    def step_arrays(self, inputs: Mapping[NestedKey, Any]) -> dict[str, Any]:
        """Step with the ``(g, "action")`` entries of ``inputs``; the outcome as numpy arrays.

        ``inputs`` maps each key of the action spec to this env's tensor (a
        TensorDict works too). See :meth:`reset_arrays`.
        """
        env = self._env
        actions = self._agent_actions(inputs)
        if self.parallel:
            moves = {a: actions[a] for a in env.agents}
            if self._parallel_step:
                raw, rew, term, trunc, _ = parallel_step(env, moves)
            else:
                raw, rew, term, trunc, _ = env.step(moves)
            rewards = rew
            live = set(env.agents)
        else:
            acting = env.agent_selection
            env.step(actions[acting])
            rewards = dict(env.rewards)
            term, trunc = env.terminations, env.truncations
            raw = {a: env.observe(a) for a in env.agents}
        had_ending = bool(self._ending)
        done_before = self._term, self._trunc
        self._ending = {
            a
            for flags in (term, trunc)
            for a, flag in flags.items()
            if flag and not (done_before[0][a] or done_before[1][a])
        }
        if had_ending or self._ending:
            self._flags_cache = {}
        for a in self._ending:
            self._term[a] = bool(term.get(a, False))
            self._trunc[a] = bool(trunc.get(a, False))
        if not self.parallel:
            if not all(self._term[a] or self._trunc[a] for a in self.agent_names):
                extra = self._skip_dead_turns()
                for a, r in extra.items():
                    rewards[a] = rewards.get(a, 0.0) + r
            live = {env.agent_selection} if env.agents else set()
            live -= {a for a in self.agent_names if self._term[a] or self._trunc[a]}
        return self._pack_arrays(raw, rewards, live)

    def _skip_dead_turns(self) -> dict[str, float]:
        """AEC: play ``None`` for agents that are done until a live agent acts."""
        env, rewards = self._env, {}
        while env.agents:
            sel = env.agent_selection
            if not (env.terminations.get(sel, False) or env.truncations.get(sel, False)):
                break
            self._term[sel] = bool(env.terminations.get(sel, False))
            self._trunc[sel] = bool(env.truncations.get(sel, False))
            self._flags_cache = {}
            env.step(None)
            for a, r in env.rewards.items():
                rewards[a] = rewards.get(a, 0.0) + r
        return rewards

    def _set_seed(self, seed: int | None) -> None:
        self._seed_next = seed
        if seed is not None:
            for i, a in enumerate(self.agent_names):
                self._env.action_space(a).seed(seed + i)

    # ------------------------------------------------------------ extras
    @property
    def pettingzoo_env(self) -> Any:
        """The underlying PettingZoo env."""
        return self._env

    def render(self) -> Any:
        """Render with the PettingZoo env's own ``render`` (set ``render_mode`` at build)."""
        return self._env.render()

    def close(self) -> None:
        self._env.close()
        super().close()


def _np_dtype(dtype: torch.dtype) -> np.dtype:
    if dtype == torch.bool:
        return np.dtype(bool)
    return torch.empty((), dtype=dtype).numpy().dtype


def _agent_row(action: Any, j: int) -> Any:
    """Agent ``j``'s action from a group's batched action (arrays, dicts, tuples)."""
    if isinstance(action, dict):
        return {k: _agent_row(v, j) for k, v in action.items()}
    if isinstance(action, tuple):
        return tuple(_agent_row(v, j) for v in action)
    return action[j]
