"""MADDPG: multi-agent DDPG with centralized critics (Lowe et al., 2017).

Decentralized deterministic actors; each agent's critic ``Q(s, a_1..a_n)`` reads
the env's global ``"state"`` (or every agent's observation of the group, or of
every group with ``critic_scope="all"``) and the group's joint action. The
update is :func:`marl.algorithms.ddpg.build_ddpg` with that critic.
"""

from __future__ import annotations

from marl.algorithms._critics import centralized_critic_of
from marl.algorithms._groups import GroupInfo
from marl.algorithms.configs import MADDPGConfig
from marl.algorithms.ddpg import build_ddpg
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import replay_actor_critic_spec

__all__ = ["SPEC", "MADDPGConfig", "build_maddpg"]


def build_maddpg(info: GroupInfo, config: MADDPGConfig) -> GroupLearner:
    """Build a MADDPG learner for one group: DDPG with a centralized ``Q(s, a)``.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("walker")
        >>> build_maddpg(info, MADDPGConfig()).loss.value_network.in_keys
        ['state', ('walker', 'action')]
    """
    c = config
    critic = centralized_critic_of(info, c, "state_action_value", with_action=True)
    return build_ddpg(info, c, value_network=critic, algorithm="maddpg")


SPEC = replay_actor_critic_spec(
    "maddpg",
    MADDPGConfig,
    build_maddpg,
    "Multi-agent DDPG: decentralized actors, centralized Q(s, a) critics.",
    continuous=True,
)
