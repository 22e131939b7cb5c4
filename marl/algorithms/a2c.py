"""A2C: synchronous advantage actor-critic (Mnih et al., 2016).

Roles: :class:`A2CConfig`, :func:`build_a2c` (stochastic actor, value critic,
``A2CLoss`` with GAE, one Adam, one optimizer step per batch by default).
"""

from __future__ import annotations

from marl.algorithms._groups import GroupInfo
from marl.algorithms.configs import A2CConfig
from marl.algorithms.learner import GroupLearner
from marl.algorithms.ppo import actor_critic_learner
from marl.algorithms.spec import policy_gradient_spec
from marl.objectives import A2CLoss

__all__ = ["SPEC", "A2CConfig", "build_a2c"]


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
