"""`OvercookedEnv`: Overcooked-AI (the ``overcooked-ai`` package), two cooks stacked.

Two players share a kitchen: they carry onions to a pot, wait for the soup,
plate it and serve it. marl drives the package's MDP
(``OvercookedGridworld``) directly: its own ``OvercookedEnv`` does not import
on numpy 2 (``np.Inf`` in a default argument), and the MDP is all an env
needs. See :class:`OvercookedEnv`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from marl.envs.batched import arrays_to_td, env_flag_arrays
from marl.envs.common import make_done_spec
from marl.envs.libs._host_steps import HostStepsEnv
from marl.extras import require
from marl.groups import GroupMap, GroupMapLike
from marl.specs import Categorical, Composite, NestedKey, OneHot, Unbounded

__all__ = ["N_ACTIONS", "N_CHANNELS", "OvercookedEnv", "layouts"]

#: NORTH, SOUTH, EAST, WEST, STAY, INTERACT (``Action.ALL_ACTIONS`` order)
N_ACTIONS = 6
#: channels of the lossless encoding (players, orientations, terrain, pot contents, items, urgency)
N_CHANNELS = 26
_AGENTS = ["agent_0", "agent_1"]


def _import_package() -> Any:
    return require(
        "overcooked_ai_py.mdp.overcooked_mdp",
        "OvercookedEnv",
        "overcooked",
        what='the "overcooked-ai" package',
    )


def layouts() -> list[str]:
    """The layout names the installed ``overcooked-ai`` ships (``data/layouts/*.layout``).

    Raises:
        ImportError: naming ``pip install "marl[overcooked]"`` when the package is missing.
    """
    _import_package()
    import overcooked_ai_py

    folder = Path(overcooked_ai_py.__file__).parent / "data" / "layouts"
    return sorted(p.stem for p in folder.glob("*.layout"))


class OvercookedEnv(HostStepsEnv):
    """An Overcooked-AI kitchen (``overcooked-ai`` 1.1), two players, unbatched.

    Keys, with the default single group ``"agent"`` of the two players
    ``agent_0`` and ``agent_1``:

    - ``("agent", "observation")`` ``[2, W, H, 26]`` float32: the package's
      lossless encoding (``OvercookedGridworld.lossless_state_encoding``), one
      image per player from its own view (its own position and orientation
      first), channels last like MAgent2's and Melting Pot's. ``W x H`` is the
      layout's grid (5 x 4 in ``cramped_room``);
    - ``("agent", "action")`` ``[2]`` (index) or ``[2, 6]`` (one-hot): NORTH,
      SOUTH, EAST, WEST, STAY, INTERACT. Every action is always legal (a
      blocked move or an interact with nothing does nothing), so there are no
      action masks;
    - ``("next", "agent", "reward")`` ``[2, 1]``: the team's sparse reward
      (20 per soup served, whoever served it) to each player, plus
      ``reward_shaping`` times that player's own shaped reward (3 for an
      ingredient put in a pot, 3 for a dish picked up, 5 for a soup plated);
    - root ``done``/``terminated``/``truncated`` ``[1]``: a kitchen never
      ends by itself, so every episode is ``truncated`` at ``horizon`` steps,
      never ``terminated``.

    Every episode starts from the layout's standard start state: the MDP is
    deterministic, so ``seed`` changes nothing (it is accepted for the
    catalogue's uniform interface).

    Args:
        layout: a layout of the package (see :func:`layouts`), e.g.
            ``"cramped_room"``; the five of Carroll et al. (2019) are
            ``cramped_room``, ``asymmetric_advantages``, ``coordination_ring``,
            ``forced_coordination`` and ``counter_circuit_o_1order``.
        horizon: steps per episode (400, the standard horizon).
        reward_shaping: weight of the shaped reward (0: the game's score only).
            The published PPO and MAPPO setups (Carroll et al. 2019, and the
            MAPPO-based zero-shot-coordination work after it) train with 1.0,
            annealed to 0 over training, and report the sparse score.
        group_map: ``None`` (one group ``"agent"``), a constructor name, a dict
            or a ``GroupMap`` over ``agent_0`` and ``agent_1``.
        seed: accepted and ignored (the MDP is deterministic).
        categorical_actions: actions as indices (True) or one-hot (False).
        device: device of the tensors.
        check_actions: check every action before the MDP sees it.

    Raises:
        ImportError: naming ``pip install "marl[overcooked]"`` when the package is missing.
        ValueError: on an unknown layout (listing the layouts), a layout
            without exactly two players, or a bad ``horizon`` or ``reward_shaping``.

    Examples:
        >>> env = OvercookedEnv("cramped_room", horizon=5)
        >>> td = env.rollout(5)
        >>> td["agent", "observation"].shape, td["next", "agent", "reward"].shape
        (torch.Size([5, 2, 5, 4, 26]), torch.Size([5, 2, 1]))
        >>> td["next", "truncated"][-1].item(), td["next", "terminated"].any().item()
        (True, False)
    """

    def __init__(
        self,
        layout: str = "cramped_room",
        horizon: int = 400,
        reward_shaping: float = 0.0,
        group_map: GroupMapLike | None = None,
        seed: int | None = None,
        *,
        categorical_actions: bool = True,
        device: Any = None,
        check_actions: bool = False,
    ) -> None:
        mdp_module = _import_package()
        from overcooked_ai_py.mdp.actions import Action

        if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
            raise ValueError(f"horizon must be a positive int (steps per episode), got {horizon!r}")
        if isinstance(reward_shaping, bool) or not isinstance(reward_shaping, (int, float)):
            raise ValueError(f"reward_shaping must be a number, got {reward_shaping!r}")
        known = layouts()
        if layout not in known:
            close = difflib.get_close_matches(str(layout), known, n=3, cutoff=0.5)
            hint = f"; closest: {close}" if close else ""
            raise ValueError(f"unknown Overcooked layout {layout!r}; expected one of {known}{hint}")
        mdp = mdp_module.OvercookedGridworld.from_layout_name(layout)
        if mdp.num_players != 2:
            raise ValueError(
                f"OvercookedEnv takes two-player layouts (the lossless encoding is for two), "
                f"layout {layout!r} has {mdp.num_players}"
            )
        if group_map is None:
            group_map = GroupMap.by_prefix(_AGENTS)
        super().__init__(batch_size=(), device=device, group_map=GroupMap.build(group_map, _AGENTS))
        self.layout, self.horizon, self.reward_shaping = layout, horizon, float(reward_shaping)
        self.categorical_actions = categorical_actions
        self.check_actions = check_actions
        self.agent_names = list(_AGENTS)
        self.n_agents = 2
        self._mdp = mdp
        self._actions_table = list(Action.ALL_ACTIONS)
        self._state = mdp.get_standard_start_state()
        self._visualizer: Any = None
        self._make_specs()

    def _make_specs(self) -> None:
        d = self.device
        width, height = self._mdp.width, self._mdp.height
        obs, act, rew = (Composite(shape=(), device=d) for _ in range(3))
        # (group, agent indices); None when the group is both players in order (no gather)
        self._groups: list[tuple[str, list[int] | None]] = []
        for g, members in self.group_map.items():
            n = len(members)
            idx = [self.agent_names.index(a) for a in members]
            self._groups.append((g, None if idx == [0, 1] else idx))
            image = Unbounded((n, width, height, N_CHANNELS), device=d)
            obs[g] = Composite({"observation": image}, shape=(n,), device=d)
            if self.categorical_actions:
                action = Categorical(N_ACTIONS, (n,), device=d)
            else:
                action = OneHot(N_ACTIONS, (n, N_ACTIONS), device=d)
            act[g] = Composite({"action": action}, shape=(n,), device=d)
            rew[g] = Composite({"reward": Unbounded((n, 1), device=d)}, shape=(n,), device=d)
        self.observation_spec, self.action_spec, self.reward_spec = obs, act, rew
        self.done_spec = make_done_spec((), d)
        self._group_sizes = {g: torch.Size([len(m)]) for g, m in self.group_map.items()}

    # ------------------------------------------------------------ data
    def _pack_arrays(self, rewards: np.ndarray | None) -> dict[str, Any]:
        """Every group's entries and the root flags as fresh numpy arrays."""
        encoding = self._mdp.lossless_state_encoding(self._state, horizon=self.horizon)
        # np.array of the list stacks and casts in one pass (np.stack + astype copy twice)
        images = np.array(encoding, dtype=np.float32)  # [2, W, H, 26]
        root: dict[str, Any] = {}
        for g, idx in self._groups:
            group: dict[str, Any] = {"observation": images if idx is None else images[idx]}
            if rewards is not None:
                group["reward"] = rewards[:, None] if idx is None else rewards[idx, None]
            root[g] = group
        # an episode only ends on the horizon: a truncation
        truncated = rewards is not None and self._state.timestep >= self.horizon
        root.update(env_flag_arrays(truncated, truncated))
        return root

    def arrays_to_tensordict(self, arrays: dict[str, Any], batch_size: torch.Size) -> TensorDict:
        """The TensorDict of :meth:`step_arrays`' arrays (or a stack of them).

        See :class:`~marl.envs.HostArrayEnv`: ``batch_size`` holds the dims stacked
        in front of every array.
        """
        return arrays_to_td(arrays, batch_size, self._group_sizes, self.device)

    def _joint_action(self, inputs: Mapping[NestedKey, Any]) -> tuple[Any, ...]:
        actions = [0] * self.n_agents
        for g, idx in self._groups:
            a = inputs[g, "action"]
            if not self.categorical_actions:
                a = a.argmax(-1)
            values = a.tolist()  # one host read, not one per player
            if idx is None:
                actions = values
                break
            for j, i in enumerate(idx):
                actions[i] = values[j]
        table = self._actions_table
        return tuple(table[i] for i in actions)

    # ------------------------------------------------------------ reset / step

    def reset_arrays(self) -> dict[str, Any]:
        """Reset; the first observations and flags as numpy arrays (see
        :class:`~marl.envs.HostArrayEnv`)."""
        self._state = self._mdp.get_standard_start_state()
        return self._pack_arrays(None)

    def step_arrays(self, inputs: Mapping[NestedKey, Any]) -> dict[str, Any]:
        """Step with the ``(g, "action")`` tensors of ``inputs``; the outcome as arrays."""
        self._state, info = self._mdp.get_state_transition(self._state, self._joint_action(inputs))
        sparse = float(sum(info["sparse_reward_by_agent"]))  # the team's soups, to both
        shaped = np.asarray(info["shaped_reward_by_agent"], dtype=np.float32)
        rewards = (sparse + self.reward_shaping * shaped).astype(np.float32)
        return self._pack_arrays(rewards)

    def _set_seed(self, seed: int | None) -> None:
        pass  # the MDP is deterministic: every episode starts from the standard start state

    # ------------------------------------------------------------ extras
    @property
    def mdp(self) -> Any:
        """The underlying ``OvercookedGridworld``."""
        return self._mdp

    @property
    def overcooked_state(self) -> Any:
        """The current ``OvercookedState``."""
        return self._state

    def render(self) -> np.ndarray:
        """One RGB frame ``[H, W, 3]`` uint8 of the current state.

        Drawn by the package's ``StateVisualizer`` (pygame, into an off-screen
        surface; without a display, SDL's dummy video driver is used).
        """
        import os

        if not os.environ.get("DISPLAY"):
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        import pygame
        from overcooked_ai_py.visualization.state_visualizer import StateVisualizer

        if self._visualizer is None:
            self._visualizer = StateVisualizer()
        surface = self._visualizer.render_state(self._state, grid=self._mdp.terrain_mtx)
        return np.ascontiguousarray(pygame.surfarray.array3d(surface).transpose(1, 0, 2))
