"""DQN: deep Q-learning (Mnih et al., 2015), double DQN by default.

Roles: :class:`DQNConfig`, :func:`build_dqn` (a Q-network, a greedy policy over
legal actions with annealed epsilon-greedy exploration, ``DQNLoss``, hard or
soft target updates, a uniform or prioritized replay buffer).
"""

from __future__ import annotations

from tensordict.nn import TensorDictModuleBase, TensorDictSequential

from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import GreedyAction, MaskedAgentValues, q_value_network
from marl.algorithms._recurrent import RECURRENT_NETWORKS, SequenceQValues, recurrent_q_network
from marl.algorithms.configs import DQNConfig
from marl.algorithms.learner import GroupLearner
from marl.algorithms.settings import EpsilonGreedy, QLearningRecipe, QLearningTraining
from marl.algorithms.spec import q_learning_spec
from marl.algorithms.updates import make_optimizer, off_policy_learner
from marl.modules import EGreedy
from marl.objectives import DQNLoss, HardUpdate, LossModule, SoftUpdate

__all__ = ["SPEC", "DQNConfig", "build_dqn", "epsilon_greedy", "q_networks", "target_updater"]


def build_dqn(info: GroupInfo, config: QLearningRecipe, *, algorithm: str = "dqn") -> GroupLearner:
    """Build a DQN learner for one group.

    Args:
        info: the group (discrete actions; an ``action_mask`` is honoured everywhere).
        config: hyperparameters.
        algorithm: the name the learner is built under (``"iql"``...).

    Returns:
        The group's learner.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("root", discrete=True)
        >>> type(build_dqn(info, DQNConfig()).loss).__name__
        'DQNLoss'
    """
    c = config
    qnet, policy_qnet, slice_len = q_networks(info, c)
    loss = DQNLoss(qnet, c)
    loss.set_keys(
        **info.loss_keys(),
        action_value=info.key("action_value"),
        action_mask=info.key("action_mask"),
    )
    egreedy = epsilon_greedy(info, c)
    return off_policy_learner(
        info,
        c,
        policy=TensorDictSequential(policy_qnet, GreedyAction(info), egreedy),
        loss=loss,
        optimizer=make_optimizer({"qvalue": (qnet.parameters(), c.lr)}),
        target_updater=target_updater(loss, c),
        exploration=[egreedy],
        algorithm=algorithm,
        slice_len=slice_len,
    )


def epsilon_greedy(info: GroupInfo, config: EpsilonGreedy) -> EGreedy:
    """The group's epsilon-greedy exploration, legal-action masks honoured."""
    return EGreedy(
        info.action_spec,
        n_actions=info.n_actions,
        eps_init=config.eps_init,
        eps_end=config.eps_end,
        annealing_num_steps=config.eps_annealing_frames,
        action_key=info.key("action"),
        action_mask_key=info.key("action_mask") if info.has_action_mask else None,
    )


def target_updater(loss: LossModule, config: QLearningTraining) -> SoftUpdate | HardUpdate:
    """Soft target updates at ``tau``, or hard ones every ``target_update_period`` steps."""
    if config.target_update_period is None:
        return SoftUpdate(loss, tau=config.tau)
    return HardUpdate(loss, period=config.target_update_period)


def q_networks(
    info: GroupInfo, config: QLearningRecipe, *, mask: bool = False
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
            info, c.network, c.cells, c.activation, share_params=c.share_policy_params
        )
        if mask:
            step = MaskedAgentValues(step, info)
        return SequenceQValues(sequence, info, mask=mask), step, c.sequence_length
    qnet: TensorDictModuleBase = q_value_network(info, **c.q_body())
    if mask:
        qnet = MaskedAgentValues(qnet, info)
    return qnet, qnet, None


SPEC = q_learning_spec(
    "dqn", DQNConfig, build_dqn, "(Double) deep Q-learning with epsilon-greedy exploration."
)
