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

from dataclasses import dataclass, field

from tensordict.nn import TensorDictModuleBase, TensorDictSequential

from marl.algorithms._groups import GroupInfo
from marl.algorithms._networks import network_spec
from marl.algorithms._policies import GreedyAction, q_value_network
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import AlgorithmSpec
from marl.algorithms.updates import OnPolicyUpdater, make_optimizer
from marl.modules import EGreedy
from marl.objectives import PQNLoss

__all__ = ["SPEC", "PQNConfig", "build_pqn", "pqn_learner"]


@dataclass
class PQNConfig:
    """PQN hyperparameters.

    Examples:
        >>> PQNConfig().layer_norm
        True
    """

    lr: float = 5e-4
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount factor."""
    lmbda: float = 0.65
    """Lambda of the Q(lambda) returns (the paper's value; 0 gives one-step targets)."""
    epochs: int = 4
    """Passes over each rollout."""
    minibatch_size: int = 1000
    """Transitions (env steps, all agents of the group together) per optimizer step."""
    max_grad_norm: float | None = 10.0
    """Gradient clipping; ``None`` disables it."""
    loss_function: str = "l2"
    """Regression loss: ``"l2"``, ``"l1"`` or ``"smooth_l1"``."""
    eps_init: float = 1.0
    """Initial epsilon of epsilon-greedy exploration."""
    eps_end: float = 0.05
    """Final epsilon."""
    eps_annealing_frames: int = 50_000
    """Frames over which epsilon decays linearly (PQN anneals over a fraction of the run:
    set it to about a fifth of your frame budget)."""
    cells: tuple[int, ...] = (128, 128)
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
    layer_norm: bool = True
    """Layer normalization after each hidden layer: what lets PQN drop the target network."""
    share_policy_params: bool = True
    """Groups: one Q-network for every agent of the group (else vectorized per agent)."""
    share_params: bool = field(default=True, init=False)
    """Set from ``share_policy_params`` (the name the Q-network builder reads)."""

    def __post_init__(self) -> None:
        self.share_params = self.share_policy_params
        if not 0.0 <= self.lmbda <= 1.0:
            raise ValueError(f"lmbda must be in [0, 1], got {self.lmbda}")
        if not 0.0 <= self.eps_end <= self.eps_init <= 1.0:
            raise ValueError(
                f"need 0 <= eps_end <= eps_init <= 1, got eps_init={self.eps_init}, "
                f"eps_end={self.eps_end}"
            )


def pqn_learner(
    info: GroupInfo,
    config: PQNConfig,
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
    loss = PQNLoss(qnet, gamma=c.gamma, lmbda=c.lmbda, team=team, loss_function=c.loss_function)
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
    egreedy = EGreedy(
        info.action_spec,
        n_actions=info.n_actions,
        eps_init=c.eps_init,
        eps_end=c.eps_end,
        annealing_num_steps=c.eps_annealing_frames,
        action_key=info.key("action"),
        action_mask_key=info.key("action_mask") if info.has_action_mask else None,
    )
    optimizer = make_optimizer({"qvalue": (qnet.parameters(), c.lr)})
    updater = OnPolicyUpdater(
        loss=loss,
        optimizer=optimizer,
        epochs=c.epochs,
        minibatch_size=c.minibatch_size,
        max_grad_norm=c.max_grad_norm,
        compile=info.compile,
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

    Args:
        info: the group (discrete actions).
        config: hyperparameters.

    Returns:
        The group's learner.

    Examples:
        >>> from marl.algorithms.base import group_infos
        >>> from marl.testing import MultiAgentFakeEnv
        >>> info = group_infos(MultiAgentFakeEnv(num_envs=2))["picker"]
        >>> learner = build_pqn(info, PQNConfig())
        >>> type(learner.loss.value_estimator).__name__, learner.updater.on_policy
        ('QLambda', True)
    """
    c = config
    qnet = q_value_network(
        info,
        c.cells,
        c.activation,
        share_params=c.share_params,
        layer_norm=c.layer_norm,
        network=network_spec(c),
    )
    return pqn_learner(info, c, qnet=qnet, team=False, algorithm="pqn")


SPEC = AlgorithmSpec(
    name="pqn",
    config_cls=PQNConfig,
    builder=build_pqn,
    on_policy=True,
    action_spaces=frozenset({"discrete"}),
    description="Parallel Q-learning: Q(lambda) on fresh rollouts, no replay, no target net.",
)
