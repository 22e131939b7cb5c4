"""SAC: soft actor-critic (Haarnoja et al., 2018), continuous or discrete actions.

Roles: :class:`SACConfig`, :func:`build_sac` (a ``TanhNormal`` or categorical
actor, twin Q-networks, ``SACLoss``/``DiscreteSACLoss`` with a learned
temperature, soft target updates, a uniform or prioritized replay buffer).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms._networks import network_spec
from marl.algorithms._policies import q_value_network, state_action_value_critic, stochastic_actor
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import AlgorithmSpec
from marl.algorithms.updates import OffPolicyConfig, make_optimizer, off_policy_learner
from marl.objectives import DiscreteSACLoss, SACLoss, SoftUpdate

__all__ = ["SPEC", "SACConfig", "build_sac"]


@dataclass
class SACConfig(OffPolicyConfig):
    """SAC hyperparameters (defaults tuned for Pendulum-like control tasks)."""

    actor_lr: float = 3e-4
    """Adam learning rate of the actor."""
    critic_lr: float = 3e-4
    """Adam learning rate of the Q-networks."""
    alpha_lr: float = 3e-4
    """Adam learning rate of the temperature."""
    alpha_init: float = 1.0
    """Initial temperature."""
    fixed_alpha: bool = False
    """Keep the temperature at ``alpha_init``."""
    target_entropy: float | str = "auto"
    """Entropy target: a number, or ``"auto"`` (``-action_dim``; ``0.98 log n`` discrete)."""
    num_qvalue_nets: int = 2
    """Q-networks whose minimum is used (2: clipped double Q)."""
    loss_function: str = "l2"
    """Q regression loss."""
    actor_cells: tuple[int, ...] = (256, 256)
    """Hidden widths of the actor."""
    critic_cells: tuple[int, ...] = (256, 256)
    """Hidden widths of each Q-network."""
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


def build_sac(
    info: GroupInfo,
    config: SACConfig,
    *,
    qvalue_network: nn.Module | None = None,
    algorithm: str = "sac",
) -> GroupLearner:
    """Build a SAC learner for one group.

    Args:
        info: the group.
        config: hyperparameters.
        qvalue_network: the Q-network (default: per-agent MLP); MASAC passes a
            centralized one. Continuous: reads the action, writes
            ``state_action_value``; discrete: writes ``action_value``.
        algorithm: the name the learner is built under (``"masac"``, ``"isac"``...).

    Returns:
        The group's learner.

    Examples:
        >>> from marl.algorithms.base import group_infos
        >>> from marl.testing import SingleAgentFakeEnv
        >>> info = group_infos(SingleAgentFakeEnv(num_envs=2))["root"]
        >>> type(build_sac(info, SACConfig()).loss).__name__
        'SACLoss'
    """
    c = config
    actor = stochastic_actor(
        info, c.actor_cells, c.activation, share_params=c.share_params, network=network_spec(c)
    )
    common = dict(
        num_qvalue_nets=c.num_qvalue_nets,
        gamma=c.gamma,
        alpha_init=c.alpha_init,
        fixed_alpha=c.fixed_alpha,
        target_entropy=c.target_entropy,
        loss_function=c.loss_function,
    )
    if info.action_space == "continuous":
        if qvalue_network is None:
            qvalue_network = state_action_value_critic(
                info,
                c.critic_cells,
                c.activation,
                share_params=c.share_params,
                network=network_spec(c),
            )
        loss = SACLoss(actor, qvalue_network, **common)
        loss.set_keys(**info.loss_keys(), state_action_value=info.key("state_action_value"))
    else:
        if qvalue_network is None:
            qvalue_network = q_value_network(
                info,
                c.critic_cells,
                c.activation,
                share_params=c.share_params,
                network=network_spec(c),
            )
        loss = DiscreteSACLoss(actor, qvalue_network, num_actions=info.n_actions, **common)
        loss.set_keys(**info.loss_keys(), action_value=info.key("action_value"))
    optimizer = make_optimizer(
        {
            "actor": (actor.parameters(), c.actor_lr),
            "critic": (loss.qvalue_networks.parameters(), c.critic_lr),
            "alpha": ([loss.log_alpha], c.alpha_lr),
        }
    )
    return off_policy_learner(
        info,
        c,
        policy=actor,
        loss=loss,
        optimizer=optimizer,
        target_updater=SoftUpdate(loss, tau=c.tau),
        algorithm=algorithm,
    )


SPEC = AlgorithmSpec(
    name="sac",
    config_cls=SACConfig,
    builder=build_sac,
    on_policy=False,
    action_spaces=frozenset({"continuous", "discrete"}),
    description="Soft actor-critic with twin Q-networks and a learned temperature.",
)
