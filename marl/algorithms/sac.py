"""SAC: soft actor-critic (Haarnoja et al., 2018), continuous or discrete actions.

Roles: :class:`SACConfig`, :func:`build_sac` (a ``TanhNormal`` or categorical
actor, twin Q-networks, ``SACLoss``/``DiscreteSACLoss`` with a learned
temperature, soft target updates, a uniform or prioritized replay buffer).
"""

from __future__ import annotations

from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import q_value_network, state_action_value_critic, stochastic_actor
from marl.algorithms.configs import SACConfig
from marl.algorithms.learner import GroupLearner
from marl.algorithms.settings import SACRecipe
from marl.algorithms.spec import replay_actor_critic_spec
from marl.algorithms.updates import make_optimizer, off_policy_learner
from marl.objectives import DiscreteSACLoss, SACLoss, SoftUpdate

__all__ = ["SPEC", "SACConfig", "build_sac"]


def build_sac(
    info: GroupInfo,
    config: SACRecipe,
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
        >>> from marl.testing import example_group
        >>> info = example_group("root")
        >>> type(build_sac(info, SACConfig()).loss).__name__
        'SACLoss'
    """
    c = config
    actor = stochastic_actor(info, **c.actor_body())
    if info.action_space == "continuous":
        if qvalue_network is None:
            qvalue_network = state_action_value_critic(info, **c.critic_body())
        loss = SACLoss(actor, qvalue_network, c)
        loss.set_keys(**info.loss_keys(), state_action_value=info.key("state_action_value"))
    else:
        if qvalue_network is None:
            qvalue_network = q_value_network(info, **c.critic_body())
        loss = DiscreteSACLoss(actor, qvalue_network, c, num_actions=info.n_actions)
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


SPEC = replay_actor_critic_spec(
    "sac",
    SACConfig,
    build_sac,
    "Soft actor-critic with twin Q-networks and a learned temperature.",
    continuous=False,
)
