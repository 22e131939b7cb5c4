"""DDPG: deep deterministic policy gradient (Lillicrap et al., 2016).

Roles: :class:`DDPGConfig`, :func:`build_ddpg` (a tanh-bounded deterministic
actor with Gaussian exploration noise, a Q(s, a) critic, ``DDPGLoss`` with
target actor and critic, soft target updates, a uniform or prioritized buffer).
"""

from __future__ import annotations

from dataclasses import dataclass

from tensordict.nn import TensorDictSequential
from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms._networks import network_spec
from marl.algorithms._policies import action_bounds, deterministic_actor, state_action_value_critic
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import AlgorithmSpec
from marl.algorithms.updates import OffPolicyConfig, make_optimizer, off_policy_learner
from marl.modules import AdditiveGaussian
from marl.objectives import DDPGLoss, SoftUpdate

__all__ = ["SPEC", "DDPGConfig", "build_ddpg", "gaussian_exploration"]


@dataclass
class DDPGConfig(OffPolicyConfig):
    """DDPG hyperparameters (defaults tuned for Pendulum-like control tasks)."""

    actor_lr: float = 1e-3
    """Adam learning rate of the actor."""
    critic_lr: float = 1e-3
    """Adam learning rate of the critic."""
    exploration_sigma: float = 0.1
    """Std of the Gaussian action noise, as a fraction of half the action range."""
    exploration_sigma_end: float | None = None
    """Final noise fraction (``None``: constant noise)."""
    exploration_annealing_frames: int = 100_000
    """Frames over which the noise decays to ``exploration_sigma_end``."""
    loss_function: str = "l2"
    """Critic regression loss."""
    actor_cells: tuple[int, ...] = (256, 256)
    """Hidden widths of the actor."""
    critic_cells: tuple[int, ...] = (256, 256)
    """Hidden widths of the critic."""
    activation: str = "relu"
    """Hidden activation."""
    network: str = "mlp"
    """Body of every network (``model.network``): ``mlp``, ``deepsets``, ``gnn``, ``cnn``,
    ``gru`` or ``lstm`` (see ``docs/basic/models.md`` for which algorithm takes which)."""
    gnn_radius: float | None = None
    """``network="gnn"``: connect the agents within this distance of each other (``None``:
    a complete graph, every agent hears every other)."""
    gnn_position: tuple[int, ...] = (0, 2)
    """``network="gnn"`` with ``gnn_radius``: ``(start, stop)`` of the observation features
    that hold each agent's position (VMAS: ``(0, 2)``)."""
    share_params: bool = True
    """Groups: one set of parameters for every agent of the group."""


def gaussian_exploration(info: GroupInfo, config: DDPGConfig) -> AdditiveGaussian:
    """Additive Gaussian noise scaled to the action range, clipped to the bounds."""
    low, high = action_bounds(info)
    half = float((high - low).max()) / 2
    end = config.exploration_sigma_end
    return AdditiveGaussian(
        sigma_init=config.exploration_sigma * half,
        sigma_end=(config.exploration_sigma if end is None else end) * half,
        annealing_num_steps=config.exploration_annealing_frames,
        low=low,
        high=high,
        action_key=info.key("action"),
    )


def build_ddpg(
    info: GroupInfo,
    config: DDPGConfig,
    *,
    value_network: nn.Module | None = None,
    algorithm: str = "ddpg",
) -> GroupLearner:
    """Build a DDPG learner for one group.

    Args:
        info: the group.
        config: hyperparameters.
        value_network: the Q(s, a) critic writing ``state_action_value`` (default: a
            per-agent MLP); MADDPG passes a centralized one.
        algorithm: the name the learner is built under (``"maddpg"``, ``"iddpg"``...).

    Returns:
        The group's learner.

    Examples:
        >>> from marl.algorithms.base import group_infos
        >>> from marl.testing import SingleAgentFakeEnv
        >>> info = group_infos(SingleAgentFakeEnv(num_envs=2))["root"]
        >>> type(build_ddpg(info, DDPGConfig()).loss).__name__
        'DDPGLoss'
    """
    c = config
    actor = deterministic_actor(
        info, c.actor_cells, c.activation, share_params=c.share_params, network=network_spec(c)
    )
    if value_network is None:
        value_network = state_action_value_critic(
            info, c.critic_cells, c.activation, share_params=c.share_params, network=network_spec(c)
        )
    loss = DDPGLoss(actor, value_network, gamma=c.gamma, loss_function=c.loss_function)
    loss.set_keys(**info.loss_keys(), state_action_value=info.key("state_action_value"))
    noise = gaussian_exploration(info, c)
    optimizer = make_optimizer(
        {
            "actor": (actor.parameters(), c.actor_lr),
            "critic": (value_network.parameters(), c.critic_lr),
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
        algorithm=algorithm,
    )


SPEC = AlgorithmSpec(
    name="ddpg",
    config_cls=DDPGConfig,
    builder=build_ddpg,
    on_policy=False,
    action_spaces=frozenset({"continuous"}),
    description="Deep deterministic policy gradient with Gaussian exploration.",
)
