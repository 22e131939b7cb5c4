"""MADDPG: multi-agent DDPG with centralized critics (Lowe et al., 2017).

Decentralized deterministic actors; each agent's critic ``Q(s, a_1..a_n)`` reads
the env's global ``"state"`` (or every agent's observation of the group, or of
every group with ``critic_scope="all"``) and the group's joint action. The
update is :func:`marl.algorithms.ddpg.build_ddpg` with that critic.
"""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms._critics import centralized_critic, check_critic_scope
from marl.algorithms._groups import GroupInfo
from marl.algorithms._networks import network_spec
from marl.algorithms.ddpg import build_ddpg
from marl.algorithms.iddpg import IDDPGConfig
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import AlgorithmSpec

__all__ = ["SPEC", "MADDPGConfig", "build_maddpg"]


@dataclass
class MADDPGConfig(IDDPGConfig):
    """MADDPG hyperparameters: IDDPG's, plus what the centralized critic sees.

    Examples:
        >>> MADDPGConfig().critic_scope
        'group'
    """

    critic_scope: str = "group"
    """``"group"``: the critic sees its group's agents; ``"all"``: every group's agents."""
    use_state: bool = True
    """With ``critic_scope="group"``, read the env's global ``"state"`` when it has one."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_critic_scope(self.critic_scope)


def build_maddpg(info: GroupInfo, config: MADDPGConfig) -> GroupLearner:
    """Build a MADDPG learner for one group: DDPG with a centralized ``Q(s, a)``.

    Args:
        info: the group (continuous, bounded actions).
        config: hyperparameters.

    Returns:
        The group's learner.

    Examples:
        >>> from marl.algorithms.base import group_infos
        >>> from marl.testing import MultiAgentFakeEnv
        >>> info = group_infos(MultiAgentFakeEnv(num_envs=2))["walker"]
        >>> build_maddpg(info, MADDPGConfig()).loss.value_network.in_keys
        ['state', ('walker', 'action')]
    """
    c = config
    critic = centralized_critic(
        info,
        c.critic_cells,
        c.activation,
        "state_action_value",
        with_action=True,
        scope=c.critic_scope,
        use_state=c.use_state,
        share_params=c.share_critic_params,
        network=network_spec(c),
    )
    return build_ddpg(info, c, value_network=critic, algorithm="maddpg")


SPEC = AlgorithmSpec(
    name="maddpg",
    config_cls=MADDPGConfig,
    builder=build_maddpg,
    on_policy=False,
    action_spaces=frozenset({"continuous"}),
    description="Multi-agent DDPG: decentralized actors, centralized Q(s, a) critics.",
)
