"""IDDPG: independent DDPG, one learner per agent group, per-agent critics.

Each agent's deterministic actor and ``Q(o_i, a_i)`` critic read only its own
observation and action. The update is :func:`marl.algorithms.ddpg.build_ddpg`
pointed at the group's keys; :class:`IDDPGConfig` adds the multi-agent options.
"""

from __future__ import annotations

from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import state_action_value_critic
from marl.algorithms.configs import IDDPGConfig
from marl.algorithms.ddpg import build_ddpg
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import replay_actor_critic_spec

__all__ = ["SPEC", "IDDPGConfig", "build_iddpg"]


def build_iddpg(info: GroupInfo, config: IDDPGConfig) -> GroupLearner:
    """Build an IDDPG learner for one group: DDPG with a per-agent critic.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("walker")
        >>> build_iddpg(info, IDDPGConfig()).algorithm
        'iddpg'
    """
    c = config
    critic = state_action_value_critic(info, **c.critic_body())
    return build_ddpg(info, c, value_network=critic, algorithm="iddpg")


SPEC = replay_actor_critic_spec(
    "iddpg",
    IDDPGConfig,
    build_iddpg,
    "Independent DDPG: per-agent deterministic actors and critics.",
    continuous=True,
)
