"""IQL: independent Q-learning (Tan, 1993) with deep Q-networks, per agent group.

Each agent learns its own ``Q(o_i, .)`` from its own reward, treating the other
agents as part of the environment. The update is
:func:`marl.algorithms.dqn.build_dqn` pointed at the group's keys (legal-action
masks honoured in the greedy action, the exploration and the target maximum);
:class:`IQLConfig` only adds BenchMARL-like defaults and the multi-agent option.
"""

from __future__ import annotations

from marl.algorithms._groups import GroupInfo
from marl.algorithms.configs import IQLConfig
from marl.algorithms.dqn import build_dqn
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import q_learning_spec

__all__ = ["SPEC", "IQLConfig", "build_iql"]


def build_iql(info: GroupInfo, config: IQLConfig) -> GroupLearner:
    """Build an IQL learner for one group: DQN on per-agent Q-networks.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("picker")
        >>> build_iql(info, IQLConfig()).algorithm
        'iql'
    """
    return build_dqn(info, config, algorithm="iql")


SPEC = q_learning_spec("iql", IQLConfig, build_iql, "Independent Q-learning: per-agent DQN.")
