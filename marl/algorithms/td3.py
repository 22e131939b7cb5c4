"""TD3: twin delayed DDPG (Fujimoto et al., 2018).

Roles: :class:`TD3Config`, :func:`build_td3` (a deterministic actor with Gaussian
exploration, twin Q-networks, ``TD3Loss`` with target smoothing and a delayed
actor, soft target updates, a uniform or prioritized buffer).
"""

from __future__ import annotations

from dataclasses import dataclass

from tensordict.nn import TensorDictSequential
from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms._networks import network_spec
from marl.algorithms._policies import action_bounds, deterministic_actor, state_action_value_critic
from marl.algorithms.ddpg import DDPGConfig, gaussian_exploration
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import AlgorithmSpec
from marl.algorithms.updates import make_optimizer, off_policy_learner
from marl.objectives import SoftUpdate, TD3Loss

__all__ = ["SPEC", "TD3Config", "build_td3"]


@dataclass
class TD3Config(DDPGConfig):
    """TD3 hyperparameters: DDPG's, plus target smoothing and the actor delay."""

    policy_noise: float = 0.2
    """Std of the target-policy smoothing noise, as a fraction of half the action range."""
    noise_clip: float = 0.5
    """Clip of the smoothing noise, as a fraction of half the action range."""
    policy_delay: int = 2
    """Critic updates per actor update."""
    num_qvalue_nets: int = 2
    """Q-networks whose minimum is the target (2: clipped double Q)."""


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
        >>> from marl.algorithms.base import group_infos
        >>> from marl.testing import SingleAgentFakeEnv
        >>> info = group_infos(SingleAgentFakeEnv(num_envs=2))["root"]
        >>> build_td3(info, TD3Config()).loss.policy_delay
        2
    """
    c = config
    actor = deterministic_actor(
        info, c.actor_cells, c.activation, share_params=c.share_params, network=network_spec(c)
    )
    if qvalue_network is None:
        qvalue_network = state_action_value_critic(
            info, c.critic_cells, c.activation, share_params=c.share_params, network=network_spec(c)
        )
    low, high = action_bounds(info)
    half = float((high - low).max()) / 2
    loss = TD3Loss(
        actor,
        qvalue_network,
        low=low,
        high=high,
        num_qvalue_nets=c.num_qvalue_nets,
        gamma=c.gamma,
        policy_noise=c.policy_noise * half,
        noise_clip=c.noise_clip * half,
        policy_delay=c.policy_delay,
        loss_function=c.loss_function,
    )
    loss.set_keys(**info.loss_keys(), state_action_value=info.key("state_action_value"))
    noise = gaussian_exploration(info, c)
    optimizer = make_optimizer(
        {
            "actor": (actor.parameters(), c.actor_lr),
            "critic": (loss.qvalue_networks.parameters(), c.critic_lr),
        }
    )
    return off_policy_learner(
        info,
        c,
        policy=TensorDictSequential(actor, noise),
        loss=loss,
        optimizer=optimizer,
        target_updater=SoftUpdate(loss, tau=c.tau),
        exploration=[noise],
        algorithm="td3",
    )


SPEC = AlgorithmSpec(
    name="td3",
    config_cls=TD3Config,
    builder=build_td3,
    on_policy=False,
    action_spaces=frozenset({"continuous"}),
    description="Twin delayed DDPG: clipped double Q, target smoothing, delayed actor.",
)
