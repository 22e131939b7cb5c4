"""IDDPG: independent DDPG, one learner per agent group, per-agent critics.

Each agent's deterministic actor and ``Q(o_i, a_i)`` critic read only its own
observation and action. The update is :func:`marl.algorithms.ddpg.build_ddpg`
pointed at the group's keys; :class:`IDDPGConfig` adds the multi-agent options.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from marl.algorithms._groups import GroupInfo
from marl.algorithms._networks import network_spec
from marl.algorithms._policies import state_action_value_critic
from marl.algorithms.ddpg import DDPGConfig, build_ddpg
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import AlgorithmSpec

__all__ = ["SPEC", "IDDPGConfig", "build_iddpg"]


@dataclass
class IDDPGConfig(DDPGConfig):
    """IDDPG hyperparameters: DDPG's, plus parameter sharing of actor and critic.

    Examples:
        >>> IDDPGConfig(share_policy_params=False).share_params
        False
    """

    share_policy_params: bool = True
    """One set of actor parameters for every agent of the group (else vectorized per agent)."""
    share_critic_params: bool = True
    """One set of critic parameters for every agent of the group (else vectorized per agent)."""
    share_params: bool = field(default=True, init=False)
    """Set from ``share_policy_params`` (the name DDPG's builder reads for the actor)."""

    def __post_init__(self) -> None:
        self.share_params = self.share_policy_params


def build_iddpg(info: GroupInfo, config: IDDPGConfig) -> GroupLearner:
    """Build an IDDPG learner for one group: DDPG with a per-agent critic.

    Args:
        info: the group (continuous, bounded actions).
        config: hyperparameters.

    Returns:
        The group's learner.

    Examples:
        >>> from marl.algorithms.base import group_infos
        >>> from marl.testing import MultiAgentFakeEnv
        >>> info = group_infos(MultiAgentFakeEnv(num_envs=2))["walker"]
        >>> build_iddpg(info, IDDPGConfig()).algorithm
        'iddpg'
    """
    c = config
    critic = state_action_value_critic(
        info,
        c.critic_cells,
        c.activation,
        share_params=c.share_critic_params,
        network=network_spec(c),
    )
    return build_ddpg(info, c, value_network=critic, algorithm="iddpg")


SPEC = AlgorithmSpec(
    name="iddpg",
    config_cls=IDDPGConfig,
    builder=build_iddpg,
    on_policy=False,
    action_spaces=frozenset({"continuous"}),
    description="Independent DDPG: per-agent deterministic actors and critics.",
)
