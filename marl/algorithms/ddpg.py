"""DDPG: deep deterministic policy gradient (Lillicrap et al., 2016).

Roles: :class:`DDPGConfig`, :func:`build_ddpg` (a tanh-bounded deterministic
actor with Gaussian exploration noise, a Q(s, a) critic, ``DDPGLoss`` with
target actor and critic, soft target updates, a uniform or prioritized buffer).
"""

from __future__ import annotations

from collections.abc import Iterable

from tensordict.nn import TensorDictSequential
from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import action_bounds, deterministic_actor, state_action_value_critic
from marl.algorithms.configs import DDPGConfig
from marl.algorithms.learner import GroupLearner
from marl.algorithms.settings import DDPGRecipe, DeterministicActorTraining, OffPolicyNetworks
from marl.algorithms.spec import replay_actor_critic_spec
from marl.algorithms.updates import make_optimizer, off_policy_learner
from marl.modules import AdditiveGaussian
from marl.objectives import DDPGLoss, LossModule, SoftUpdate

__all__ = [
    "SPEC",
    "DDPGConfig",
    "build_ddpg",
    "deterministic_actor_critic",
    "deterministic_actor_learner",
    "gaussian_exploration",
]


def gaussian_exploration(info: GroupInfo, config: DeterministicActorTraining) -> AdditiveGaussian:
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


def deterministic_actor_critic(
    info: GroupInfo, config: OffPolicyNetworks, critic: nn.Module | None
) -> tuple[nn.Module, nn.Module]:
    """The deterministic actor, and ``critic`` or a per-agent ``Q(s, a)`` MLP critic."""
    c = config
    actor = deterministic_actor(info, **c.actor_body())
    if critic is None:
        critic = state_action_value_critic(info, **c.critic_body())
    return actor, critic


def deterministic_actor_learner(
    info: GroupInfo,
    config: DeterministicActorTraining,
    actor: nn.Module,
    loss: LossModule,
    *,
    critic_params: Iterable[nn.Parameter],
    algorithm: str,
) -> GroupLearner:
    """The replay learner of a deterministic actor's loss (DDPG's, TD3's).

    Args:
        info: the group; the loss is pointed at its keys here.
        config: the DDPG or TD3 config: its rates and exploration, and its
            :class:`~marl.algorithms.settings.ReplaySettings`.
        actor: the deterministic actor, which collects with Gaussian exploration noise.
        loss: the loss over ``actor`` and its critic(s).
        critic_params: the critics' parameters, trained at ``critic_lr``.
        algorithm: the name the learner is built under.

    Returns:
        The group's learner: one Adam, soft target updates, replay.
    """
    c = config
    loss.set_keys(**info.loss_keys(), state_action_value=info.key("state_action_value"))
    noise = gaussian_exploration(info, c)
    optimizer = make_optimizer(
        {"actor": (actor.parameters(), c.actor_lr), "critic": (critic_params, c.critic_lr)}
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


def build_ddpg(
    info: GroupInfo,
    config: DDPGRecipe,
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
        >>> from marl.testing import example_group
        >>> info = example_group("root")
        >>> type(build_ddpg(info, DDPGConfig()).loss).__name__
        'DDPGLoss'
    """
    c = config
    actor, value_network = deterministic_actor_critic(info, c, value_network)
    loss = DDPGLoss(actor, value_network, c)
    return deterministic_actor_learner(
        info, c, actor, loss, critic_params=value_network.parameters(), algorithm=algorithm
    )


SPEC = replay_actor_critic_spec(
    "ddpg",
    DDPGConfig,
    build_ddpg,
    "Deep deterministic policy gradient with Gaussian exploration.",
    continuous=True,
)
