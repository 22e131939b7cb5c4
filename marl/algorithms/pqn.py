"""PQN: parallel Q-learning (Gallici et al., 2025), without replay buffer or target network.

Q-learning made on-policy: each rollout of many vectorized envs is used for a few
epochs of minibatches and then dropped, as in PPO. The targets are Q(lambda)
returns bootstrapped on the current network (:class:`marl.objectives.pqn.QLambda`,
computed once per rollout), and layer normalization in the Q-network keeps the
regression stable without a target network. Acting is epsilon-greedy over the legal
actions, annealed with the frames.

The update, in call order: :class:`~marl.algorithms.updates.OnPolicyUpdater`
``.process`` runs the loss's ``QLambda`` on the ``[*B, T]`` rollout; ``.update`` runs
``epochs`` passes of shuffled minibatches through :class:`marl.objectives.PQNLoss`
(``l(Q(s, a), G)``). ``pqn`` treats each agent of a group independently (IQL-like,
per-agent rewards); ``pqn_vdn`` (:mod:`marl.algorithms.pqn_vdn`) regresses the sum
of the agents' values on the team's returns.
"""

from __future__ import annotations

from tensordict.nn import TensorDictModuleBase, TensorDictSequential

from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import GreedyAction, q_value_network
from marl.algorithms.configs import PQNConfig
from marl.algorithms.dqn import epsilon_greedy
from marl.algorithms.learner import GroupLearner
from marl.algorithms.settings import PQNRecipe
from marl.algorithms.spec import pqn_spec
from marl.algorithms.updates import OnPolicyUpdater, make_optimizer
from marl.objectives import PQNLoss

__all__ = ["SPEC", "PQNConfig", "build_pqn", "pqn_learner"]


def pqn_learner(
    info: GroupInfo,
    config: PQNRecipe,
    *,
    qnet: TensorDictModuleBase,
    team: bool,
    algorithm: str,
) -> GroupLearner:
    """Assemble a PQN learner around a Q-network: the loss, epsilon-greedy, the updater.

    Args:
        info: the group (discrete actions; legal-action masks honoured in the greedy
            action, the exploration and the bootstrap maximum).
        config: hyperparameters.
        qnet: the module writing the group's ``action_value``.
        team: regress the sum of the agents' values on the team's returns (PQN-VDN).
        algorithm: the algorithm's name.

    Returns:
        The group's learner.
    """
    c = config
    loss = PQNLoss(qnet, c, team=team)
    keys = info.loss_keys()
    if team:
        # the team value bootstraps until the episode (not one agent) ends; the loss is
        # on Q_tot, so it has no agent mask: masked agents are removed from its inputs
        keys.pop("agent_mask", None)
        keys.update(done=("next", "done"), terminated=("next", "terminated"))
    loss.set_keys(
        **keys,
        action_value=info.key("action_value"),
        action_mask=info.key("action_mask"),
        advantage=info.key("advantage"),
        value_target=info.key("value_target"),
        truncated=(*keys["done"][:-1], "truncated"),
    )
    egreedy = epsilon_greedy(info, c)
    optimizer = make_optimizer({"qvalue": (qnet.parameters(), c.lr)})
    updater = OnPolicyUpdater.from_settings(
        c, loss, optimizer, compile=info.compile, sync=info.gradient_sync
    )
    return GroupLearner(
        info,
        algorithm=algorithm,
        policy=TensorDictSequential(qnet, GreedyAction(info), egreedy),
        loss=loss,
        optimizer=optimizer,
        updater=updater,
        exploration=[egreedy],
        config=c,
    )


def build_pqn(info: GroupInfo, config: PQNConfig) -> GroupLearner:
    """Build a PQN learner for one group (or a single-agent env): independent Q(lambda).

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("picker")
        >>> learner = build_pqn(info, PQNConfig())
        >>> type(learner.loss.value_estimator).__name__, learner.updater.on_policy
        ('QLambda', True)
    """
    c = config
    qnet = q_value_network(info, layer_norm=c.layer_norm, **c.q_body())
    return pqn_learner(info, c, qnet=qnet, team=False, algorithm="pqn")


SPEC = pqn_spec(
    "pqn",
    PQNConfig,
    build_pqn,
    "Parallel Q-learning: Q(lambda) on fresh rollouts, no replay, no target net.",
)
