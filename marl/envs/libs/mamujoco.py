"""`MaMuJoCoEnv`: Multi-Agent MuJoCo (``gymnasium-robotics``), through :class:`PettingZooEnv`.

MaMuJoCo splits a Gymnasium MuJoCo robot (HalfCheetah, Ant, Humanoid, ...)
into agents that each drive some of its joints and see the joints near them.
The package builds a PettingZoo ``ParallelEnv``; this module builds it and
hands it to :class:`~marl.envs.libs.pettingzoo.PettingZooEnv`, which does the
stacking, the dtypes and the done flags. What is MaMuJoCo's own is here: the
partitions, a default grouping by shape (agents of one robot can see and
drive different numbers of joints) and the global state.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from marl.envs.libs.pettingzoo import PettingZooEnv
from marl.extras import require
from marl.groups import GroupMap, GroupMapLike

__all__ = ["MaMuJoCoEnv", "group_by_shape", "mamujoco_partitions"]


def _import_mamujoco() -> Any:
    robotics = require(
        "gymnasium_robotics", "MaMuJoCo", "mamujoco", what='the "gymnasium-robotics" package'
    )
    return robotics.mamujoco_v1


def mamujoco_partitions(scenario: str) -> list[str]:
    """The ``agent_conf`` partitions MaMuJoCo defines for a robot.

    The package keeps no table of them: they are read from the source of its
    ``get_parts_and_edges`` (the strings its branch for ``scenario`` compares
    the partition with), so the list follows the installed version. An empty
    list means none was found; the package then checks the partition itself.

    Args:
        scenario: a robot such as ``"HalfCheetah"`` or ``"Humanoid"``.

    Returns:
        The partition names, e.g. ``["2x3", "6x1"]`` for ``"HalfCheetah"``.

    Raises:
        ImportError: when ``gymnasium-robotics`` is missing.
        ValueError: on an unknown scenario (listing the known ones).

    Examples:
        >>> mamujoco_partitions("HalfCheetah")
        ['2x3', '6x1']
    """
    _import_mamujoco()
    import inspect

    from gymnasium_robotics.envs.multiagent_mujoco import obsk

    known = _scenarios()
    if scenario not in known:
        raise ValueError(f"unknown MaMuJoCo scenario {scenario!r}; known: {known}")
    # read from the package's source rather than copied here: they follow its version
    return list(_partitions_in_source(inspect.getsource(obsk.get_parts_and_edges), scenario))


def _scenarios() -> list[str]:
    from gymnasium_robotics.envs.multiagent_mujoco import mujoco_multi

    return list(mujoco_multi._MUJOCO_GYM_ENVIROMENTS)


@functools.cache
def _partitions_in_source(source: str, scenario: str) -> tuple[str, ...]:
    import ast
    import textwrap

    tree = ast.parse(textwrap.dedent(source))
    found: list[str] = []

    def literals(test: ast.AST) -> list[str]:
        return [
            n.value
            for n in ast.walk(test)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        ]

    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or scenario not in literals(node.test):
            continue
        # the scenario's branch: the partitions are the strings its inner ifs test
        for inner in ast.walk(ast.Module(body=node.body, type_ignores=[])):
            if isinstance(inner, ast.If):
                found.extend(s for s in literals(inner.test) if s not in found)
        break
    return tuple(found)


def group_by_shape(env: Any) -> GroupMap:
    """One group per distinct (observation shape, action shape), in agent order.

    MaMuJoCo agents of one robot may see and drive different numbers of
    joints (Humanoid ``"9|8"``: 9 and 8 actuators; HalfCheetah ``"6x1"``: the
    end joints see fewer neighbours). Groups are stacked, so a group needs one
    shape. All agents share one group ``"agents"`` when their shapes agree;
    otherwise the groups are named ``"agents_<obs>_<act>"`` after their sizes.

    Args:
        env: a PettingZoo parallel env (``possible_agents``,
            ``observation_space(a)``, ``action_space(a)``).

    Returns:
        The ``GroupMap``.

    Examples:
        >>> from gymnasium_robotics import mamujoco_v1
        >>> group_by_shape(mamujoco_v1.parallel_env("Humanoid", "9|8")).to_dict()
        {'agents_242_9': ['agent_0'], 'agents_170_8': ['agent_1']}
        >>> group_by_shape(mamujoco_v1.parallel_env("HalfCheetah", "2x3")).to_dict()
        {'agents': ['agent_0', 'agent_1']}
    """
    groups: dict[tuple, list[str]] = {}
    for a in env.possible_agents:
        key = (env.observation_space(a).shape, env.action_space(a).shape)
        groups.setdefault(key, []).append(a)
    if len(groups) == 1:
        return GroupMap(dict(agents=next(iter(groups.values()))))

    def name(key: tuple) -> str:
        return "agents_" + "_".join("x".join(map(str, shape)) for shape in key)

    return GroupMap({name(k): members for k, members in groups.items()})


def _with_state_space(env: Any) -> Any:
    """``env`` with a ``state_space`` (MaMuJoCo has ``state()`` but no space for it)."""
    import gymnasium

    state = np.asarray(env.state())
    space = gymnasium.spaces.Box(-np.inf, np.inf, shape=state.shape, dtype=state.dtype)
    return _state_wrapper_class()(env, space)


@functools.cache
def _state_wrapper_class() -> type:
    """A PettingZoo wrapper that adds ``state_space`` (defined once pettingzoo is imported)."""
    from pettingzoo.utils import BaseParallelWrapper

    class WithStateSpace(BaseParallelWrapper):
        def __init__(self, env: Any, state_space: Any) -> None:
            super().__init__(env)
            self.state_space = state_space

    return WithStateSpace


# A factory named like the other families' env classes: it returns the PettingZoo wrapper.
def MaMuJoCoEnv(
    scenario: str,
    agent_conf: str,
    *,
    agent_obsk: int = 1,
    group_map: GroupMapLike | None = None,
    return_state: bool = True,
    seed: int | None = None,
    device: Any = None,
    keep_float64: bool = False,
    check_actions: bool = False,
    max_episode_steps: int | None = None,
    render_mode: str | None = None,
    **kwargs: Any,
) -> PettingZooEnv:
    """A MaMuJoCo task as a :class:`PettingZooEnv`, agents grouped by shape.

    Keys, with ``g`` a group of ``n_g`` agents (see :func:`group_by_shape`):

    - ``(g, "observation")`` ``[n_g, obs]`` float32: each agent's joints and
      those ``agent_obsk`` edges away;
    - ``(g, "action")`` ``[n_g, act]`` float32, bounded by the robot's
      actuator range (``[-1, 1]``; ``[-0.4, 0.4]`` for Humanoid);
    - ``("next", g, "reward")`` ``[n_g, 1]``: the team reward, the same for
      every agent (MaMuJoCo gives each agent the robot's reward);
    - root ``"state"`` (with ``return_state=True``, the default): the robot's
      full Gymnasium observation, float32, for centralized critics;
    - root ``done``/``terminated``/``truncated`` ``[1]``: ``terminated`` when
      the robot falls (Ant, Hopper, Humanoid, Walker2d), ``truncated`` at
      ``max_episode_steps`` (1000 by default, Gymnasium's).

    Every agent ends with the robot, so no ``"mask"`` key is written.

    Args:
        scenario: the robot, e.g. ``"HalfCheetah"``, ``"Ant"``, ``"Humanoid"``.
        agent_conf: the partition, e.g. ``"2x3"`` (see :func:`mamujoco_partitions`).
        agent_obsk: how many joint-graph edges away an agent sees (MaMuJoCo's default 1).
        group_map: ``None`` (:func:`group_by_shape`), a constructor name, a
            dict or a ``GroupMap`` over ``agent_0 ... agent_{n-1}``.
        return_state: add the root ``"state"``.
        seed: optional seed, used at the next reset.
        device: device of the tensors.
        keep_float64: keep float64 observations, state and rewards.
        check_actions: check every action (NaN/inf) before the env sees it.
        max_episode_steps: the episode length (``None``: Gymnasium's 1000).
        render_mode: ``"rgb_array"`` to render frames (set ``MUJOCO_GL=egl``
            or ``osmesa`` on a machine without a display).
        **kwargs: Gymnasium MuJoCo arguments (``ctrl_cost_weight``, ...).

    Returns:
        The ``PettingZooEnv`` (its ``pettingzoo_env.unwrapped`` is the MaMuJoCo env).

    Raises:
        ImportError: naming ``pip install "marl[mamujoco]"`` when
            ``gymnasium-robotics`` is missing.
        ValueError: on an unknown scenario or partition (listing the valid ones).

    Examples:
        >>> env = MaMuJoCoEnv("Humanoid", "9|8", seed=0)
        >>> td = env.rollout(3)
        >>> td["agents_242_9", "observation"].shape, td["agents_170_8", "action"].shape
        (torch.Size([3, 1, 242]), torch.Size([3, 1, 8]))
        >>> td["state"].dtype, td["next", "agents_242_9", "reward"].dtype
        (torch.float32, torch.float32)
    """
    mamujoco_v1 = _import_mamujoco()
    known = _scenarios()
    if scenario not in known:
        raise ValueError(f"unknown MaMuJoCo scenario {scenario!r}; known: {known}")
    partitions = mamujoco_partitions(scenario)
    if partitions and agent_conf not in partitions:
        raise ValueError(
            f"unknown MaMuJoCo partition {agent_conf!r} for {scenario!r}; valid: {partitions}"
        )
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = max_episode_steps
    env = mamujoco_v1.parallel_env(
        scenario, agent_conf, agent_obsk=agent_obsk, render_mode=render_mode, **kwargs
    )
    if return_state:
        env = _with_state_space(env)
    if group_map is None:
        group_map = group_by_shape(env)
    return PettingZooEnv(
        env=env,
        group_map=group_map,
        use_mask=False,
        return_state=return_state,
        seed=seed,
        device=device,
        keep_float64=keep_float64,
        check_actions=check_actions,
    )
