"""IPPO: independent PPO (de Witt et al., 2020), one learner per agent group.

Each agent has its own (decentralized) actor and critic, both reading only its
own observation; parameters are shared over the group's agents or vectorized
per agent (``MultiAgentMLP``). The update is :func:`marl.algorithms.ppo.build_ppo`
pointed at the group's keys: :class:`IPPOConfig` only adds the multi-agent
options and BenchMARL-like defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import state_value_critic
from marl.algorithms._recurrent import critic_network
from marl.algorithms.learner import GroupLearner
from marl.algorithms.ppo import PPOConfig, build_ppo
from marl.algorithms.spec import AlgorithmSpec

__all__ = ["SPEC", "IPPOConfig", "build_ippo"]


@dataclass
class IPPOConfig(PPOConfig):
    """IPPO hyperparameters (BenchMARL-like defaults).

    Examples:
        >>> IPPOConfig(share_policy_params=False).share_params
        False
    """

    lr: float = 5e-5
    """Adam learning rate of the actor and the critic (BenchMARL's default)."""
    lmbda: float = 0.9
    """GAE lambda (BenchMARL's default)."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus (BenchMARL: none). Masked-out agents are weighted
    out of it, as they are of the objective."""
    critic_coef: float = 1.0
    """Weight of the critic loss (BenchMARL's default)."""
    minibatch_size: int = 400
    """Transitions (env steps, all agents of the group together) per optimizer step."""
    share_policy_params: bool = True
    """One set of actor parameters for every agent of the group (else vectorized per agent)."""
    share_critic_params: bool = True
    """One set of critic parameters for every agent of the group (else vectorized per agent)."""
    share_params: bool = field(default=True, init=False)
    """Set from ``share_policy_params`` (the name PPO's builder reads for the actor)."""

    def __post_init__(self) -> None:
        self.share_params = self.share_policy_params


def build_ippo(info: GroupInfo, config: IPPOConfig) -> GroupLearner:
    """Build an IPPO learner for one group: PPO with a per-agent critic.

    Args:
        info: the group.
        config: hyperparameters.

    Returns:
        The group's learner.

    Examples:
        >>> from marl.algorithms.base import group_infos
        >>> from marl.testing import MultiAgentFakeEnv
        >>> info = group_infos(MultiAgentFakeEnv(num_envs=2))["walker"]
        >>> build_ippo(info, IPPOConfig()).algorithm
        'ippo'
    """
    c = config
    critic = state_value_critic(
        info,
        c.critic_cells,
        c.activation,
        share_params=c.share_critic_params,
        network=critic_network(c),
    )
    return build_ppo(info, c, critic=critic, algorithm="ippo")


SPEC = AlgorithmSpec(
    name="ippo",
    config_cls=IPPOConfig,
    builder=build_ippo,
    on_policy=True,
    action_spaces=frozenset({"continuous", "discrete"}),
    description="Independent PPO: decentralized actors and per-agent critics.",
)
