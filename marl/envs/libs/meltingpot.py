"""`meltingpot_env`: DeepMind's Melting Pot substrates (pixel gridworlds) through `PettingZooEnv`.

Melting Pot (``dm-meltingpot`` over ``dmlab2d``) builds ``dm_env`` environments
whose observations, actions and rewards are lists with one entry a player.
:class:`MeltingPotParallelEnv` presents one as a PettingZoo ``ParallelEnv``
(players ``player_0 ... player_{n-1}``), and :func:`meltingpot_env` hands it to
:class:`~marl.envs.libs.pettingzoo.PettingZooEnv`, which owns grouping,
stacking, float32 conversion and the done flags. See :func:`meltingpot_env`.
"""

from __future__ import annotations

import difflib
import functools
import random
from typing import Any

import numpy as np

from marl.envs.libs.pettingzoo import PettingZooEnv
from marl.extras import require
from marl.groups import GroupMapLike

__all__ = ["TASKS", "MeltingPotParallelEnv", "meltingpot_env"]

# The substrates of the catalogue (``meltingpot.substrate.SUBSTRATES`` has 49).
TASKS = (
    "clean_up",
    "collaborative_cooking__asymmetric",
    "commons_harvest__open",
    "prisoners_dilemma_in_the_matrix__arena",
    "territory__rooms",
)


def _import_meltingpot() -> Any:
    return require(
        "meltingpot.substrate",
        "Melting Pot",
        "meltingpot",
        what='the "dm-meltingpot" package',
        own=("meltingpot", "dmlab2d"),
    )


def _box(spec: Any) -> Any:
    """A gymnasium ``Box`` for a ``dm_env`` array spec (uint8 images keep 0..255)."""
    from gymnasium.spaces import Box

    dtype = np.dtype(spec.dtype)
    if dtype == np.uint8:
        return Box(0, 255, tuple(spec.shape), np.uint8)
    return Box(-np.inf, np.inf, tuple(spec.shape), dtype)


def _parallel_base() -> type:
    pettingzoo = require(
        "pettingzoo.utils.env",
        "Melting Pot, which goes through PettingZooEnv,",
        "meltingpot",
        what='"pettingzoo"',
    )
    return pettingzoo.ParallelEnv


@functools.cache
def _with_parallel_base(cls: type) -> type:
    """``cls`` that is also a PettingZoo ``ParallelEnv`` (made once per class)."""
    return type(cls.__name__, (cls, _parallel_base()), {"__module__": cls.__module__})


class MeltingPotParallelEnv:
    """A Melting Pot substrate as a PettingZoo ``ParallelEnv`` (built by :func:`meltingpot_env`).

    Each player observes the substrate's *individual* observations (``RGB``,
    its partial egocentric view, and scalars such as ``READY_TO_SHOOT``); the
    global ``WORLD.RGB`` frame is the ``state()``. The episode ends for every
    player at once: ``terminated`` when the substrate ends it (Melting Pot
    episodes end at random times, up to a cap of a few thousand steps),
    ``truncated`` after ``max_steps`` steps when that is set.

    The substrate is built at the first ``reset`` (a ``dmlab2d`` world takes
    0.1-1 s to build) and rebuilt by every ``reset(seed=...)``: Melting Pot
    takes the seed of its Lua world only when it builds it (later resets use
    seed + 1, + 2, ...).
    """

    metadata = {"render_modes": ["rgb_array"], "name": "meltingpot"}

    def __new__(cls, *args: Any, **kwargs: Any) -> MeltingPotParallelEnv:
        # subclass PettingZoo's ParallelEnv lazily, so that importing this module
        # needs neither pettingzoo nor meltingpot
        if not issubclass(cls, _parallel_base()):
            cls = _with_parallel_base(cls)
        return super().__new__(cls)

    def __init__(
        self,
        substrate: str,
        roles: list[str] | tuple[str, ...] | None = None,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        module = _import_meltingpot()
        if substrate not in module.SUBSTRATES:
            close = difflib.get_close_matches(str(substrate), module.SUBSTRATES, n=3, cutoff=0.5)
            hint = f"; closest: {close}" if close else ""
            raise ValueError(
                f"unknown Melting Pot substrate {substrate!r}; expected one of "
                f"meltingpot.substrate.SUBSTRATES ({len(module.SUBSTRATES)} names){hint}"
            )
        config = module.get_config(substrate)
        roles = tuple(config.default_player_roles if roles is None else roles)
        bad = sorted(set(roles) - set(config.valid_roles))
        if not roles or bad:
            raise ValueError(
                f"roles for {substrate!r} must be a non-empty list of {sorted(config.valid_roles)}"
                f", got {list(roles)}"
            )
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"max_steps must be a positive int or None, got {max_steps!r}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        from gymnasium.spaces import Dict, Discrete

        self.substrate = substrate
        self.roles = roles
        self.max_steps = max_steps
        self.render_mode = render_mode
        self._config = config
        self._individual = tuple(config.individual_observation_names)
        specs = config.timestep_spec.observation
        self._global = "WORLD.RGB"
        self.possible_agents = [f"player_{i}" for i in range(len(roles))]
        self.agents: list[str] = []
        obs_space = Dict({k: _box(specs[k]) for k in self._individual})
        n_actions = int(config.action_spec.num_values)
        self.observation_spaces = {a: obs_space for a in self.possible_agents}
        self.action_spaces = {a: Discrete(n_actions) for a in self.possible_agents}
        self.state_space = _box(specs[self._global])
        self._env: Any = None
        self._world: np.ndarray | None = None
        self._t = 0

    def observation_space(self, agent: str) -> Any:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> Any:
        return self.action_spaces[agent]

    # ------------------------------------------------------------ building
    def _build(self, seed: int | None) -> Any:
        """The substrate, as ``meltingpot.substrate.build`` makes it, with a chosen Lua seed."""
        from meltingpot.utils.substrates import builder
        from meltingpot.utils.substrates import substrate as mp_substrate
        from meltingpot.utils.substrates.wrappers import (
            discrete_action_wrapper,
            multiplayer_wrapper,
            observables_wrapper,
        )

        config = self._config
        settings = config.lab2d_settings_builder(roles=self.roles, config=config)
        # meltingpot.substrate.build offers no seed: it draws one from Python's
        # `random`; the builder takes it (each later reset uses seed + 1, + 2, ...)
        env = builder.builder(settings, env_seed=seed)
        env = observables_wrapper.ObservablesWrapper(env)
        env = multiplayer_wrapper.Wrapper(
            env,
            individual_observation_names=self._individual,
            global_observation_names=[self._global],
        )
        env = discrete_action_wrapper.Wrapper(env, action_table=config.action_set)
        return mp_substrate.Substrate(env)

    def _split(self, observations: Any) -> dict[str, dict[str, np.ndarray]]:
        """Per-player individual observations; keeps ``WORLD.RGB`` for ``state()``."""
        self._world = observations[0][self._global]
        keys = self._individual
        return {a: {k: o[k] for k in keys} for a, o in zip(self.possible_agents, observations)}

    # ------------------------------------------------------------ API
    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None or self._env is None:
            if self._env is not None:
                self._env.close()
            if seed is None:
                seed = random.randint(1, 2**31 - 1)
            self._env = self._build(int(seed) % 2**32)
        timestep = self._env.reset()
        self._t = 0
        self.agents = list(self.possible_agents)
        return self._split(timestep.observation), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            raise RuntimeError("step() after the episode ended: call reset() first")
        missing = [a for a in self.possible_agents if a not in actions]
        if missing:
            raise ValueError(f"Melting Pot steps every player at once; no action for {missing}")
        timestep = self._env.step([int(actions[a]) for a in self.possible_agents])
        self._t += 1
        obs = self._split(timestep.observation)
        rewards = {a: float(r) for a, r in zip(self.possible_agents, timestep.reward)}
        ended = timestep.last()
        cut = not ended and self.max_steps is not None and self._t >= self.max_steps
        term = dict.fromkeys(self.possible_agents, bool(ended))
        trunc = dict.fromkeys(self.possible_agents, bool(cut))
        if ended or cut:
            self.agents = []
        return obs, rewards, term, trunc, {a: {} for a in self.possible_agents}

    def state(self) -> np.ndarray:
        """The global ``WORLD.RGB`` frame ``[H, W, 3]`` uint8 of the last step."""
        if self._world is None:
            raise RuntimeError("state() before reset()")
        return self._world

    def render(self) -> np.ndarray | None:
        """``WORLD.RGB`` with ``render_mode="rgb_array"`` (None otherwise)."""
        return None if self.render_mode is None else self.state()

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


def meltingpot_env(
    substrate: str,
    roles: list[str] | tuple[str, ...] | None = None,
    max_steps: int | None = None,
    group_map: GroupMapLike | None = None,
    return_state: bool = False,
    seed: int | None = None,
    *,
    categorical_actions: bool = True,
    device: Any = None,
    render_mode: str | None = None,
    check_actions: bool = False,
) -> PettingZooEnv:
    """A Melting Pot substrate (``dm-meltingpot`` 2.4), players stacked in one group, unbatched.

    Players are named ``player_0 ... player_{n-1}``, so the default
    ``by_prefix`` grouping gives one group ``"player"`` of ``n`` players
    (pass a dict to split them, e.g. predators and prey by their ``roles``).
    Keys, for ``n`` players (see :class:`PettingZooEnv` for the rest):

    - ``("player", "observation", "RGB")`` ``[n, H, W, 3]`` uint8: each
      player's egocentric view (``88 x 88`` in most substrates, ``40 x 40`` in
      ``collaborative_cooking``), channels last: ``obs.movedim(-1, -3).float()
      / 255`` gives the ``[.., 3, H, W]`` that
      :class:`~marl.modules.MultiAgentConvNet` reads;
    - ``("player", "observation", <name>)`` float32: the substrate's other
      individual observations (``READY_TO_SHOOT`` ``[n]``, ``INVENTORY``
      ``[n, k]``, ...);
    - ``("player", "action")`` ``[n]`` (index) or ``[n, A]`` (one-hot): 8 or
      9 discrete actions (no-op, moves, turns, the substrate's beams);
    - ``("next", "player", "reward")`` ``[n, 1]``: each player's own reward;
    - root ``done``: the episode is over for every player at once
      (``terminated`` when the substrate ends it, ``truncated`` at
      ``max_steps``);
    - ``"state"`` ``[H, W, 3]`` uint8 with ``return_state=True``: the
      ``WORLD.RGB`` frame of the whole map.

    Args:
        substrate: a name of ``meltingpot.substrate.SUBSTRATES``, e.g.
            ``"commons_harvest__open"`` (:data:`TASKS` are the catalogue's).
        roles: one role a player (default: the substrate's
            ``default_player_roles``; their number sets the number of players).
        max_steps: end episodes (truncated) after this many steps; ``None``
            keeps the substrate's own random ending (about 1000 steps or more).
        group_map: ``None`` (``by_prefix``: one group ``"player"``), a
            constructor name, a dict or a ``GroupMap``.
        return_state: add the global ``"state"`` (``WORLD.RGB``).
        seed: optional seed, Melting Pot's ``env_seed`` for the Lua world.
            Melting Pot does not replay an episode from it exactly: its Lua
            hands the seeded spawn points to the avatars in ``pairs()`` order,
            which changes between builds (``docs/basic/tasks/meltingpot.md``).
        categorical_actions: actions as indices (True) or one-hot (False).
        device: device of the tensors.
        render_mode: ``"rgb_array"`` to make ``env.render()`` return ``WORLD.RGB``.
        check_actions: check every action before Melting Pot sees it.

    Returns:
        A :class:`PettingZooEnv` over a :class:`MeltingPotParallelEnv`
        (``env.pettingzoo_env``).

    Raises:
        ImportError: naming ``pip install "marl[meltingpot]"`` when the package is missing.
        ValueError: on an unknown substrate (with the closest names), bad roles
            or a bad ``max_steps``.

    Examples:
        >>> env = meltingpot_env("collaborative_cooking__asymmetric", max_steps=5, seed=0)
        >>> {g: len(m) for g, m in env.group_map.items()}
        {'player': 2}
        >>> td = env.rollout(3)
        >>> td["player", "observation", "RGB"].shape, td["player", "observation", "RGB"].dtype
        (torch.Size([3, 2, 40, 40, 3]), torch.uint8)
    """
    raw = MeltingPotParallelEnv(substrate, roles, max_steps, render_mode)
    env = PettingZooEnv(
        env=raw,
        group_map=group_map,
        use_mask=False,  # every player acts every step, until all end together
        return_state=return_state,
        seed=seed,
        categorical_actions=categorical_actions,
        device=device,
        check_actions=check_actions,
    )
    env.task = substrate
    return env
