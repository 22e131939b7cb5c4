"""MAT: the Multi-Agent Transformer (Wen et al., 2022, "Multi-Agent Reinforcement
Learning is a Sequence Modeling Problem").

One group's agents are a sequence: an encoder (self-attention over the agents'
observations) gives each agent a representation and a value ``V(o_i)``; a decoder
chooses the actions agent after agent, agent ``i`` conditioned on the representations
and on the actions of agents ``0..i-1``. The policy is joint over the group and still
factorizes into per-agent terms, ``pi(a|o) = prod_i pi(a_i | o, a_0..a_{i-1})``, so PPO's
clipped objective applies to each agent's ratio, with GAE advantages from the encoder's
values (:class:`~marl.objectives.PPOLoss`, agent masks included). Each minibatch runs
the encoder once: it gives both the decoder's representations and the values the
critic loss regresses (``value_from_actor``).

Roles: :class:`MATConfig` (hyperparameters), :func:`build_mat` (the network
:class:`~marl.modules.transformer.MultiAgentTransformer`, its policy and value modules,
the PPO loss, one Adam, the on-policy updater of PPO).

Groups: MAT is built per group, like every marl algorithm: an env with several groups
gets one independent transformer per group (each its own sequence, its own optimizer).
A single-agent env (no group) is refused: use ``ppo``.
"""

from __future__ import annotations

from marl.algorithms._groups import GroupInfo
from marl.algorithms._networks import NETWORKS
from marl.algorithms._policies import action_bounds, observation_inputs
from marl.algorithms.configs import MATConfig
from marl.algorithms.learner import GroupLearner
from marl.algorithms.ppo import policy_gradient_learner
from marl.algorithms.spec import policy_gradient_spec
from marl.modules.transformer import MATPolicy, MATValue, MultiAgentTransformer
from marl.objectives import PPOLoss
from marl.specs import Bounded, Categorical, OneHot

__all__ = ["SPEC", "MATConfig", "build_mat"]


def _action_kind(info: GroupInfo) -> tuple[str, int]:
    """The policy's action kind and the transformer's ``action_dim`` for the group."""
    spec = info.action_spec
    if info.action_space == "continuous":
        if len(info.action_shape) != 1:
            raise ValueError(
                f"mat: group {info.label!r} has continuous actions of shape "
                f"{tuple(info.action_shape)} per agent; mat needs a vector (one dim)"
            )
        kind = "tanh_normal" if isinstance(spec, Bounded) else "normal"
        return kind, int(info.action_shape[0])
    if isinstance(spec, Categorical):
        return "index", info.n_actions
    if isinstance(spec, OneHot):
        return "one_hot", info.n_actions
    raise TypeError(
        f"mat: group {info.label!r} has {type(spec).__name__} actions; mat serves index "
        "(Categorical), one-hot and continuous vector actions"
    )


def build_mat(info: GroupInfo, config: MATConfig) -> GroupLearner:
    """Build a MAT learner for one group.

    Args:
        info: the group (its agents are the transformer's sequence).
        config: hyperparameters.

    Returns:
        The group's learner: ``policy`` decodes the agents' actions in order, the loss
        is :class:`~marl.objectives.PPOLoss` on the teacher-forced log-probabilities.

    Raises:
        ValueError: for a single-agent env (no group), or multi-dim continuous actions.
        TypeError: for action specs other than index, one-hot or continuous vectors.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("picker")
        >>> build_mat(info, MATConfig(embed_dim=16)).policy.kind
        'index'
    """
    if info.name is None or info.n_agents is None:
        raise ValueError(
            "mat is a joint policy over the agents of a group, but this env is "
            "single-agent (no group): use ppo"
        )
    c = config
    kind, action_dim = _action_kind(info)
    obs_keys, obs_ndims, obs_dim = observation_inputs(info)
    net = MultiAgentTransformer(
        obs_dim,
        action_dim,
        info.n_agents,
        discrete=kind in ("index", "one_hot"),
        embed_dim=c.embed_dim,
        n_heads=c.n_heads,
        n_blocks=c.n_blocks,
        log_std_init=c.log_std_init,
    ).to(info.device)
    low, high = action_bounds(info) if kind == "tanh_normal" else (None, None)
    if low is not None:
        # per-agent bounds of a shared policy must agree: the decoder is shared
        low, high = low.reshape(-1, action_dim), high.reshape(-1, action_dim)
        if not (bool((low == low[0]).all()) and bool((high == high[0]).all())):
            raise ValueError(
                f"mat: group {info.label!r} has per-agent action bounds that differ; "
                "mat's decoder is shared by the agents and needs one set of bounds"
            )
        low, high = low[0], high[0]
    policy = MATPolicy(
        net,
        obs_keys,
        obs_ndims,
        info.key("action"),
        info.key("action_log_prob"),
        kind=kind,
        mask_key=info.key("action_mask") if info.has_action_mask else None,
        low=low,
        high=high,
    ).to(info.device)
    critic = MATValue(net, obs_keys, obs_ndims, info.key("state_value"))
    # one encoder pass gives the decoder's representations and the values
    loss = PPOLoss(policy, critic, c, value_from_actor=True)
    # the critic's parameters are the policy's (one network): one "actor" param group
    return policy_gradient_learner(info, c, loss, actor=policy, critic=critic, algorithm="mat")


SPEC = policy_gradient_spec(
    "mat",
    MATConfig,
    build_mat,
    "Multi-Agent Transformer: agents' actions decoded in sequence, trained with PPO.",
    # a transformer over the group's agents: no body to choose
    network_refusals=dict.fromkeys(
        NETWORKS,
        "mat is a transformer over the group's agents (MultiAgentTransformer, sized by "
        "embed_dim and n_blocks); it has no MLP body to replace",
    ),
)
