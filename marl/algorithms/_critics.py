"""Centralized critics: value and Q networks that see a whole group, or every group.

MAPPO's ``V``, MADDPG's and MASAC's ``Q`` read the env's global ``"state"``, the
group's agents (``critic_scope="group"``) or every group's agents, whatever
their observation shapes (``critic_scope="all"``), and give each agent of the
group one output (``MultiAgentMLP``, parameters shared or per agent). With another
body (``network="deepsets"``, ``"gnn"``, ``"cnn"``) the critic reads the group's agents
apart, each its observation (and action), and the body pools them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from tensordict.nn import TensorDictModule
from tensordict.utils import NestedKey
from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms._networks import activation_class, make_network
from marl.algorithms._policies import group_action_dim, group_module, observation_inputs
from marl.algorithms.settings import (
    CRITIC_SCOPES,
    CentralCritic,
    NetworkSpec,
    check_critic_scope,
)
from marl.modules import MLP
from marl.specs import Composite

__all__ = [
    "CRITIC_SCOPES",
    "centralized_critic",
    "centralized_critic_of",
    "centralized_inputs",
    "check_critic_scope",
]


class _CentralNet(nn.Module):
    """Flatten every input (agent dims included), concatenate, one output per agent.

    ``flat_ndims[i]`` trailing dims of input ``i`` are flattened: the features, plus
    the agent dim for a group's entries, giving ``h = [*B, F]``, the same for every
    agent. With parameters shared over the agents, ``net`` (an ``MLP``) runs once on
    ``h`` and its output is expanded to ``[*B, n_agents, out]`` (a view); with
    per-agent parameters, ``h`` is expanded to ``[*B, n_agents, F]`` for ``net`` (a
    ``MultiAgentMLP``) so that each agent's output differs.
    """

    def __init__(
        self, net: nn.Module, flat_ndims: Sequence[int], n_agents: int, *, shared: bool
    ) -> None:
        super().__init__()
        self.net = net
        self.flat_ndims = tuple(flat_ndims)
        self.n_agents = n_agents
        self.shared = shared

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        parts = []
        for x, nd in zip(xs, self.flat_ndims):
            x = x.reshape(*x.shape[: x.ndim - nd], -1)
            parts.append(x.to(torch.get_default_dtype()) if not x.is_floating_point() else x)
        h = torch.cat(parts, -1) if len(parts) > 1 else parts[0]
        if self.shared:
            out = self.net(h)  # computed once, not once per agent
            return out.unsqueeze(-2).expand(*out.shape[:-1], self.n_agents, out.shape[-1])
        return self.net(h.unsqueeze(-2).expand(*h.shape[:-1], self.n_agents, h.shape[-1]))


def _group_leaves(spec, lead: int, prefix: tuple[str, ...]) -> list[tuple[NestedKey, int, int]]:
    """``(key, flat_ndims, size)`` of an observation spec's leaves; ``lead`` dims kept."""
    items = (
        [
            ((*prefix, *(k if isinstance(k, tuple) else (k,))), spec[k])
            for k in spec.keys(include_nested=True, leaves_only=True)
        ]
        if isinstance(spec, Composite)
        else [(prefix, spec)]
    )
    return [(key, len(leaf.shape) - lead, math.prod(leaf.shape[lead:])) for key, leaf in items]


def centralized_inputs(
    info: GroupInfo, scope: str = "group", use_state: bool = True
) -> tuple[list[NestedKey], list[int], int]:
    """What a centralized critic of ``info``'s group reads.

    Args:
        info: the group.
        scope: ``"group"`` (the group's agents) or ``"all"`` (every group's agents,
            whatever their observation shapes).
        use_state: with ``scope="group"``, read the env's global ``"state"`` instead
            of the observations when the env has one.

    Returns:
        ``(keys, flat_ndims, size)``: the entries, how many trailing dims of each are
        flattened (features, and the agent dim of group entries), and the total size.

    Raises:
        ValueError: on an unknown scope.
    """
    check_critic_scope(scope)
    spec = info.env_observation_spec
    b = info.batch_dims
    if scope == "group" and use_state and info.has_state:
        leaves = _group_leaves(spec["state"], b, ("state",))
    else:
        groups = info.groups if scope == "all" else (info.name,)
        # a group's leaves keep the env batch dims only: the agent dim is flattened too
        leaves = [
            leaf
            for g in groups
            for leaf in _group_leaves(spec[g, "observation"], b, (g, "observation"))
        ]
    keys = [k[0] if len(k) == 1 else k for k, _, _ in leaves]
    return keys, [nd for _, nd, _ in leaves], sum(size for _, _, size in leaves)


def centralized_critic(
    info: GroupInfo,
    cells: Sequence[int],
    activation: str,
    out_key: str,
    *,
    out_features: int = 1,
    with_action: bool = False,
    scope: str = "group",
    use_state: bool = True,
    share_params: bool = True,
    network: str | NetworkSpec = "mlp",
) -> TensorDictModule:
    """A critic that sees the whole group (or every group), one output per agent.

    Covers MAPPO's ``V`` (``out_key="state_value"``), MADDPG's and MASAC's ``Q(s, a)``
    (``with_action=True``: the group's joint action is an input) and MASAC's discrete
    ``Q(s, .)`` (``out_key="action_value"``, ``out_features=n_actions``).

    Args:
        info: the group (a single-agent root gets a plain per-agent critic input).
        cells: hidden widths.
        activation: activation name.
        out_key: the group entry written (``[*B, n_agents, out_features]``).
        out_features: outputs per agent.
        with_action: also read the group's joint action.
        scope: ``"group"`` or ``"all"`` (see :func:`centralized_inputs`).
        use_state: prefer the env's global ``"state"`` with ``scope="group"``.
        share_params: one set of critic parameters for every agent of the group.
        network: the body (see :data:`~marl.algorithms._networks.NETWORKS`).

    Returns:
        A ``TensorDictModule`` writing ``(group, out_key)``.

    Examples:
        >>> from marl.algorithms.base import group_infos
        >>> from marl.testing import MultiAgentFakeEnv
        >>> env = MultiAgentFakeEnv(num_envs=4)
        >>> info = group_infos(env)["picker"]
        >>> critic = centralized_critic(info, [32], "tanh", "state_value", scope="all")
        >>> critic(env.reset())["picker", "state_value"].shape
        torch.Size([4, 3, 1])
    """
    if info.name is None:
        raise ValueError("a centralized critic needs an env with agent groups, got a root env")
    keys, ndims, size = centralized_inputs(info, scope, use_state)
    if with_action:
        keys.append(info.key("action"))
        ndims.append(len(info.action_shape) + 1)
        size += info.n_agents * group_action_dim(info)
    spec = network if isinstance(network, NetworkSpec) else NetworkSpec(name=network)
    if spec.name != "mlp":
        # deepsets, gnn, cnn: the group's agents stay apart, each with its observation
        # (and action); the body pools them (check_network refuses a state or every group)
        in_keys, obs_ndims, in_size = observation_inputs(info)
        if with_action:
            in_keys.append(info.key("action"))
            obs_ndims.append(len(info.action_shape))
            in_size += group_action_dim(info)
        net = make_network(
            info,
            in_size,
            out_features,
            cells,
            activation,
            network=spec,
            centralized=True,
            share_params=share_params,
        )
        return group_module(info, net, in_keys, obs_ndims, [info.key(out_key)])
    if share_params:
        # one MLP on the group's joint input, its output shared by the agents
        act = activation_class(activation)
        net = MLP(size, out_features, num_cells=list(cells), activation=act, device=info.device)
    else:
        net = make_network(info, size, out_features, cells, activation, share_params=False)
    central = _CentralNet(net, ndims, info.n_agents, shared=share_params)
    return TensorDictModule(central, keys, [info.key(out_key)])


def centralized_critic_of(
    info: GroupInfo,
    config: CentralCritic,
    out_key: str,
    *,
    out_features: int = 1,
    with_action: bool = False,
) -> TensorDictModule:
    """:func:`centralized_critic` as an algorithm config sets it up (MAPPO's, HAPPO's,
    MADDPG's, MASAC's): what it sees from the config's
    :class:`~marl.algorithms.settings.CentralCritic`, its body from ``critic_body()``.

    Args:
        info: the group.
        config: a config composing :class:`~marl.algorithms.settings.CentralCritic` and
            :class:`~marl.algorithms.settings.ActorCriticNetworks`.
        out_key: the group entry written.
        out_features: outputs per agent.
        with_action: also read the group's joint action.

    Returns:
        A ``TensorDictModule`` writing ``(group, out_key)``.
    """
    return centralized_critic(
        info,
        out_key=out_key,
        out_features=out_features,
        with_action=with_action,
        scope=config.critic_scope,
        use_state=config.use_state,
        **config.critic_body(),
    )
