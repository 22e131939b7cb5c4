"""A2C: synchronous advantage actor-critic (Mnih et al., 2016).

Roles: :class:`A2CConfig`, :func:`build_a2c` (stochastic actor, value critic,
``A2CLoss`` with GAE, one Adam, one optimizer step per batch by default).
"""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms._groups import GroupInfo
from marl.algorithms.learner import GroupLearner
from marl.algorithms.ppo import actor_critic_learner
from marl.algorithms.settings import ActorCriticNetworks, ActorCriticTraining, OnPolicyOptimization
from marl.algorithms.spec import policy_gradient_spec
from marl.objectives import A2CLoss
from marl.objectives.settings import A2CSettings

__all__ = ["SPEC", "A2CConfig", "build_a2c"]


@dataclass
class A2CConfig(A2CSettings, ActorCriticTraining, OnPolicyOptimization, ActorCriticNetworks):
    """A2C hyperparameters (defaults tuned for the classic control tasks).

    The loss's :class:`~marl.objectives.settings.A2CSettings` with PPO's update, networks
    and training settings; it restates only the update defaults of plain A2C.

    Examples:
        >>> A2CConfig().epochs, A2CConfig().lmbda
        (1, 1.0)
    """

    lr: float = 1e-3
    """Adam learning rate of the actor (and of the critic unless ``critic_lr`` is set)."""
    epochs: int = 1
    """Passes over each batch (1: plain A2C)."""
    minibatch_size: int = 100_000
    """Transitions per optimizer step; larger than a batch means the whole batch."""


def build_a2c(info: GroupInfo, config: A2CConfig) -> GroupLearner:
    """Build an A2C learner for one group.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("root", discrete=True)
        >>> type(build_a2c(info, A2CConfig()).loss).__name__
        'A2CLoss'
    """
    return actor_critic_learner(info, config, A2CLoss, algorithm="a2c")


SPEC = policy_gradient_spec("a2c", A2CConfig, build_a2c, "Synchronous advantage actor-critic.")
