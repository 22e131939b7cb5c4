"""`TupleAgentsEnv`: Gymnasium envs whose spaces are tuples over agents (LBF, RWARE).

Level-Based Foraging and the multi-robot warehouse are plain ``gymnasium.Env``
classes: ``observation_space`` and ``action_space`` are ``Tuple`` spaces with one
entry per agent, ``reset`` returns a tuple of observations and ``step`` takes a
sequence of actions and returns a list of per-agent rewards and one episode-level
``done``. This module maps that onto marl's layout (DESIGN.md): agents
``agent_0 ... agent_{n-1}``, stacked by group, env-level flags at the root.
The family wrappers (:class:`~marl.envs.libs.lbforaging.LBForagingEnv`,
:class:`~marl.envs.libs.rware.RwareEnv`) add what is specific to each package:
the import, action masks and which endings are time limits.

The env is unbatched (batch size ``[]``); run several with ``SerialEnv`` or
``ParallelEnv``.
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
    space_to_spec,
    stack_agent_specs,
)
from marl.extras import require
from marl.groups import GroupMap, GroupMapLike
from marl.specs import Composite, NestedKey, OneHot, Unbounded

__all__ = ["TupleAgentsEnv"]


class TupleAgentsEnv(HostStepsEnv):
    """A Gymnasium env with ``Tuple`` spaces over agents, agents stacked by group.

    Subclasses name the package (``package``, ``extra``) and may override
    :meth:`_action_masks` and :meth:`_time_limit_reached`.

    Keys (``g`` a group of ``n_g`` agents; default one group ``"agents"``):

    - ``(g, "observation")`` ``[n_g, *obs]``;
    - ``(g, "action_mask")`` ``[n_g, n_actions]`` bool, where the family has masks;
    - ``(g, "action")`` ``[n_g]`` (an index) or ``[n_g, n_actions]`` (one-hot);
    - ``("next", g, "reward")`` ``[n_g, 1]``: each agent's reward as the env gives it;
    - root ``done``/``terminated``/``truncated`` ``[1]``: every agent ends together.

    Args:
        env_id: a registered Gymnasium id of the family.
        env: an existing env of the family (instead of ``env_id``).
        group_map: ``None`` (one group ``"agents"``), a constructor name, a dict
            or a ``GroupMap`` over ``agent_0 ... agent_{n-1}``.
        seed: optional seed, used at the next reset.
        categorical_actions: discrete actions as indices (True) or one-hot (False).
        device: device of the tensors.
        keep_float64: keep float64 observations and rewards (False: float32).
        check_actions: check every action before the env sees it.
        **kwargs: the env's constructor arguments, replacing those registered
            with ``env_id``.
    """

    package: str = ""
    extra: str = ""
    #: a registered id, quoted in the error for an unknown one
    example_id: str = ""
    #: whether the family writes ``(g, "action_mask")`` (its ``_action_masks`` returns them)
    has_action_mask: bool = False

    def __init__(
        self,
        env_id: str | None = None,
        env: Any = None,
        group_map: GroupMapLike | None = None,
        seed: int | None = None,
        *,
        categorical_actions: bool = True,
        device: Any = None,
        keep_float64: bool = False,
        check_actions: bool = False,
        **kwargs: Any,
    ) -> None:
        self._import_package()
        if (env_id is None) == (env is None):
            raise ValueError(f"{type(self).__name__} needs exactly one of env_id= or env=")
        if env is None:
            env = self._build(env_id, kwargs)
        elif kwargs:
            raise ValueError(f"env arguments {sorted(kwargs)} need env_id=, not env=")
        obs_space, act_space = env.observation_space, env.action_space
        if type(obs_space).__name__ != "Tuple" or type(act_space).__name__ != "Tuple":
            raise TypeError(
                f"{type(self).__name__} needs Tuple observation and action spaces (one entry "
                f"per agent), got {type(obs_space).__name__} and {type(act_space).__name__}"
            )
        for space in obs_space.spaces:
            if type(space).__name__ not in ("Box", "MultiBinary"):
                raise NotImplementedError(
                    f"{type(self).__name__} takes array observations (Box), got a "
                    f"{type(space).__name__} observation space; use the flattened or image "
                    "observation types"
                )
        self._env = env
        self.env_id = env_id
        n = len(act_space.spaces)
        agents = [f"agent_{i}" for i in range(n)]
        if group_map is None:
            group_map = GroupMap.all_in_one(agents)
        super().__init__(batch_size=(), device=device, group_map=GroupMap.build(group_map, agents))
        self.agent_names = agents
        self.n_agents = n
        self._host_options(
            categorical_actions=categorical_actions,
            keep_float64=keep_float64,
            check_actions=check_actions,
            seed=seed,
        )

    # ------------------------------------------------------------ construction
    def _import_package(self) -> Any:
        return require(self.package, type(self).__name__, self.extra)

    def _build(self, env_id: str, kwargs: dict[str, Any]) -> Any:
        """The registered env class with its registered arguments and ``kwargs`` on top.

        Built without ``gymnasium.make``: its passive checker warns at every step
        that the rewards are a list (they are per agent here), and its wrappers
        cost time on every step. ``max_episode_steps`` stays the env's own
        argument (LBF's), not gymnasium's ``TimeLimit``.
        """
        import gymnasium
        from gymnasium.envs.registration import load_env_creator

        try:
            spec = gymnasium.spec(env_id)
        except gymnasium.error.Error as err:
            raise ValueError(
                f"unknown {self.package} env id {env_id!r}: {err}. Registered ids look like "
                f"{self.example_id!r}"
            ) from None
        creator = spec.entry_point
        if isinstance(creator, str):
            if not creator.startswith(f"{self.package}."):
                raise ValueError(
                    f"{env_id!r} is not a {self.package} env (entry point {creator!r})"
                )
            creator = load_env_creator(creator)
        args = {**spec.kwargs, **kwargs}
        try:
            return creator(**args)
        except TypeError as err:
            if "unexpected keyword" not in str(err):
                raise
            raise ValueError(f"unknown argument for {env_id!r}: {err}") from None

    def _make_specs(self) -> None:
        env, d = self._env, self.device
        obs_spaces = env.observation_space.spaces
        act_spaces = env.action_space.spaces
        obs_spec = Composite(shape=(), device=d)
        act_spec = Composite(shape=(), device=d)
        rew_spec = Composite(shape=(), device=d)
        n_actions = int(getattr(act_spaces[0], "n", 0))
        self._index: dict[str, list[int]] = {}
        for g, members in self.group_map.items():
            n = len(members)
            idx = [self.agent_names.index(a) for a in members]
            self._index[g] = idx
            spec = space_to_spec
            obs = stack_agent_specs(
                [spec(obs_spaces[i], device=d, keep_float64=self.keep_float64) for i in idx],
                members,
                g,
                "observation",
                0,
            )
            group = Composite({"observation": obs}, shape=(n,), device=d)
            if self.has_action_mask:
                group["action_mask"] = Unbounded((n, n_actions), dtype=torch.bool, device=d)
            obs_spec[g] = group
            act = stack_agent_specs(
                [spec(act_spaces[i], categorical=self.categorical_actions, device=d) for i in idx],
                members,
                g,
                "action",
                0,
            )
            act_spec[g] = Composite({"action": act}, shape=(n,), device=d)
            reward = Unbounded((n, 1), dtype=numpy_to_torch_dtype(self._reward_dtype), device=d)
            rew_spec[g] = Composite({"reward": reward}, shape=(n,), device=d)
        self.observation_spec = obs_spec
        self.action_spec = act_spec
        self.reward_spec = rew_spec
        self.done_spec = make_done_spec((), d)
        self._obs_dtype = {
            g: torch.empty((), dtype=obs_spec[g, "observation"].dtype).numpy().dtype
            for g in self.group_map
        }
        self._one_hot = {g: isinstance(act_spec[g, "action"], OneHot) for g in self.group_map}
        self._group_sizes = {g: torch.Size([len(m)]) for g, m in self.group_map.items()}
        # (group, agent indices); None when the group is every agent in order (no gather)
        self._groups = [
            (g, None if idx == list(range(self.n_agents)) else idx)
            for g, idx in self._index.items()
        ]

    # ------------------------------------------------------------ family hooks
    def _action_masks(self) -> np.ndarray:
        """Legal actions ``[n_agents, n_actions]`` bool (families with ``has_action_mask``)."""
        raise NotImplementedError

    def _time_limit_reached(self) -> bool:
        """Whether an episode that just ended was cut by a step limit (a truncation)."""
        return False

    # ------------------------------------------------------------ data
    def _pack_arrays(self, obs: Any, rewards: Any, done: bool) -> dict[str, Any]:
        """Every group's entries and the root flags as fresh numpy arrays (the hot path)."""
        masks = self._action_masks() if self.has_action_mask else None
        root: dict[str, Any] = {}
        for g, idx in self._groups:
            # np.array stacks and casts in one C call (np.stack then astype: 4x slower)
            stacked = np.array(obs if idx is None else [obs[i] for i in idx], self._obs_dtype[g])
            group: dict[str, Any] = {"observation": stacked}
            if masks is not None:
                group["action_mask"] = masks if idx is None else masks[idx]
            if rewards is not None:
                r = np.asarray(rewards if idx is None else [rewards[i] for i in idx])
                group["reward"] = r.astype(self._reward_dtype)[:, None]
            root[g] = group
        root.update(env_flag_arrays(done, done and self._time_limit_reached()))
        return root

    def arrays_to_tensordict(self, arrays: dict[str, Any], batch_size: torch.Size) -> TensorDict:
        """The TensorDict of :meth:`step_arrays`' arrays (or a stack of them).

        See :class:`~marl.envs.HostArrayEnv`: ``batch_size`` holds the dims stacked
        in front of every array.
        """
        return arrays_to_td(arrays, batch_size, self._group_sizes, self.device)

    def _actions(self, inputs: Mapping[NestedKey, Any]) -> list[Any]:
        """Every agent's action in agent order (ints; lists for ``MultiDiscrete``).

        Straight from the tensor (``tolist``), without numpy: both packages take
        Python ints, and this runs at every step.
        """
        actions: list[Any] = [0] * self.n_agents
        for g, idx in self._groups:
            a = inputs[g, "action"]
            if self._one_hot[g]:
                a = a.argmax(-1)
            values = a.tolist()
            if idx is None:
                return values
            for j, i in enumerate(idx):
                actions[i] = values[j]
        return actions

    # ------------------------------------------------------------ reset / step

    def reset_arrays(self) -> dict[str, Any]:
        """Reset; the first observations and flags as numpy arrays (see
        :class:`~marl.envs.HostArrayEnv`)."""
        seed, self._seed_next = self._seed_next, None
        obs, _ = self._env.reset(seed=seed)
        return self._pack_arrays(obs, None, False)

    def step_arrays(self, inputs: Mapping[NestedKey, Any]) -> dict[str, Any]:
        """Step with the ``(g, "action")`` tensors of ``inputs``; the outcome as arrays."""
        obs, rewards, done, truncated, _ = self._env.step(self._actions(inputs))
        return self._pack_arrays(obs, rewards, bool(done or truncated))

    def _set_seed(self, seed: int | None) -> None:
        self._seed_next = seed

    # ------------------------------------------------------------ extras
    @property
    def raw_env(self) -> Any:
        """The underlying Gymnasium env."""
        return self._env

    def render(self) -> np.ndarray:
        """One RGB frame ``[H, W, 3]`` uint8 of the current state.

        Both packages draw with pyglet, which needs a display; on a machine
        without one (no ``DISPLAY``), pyglet is switched to headless (EGL)
        rendering before its first window, which must happen before anything
        else in the process opens a pyglet window.
        """
        import os

        if not os.environ.get("DISPLAY"):
            import pyglet

            pyglet.options["headless"] = True
        return self._env.render(mode="rgb_array")

    def close(self) -> None:
        self._env.close()
        super().close()
