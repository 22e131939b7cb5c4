"""MAPPO: multi-agent PPO with a centralized critic (Yu et al., 2022).

The actors are decentralized (each agent reads its own observation); the critic
is centralized: it reads the env's global ``"state"`` when there is one, else
every agent of the group (``critic_scope="group"``), or every agent of every
group, heterogeneous shapes included (``critic_scope="all"``). The update is
:func:`marl.algorithms.ppo.build_ppo` with that critic.
"""

from __future__ import annotations

from marl.algorithms._critics import centralized_critic_of
from marl.algorithms._groups import GroupInfo
from marl.algorithms.configs import MAPPOConfig
from marl.algorithms.learner import GroupLearner
from marl.algorithms.ppo import build_ppo
from marl.algorithms.spec import policy_gradient_spec

__all__ = ["SPEC", "MAPPOConfig", "build_mappo"]


def build_mappo(info: GroupInfo, config: MAPPOConfig) -> GroupLearner:
    """Build a MAPPO learner for one group: PPO with a centralized critic.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("walker")
        >>> build_mappo(info, MAPPOConfig(critic_scope="all")).loss.critic.in_keys
        [('walker', 'observation'), ('picker', 'observation')]
    """
    c = config
    critic = centralized_critic_of(info, c, "state_value")
    return build_ppo(info, c, critic=critic, algorithm="mappo")


SPEC = policy_gradient_spec(
    "mappo",
    MAPPOConfig,
    build_mappo,
    "Multi-agent PPO: decentralized actors, a centralized critic.",
)
