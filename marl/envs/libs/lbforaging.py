"""`LBForagingEnv`: Level-Based Foraging (the ``lbforaging`` package), agents stacked.

Players with levels walk a grid and load food whose level is at most the sum of
the levels of the players loading it together. See :class:`LBForagingEnv`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marl.envs.libs._tuple_agents import TupleAgentsEnv

__all__ = ["LBForagingEnv"]


# The Action enum members in index order (NONE, NORTH, SOUTH, WEST, EAST, LOAD), filled at
# the first env: the masks test membership in each player's list of legal members, which
# compares by identity (``Enum.value`` and ``Enum.__hash__`` are Python calls, slow per step)
_ACTIONS: list[Any] = []


class LBForagingEnv(TupleAgentsEnv):
    """A Level-Based Foraging env (``lbforaging`` 2.x), unbatched.

    Keys, with the default single group ``"agents"`` of ``n`` players:

    - ``("agents", "observation")`` ``[n, 3 * (food + players)]`` float32: each
      food's and player's ``(row, col, level)`` (``-1`` for what is not seen);
    - ``("agents", "action_mask")`` ``[n, 6]`` bool: the actions the env
      accepts at this step (NONE, NORTH, SOUTH, WEST, EAST, LOAD), from
      ``ForagingEnv._valid_actions``; the env turns any other action into NONE;
    - ``("agents", "action")`` ``[n]`` (index) or ``[n, 6]`` (one-hot);
    - ``("next", "agents", "reward")`` ``[n, 1]``: each player's share of the
      food it loaded (normalized so that an episode sums to at most 1 over
      all players with ``normalize_reward=True``, the default). LBF has no
      shared-reward option; algorithms that want a team reward sum these.
    - root ``done``/``terminated``/``truncated`` ``[1]``: ``terminated`` when
      all food is loaded, ``truncated`` when ``max_episode_steps`` ran out
      first (the package itself reports both as ``done``).

    Args:
        env_id: a registered id, e.g. ``"Foraging-8x8-2p-2f-coop-v3"``
            (``-coop``: every food needs all players; ``-2s``: sight 2).
        env: an existing ``ForagingEnv`` (instead of ``env_id``).
        group_map: ``None`` (one group ``"agents"``), a constructor name, a dict
            or a ``GroupMap`` over ``agent_0 ... agent_{n-1}``.
        seed: optional seed, used at the next reset.
        categorical_actions: actions as indices (True) or one-hot (False).
        device: device of the tensors.
        keep_float64: keep float64 rewards (False: float32).
        check_actions: check every action before the env sees it.
        **kwargs: ``ForagingEnv`` arguments replacing the registered ones
            (``max_episode_steps``, ``sight``, ``force_coop``, ``penalty``, ...).

    Raises:
        ImportError: naming ``pip install "marl[lbforaging]"`` when the package is missing.
        ValueError: on an unknown id or argument.

    Examples:
        >>> env = LBForagingEnv("Foraging-5x5-2p-1f-v3", seed=0, max_episode_steps=10)
        >>> td = env.rollout(4)
        >>> td["agents", "observation"].shape, td["agents", "action_mask"].shape
        (torch.Size([4, 2, 9]), torch.Size([4, 2, 6]))
    """

    package = "lbforaging"
    extra = "lbforaging"
    example_id = "Foraging-8x8-2p-2f-coop-v3"
    has_action_mask = True

    def _import_package(self) -> Any:
        package = super()._import_package()
        if not _ACTIONS:
            from lbforaging.foraging.environment import Action

            actions = sorted(Action, key=lambda a: a.value)
            if [a.value for a in actions] != list(range(6)):
                raise RuntimeError(
                    "LBForagingEnv expects lbforaging's Action values 0..5 (NONE, NORTH, "
                    f"SOUTH, WEST, EAST, LOAD), got {[(a.name, a.value) for a in actions]}"
                )
            _ACTIONS.extend(actions)
        return package

    def _action_masks(self) -> np.ndarray:
        env = self._env
        valid = env._valid_actions  # the package's own per-player legal actions
        return np.array([[a in valid[p] for a in _ACTIONS] for p in env.players], bool)

    def _time_limit_reached(self) -> bool:
        env = self._env
        return bool(env.current_step >= env._max_episode_steps and env.field.sum() > 0)

    @property
    def lbforaging_env(self) -> Any:
        """The underlying ``ForagingEnv``."""
        return self._env
