"""PPO: clipped proximal policy optimization (Schulman et al., 2017).

Roles: :class:`PPOConfig` (hyperparameters), :func:`build_ppo` (policy, critic,
``PPOLoss`` with GAE, one Adam, the on-policy updater). :func:`policy_gradient_learner`
is the assembly shared with A2C and the MARL PPO variants, which pass their own
critic (e.g. a centralized one). The update itself, step by step, is
:class:`marl.algorithms.updates.OnPolicyUpdater`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import state_value_critic, stochastic_actor
from marl.algorithms._recurrent import (
    RECURRENT_NETWORKS,
    is_recurrent,
    recurrent_stochastic_actor,
)
from marl.algorithms.configs import PPOConfig
from marl.algorithms.contracts import OnPolicySettings
from marl.algorithms.learner import GroupLearner
from marl.algorithms.settings import ActorCriticNetworks, PPORecipe
from marl.algorithms.spec import policy_gradient_spec
from marl.algorithms.updates import OnPolicyUpdater, make_optimizer
from marl.objectives import LossModule, PPOLoss

__all__ = [
    "SPEC",
    "PPOConfig",
    "actor_critic_learner",
    "build_ppo",
    "point_at_group",
    "policy_gradient_learner",
]

LossT = TypeVar("LossT", bound=LossModule)

_WHOLE = 1 << 30  # a sequence length no rollout reaches: each env's whole rollout


def point_at_group(loss: LossT, info: GroupInfo) -> LossT:
    """Point a policy-gradient loss at the group's entries (its agent mask included, when
    the group has one) and return it.

    In a data-parallel run (``info.gradient_sync``), the loss also standardizes its
    advantages with the statistics of every rank's samples
    (:meth:`~marl.objectives.PPOLoss.share_advantage_statistics`), so that the ranks'
    update is one process's on the union of their shares.
    """
    if info.gradient_sync is not None:
        loss.share_advantage_statistics(info.gradient_sync)
    loss.set_keys(
        **info.loss_keys(),
        sample_log_prob=info.key("action_log_prob"),
        value=info.key("state_value"),
        advantage=info.key("advantage"),
        value_target=info.key("value_target"),
        truncated=info.done_key("truncated"),
    )
    return loss


def policy_gradient_learner(
    info: GroupInfo,
    config: OnPolicySettings,
    loss: nn.Module,
    *,
    actor: nn.Module,
    critic: nn.Module,
    algorithm: str,
    critic_lr: float | None = None,
    policy: nn.Module | None = None,
    sequence_length: int | None = None,
) -> GroupLearner:
    """Assemble an on-policy learner from an actor-critic loss pointed at the group's keys.

    The loss is pointed at the group's entries here (its agent mask included, when the
    group has one), then trained by an :class:`~marl.algorithms.updates.OnPolicyUpdater`.
    The actor trains at ``config.lr``, the critic at ``critic_lr`` (``None``: ``config.lr``).
    A recurrent actor comes in two modes over the same parameters: ``policy`` collects
    (one step at a time), ``actor`` (the loss's) unrolls sequences, and the updater
    trains on sequences of ``sequence_length`` steps (``None``: each env's whole rollout).
    """
    recurrent = policy is not None and is_recurrent(policy)
    point_at_group(loss, info)
    optimizer = make_optimizer(
        {
            "actor": (actor.parameters(), config.lr),
            "critic": (critic.parameters(), config.lr if critic_lr is None else critic_lr),
        }
    )
    steps = (sequence_length or _WHOLE) if recurrent else None
    updater = OnPolicyUpdater.from_settings(
        config,
        loss,
        optimizer,
        compile=info.compile,
        sequence_length=steps,
        sync=info.gradient_sync,
    )
    return GroupLearner(
        info,
        algorithm=algorithm,
        policy=actor if policy is None else policy,
        loss=loss,
        optimizer=optimizer,
        updater=updater,
        config=config,
    )


def actor_and_policy(
    info: GroupInfo, config: ActorCriticNetworks
) -> tuple[nn.Module, nn.Module | None]:
    """``(the loss's actor, the collection policy or None when it is the actor)``.

    A recurrent network (``gru``/``lstm``) gives two modes over the same parameters
    (:func:`~marl.algorithms._recurrent.recurrent_stochastic_actor`); any other body one
    actor for both.
    """
    c = config
    if c.network in RECURRENT_NETWORKS:
        policy, actor = recurrent_stochastic_actor(
            info, c.network, c.actor_cells, c.activation, share_params=c.share_policy_params
        )
        return actor, policy
    actor = stochastic_actor(info, **c.actor_body())
    return actor, None


def actor_critic_learner(
    info: GroupInfo,
    config: ActorCriticNetworks,
    loss_cls: Callable[[nn.Module, nn.Module, Any], nn.Module],
    *,
    critic: nn.Module | None = None,
    algorithm: str,
) -> GroupLearner:
    """The learner of an advantage actor-critic loss (PPO's, A2C's) over the config's actor.

    Args:
        info: the group.
        config: the PPO or A2C config: its networks, and its
            :class:`~marl.algorithms.settings.OnPolicyOptimization` and
            :class:`~marl.algorithms.settings.ActorCriticTraining`.
        loss_cls: ``(actor, critic, config) -> loss``, e.g. ``PPOLoss``.
        critic: a value module writing the group's ``state_value`` (default: a per-agent
            critic, built after the actor).
        algorithm: the name the learner is built under.

    Returns:
        The group's learner (:func:`policy_gradient_learner`), its actor recurrent or not
        (:func:`actor_and_policy`).
    """
    c = config
    actor, policy = actor_and_policy(info, c)
    if critic is None:
        critic = state_value_critic(info, **c.critic_body())
    loss = loss_cls(actor, critic, c)
    return policy_gradient_learner(
        info,
        c,
        loss,
        actor=actor,
        critic=critic,
        algorithm=algorithm,
        critic_lr=c.critic_lr,
        policy=policy,
        sequence_length=c.sequence_length,
    )


def build_ppo(
    info: GroupInfo,
    config: PPORecipe,
    *,
    critic: nn.Module | None = None,
    algorithm: str = "ppo",
) -> GroupLearner:
    """Build a PPO learner for one group.

    Args:
        info: the group.
        config: hyperparameters.
        critic: a value module writing the group's ``state_value`` (default: a
            per-agent MLP critic); MAPPO passes a centralized one.
        algorithm: the name the learner is built under (``"mappo"``, ``"ippo"``...).

    Returns:
        The group's learner.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("root")
        >>> build_ppo(info, PPOConfig()).loss.clip_epsilon
        0.2
    """
    return actor_critic_learner(info, config, PPOLoss, critic=critic, algorithm=algorithm)


SPEC = policy_gradient_spec("ppo", PPOConfig, build_ppo, "Clipped PPO with a GAE critic.")
