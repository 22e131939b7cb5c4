"""DQN: deep Q-learning (Mnih et al., 2015), double DQN by default.

Roles: :class:`DQNConfig`, :func:`build_dqn` (a Q-network, a greedy policy over
legal actions with annealed epsilon-greedy exploration, ``DQNLoss``, hard or
soft target updates, a uniform or prioritized replay buffer).
"""

from __future__ import annotations

from dataclasses import dataclass

from tensordict.nn import TensorDictModuleBase, TensorDictSequential

from marl.algorithms._groups import GroupInfo
from marl.algorithms._networks import network_spec
from marl.algorithms._policies import GreedyAction, MaskedAgentValues, q_value_network
from marl.algorithms._recurrent import RECURRENT_NETWORKS, SequenceQValues, recurrent_q_network
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import AlgorithmSpec
from marl.algorithms.updates import OffPolicyConfig, make_optimizer, off_policy_learner
from marl.modules import EGreedy
from marl.objectives import DQNLoss, HardUpdate, SoftUpdate

__all__ = ["SPEC", "DQNConfig", "build_dqn"]


@dataclass
class DQNConfig(OffPolicyConfig):
    """DQN hyperparameters (defaults for CartPole-like tasks, after RL Zoo's tuned values)."""

    lr: float = 2.3e-3
    """Adam learning rate."""
    batch_size: int = 64
    """Transitions per optimizer step."""
    buffer_size: int = 100_000
    """Replay buffer capacity."""
    utd_ratio: float = 0.5
    """Optimizer steps per collected frame."""
    double_dqn: bool = True
    """Select the next action with the online network (van Hasselt et al., 2016)."""
    loss_function: str = "smooth_l1"
    """TD regression loss (Huber by default)."""
    target_update_period: int | None = 128
    """Hard target copy every this many optimizer steps; ``None`` uses soft updates (``tau``)."""
    eps_init: float = 1.0
    """Initial epsilon of epsilon-greedy exploration."""
    eps_end: float = 0.04
    """Final epsilon."""
    eps_annealing_frames: int = 8_000
    """Frames over which epsilon decays linearly."""
    cells: tuple[int, ...] = (256, 256)
    """Hidden widths of the Q-network."""
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
    sequence_length: int = 16
    """Recurrent Q-networks (``gru``/``lstm``): steps per replayed slice (slices never
    cross an episode boundary; ``batch_size // sequence_length`` slices per step)."""


def build_dqn(info: GroupInfo, config: DQNConfig, *, algorithm: str = "dqn") -> GroupLearner:
    """Build a DQN learner for one group.

    Args:
        info: the group (discrete actions; an ``action_mask`` is honoured everywhere).
        config: hyperparameters.
        algorithm: the name the learner is built under (``"iql"``...).

    Returns:
        The group's learner.

    Examples:
        >>> from marl.algorithms.base import group_infos
        >>> from marl.testing import SingleAgentFakeEnv
        >>> info = group_infos(SingleAgentFakeEnv(num_envs=2, discrete=True))["root"]
        >>> type(build_dqn(info, DQNConfig()).loss).__name__
        'DQNLoss'
    """
    c = config
    qnet, policy_qnet, slice_len = q_networks(info, c)
    loss = DQNLoss(qnet, gamma=c.gamma, double_dqn=c.double_dqn, loss_function=c.loss_function)
    loss.set_keys(
        **info.loss_keys(),
        action_value=info.key("action_value"),
        action_mask=info.key("action_mask"),
    )
    egreedy = EGreedy(
        info.action_spec,
        n_actions=info.n_actions,
        eps_init=c.eps_init,
        eps_end=c.eps_end,
        annealing_num_steps=c.eps_annealing_frames,
        action_key=info.key("action"),
        action_mask_key=info.key("action_mask") if info.has_action_mask else None,
    )
    if c.target_update_period is None:
        target_updater = SoftUpdate(loss, tau=c.tau)
    else:
        target_updater = HardUpdate(loss, period=c.target_update_period)
    return off_policy_learner(
        info,
        c,
        policy=TensorDictSequential(policy_qnet, GreedyAction(info), egreedy),
        loss=loss,
        optimizer=make_optimizer({"qvalue": (qnet.parameters(), c.lr)}),
        target_updater=target_updater,
        exploration=[egreedy],
        algorithm=algorithm,
        slice_len=slice_len,
    )


def q_networks(
    info: GroupInfo, config: DQNConfig, *, mask: bool = False
) -> tuple[TensorDictModuleBase, TensorDictModuleBase, int | None]:
    """``(trained Q-network, collection Q-network, replay slice length)`` for a group.

    An MLP is one module for both, trained on single transitions (``None``). A recurrent
    network (``network="gru"``/``"lstm"``) is trained in sequence mode on replayed slices
    of ``sequence_length`` steps (:class:`~marl.algorithms._recurrent.SequenceQValues`)
    and collects in step mode, over the same parameters. ``mask``: zero masked-out
    agents' values (the mixers' losses).
    """
    c = config
    if c.network in RECURRENT_NETWORKS:
        step, sequence = recurrent_q_network(
            info, c.network, c.cells, c.activation, share_params=c.share_params
        )
        if mask:
            step = MaskedAgentValues(step, info)
        return SequenceQValues(sequence, info, mask=mask), step, c.sequence_length
    qnet: TensorDictModuleBase = q_value_network(
        info, c.cells, c.activation, share_params=c.share_params, network=network_spec(c)
    )
    if mask:
        qnet = MaskedAgentValues(qnet, info)
    return qnet, qnet, None


SPEC = AlgorithmSpec(
    name="dqn",
    config_cls=DQNConfig,
    builder=build_dqn,
    on_policy=False,
    action_spaces=frozenset({"discrete"}),
    description="(Double) deep Q-learning with epsilon-greedy exploration.",
)
