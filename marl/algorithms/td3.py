"""TD3: twin delayed DDPG (Fujimoto et al., 2018).

Roles: :class:`TD3Config`, :func:`build_td3` (a deterministic actor with Gaussian
exploration, twin Q-networks, ``TD3Loss`` with target smoothing and a delayed
actor, soft target updates, a uniform or prioritized buffer).
"""

from __future__ import annotations

from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import action_bounds
from marl.algorithms.configs import TD3Config
from marl.algorithms.ddpg import deterministic_actor_critic, deterministic_actor_learner
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import replay_actor_critic_spec
from marl.objectives import TD3Loss

__all__ = ["SPEC", "TD3Config", "build_td3"]


def build_td3(
    info: GroupInfo, config: TD3Config, *, qvalue_network: nn.Module | None = None
) -> GroupLearner:
    """Build a TD3 learner for one group.

    Args:
        info: the group.
        config: hyperparameters.
        qvalue_network: the Q(s, a) critic writing ``state_action_value`` (default: a
            per-agent MLP); its twin is an independently initialised copy.

    Returns:
        The group's learner.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("root")
        >>> build_td3(info, TD3Config()).loss.policy_delay
        2
    """
    c = config
    actor, qvalue_network = deterministic_actor_critic(info, c, qvalue_network)
    low, high = action_bounds(info)
    loss = TD3Loss(actor, qvalue_network, c, low=low, high=high)
    critic_params = loss.qvalue_networks.parameters()
    return deterministic_actor_learner(
        info, c, actor, loss, critic_params=critic_params, algorithm="td3"
    )


SPEC = replay_actor_critic_spec(
    "td3",
    TD3Config,
    build_td3,
    "Twin delayed DDPG: clipped double Q, target smoothing, delayed actor.",
    continuous=True,
)
