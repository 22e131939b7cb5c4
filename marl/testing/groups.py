"""A group of a fake env, for examples and tests of the algorithm builders."""

from __future__ import annotations

from typing import TYPE_CHECKING

from marl.testing.fake_envs import MultiAgentFakeEnv, SingleAgentFakeEnv

if TYPE_CHECKING:
    from marl.algorithms import GroupInfo

__all__ = ["example_group"]


def example_group(group: str = "walker", *, discrete: bool = False) -> GroupInfo:
    """The :class:`~marl.algorithms.GroupInfo` of one group of a two-env fake env.

    Args:
        group: ``"walker"`` (continuous actions) or ``"picker"`` (discrete, with action
            and agent masks) of :class:`MultiAgentFakeEnv`, or ``"root"``: the single
            agent of :class:`SingleAgentFakeEnv`.
        discrete: ``"root"`` only: discrete actions.

    Examples:
        >>> example_group("picker").n_agents, example_group("root").name is None
        (3, True)
    """
    from marl.algorithms.base import group_infos  # marl.testing sits above the algorithms

    if group == "root":
        return group_infos(SingleAgentFakeEnv(num_envs=2, discrete=discrete))["root"]
    return group_infos(MultiAgentFakeEnv(num_envs=2))[group]
