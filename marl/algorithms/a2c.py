"""A2C: synchronous advantage actor-critic (Mnih et al., 2016).

Roles: :class:`A2CConfig`, :func:`build_a2c` (stochastic actor, value critic,
``A2CLoss`` with GAE, one Adam, one optimizer step per batch by default).
"""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import state_value_critic
from marl.algorithms._recurrent import critic_network
from marl.algorithms.learner import GroupLearner
from marl.algorithms.ppo import actor_and_policy, policy_gradient_learner
from marl.algorithms.spec import AlgorithmSpec
from marl.objectives import A2CLoss

__all__ = ["SPEC", "A2CConfig", "build_a2c"]


@dataclass
class A2CConfig:
    """A2C hyperparameters (defaults tuned for the classic control tasks)."""

    lr: float = 1e-3
    """Adam learning rate of the actor (and of the critic unless ``critic_lr`` is set)."""
    critic_lr: float | None = None
    """Adam learning rate of the critic (``None``: ``lr``). At a small actor rate, a critic
    that must fit returns of tens to hundreds lags behind and biases the advantages; the
    CartPole learning tests use ``1e-2`` (see ``docs/basic/algorithms_and_tasks.md``)."""
    gamma: float = 0.99
    """Discount factor."""
    lmbda: float = 1.0
    """GAE lambda (1.0: the n-step returns of the original A2C)."""
    entropy_coef: float = 0.01
    """Weight of the entropy bonus."""
    critic_coef: float = 0.5
    """Weight of the critic loss."""
    loss_critic_type: str = "l2"
    """Critic regression loss: ``"l2"``, ``"l1"`` or ``"smooth_l1"``."""
    normalize_advantage: bool = False
    """Standardize advantages over each batch."""
    epochs: int = 1
    """Passes over each batch (1: plain A2C)."""
    minibatch_size: int = 100_000
    """Transitions per optimizer step; larger than a batch means the whole batch."""
    max_grad_norm: float | None = 0.5
    """Gradient clipping, per role (actor, critic); ``None`` disables it."""
    actor_cells: tuple[int, ...] = (64, 64)
    """Hidden widths of the actor."""
    critic_cells: tuple[int, ...] = (64, 64)
    """Hidden widths of the critic."""
    activation: str = "tanh"
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
    sequence_length: int | None = None
    """Recurrent actors (``gru``/``lstm``): steps per training sequence (``None``: each
    env's whole collected rollout)."""


def build_a2c(info: GroupInfo, config: A2CConfig) -> GroupLearner:
    """Build an A2C learner for one group.

    Args:
        info: the group.
        config: hyperparameters.

    Returns:
        The group's learner.

    Examples:
        >>> from marl.algorithms.base import group_infos
        >>> from marl.testing import SingleAgentFakeEnv
        >>> info = group_infos(SingleAgentFakeEnv(num_envs=2, discrete=True))["root"]
        >>> type(build_a2c(info, A2CConfig()).loss).__name__
        'A2CLoss'
    """
    c = config
    actor, policy = actor_and_policy(info, c)
    critic = state_value_critic(
        info,
        c.critic_cells,
        c.activation,
        share_params=c.share_params,
        network=critic_network(c),
    )
    loss = A2CLoss(
        actor,
        critic,
        entropy_coef=c.entropy_coef,
        critic_coef=c.critic_coef,
        loss_critic_type=c.loss_critic_type,
        normalize_advantage=c.normalize_advantage,
        gamma=c.gamma,
        lmbda=c.lmbda,
    )
    return policy_gradient_learner(
        info,
        c,
        loss,
        actor=actor,
        critic=critic,
        algorithm="a2c",
        critic_lr=c.critic_lr,
        policy=policy,
        sequence_length=c.sequence_length,
    )


SPEC = AlgorithmSpec(
    name="a2c",
    config_cls=A2CConfig,
    builder=build_a2c,
    on_policy=True,
    action_spaces=frozenset({"continuous", "discrete"}),
    description="Synchronous advantage actor-critic.",
)
