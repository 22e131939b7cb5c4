"""The settings an algorithm config is composed of: networks, optimization, replay, exploration.

Every algorithm config is a flat dataclass (the command line's ``algorithm.lr``,
``algorithm.actor_cells``, ... are its fields) composed of small settings classes, each
the one owner of its defaults: the loss's (:mod:`marl.objectives.settings`), the
networks' (:class:`ActorCriticNetworks`, :class:`QNetworks`), the optimization's
(:class:`OnPolicyOptimization`, :class:`ReplaySettings`, ...). No algorithm config
subclasses another algorithm's config: the configs that share a builder compose the
same *recipe* here (:class:`PPORecipe`, :class:`DDPGRecipe`, ...), and algorithms that
share other defaults share a *preset* (:class:`MultiAgentPPO`,
:class:`MultiAgentQLearning`), which states them once.

``model=`` on the command line reaches the network settings through
:attr:`NetworkSettings.MODEL_KEYS`: each network settings class says which of its fields
each ``model.*`` key sets (the Q-learners' ``cells`` take ``model.actor_cells``), so
nothing guesses field names.

Examples:
    >>> from marl.algorithms import get_algorithm
    >>> mappo = get_algorithm("mappo").config_cls()
    >>> isinstance(mappo, (ActorCriticNetworks, OnPolicyOptimization)), mappo.lr
    (True, 5e-05)
    >>> QNetworks.MODEL_KEYS["actor_cells"]
    'cells'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, TypedDict

from marl.objectives.settings import (
    DDPGSettings,
    DQNSettings,
    PPOSettings,
    PQNSettings,
    SACSettings,
)

__all__ = [
    "CRITIC_SCOPES",
    "NETWORKS",
    "RECURRENT_BODIES",
    "VMAS_POSITION",
    "ActorCriticNetworks",
    "ActorCriticTraining",
    "Body",
    "CentralCritic",
    "DDPGRecipe",
    "DeterministicActorTraining",
    "EpsilonGreedy",
    "MultiAgentPPO",
    "MultiAgentQLearning",
    "NetworkSettings",
    "NetworkSpec",
    "OffPolicyNetworks",
    "OnPolicyOptimization",
    "PPORecipe",
    "PQNRecipe",
    "QLearningRecipe",
    "QLearningTraining",
    "QNetworks",
    "ReplaySettings",
    "SACRecipe",
    "SACTraining",
    "check_critic_scope",
]

NETWORKS: dict[str, str] = {
    "mlp": "a multi-layer perceptron per agent (MultiAgentMLP): the default",
    "deepsets": "per-agent encoder, pooled over the group's agents, then a decoder "
    "(permutation-invariant)",
    "gnn": "message passing between the group's agents over a complete or a distance graph",
    "cnn": "a convolutional encoder per agent for image observations, then an MLP head",
    "gru": "a GRU over time, its state kept in the TensorDict",
    "lstm": "an LSTM over time, its state kept in the TensorDict",
}
"""The network bodies, by name, with one line each (built by ``marl.algorithms._networks``;
here, with no torch, for the command line's checks of ``model.network``)."""

RECURRENT_BODIES = ("gru", "lstm")
"""The bodies that train on sequences (``marl.algorithms._recurrent``): an algorithm
takes them only when its builder says so (``AlgorithmSpec.network_refusals``)."""

VMAS_POSITION = (0, 2)
"""Where VMAS puts each agent's position in its observation (every scenario's first two
features): the default of ``gnn_position``."""

CRITIC_SCOPES = ("group", "all")
"""What a centralized critic sees: its group's agents, or every group's agents."""


def check_critic_scope(scope: str) -> str:
    """Return ``scope`` if it is one of :data:`CRITIC_SCOPES`, else raise ``ValueError``."""
    if scope not in CRITIC_SCOPES:
        raise ValueError(f"critic_scope must be one of {CRITIC_SCOPES}, got {scope!r}")
    return scope


@dataclass(frozen=True)
class NetworkSpec:
    """The body a network is built with: its name and the options of the ``gnn``.

    Args:
        name: one of :data:`NETWORKS`.
        gnn_radius: ``gnn`` only: connect the agents within this distance of each other
            (``None``: a complete graph).
        gnn_position: ``gnn`` only: ``(start, stop)``, the observation features that hold
            each agent's position.

    Examples:
        >>> from marl.algorithms.ppo import PPOConfig
        >>> PPOConfig(network="gnn", gnn_radius=0.5).network_spec()
        NetworkSpec(name='gnn', gnn_radius=0.5, gnn_position=(0, 2))
    """

    name: str = "mlp"
    gnn_radius: float | None = None
    gnn_position: tuple[int, ...] = VMAS_POSITION


class Body(TypedDict):
    """The arguments every network builder of ``_policies.py``/``_critics.py`` takes after
    the group: ``state_value_critic(info, **config.critic_body())``."""

    cells: tuple[int, ...]
    activation: str
    share_params: bool
    network: NetworkSpec


# ---------------------------------------------------------------------------- networks


@dataclass
class NetworkSettings:
    """The body of every network an algorithm builds, and the sharing of its parameters."""

    network: str = "mlp"
    """Body of every network (``model.network``): ``mlp``, ``deepsets``, ``gnn``, ``cnn``,
    ``gru`` or ``lstm`` (see ``docs/basic/models.md`` for which algorithm takes which)."""
    gnn_radius: float | None = None
    """``network="gnn"``: connect the agents within this distance of each other (``None``:
    a complete graph, every agent hears every other)."""
    gnn_position: tuple[int, ...] = VMAS_POSITION
    """``network="gnn"`` with ``gnn_radius``: ``(start, stop)`` of the observation features
    that hold each agent's position (VMAS: ``(0, 2)``)."""
    share_policy_params: bool = True
    """One set of policy (or Q-network) parameters for every agent of a group (``False``:
    one per agent, vectorized)."""

    MODEL_KEYS: ClassVar[Mapping[str, str | None]] = {
        "network": "network",
        "gnn_radius": "gnn_radius",
        "gnn_position": "gnn_position",
        "share_policy_params": "share_policy_params",
    }
    """``model.<key>`` -> the field it sets (``None``: the key means nothing here, e.g. a
    critic's width for a Q-learner, and is ignored)."""

    def network_spec(self) -> NetworkSpec:
        """The :class:`NetworkSpec` of these settings."""
        return NetworkSpec(self.network, self.gnn_radius, tuple(self.gnn_position))

    def _body(self, cells: tuple[int, ...], activation: str, share_params: bool) -> Body:
        return Body(
            cells=cells,
            activation=activation,
            share_params=share_params,
            network=self.network_spec(),
        )


@dataclass
class ActorCriticNetworks(NetworkSettings):
    """An actor and a critic (the on-policy sizes: two tanh layers of 64)."""

    actor_cells: tuple[int, ...] = (64, 64)
    """Hidden widths of the actor."""
    critic_cells: tuple[int, ...] = (64, 64)
    """Hidden widths of the critic."""
    activation: str = "tanh"
    """Hidden activation (``tanh``, ``relu``, ``elu``, ``silu``, ``leaky_relu``)."""
    share_critic_params: bool = True
    """One set of critic parameters for every agent of a group (``False``: one per agent)."""

    MODEL_KEYS: ClassVar[Mapping[str, str | None]] = {
        **NetworkSettings.MODEL_KEYS,
        **{k: k for k in ("actor_cells", "critic_cells", "activation", "share_critic_params")},
    }

    def actor_body(self) -> Body:
        """The actor's network arguments."""
        return self._body(self.actor_cells, self.activation, self.share_policy_params)

    def critic_body(self) -> Body:
        """The critic's network arguments. A recurrent actor keeps an MLP critic: the
        values are computed on the whole batch after collection (GAE), so a recurrent
        critic would need its own state stored at every step; the actor's memory is what
        acting under partial observability needs. Any other body is the critic's too."""
        body = self._body(self.critic_cells, self.activation, self.share_critic_params)
        if body["network"].name in RECURRENT_BODIES:
            body["network"] = NetworkSpec()
        return body


@dataclass
class OffPolicyNetworks(ActorCriticNetworks):
    """An actor and Q-critics of the off-policy actor-critics (two relu layers of 256)."""

    actor_cells: tuple[int, ...] = (256, 256)
    """Hidden widths of the actor."""
    critic_cells: tuple[int, ...] = (256, 256)
    """Hidden widths of each Q-critic."""
    activation: str = "relu"
    """Hidden activation."""


@dataclass
class QNetworks(NetworkSettings):
    """One Q-network (per agent, or shared by a group's agents)."""

    cells: tuple[int, ...] = (256, 256)
    """Hidden widths of the Q-network (``model.actor_cells``)."""
    activation: str = "relu"
    """Hidden activation."""

    MODEL_KEYS: ClassVar[Mapping[str, str | None]] = {
        **NetworkSettings.MODEL_KEYS,
        "actor_cells": "cells",
        "activation": "activation",
        "critic_cells": None,  # no critic
        "share_critic_params": None,
    }

    def q_body(self) -> Body:
        """The Q-network's arguments (its non-recurrent body)."""
        return self._body(self.cells, self.activation, self.share_policy_params)


# ------------------------------------------------------------------------- on-policy


@dataclass
class OnPolicyOptimization:
    """Epochs of minibatches over each collected batch, with Adam and gradient clipping."""

    lr: float = 3e-4
    """Adam learning rate (of every network unless a ``critic_lr`` says otherwise)."""
    epochs: int = 10
    """Passes over each collected batch."""
    minibatch_size: int = 256
    """Transitions (env steps, a group's agents together) per optimizer step."""
    max_grad_norm: float | None = 0.5
    """Gradient clipping, per role (actor, critic); ``None`` disables it."""


@dataclass
class ActorCriticTraining:
    """What an on-policy actor-critic adds: the critic's own rate, the recurrent sequences."""

    critic_lr: float | None = None
    """Adam learning rate of the critic (``None``: ``lr``). At a small actor rate, a critic
    that must fit returns of tens to hundreds lags behind and biases the advantages; the
    CartPole learning tests use ``1e-2`` (see ``docs/basic/algorithms_and_tasks.md``)."""
    sequence_length: int | None = None
    """Recurrent actors (``gru``/``lstm``): steps per training sequence (``None``: each
    env's whole collected rollout). Minibatches are ``minibatch_size // sequence_length``
    whole sequences, each unrolled from the hidden state stored at its first step."""


@dataclass
class CentralCritic:
    """What a centralized critic (MAPPO, HAPPO, MADDPG, MASAC) sees."""

    critic_scope: str = "group"
    """``"group"``: the critic sees its group's agents; ``"all"``: every group's agents."""
    use_state: bool = True
    """With ``critic_scope="group"``, read the env's global ``"state"`` when it has one."""

    def __post_init__(self) -> None:
        check_critic_scope(self.critic_scope)


# ------------------------------------------------------------------------ off-policy


@dataclass
class ReplaySettings:
    """Replay and update settings shared by the off-policy algorithms."""

    buffer_size: int = 1_000_000
    """Replay buffer capacity, in transitions (env steps x env batch)."""
    batch_size: int = 256
    """Transitions per optimizer step."""
    utd_ratio: float = 1.0
    """Optimizer steps per collected frame (update-to-data ratio)."""
    learning_starts: int = 1000
    """No update before the buffer holds this many transitions."""
    prioritized: bool = False
    """Prioritized replay (Schaul et al., 2016) on the loss's TD errors."""
    priority_alpha: float = 0.6
    """Priority exponent of the prioritized buffer."""
    priority_beta: float = 0.4
    """Importance-weight exponent of the prioritized buffer."""
    tau: float = 0.005
    """Polyak factor of the soft target updates."""
    max_grad_norm: float | None = None
    """Gradient clipping, per role; ``None`` disables it."""
    buffer_device: str = "cpu"
    """Where the replay buffer lives."""


@dataclass
class DeterministicActorTraining:
    """DDPG-style actors: their rates and their Gaussian exploration noise."""

    actor_lr: float = 1e-3
    """Adam learning rate of the actor."""
    critic_lr: float = 1e-3
    """Adam learning rate of the critic."""
    exploration_sigma: float = 0.1
    """Std of the Gaussian exploration noise, in units of the action range's half-width."""
    exploration_sigma_end: float | None = None
    """Anneal the noise std linearly to this value (``None``: constant)."""
    exploration_annealing_frames: int = 100_000
    """Frames over which the noise std anneals."""


@dataclass
class SACTraining:
    """Soft actor-critic rates: actor, critics and the temperature."""

    actor_lr: float = 3e-4
    """Adam learning rate of the actor."""
    critic_lr: float = 3e-4
    """Adam learning rate of the Q-critics."""
    alpha_lr: float = 3e-4
    """Adam learning rate of the temperature."""


@dataclass
class EpsilonGreedy:
    """Epsilon-greedy exploration, annealed linearly over frames."""

    eps_init: float = 1.0
    """Initial epsilon."""
    eps_end: float = 0.04
    """Final epsilon."""
    eps_annealing_frames: int = 8_000
    """Frames over which epsilon decays linearly."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.eps_end <= self.eps_init <= 1.0:
            raise ValueError(
                f"need 0 <= eps_end <= eps_init <= 1, got eps_init={self.eps_init}, "
                f"eps_end={self.eps_end}"
            )


@dataclass
class QLearningTraining(ReplaySettings, EpsilonGreedy):
    """Q-learning on replay (DQN's recipe): rate, target network, slices, epsilon."""

    buffer_size: int = 100_000
    """Replay buffer capacity, in transitions."""
    batch_size: int = 64
    """Transitions per optimizer step."""
    utd_ratio: float = 0.5
    """Optimizer steps per collected frame."""
    lr: float = 2.3e-3
    """Adam learning rate of the Q-network."""
    target_update_period: int | None = 128
    """Hard target update every this many optimizer steps (``None``: soft, with ``tau``)."""
    sequence_length: int = 16
    """Recurrent Q-networks (``gru``/``lstm``): steps per replayed slice (slices never
    cross an episode boundary; ``batch_size // sequence_length`` slices per step)."""


# ------------------------------------------------------------- recipes and presets
# A recipe is the composition one builder reads (``build_ppo`` takes a ``PPORecipe``);
# the algorithm configs that share a builder compose the same recipe, and a preset
# restates only the defaults its algorithms change.


@dataclass
class PPORecipe(PPOSettings, ActorCriticTraining, OnPolicyOptimization, ActorCriticNetworks):
    """What ``build_ppo`` reads: the PPO loss, its update, and an actor and a critic."""


@dataclass
class MultiAgentPPO(PPORecipe):
    """The PPO recipe of IPPO, MAPPO and HAPPO, with BenchMARL's defaults: a preset.

    Each of the three configs composes it with what its critic needs.
    """

    lr: float = 5e-5
    """Adam learning rate of the actor and the critic (BenchMARL's default)."""
    lmbda: float = 0.9
    """GAE lambda (BenchMARL's default)."""
    critic_coef: float = 1.0
    """Weight of the critic loss (BenchMARL's default)."""
    minibatch_size: int = 400
    """Transitions (env steps, a group's agents together) per optimizer step."""


@dataclass
class DDPGRecipe(DDPGSettings, ReplaySettings, DeterministicActorTraining, OffPolicyNetworks):
    """What ``build_ddpg`` reads (DDPG, IDDPG, MADDPG): the loss, replay, the actor's
    rates and exploration, the networks."""


@dataclass
class SACRecipe(SACSettings, ReplaySettings, SACTraining, OffPolicyNetworks):
    """What ``build_sac`` reads (SAC, ISAC, MASAC): the loss, replay, rates, networks."""


@dataclass
class QLearningRecipe(DQNSettings, QLearningTraining, QNetworks):
    """What ``build_dqn`` reads (DQN, IQL, VDN, QMIX): the loss, replay and epsilon, the
    Q-network."""


@dataclass
class MultiAgentQLearning(QLearningRecipe):
    """The Q-learning recipe of IQL, VDN and QMIX (BenchMARL-like defaults): a preset."""

    lr: float = 5e-4
    """Adam learning rate of the agents' Q-network (and the mixer)."""
    batch_size: int = 128
    """Transitions per optimizer step."""
    utd_ratio: float = 0.25
    """Optimizer steps per collected frame."""
    target_update_period: int | None = None
    """``None``: soft target updates with ``tau`` (else a hard update every this many
    optimizer steps)."""
    eps_init: float = 0.8
    """Initial epsilon."""
    eps_end: float = 0.01
    """Final epsilon."""
    eps_annealing_frames: int = 10_000
    """Frames over which epsilon decays linearly."""


@dataclass
class PQNRecipe(PQNSettings, OnPolicyOptimization, EpsilonGreedy, QNetworks):
    """What ``pqn_learner`` reads (PQN, PQN-VDN), with the PQN paper's defaults."""

    lr: float = 5e-4
    """Adam learning rate of the Q-network."""
    epochs: int = 4
    """Passes over each collected batch."""
    minibatch_size: int = 1000
    """Transitions per optimizer step."""
    max_grad_norm: float | None = 10.0
    """Gradient clipping; ``None`` disables it."""
    eps_end: float = 0.05
    """Final epsilon."""
    eps_annealing_frames: int = 50_000
    """Frames over which epsilon decays linearly (PQN anneals over a fraction of the run:
    set it to about a fifth of your frame budget)."""
    cells: tuple[int, ...] = (128, 128)
    """Hidden widths of the Q-network (``model.actor_cells``)."""
    layer_norm: bool = True
    """Layer normalization after every hidden layer (PQN's stabilizer in place of a
    target network)."""
