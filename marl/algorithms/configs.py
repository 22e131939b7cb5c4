"""The config dataclass of every built-in algorithm, in one module that imports no torch.

Each algorithm module (:mod:`marl.algorithms.mappo`, ...) builds its learner from its
config and re-exports it from here (``from marl.algorithms.mappo import MAPPOConfig``
works as before). They live apart from their builders because the command line reads
them without building anything: ``marl-run --help`` and hydra's checks compose the
configs (:mod:`marl.experiment._conf`) and must not pay for importing torch.

Every config is a flat composition of the settings classes of
:mod:`marl.algorithms.settings` and :mod:`marl.objectives.settings`, the owners of their
defaults; a config states only what its algorithm changes or adds.

Examples:
    >>> MAPPOConfig().lr, QMIXConfig().mixing_embed_dim
    (5e-05, 32)
"""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.settings import (
    ActorCriticNetworks,
    ActorCriticTraining,
    CentralCritic,
    DDPGRecipe,
    DeterministicActorTraining,
    MultiAgentPPO,
    MultiAgentQLearning,
    OffPolicyNetworks,
    OnPolicyOptimization,
    PPORecipe,
    PQNRecipe,
    QLearningRecipe,
    ReplaySettings,
    SACRecipe,
)
from marl.objectives.settings import A2CSettings, PPOSettings, TD3Settings

__all__ = [
    "A2CConfig",
    "DDPGConfig",
    "DQNConfig",
    "HAPPOConfig",
    "IDDPGConfig",
    "IPPOConfig",
    "IQLConfig",
    "ISACConfig",
    "MADDPGConfig",
    "MAPPOConfig",
    "MASACConfig",
    "MATConfig",
    "PPOConfig",
    "PQNConfig",
    "PQNVDNConfig",
    "QMIXConfig",
    "SACConfig",
    "TD3Config",
    "VDNConfig",
]


@dataclass
class PPOConfig(PPORecipe):
    """PPO hyperparameters (defaults tuned for the classic control tasks).

    The :class:`~marl.algorithms.settings.PPORecipe` as it is, with no field of its own:
    the loss's :class:`~marl.objectives.settings.PPOSettings`, the
    :class:`~marl.algorithms.settings.OnPolicyOptimization` and
    :class:`~marl.algorithms.settings.ActorCriticTraining` of the update, and the
    :class:`~marl.algorithms.settings.ActorCriticNetworks`.

    Examples:
        >>> PPOConfig().clip_epsilon, PPOConfig().actor_cells
        (0.2, (64, 64))
    """


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


@dataclass
class MAPPOConfig(MultiAgentPPO, CentralCritic):
    """MAPPO hyperparameters: the multi-agent PPO preset and what the centralized critic sees.

    Examples:
        >>> MAPPOConfig(critic_scope="all").critic_scope
        'all'
    """


@dataclass
class IPPOConfig(MultiAgentPPO):
    """IPPO hyperparameters: the :class:`~marl.algorithms.settings.MultiAgentPPO` preset
    (PPO's settings, BenchMARL's defaults), with no field of its own.

    Examples:
        >>> IPPOConfig(share_policy_params=False).share_policy_params, IPPOConfig().lr
        (False, 5e-05)
    """


@dataclass
class HAPPOConfig(MultiAgentPPO, CentralCritic):
    """HAPPO hyperparameters: the multi-agent PPO preset (MAPPO's), per-agent actors.

    ``epochs`` (MAPPO's 10) and ``minibatch_size`` apply to each agent's turn and to the
    critic's update, so an iteration runs ``n_agents + 1`` times MAPPO's epochs. (HARL
    runs 5 epochs, at a 10 times larger learning rate; at MAPPO's ``lr`` 5 epochs left
    HAPPO undertrained: see docs/basic/algorithms/happo.md.)

    Examples:
        >>> HAPPOConfig().share_policy_params, HAPPOConfig().epochs
        (False, 10)
        >>> HAPPOConfig(share_policy_params=True)
        Traceback (most recent call last):
        ...
        ValueError: happo updates each agent's policy in turn, so its agents need their own actor parameters: share_policy_params must be False, got True (use mappo for a shared actor)
    """

    share_policy_params: bool = False
    """Must stay ``False``: HAPPO's agents are heterogeneous, each with its own actor
    parameters (stacked per agent in one vectorized network)."""

    def __post_init__(self) -> None:
        if self.share_policy_params:
            raise ValueError(
                "happo updates each agent's policy in turn, so its agents need their own "
                f"actor parameters: share_policy_params must be False, got "
                f"{self.share_policy_params} (use mappo for a shared actor)"
            )
        super().__post_init__()


@dataclass
class MATConfig(PPOSettings, OnPolicyOptimization):
    """MAT hyperparameters: the paper's MPE settings, the network scaled down for CPUs.

    The loss's :class:`~marl.objectives.settings.PPOSettings` and the update's
    :class:`~marl.algorithms.settings.OnPolicyOptimization` (the paper's values where they
    differ), and the transformer's sizes.

    Examples:
        >>> MATConfig().embed_dim
        64
        >>> MATConfig(embed_dim=30, n_heads=4)
        Traceback (most recent call last):
        ...
        ValueError: mat: embed_dim (30) must be a multiple of n_heads (4)
    """

    lr: float = 5e-4
    """Adam learning rate of the whole transformer (encoder, value head, decoder)."""
    entropy_coef: float = 0.01
    """Weight of the entropy bonus (masked-out agents weighted out)."""
    critic_coef: float = 1.0
    """Weight of the value loss (the paper's ``value_loss_coef``)."""
    minibatch_size: int = 400
    """Transitions (env steps, the group's agents together) per optimizer step."""
    max_grad_norm: float | None = 10.0
    """Gradient clipping of the transformer (the paper's 10); ``None`` disables it."""
    embed_dim: int = 64
    """Width of the tokens (the paper: 64)."""
    n_heads: int = 1
    """Attention heads; must divide ``embed_dim`` (the paper: 1)."""
    n_blocks: int = 1
    """Encoder blocks, and as many decoder blocks (the paper: 1 on MPE)."""
    log_std_init: float = 0.0
    """Initial log standard deviation of continuous actions (learned, one per action
    dim, independent of the observations, as in the paper)."""

    def __post_init__(self) -> None:
        for name in ("epochs", "minibatch_size", "embed_dim", "n_heads", "n_blocks"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"mat: {name} must be an integer >= 1, got {value!r}")
        if self.embed_dim % self.n_heads:
            raise ValueError(
                f"mat: embed_dim ({self.embed_dim}) must be a multiple of n_heads ({self.n_heads})"
            )
        if self.lr <= 0 or self.clip_epsilon <= 0:
            raise ValueError(
                f"mat: lr and clip_epsilon must be > 0, got {self.lr} and {self.clip_epsilon}"
            )


@dataclass
class DDPGConfig(DDPGRecipe):
    """DDPG hyperparameters (defaults tuned for Pendulum-like control tasks).

    The :class:`~marl.algorithms.settings.DDPGRecipe` as it is: the loss's
    :class:`~marl.objectives.settings.DDPGSettings`, the
    :class:`~marl.algorithms.settings.ReplaySettings`, the actor's rates and exploration
    (:class:`~marl.algorithms.settings.DeterministicActorTraining`) and the
    :class:`~marl.algorithms.settings.OffPolicyNetworks`.

    Examples:
        >>> DDPGConfig().actor_cells, DDPGConfig().tau
        ((256, 256), 0.005)
    """


@dataclass
class TD3Config(TD3Settings, ReplaySettings, DeterministicActorTraining, OffPolicyNetworks):
    """TD3 hyperparameters: DDPG's update, networks and exploration with TD3's loss
    (:class:`~marl.objectives.settings.TD3Settings`: twin Q, target smoothing, the
    actor's delay).

    Examples:
        >>> TD3Config().policy_delay, TD3Config().actor_lr
        (2, 0.001)
    """


@dataclass
class IDDPGConfig(DDPGRecipe):
    """IDDPG hyperparameters: the :class:`~marl.algorithms.settings.DDPGRecipe`
    (DDPG's), with the sharing of actor and critic parameters over a group's agents.

    Examples:
        >>> IDDPGConfig(share_policy_params=False).share_policy_params
        False
    """


@dataclass
class MADDPGConfig(DDPGRecipe, CentralCritic):
    """MADDPG hyperparameters: DDPG's recipe and what the centralized critic sees.

    Examples:
        >>> MADDPGConfig().critic_scope
        'group'
    """


@dataclass
class SACConfig(SACRecipe):
    """SAC hyperparameters: the :class:`~marl.algorithms.settings.SACRecipe` as it is (the
    loss's :class:`~marl.objectives.settings.SACSettings`, replay, the three rates, the
    networks).

    Examples:
        >>> SACConfig().num_qvalue_nets, SACConfig().alpha_lr
        (2, 0.0003)
    """


@dataclass
class ISACConfig(SACRecipe):
    """ISAC hyperparameters: the :class:`~marl.algorithms.settings.SACRecipe` (SAC's),
    with the sharing of actor and critic parameters over a group's agents.

    Examples:
        >>> ISACConfig(share_critic_params=False).share_critic_params
        False
    """


@dataclass
class MASACConfig(SACRecipe, CentralCritic):
    """MASAC hyperparameters: SAC's recipe and what the centralized critics see.

    Examples:
        >>> MASACConfig(critic_scope="all").critic_scope
        'all'
    """


@dataclass
class DQNConfig(QLearningRecipe):
    """DQN hyperparameters (defaults tuned for CartPole-like tasks).

    The :class:`~marl.algorithms.settings.QLearningRecipe` (DQN's rate, replay, target
    period and epsilon are its defaults), with a Huber loss.

    Examples:
        >>> DQNConfig().loss_function, DQNConfig().target_update_period
        ('smooth_l1', 128)
    """

    loss_function: str = "smooth_l1"
    """Q regression loss (Huber: DQN's)."""


@dataclass
class IQLConfig(MultiAgentQLearning):
    """IQL hyperparameters: the :class:`~marl.algorithms.settings.MultiAgentQLearning`
    preset (BenchMARL-like defaults), with no field of its own.

    Examples:
        >>> IQLConfig().target_update_period is None
        True
    """


@dataclass
class VDNConfig(MultiAgentQLearning):
    """VDN hyperparameters: the multi-agent Q-learning preset (IQL's); the mixer has none.

    Examples:
        >>> VDNConfig().gamma
        0.99
    """


@dataclass
class QMIXConfig(MultiAgentQLearning):
    """QMIX hyperparameters: the multi-agent Q-learning preset (VDN's), plus the mixer's.

    Examples:
        >>> QMIXConfig().mixing_embed_dim
        32
    """

    mixing_embed_dim: int = 32
    """Width of the mixing layer (BenchMARL's default)."""
    hypernet_embed: int = 64
    """Hidden width of the hypernetworks producing the mixing weights."""
    use_state: bool = True
    """Condition the mixer on the env's global ``"state"`` when it has one (else on the
    group's concatenated observations)."""
    hypernet_init_scale: float | None = None
    """A factor on the initial weights of the hypernetworks' output layers (their biases
    start at 0); ``None``: PyTorch's initialization (PyMARL's, made for a normalized
    state such as SMAC's). States of raw units need a small one: on SMAX's world state
    (positions in [0, 32]) PyTorch's starts ``Q_tot`` near 50 where returns are below 2,
    and QMIX does not learn; 0.01 starts it near 0 (JaxMARL's QMIX: 0.001), and QMIX
    wins ``smax/3m`` battles (docs/basic/tasks/smax.md)."""


@dataclass
class PQNConfig(PQNRecipe):
    """PQN hyperparameters: the :class:`~marl.algorithms.settings.PQNRecipe` as it is.

    Examples:
        >>> PQNConfig().layer_norm
        True
    """


@dataclass
class PQNVDNConfig(PQNRecipe):
    """PQN-VDN hyperparameters: PQN's recipe (the sum has none).

    Examples:
        >>> PQNVDNConfig().lmbda
        0.65
    """
