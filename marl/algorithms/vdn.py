"""VDN: value decomposition networks (Sunehag et al., 2018), and the learner QMIX shares.

Per-agent Q-networks ``Q_i(o_i, .)`` act greedily (over legal actions) with
epsilon-greedy exploration; training regresses the team value
``Q_tot = mixer(Q_1(o_1, a_1), ..., Q_n(o_n, a_n))`` on the team reward with
``QMixLoss``. VDN's mixer is the sum (``VDNMixer``); QMIX (``marl.algorithms.qmix``)
passes a state-conditioned ``QMixer`` to the same :func:`value_decomposition_learner`.
"""

from __future__ import annotations

from tensordict.nn import TensorDictSequential
from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import GreedyAction, MaskedAgentValues
from marl.algorithms.configs import VDNConfig
from marl.algorithms.dqn import epsilon_greedy, q_networks, target_updater
from marl.algorithms.learner import GroupLearner
from marl.algorithms.settings import MultiAgentQLearning
from marl.algorithms.spec import q_learning_spec
from marl.algorithms.updates import make_optimizer, off_policy_learner
from marl.modules import VDNMixer
from marl.objectives import QMixLoss

__all__ = ["SPEC", "MaskedAgentValues", "VDNConfig", "build_vdn", "value_decomposition_learner"]


def value_decomposition_learner(
    info: GroupInfo,
    config: MultiAgentQLearning,
    mixer: nn.Module,
    *,
    state_key: object = None,
    algorithm: str,
) -> GroupLearner:
    """Assemble a VDN/QMIX learner: per-agent Q-networks trained through ``mixer``.

    Args:
        info: the group (discrete actions).
        config: Q-learning and replay hyperparameters.
        mixer: ``VDNMixer`` or ``QMixer``.
        state_key: the entry the mixer is conditioned on (``None`` for VDN).
        algorithm: the algorithm's name.

    Returns:
        The group's learner.
    """
    c = config
    qnet, policy_qnet, slice_len = q_networks(info, c, mask=info.has_agent_mask)
    loss = QMixLoss(qnet, mixer, c)
    # the team value bootstraps until the episode (not one agent) ends; the loss is on
    # Q_tot, so it has no agent mask: masked agents are removed from its inputs instead
    loss.set_keys(
        action=info.key("action"),
        action_value=info.key("action_value"),
        action_mask=info.key("action_mask"),
        reward=info.next_key("reward"),
        done=("next", "done"),
        terminated=("next", "terminated"),
        **({} if state_key is None else {"state": state_key}),
    )
    egreedy = epsilon_greedy(info, c)
    optimizer = make_optimizer(
        {"qvalue": (qnet.parameters(), c.lr), "mixer": (mixer.parameters(), c.lr)}
    )
    return off_policy_learner(
        info,
        c,
        policy=TensorDictSequential(policy_qnet, GreedyAction(info), egreedy),
        loss=loss,
        optimizer=optimizer,
        target_updater=target_updater(loss, c),
        exploration=[egreedy],
        algorithm=algorithm,
        slice_len=slice_len,
    )


def check_mixed_group(info: GroupInfo, algorithm: str) -> None:
    if info.name is None:
        raise ValueError(
            f"{algorithm} mixes the values of a group's agents; got a single-agent env"
        )


def build_vdn(info: GroupInfo, config: VDNConfig) -> GroupLearner:
    """Build a VDN learner for one group: ``Q_tot = sum_i Q_i``.

    Raises:
        ValueError: for a single-agent env (no group to mix).

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("picker")
        >>> type(build_vdn(info, VDNConfig()).loss.mixer).__name__
        'VDNMixer'
    """
    check_mixed_group(info, "vdn")
    return value_decomposition_learner(info, config, VDNMixer(info.n_agents), algorithm="vdn")


SPEC = q_learning_spec(
    "vdn",
    VDNConfig,
    build_vdn,
    "Value decomposition networks: the team Q is the sum of the agents' Qs.",
)
