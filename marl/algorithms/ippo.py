"""IPPO: independent PPO (de Witt et al., 2020), one learner per agent group.

Each agent has its own (decentralized) actor and critic, both reading only its
own observation; parameters are shared over the group's agents or vectorized
per agent (``MultiAgentMLP``). The update is :func:`marl.algorithms.ppo.build_ppo`
pointed at the group's keys, with the multi-agent preset
:class:`~marl.algorithms.settings.MultiAgentPPO` (BenchMARL-like defaults).
"""

from __future__ import annotations

from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import state_value_critic
from marl.algorithms.configs import IPPOConfig
from marl.algorithms.learner import GroupLearner
from marl.algorithms.ppo import build_ppo
from marl.algorithms.spec import policy_gradient_spec

__all__ = ["SPEC", "IPPOConfig", "build_ippo"]


def build_ippo(info: GroupInfo, config: IPPOConfig) -> GroupLearner:
    """Build an IPPO learner for one group: PPO with a per-agent critic.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("walker")
        >>> build_ippo(info, IPPOConfig()).algorithm
        'ippo'
    """
    c = config
    critic = state_value_critic(info, **c.critic_body())
    return build_ppo(info, c, critic=critic, algorithm="ippo")


SPEC = policy_gradient_spec(
    "ippo", IPPOConfig, build_ippo, "Independent PPO: decentralized actors and per-agent critics."
)
