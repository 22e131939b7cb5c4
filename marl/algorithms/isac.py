"""ISAC: independent soft actor-critic, one learner per agent group.

Each agent's stochastic actor and twin Q-networks read only its own observation
(``Q(o_i, a_i)`` for continuous actions, ``Q(o_i, .)`` for discrete ones). The
update is :func:`marl.algorithms.sac.build_sac` pointed at the group's keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from marl.algorithms._groups import GroupInfo
from marl.algorithms._networks import network_spec
from marl.algorithms._policies import q_value_network, state_action_value_critic
from marl.algorithms.learner import GroupLearner
from marl.algorithms.sac import SACConfig, build_sac
from marl.algorithms.spec import AlgorithmSpec

__all__ = ["SPEC", "ISACConfig", "build_isac"]


@dataclass
class ISACConfig(SACConfig):
    """ISAC hyperparameters: SAC's, plus parameter sharing of actor and critics.

    Examples:
        >>> ISACConfig(share_critic_params=False).share_critic_params
        False
    """

    share_policy_params: bool = True
    """One set of actor parameters for every agent of the group (else vectorized per agent)."""
    share_critic_params: bool = True
    """One set of Q-network parameters for every agent of the group (else per agent)."""
    share_params: bool = field(default=True, init=False)
    """Set from ``share_policy_params`` (the name SAC's builder reads for the actor)."""

    def __post_init__(self) -> None:
        self.share_params = self.share_policy_params


def build_isac(info: GroupInfo, config: ISACConfig) -> GroupLearner:
    """Build an ISAC learner for one group: SAC with per-agent Q-networks.

    Args:
        info: the group (continuous or discrete actions).
        config: hyperparameters.

    Returns:
        The group's learner.

    Examples:
        >>> from marl.algorithms.base import group_infos
        >>> from marl.testing import MultiAgentFakeEnv
        >>> info = group_infos(MultiAgentFakeEnv(num_envs=2))["picker"]
        >>> type(build_isac(info, ISACConfig()).loss).__name__
        'DiscreteSACLoss'
    """
    c = config
    make = state_action_value_critic if info.action_space == "continuous" else q_value_network
    qnet = make(
        info,
        c.critic_cells,
        c.activation,
        share_params=c.share_critic_params,
        network=network_spec(c),
    )
    return build_sac(info, c, qvalue_network=qnet, algorithm="isac")


SPEC = AlgorithmSpec(
    name="isac",
    config_cls=ISACConfig,
    builder=build_isac,
    on_policy=False,
    action_spaces=frozenset({"continuous", "discrete"}),
    description="Independent SAC: per-agent stochastic actors and twin Q-networks.",
)
