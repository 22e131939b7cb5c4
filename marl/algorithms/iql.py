"""IQL: independent Q-learning (Tan, 1993) with deep Q-networks, per agent group.

Each agent learns its own ``Q(o_i, .)`` from its own reward, treating the other
agents as part of the environment. The update is
:func:`marl.algorithms.dqn.build_dqn` pointed at the group's keys (legal-action
masks honoured in the greedy action, the exploration and the target maximum);
:class:`IQLConfig` only adds BenchMARL-like defaults and the multi-agent option.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from marl.algorithms._groups import GroupInfo
from marl.algorithms.dqn import DQNConfig, build_dqn
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import AlgorithmSpec

__all__ = ["SPEC", "IQLConfig", "build_iql"]


@dataclass
class IQLConfig(DQNConfig):
    """IQL hyperparameters (BenchMARL-like defaults).

    Examples:
        >>> IQLConfig().target_update_period is None
        True
    """

    lr: float = 5e-4
    """Adam learning rate."""
    batch_size: int = 128
    """Transitions (env steps, all agents of the group together) per optimizer step."""
    utd_ratio: float = 0.25
    """Optimizer steps per collected frame."""
    learning_starts: int = 1000
    """No update before the buffer holds this many transitions."""
    loss_function: str = "l2"
    """TD regression loss (BenchMARL: squared error)."""
    target_update_period: int | None = None
    """Hard target copy period; ``None`` (the default, as in BenchMARL) uses soft updates."""
    eps_init: float = 0.8
    """Initial epsilon of epsilon-greedy exploration (BenchMARL's default)."""
    eps_end: float = 0.01
    """Final epsilon (BenchMARL's default)."""
    eps_annealing_frames: int = 10_000
    """Frames over which epsilon decays linearly."""
    share_policy_params: bool = True
    """One Q-network for every agent of the group (else vectorized per agent)."""
    share_params: bool = field(default=True, init=False)
    """Set from ``share_policy_params`` (the name DQN's builder reads)."""

    def __post_init__(self) -> None:
        self.share_params = self.share_policy_params


def build_iql(info: GroupInfo, config: IQLConfig) -> GroupLearner:
    """Build an IQL learner for one group: DQN on per-agent Q-networks.

    Args:
        info: the group (discrete actions).
        config: hyperparameters.

    Returns:
        The group's learner.

    Examples:
        >>> from marl.algorithms.base import group_infos
        >>> from marl.testing import MultiAgentFakeEnv
        >>> info = group_infos(MultiAgentFakeEnv(num_envs=2))["picker"]
        >>> build_iql(info, IQLConfig()).algorithm
        'iql'
    """
    return build_dqn(info, config, algorithm="iql")


SPEC = AlgorithmSpec(
    name="iql",
    config_cls=IQLConfig,
    builder=build_iql,
    on_policy=False,
    action_spaces=frozenset({"discrete"}),
    description="Independent Q-learning: per-agent DQN.",
)
