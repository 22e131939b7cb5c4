"""MASAC: multi-agent soft actor-critic with centralized critics.

Decentralized stochastic actors; the twin Q-networks read the env's global
``"state"`` (or every agent of the group, or of every group with
``critic_scope="all"``) and, for continuous actions, the group's joint action
(``Q(s, a_1..a_n)``); for discrete actions they give each agent ``Q(s, .)``.
The update is :func:`marl.algorithms.sac.build_sac` with those Q-networks.
"""

from __future__ import annotations

from marl.algorithms._critics import centralized_critic_of
from marl.algorithms._groups import GroupInfo
from marl.algorithms.configs import MASACConfig
from marl.algorithms.learner import GroupLearner
from marl.algorithms.sac import build_sac
from marl.algorithms.spec import replay_actor_critic_spec

__all__ = ["SPEC", "MASACConfig", "build_masac"]


def build_masac(info: GroupInfo, config: MASACConfig) -> GroupLearner:
    """Build a MASAC learner for one group: SAC with centralized Q-networks.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("picker")
        >>> build_masac(info, MASACConfig(use_state=False)).loss.qvalue_networks[0].in_keys
        [('picker', 'observation')]
    """
    c = config
    continuous = info.action_space == "continuous"
    out_key = "state_action_value" if continuous else "action_value"
    out_features = 1 if continuous else info.n_actions
    qnet = centralized_critic_of(
        info, c, out_key, out_features=out_features, with_action=continuous
    )
    return build_sac(info, c, qvalue_network=qnet, algorithm="masac")


SPEC = replay_actor_critic_spec(
    "masac",
    MASACConfig,
    build_masac,
    "Multi-agent SAC: decentralized actors, centralized twin Q-networks.",
    continuous=False,
)
