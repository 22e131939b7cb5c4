"""The settings of each loss: one small dataclass per objective, the one owner of its defaults.

A loss takes its settings object (``PPOLoss(actor, critic, PPOSettings(clip_epsilon=0.1))``)
and keeps no default of its own. The algorithm configs of :mod:`marl.algorithms` are
flat compositions of these objects with the network, optimization and replay settings
(``PPOConfig`` *is a* ``PPOSettings``, so the builder hands the config itself to the
loss); an algorithm whose recipe wants another default (A2C's ``lmbda=1``) states it
once, in its own settings class or preset.

Examples:
    >>> PPOSettings().clip_epsilon, A2CSettings().lmbda, DQNSettings().double_dqn
    (0.2, 1.0, True)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "A2CSettings",
    "DDPGSettings",
    "DQNSettings",
    "Discounted",
    "PPOSettings",
    "PQNSettings",
    "PolicyGradientSettings",
    "QRegression",
    "SACSettings",
    "TD3Settings",
    "TwinQ",
]


@dataclass
class Discounted:
    """The discount every return and TD target uses."""

    gamma: float = 0.99
    """Discount factor."""


@dataclass
class PolicyGradientSettings(Discounted):
    """An actor-critic policy-gradient objective: GAE, entropy bonus and critic loss."""

    lmbda: float = 0.95
    """GAE lambda."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus (``loss_entropy = -coef * H``); masked-out agents are
    weighted out of it, as they are of the objective."""
    critic_coef: float = 0.5
    """Weight of the critic loss."""
    loss_critic_type: str = "l2"
    """Critic regression loss: ``"l2"``, ``"l1"`` or ``"smooth_l1"``."""
    normalize_advantage: bool = True
    """Standardize advantages over each minibatch (over the unmasked agents when the loss
    has an agent mask)."""


@dataclass
class PPOSettings(PolicyGradientSettings):
    """Clipped PPO (Schulman et al., 2017): :class:`PolicyGradientSettings` plus the clips."""

    clip_epsilon: float = 0.2
    """PPO ratio clip range."""
    clip_value: float | None = None
    """Clip the critic update around the stored value (``None``: off)."""


@dataclass
class A2CSettings(PolicyGradientSettings):
    """A2C (Mnih et al., 2016): the original recipe's n-step returns and entropy bonus."""

    lmbda: float = 1.0
    """GAE lambda (1.0: the n-step returns of the original A2C)."""
    entropy_coef: float = 0.01
    """Weight of the entropy bonus."""
    normalize_advantage: bool = False
    """Standardize advantages over each batch (off in the original A2C)."""


@dataclass
class QRegression(Discounted):
    """A regression of Q-values on TD targets."""

    loss_function: str = "l2"
    """Q regression loss: ``"l2"``, ``"l1"`` or ``"smooth_l1"``."""


@dataclass
class DDPGSettings(QRegression):
    """DDPG (Lillicrap et al., 2016): one Q-network, a deterministic actor."""


@dataclass
class TwinQ(QRegression):
    """Several Q-networks, the smallest of their targets taken (Fujimoto et al., 2018)."""

    num_qvalue_nets: int = 2
    """Q-networks whose minimum is the target (2: clipped double Q); the copies are
    initialised independently."""


@dataclass
class TD3Settings(TwinQ):
    """TD3: twin Q, target policy smoothing and a delayed actor."""

    policy_noise: float = 0.2
    """Std of the target-policy smoothing noise, as a fraction of half the action range."""
    noise_clip: float = 0.5
    """Clip of the smoothing noise, as a fraction of half the action range."""
    policy_delay: int = 2
    """Critic updates per actor update."""


@dataclass
class SACSettings(TwinQ):
    """Soft actor-critic (Haarnoja et al., 2018): twin Q and a learned temperature."""

    alpha_init: float = 1.0
    """Initial entropy temperature."""
    fixed_alpha: bool = False
    """Keep alpha at ``alpha_init``."""
    target_entropy: float | str = "auto"
    """Target entropy, or ``"auto"`` (``-action_dim``; discrete: ``0.98 log n``)."""


@dataclass
class DQNSettings(QRegression):
    """Q-learning on replayed transitions (DQN, and the agents of IQL, VDN and QMIX)."""

    double_dqn: bool = True
    """Select the next action with the online network (van Hasselt et al., 2016)."""


@dataclass
class PQNSettings(QRegression):
    """PQN (Gallici et al., 2024): Q(lambda) targets on the collected rollout."""

    lmbda: float = 0.65
    """Lambda of the Q(lambda) returns."""
