"""PPO: clipped proximal policy optimization (Schulman et al., 2017).

Roles: :class:`PPOConfig` (hyperparameters), :func:`build_ppo` (policy, critic,
``PPOLoss`` with GAE, one Adam, the on-policy updater). :func:`policy_gradient_learner`
is the assembly shared with A2C and the MARL PPO variants, which pass their own
critic (e.g. a centralized one). The update itself, step by step, is
:class:`marl.algorithms.updates.OnPolicyUpdater`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms._networks import network_spec
from marl.algorithms._policies import state_value_critic, stochastic_actor
from marl.algorithms._recurrent import (
    RECURRENT_NETWORKS,
    critic_network,
    is_recurrent,
    recurrent_stochastic_actor,
)
from marl.algorithms.contracts import OnPolicySettings
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import AlgorithmSpec
from marl.algorithms.updates import OnPolicyUpdater, make_optimizer
from marl.objectives import PPOLoss

__all__ = ["SPEC", "PPOConfig", "build_ppo", "policy_gradient_learner"]

_WHOLE = 1 << 30  # a sequence length no rollout reaches: each env's whole rollout


@dataclass
class PPOConfig:
    """PPO hyperparameters (defaults tuned for the classic control tasks)."""

    lr: float = 3e-4
    """Adam learning rate of the actor (and of the critic unless ``critic_lr`` is set)."""
    critic_lr: float | None = None
    """Adam learning rate of the critic (``None``: ``lr``). At a small actor rate, a critic
    that must fit returns of tens to hundreds lags behind and biases the advantages; the
    CartPole learning tests use ``1e-2`` (see ``docs/basic/algorithms_and_tasks.md``)."""
    gamma: float = 0.99
    """Discount factor."""
    lmbda: float = 0.95
    """GAE lambda."""
    clip_epsilon: float = 0.2
    """PPO ratio clip range."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus."""
    critic_coef: float = 0.5
    """Weight of the critic loss."""
    loss_critic_type: str = "l2"
    """Critic regression loss: ``"l2"``, ``"l1"`` or ``"smooth_l1"``."""
    normalize_advantage: bool = True
    """Standardize advantages over each minibatch."""
    clip_value: float | None = None
    """Clip the critic update around the stored value (``None``: off)."""
    epochs: int = 10
    """Passes over each collected batch."""
    minibatch_size: int = 256
    """Transitions per optimizer step."""
    max_grad_norm: float | None = 0.5
    """Gradient clipping, per role (actor, critic); ``None`` disables it."""
    actor_cells: tuple[int, ...] = (64, 64)
    """Hidden widths of the actor."""
    critic_cells: tuple[int, ...] = (64, 64)
    """Hidden widths of the critic."""
    activation: str = "tanh"
    """Hidden activation (``tanh``, ``relu``, ``elu``, ``silu``, ``leaky_relu``)."""
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
    sequence_length: int | None = None
    """Recurrent actors (``gru``/``lstm``): steps per training sequence (``None``: each
    env's whole collected rollout). Minibatches are ``minibatch_size // sequence_length``
    whole sequences, each unrolled from the hidden state stored at its first step."""


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
    loss.set_keys(
        **info.loss_keys(),
        sample_log_prob=info.key("action_log_prob"),
        value=info.key("state_value"),
        advantage=info.key("advantage"),
        value_target=info.key("value_target"),
        truncated=info.done_key("truncated"),
    )
    optimizer = make_optimizer(
        {
            "actor": (actor.parameters(), config.lr),
            "critic": (critic.parameters(), config.lr if critic_lr is None else critic_lr),
        }
    )
    updater = OnPolicyUpdater(
        loss=loss,
        optimizer=optimizer,
        epochs=config.epochs,
        minibatch_size=config.minibatch_size,
        max_grad_norm=config.max_grad_norm,
        compile=info.compile,
        sequence_length=(sequence_length or _WHOLE) if recurrent else None,
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


def actor_and_policy(info: GroupInfo, config: Any) -> tuple[nn.Module, nn.Module | None]:
    """``(the loss's actor, the collection policy or None when it is the actor)``.

    A recurrent network (``gru``/``lstm``) gives two modes over the same parameters
    (:func:`~marl.algorithms._recurrent.recurrent_stochastic_actor`); any other body one
    actor for both.
    """
    c = config
    if c.network in RECURRENT_NETWORKS:
        policy, actor = recurrent_stochastic_actor(
            info, c.network, c.actor_cells, c.activation, share_params=c.share_params
        )
        return actor, policy
    actor = stochastic_actor(
        info, c.actor_cells, c.activation, share_params=c.share_params, network=network_spec(c)
    )
    return actor, None


def build_ppo(
    info: GroupInfo,
    config: PPOConfig,
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
        >>> from marl.algorithms.base import group_infos
        >>> from marl.testing import SingleAgentFakeEnv
        >>> info = group_infos(SingleAgentFakeEnv(num_envs=2))["root"]
        >>> build_ppo(info, PPOConfig()).loss.clip_epsilon
        0.2
    """
    c = config
    actor, policy = actor_and_policy(info, c)
    if critic is None:
        critic = state_value_critic(
            info,
            c.critic_cells,
            c.activation,
            share_params=c.share_params,
            network=critic_network(c),
        )
    loss = PPOLoss(
        actor,
        critic,
        clip_epsilon=c.clip_epsilon,
        entropy_coef=c.entropy_coef,
        critic_coef=c.critic_coef,
        loss_critic_type=c.loss_critic_type,
        normalize_advantage=c.normalize_advantage,
        clip_value=c.clip_value,
        gamma=c.gamma,
        lmbda=c.lmbda,
    )
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


SPEC = AlgorithmSpec(
    name="ppo",
    config_cls=PPOConfig,
    builder=build_ppo,
    on_policy=True,
    action_spaces=frozenset({"continuous", "discrete"}),
    description="Clipped PPO with a GAE critic.",
)
