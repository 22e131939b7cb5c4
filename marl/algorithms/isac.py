"""ISAC: independent soft actor-critic, one learner per agent group.

Each agent's stochastic actor and twin Q-networks read only its own observation
(``Q(o_i, a_i)`` for continuous actions, ``Q(o_i, .)`` for discrete ones). The
update is :func:`marl.algorithms.sac.build_sac` pointed at the group's keys.
"""

from __future__ import annotations

from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import q_value_network, state_action_value_critic
from marl.algorithms.configs import ISACConfig
from marl.algorithms.learner import GroupLearner
from marl.algorithms.sac import build_sac
from marl.algorithms.spec import replay_actor_critic_spec

__all__ = ["SPEC", "ISACConfig", "build_isac"]


def build_isac(info: GroupInfo, config: ISACConfig) -> GroupLearner:
    """Build an ISAC learner for one group: SAC with per-agent Q-networks.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("picker")
        >>> type(build_isac(info, ISACConfig()).loss).__name__
        'DiscreteSACLoss'
    """
    c = config
    make = state_action_value_critic if info.action_space == "continuous" else q_value_network
    qnet = make(info, **c.critic_body())
    return build_sac(info, c, qvalue_network=qnet, algorithm="isac")


SPEC = replay_actor_critic_spec(
    "isac",
    ISACConfig,
    build_isac,
    "Independent SAC: per-agent stochastic actors and twin Q-networks.",
    continuous=False,
)
