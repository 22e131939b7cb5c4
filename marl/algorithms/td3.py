"""TD3: twin delayed DDPG (Fujimoto et al., 2018).

Roles: :class:`TD3Config`, :func:`build_td3` (a deterministic actor with Gaussian
exploration, twin Q-networks, ``TD3Loss`` with target smoothing and a delayed
actor, soft target updates, a uniform or prioritized buffer).
"""

from __future__ import annotations

from dataclasses import dataclass

from tensordict.nn import TensorDictSequential
from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import action_bounds
from marl.algorithms.ddpg import deterministic_actor_critic, gaussian_exploration
from marl.algorithms.learner import GroupLearner
from marl.algorithms.settings import DeterministicActorTraining, OffPolicyNetworks, ReplaySettings
from marl.algorithms.spec import OFF_POLICY_NOT_RECURRENT, AlgorithmSpec, recurrent_refusals
from marl.algorithms.updates import make_optimizer, off_policy_learner
from marl.objectives import SoftUpdate, TD3Loss
from marl.objectives.settings import TD3Settings

__all__ = ["SPEC", "TD3Config", "build_td3"]


@dataclass
class TD3Config(TD3Settings, ReplaySettings, DeterministicActorTraining, OffPolicyNetworks):
    """TD3 hyperparameters: DDPG's update, networks and exploration with TD3's loss
    (:class:`~marl.objectives.settings.TD3Settings`: twin Q, target smoothing, the
    actor's delay).

    Examples:
        >>> TD3Config().policy_delay, TD3Config().actor_lr
        (2, 0.001)
    """


def build_td3(
    info: GroupInfo, config: TD3Config, *, qvalue_network: nn.Module | None = None
) -> GroupLearner:
    """Build a TD3 learner for one group.

    Args:
        info: the group.
        config: hyperparameters.
        qvalue_network: the Q(s, a) critic writing ``state_action_value`` (default: a
            per-agent MLP); its twin is an independently initialised copy.

    Returns:
        The group's learner.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("root")
        >>> build_td3(info, TD3Config()).loss.policy_delay
        2
    """
    c = config
    actor, qvalue_network = deterministic_actor_critic(info, c, qvalue_network)
    low, high = action_bounds(info)
    loss = TD3Loss(actor, qvalue_network, c, low=low, high=high)
    loss.set_keys(**info.loss_keys(), state_action_value=info.key("state_action_value"))
    noise = gaussian_exploration(info, c)
    optimizer = make_optimizer(
        {
            "actor": (actor.parameters(), c.actor_lr),
            "critic": (loss.qvalue_networks.parameters(), c.critic_lr),
        }
    )
    return off_policy_learner(
        info,
        c,
        policy=TensorDictSequential(actor, noise),
        loss=loss,
        optimizer=optimizer,
        target_updater=SoftUpdate(loss, tau=c.tau),
        exploration=[noise],
        algorithm="td3",
    )


SPEC = AlgorithmSpec(
    name="td3",
    config_cls=TD3Config,
    builder=build_td3,
    on_policy=False,
    action_spaces=frozenset({"continuous"}),
    description="Twin delayed DDPG: clipped double Q, target smoothing, delayed actor.",
    network_refusals=recurrent_refusals(OFF_POLICY_NOT_RECURRENT),
)
