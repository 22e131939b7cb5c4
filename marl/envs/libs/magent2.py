"""`magent2_env`: MAgent2 gridworlds (hundreds of agents in teams) through `PettingZooEnv`.

MAgent2's environments are PettingZoo parallel envs, so this module only
finds and builds one and hands it to :class:`~marl.envs.libs.pettingzoo.PettingZooEnv`:
grouping, masks for agents that die, float32 conversion and seeding are that
wrapper's. See :func:`magent2_env`.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any

from marl.envs.libs.pettingzoo import PettingZooEnv
from marl.groups import GroupMapLike

__all__ = ["TASKS", "magent2_env"]

# The environments of magent2 0.3.4 (``magent2.environments.<name>``).
TASKS = (
    "adversarial_pursuit_v4",
    "battle_v4",
    "battlefield_v5",
    "combined_arms_v6",
    "gather_v5",
    "tiger_deer_v4",
)


def _import_task(task: str) -> Any:
    """The ``magent2.environments`` module of ``task``; clear errors otherwise."""
    if not isinstance(task, str) or task not in TASKS:
        close = difflib.get_close_matches(str(task), TASKS, n=3, cutoff=0.5)
        hint = f"; closest: {close}" if close else ""
        raise ValueError(f"unknown MAgent2 task {task!r}; expected one of {list(TASKS)}{hint}")
    try:
        return importlib.import_module(f"magent2.environments.{task}")
    except ImportError as err:
        if err.name is not None and not err.name.startswith("magent2"):
            raise
        raise ImportError(
            f'MAgent2 task {task!r} needs the "magent2" package: pip install "marl[magent2]"'
        ) from err


def magent2_env(
    task: str,
    group_map: GroupMapLike | None = None,
    use_mask: bool = True,
    return_state: bool = False,
    seed: int | None = None,
    *,
    categorical_actions: bool = True,
    device: Any = None,
    check_actions: bool = False,
    **kwargs: Any,
) -> PettingZooEnv:
    """A MAgent2 environment (``magent2`` 0.3.x), agents stacked by team, unbatched.

    MAgent2 names agents ``<team>_<i>`` (``red_0 ... red_80``,
    ``predator_0``, ``prey_0``, ...), so the default ``by_prefix`` grouping
    gives one group per team (per unit type in ``combined_arms``, whose melee
    and ranged units have different observations and actions). Keys, for a
    group ``g`` of ``n_g`` agents (see :class:`PettingZooEnv` for the rest):

    - ``(g, "observation")`` ``[n_g, H, W, C]`` float32: each agent's local
      view as MAgent2 gives it, channels last (e.g. ``13 x 13 x 5`` in
      ``battle``: walls, own team presence and HP, other team presence and
      HP). Kept as an image: algorithms flatten it for their MLPs, and
      ``obs.movedim(-1, -3)`` gives the ``[.., C, H, W]`` that
      :class:`~marl.modules.MultiAgentConvNet` reads. ``minimap_mode=True``
      adds the global density channels and the agent's position;
    - ``(g, "action")`` ``[n_g]`` (index) or ``[n_g, A]`` (one-hot). MAgent2
      has no action masks (every action is accepted; a blocked move does
      nothing);
    - ``(g, "mask")`` ``[n_g]`` bool: False once an agent has died (MAgent2
      removes dead agents; they stay in the layout with zero observations and
      zero rewards until the episode ends);
    - root ``done``: every agent dead or the episode over (``truncated`` at
      ``max_cycles``, ``terminated`` when the game ends, e.g. one team wiped
      out in ``battle``);
    - ``"state"`` ``[map, map, C]`` with ``return_state=True``: the whole map
      (walls, each team's presence and HP). It costs a second observation pass
      of the engine per step, so it is off by default.

    Args:
        task: one of :data:`TASKS`, e.g. ``"battle_v4"``.
        group_map: ``None`` (``by_prefix``: one group per team), a constructor
            name, a dict or a ``GroupMap``.
        use_mask: write the per-group ``"mask"`` key.
        return_state: add the global ``"state"``.
        seed: optional seed (MAgent2 seeds its engine, so the map and the
            agents' placement repeat).
        categorical_actions: actions as indices (True) or one-hot (False).
        device: device of the tensors.
        check_actions: check every action before MAgent2 sees it.
        **kwargs: the task's arguments: ``map_size`` (sets the number of
            agents), ``max_cycles``, ``minimap_mode``, ``extra_features``,
            ``render_mode`` and its reward terms (e.g. ``step_reward``).

    Returns:
        A :class:`PettingZooEnv` over the built MAgent2 env
        (``env.pettingzoo_env`` is the MAgent2 env).

    Raises:
        ImportError: naming ``pip install "marl[magent2]"`` when the package is missing.
        ValueError: on an unknown task (listing the known ones) or argument.

    Examples:
        >>> env = magent2_env("battle_v4", seed=0, map_size=16, max_cycles=5)
        >>> {g: len(m) for g, m in env.group_map.items()}
        {'red': 6, 'blue': 6}
        >>> td = env.rollout(3)
        >>> td["red", "observation"].shape, td["red", "mask"].shape
        (torch.Size([3, 6, 13, 13, 5]), torch.Size([3, 6]))
    """
    module = _import_task(task)
    try:
        raw = module.parallel_env(**kwargs)
    except TypeError as err:
        if "unexpected keyword" not in str(err):
            raise
        raise ValueError(f"unknown argument for MAgent2 task {task!r}: {err}") from err
    env = PettingZooEnv(
        env=raw,
        group_map=group_map,
        use_mask=use_mask,
        return_state=return_state,
        seed=seed,
        categorical_actions=categorical_actions,
        device=device,
        check_actions=check_actions,
    )
    env.task = task
    return env
