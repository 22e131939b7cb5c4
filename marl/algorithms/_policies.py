"""Network builders shared by the algorithms: actors, critics and Q-networks for a group.

Every builder reads a :class:`~marl.algorithms.base.GroupInfo` and returns
``tensordict.nn`` modules that read and write the group's keys. The body of
every network is :func:`~marl.algorithms._networks.make_network`'s, chosen by the
``network`` argument (the algorithm config's ``network`` field): by default a
``MultiAgentMLP`` for a group (vectorized over agents, parameters shared or not) and
a plain ``MLP`` for the root of a single-agent env.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from tensordict import TensorDictBase
from tensordict.nn import (
    InteractionType,
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictModuleBase,
)
from tensordict.utils import NestedKey
from torch import distributions as D
from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms._networks import ACTIVATIONS, activation_class, make_network
from marl.algorithms.settings import NetworkSpec
from marl.modules import MaskedCategorical, OneHotCategorical, TanhNormal
from marl.specs import Bounded, Categorical, Composite, OneHot

__all__ = [
    "ACTIVATIONS",
    "GreedyAction",
    "IndependentNormal",
    "MaskedAgentValues",
    "action_bounds",
    "activation_class",
    "actor_distribution",
    "deterministic_actor",
    "group_module",
    "make_network",
    "observation_inputs",
    "q_value_network",
    "state_action_value_critic",
    "state_value_critic",
    "stochastic_actor",
]


class IndependentNormal(D.Independent):
    """A diagonal Normal over the last dim (for unbounded continuous actions)."""

    def __init__(self, loc: torch.Tensor, scale: torch.Tensor) -> None:
        super().__init__(D.Normal(loc, scale, validate_args=False), 1, validate_args=False)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.base_dist.loc


class CatNet(nn.Module):
    """Concatenate inputs over their feature dims, run ``net``, then ``post``.

    ``feature_ndims[i]`` trailing dims of input ``i`` are its features; they are
    flattened, so the same module works on ``[*B, T, ...]`` and flattened batches.
    With ``mask=True`` the last input is the group's agents present (``[*B, n_agents]``),
    given to ``net`` as ``mask`` (the ``deepsets`` and ``gnn`` bodies leave absent agents
    out of their pools and messages).
    """

    def __init__(
        self,
        net: nn.Module,
        feature_ndims: Sequence[int],
        post: nn.Module | None = None,
        *,
        mask: bool = False,
    ):
        super().__init__()
        self.net = net
        self.feature_ndims = tuple(feature_ndims)
        self.post = post
        self.mask = mask

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        mask = None
        if self.mask:
            *xs, mask = xs
        parts = []
        for x, nd in zip(xs, self.feature_ndims):
            if nd != 1:
                x = x.reshape(*x.shape[: x.ndim - nd], -1)
            parts.append(x.to(torch.get_default_dtype()) if not x.is_floating_point() else x)
        h = parts[0] if len(parts) == 1 else torch.cat(parts, -1)
        out = self.net(h) if mask is None else self.net(h, mask=mask)
        return out if self.post is None else self.post(out)


def group_module(
    info: GroupInfo,
    net: nn.Module,
    in_keys: Sequence[NestedKey],
    feature_ndims: Sequence[int],
    out_keys: Sequence[NestedKey],
    post: nn.Module | None = None,
) -> TensorDictModule:
    """``net`` on the concatenated ``in_keys``, written to ``out_keys``; a body that pools or
    passes messages over the agents (``takes_mask``) also reads the group's ``mask`` when
    the env writes one."""
    mask = bool(getattr(net, "takes_mask", False)) and info.has_agent_mask
    keys = [*in_keys, info.key("mask")] if mask else list(in_keys)
    return TensorDictModule(CatNet(net, feature_ndims, post, mask=mask), keys, list(out_keys))


class _Scale(nn.Module):
    """Map ``[-1, 1]`` to ``[low, high]``."""

    def __init__(self, low: torch.Tensor, high: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("center", (high + low) / 2)
        self.register_buffer("half_range", (high - low) / 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * self.half_range + self.center


def observation_inputs(info: GroupInfo) -> tuple[list[NestedKey], list[int], int]:
    """The group's observation leaves, their feature ndims and total feature size.

    A ``Composite`` observation (named observations) is read leaf by leaf and
    concatenated by the networks.
    """
    spec = info.observation_spec
    lead = info.feature_dims
    if isinstance(spec, Composite):
        keys, ndims, size = [], [], 0
        for leaf in spec.keys(include_nested=True, leaves_only=True):
            leaf = leaf if isinstance(leaf, tuple) else (leaf,)
            shape = spec[leaf].shape[lead:]
            keys.append(info.key("observation", *leaf))
            ndims.append(len(shape))
            size += math.prod(shape)
        return keys, ndims, size
    shape = spec.shape[lead:]
    return [info.key("observation")], [len(shape)], math.prod(shape)


def action_bounds(info: GroupInfo) -> tuple[torch.Tensor, torch.Tensor]:
    """``(low, high)`` of a bounded continuous action, without the env batch dims."""
    spec = info.action_spec
    if not isinstance(spec, Bounded):
        raise TypeError(f"group {info.label!r} has no action bounds ({type(spec).__name__})")
    index = (0,) * info.batch_dims
    low = torch.as_tensor(spec.low, dtype=torch.float32)
    high = torch.as_tensor(spec.high, dtype=torch.float32)
    if low.ndim >= info.batch_dims + 1:
        # copies, not views of the env's spec: the policy keeps only what it uses, and an
        # exported program stores them whole (marl.export)
        low, high = low[index].clone(), high[index].clone()
    return low.to(info.device), high.to(info.device)


def group_action_dim(info: GroupInfo) -> int:
    return math.prod(info.action_shape) if info.action_shape else 1


def actor_distribution(
    info: GroupInfo, log_prob_key: str
) -> tuple[int, nn.Module | None, list, ProbabilisticTensorDictModule]:
    """What a stochastic actor's network must output, and the distribution module reading it.

    Shared by :func:`stochastic_actor` and the recurrent actors, so that every body gets the
    same distribution for the same action spec.

    Returns:
        ``(out_features, post, out_keys, head)``: the network's output width, a module to
        run on its output (``NormalParamExtractor`` for continuous actions, else ``None``),
        the keys it writes, and the ``ProbabilisticTensorDictModule`` sampling the action.
    """
    key, spec = info.key, info.action_spec
    kwargs: dict = {}
    if info.action_space == "continuous":
        out, post, out_keys = (
            2 * group_action_dim(info),
            NormalParamExtractor(),
            [key("loc"), key("scale")],
        )
        dist_in = {"loc": key("loc"), "scale": key("scale")}
        if isinstance(spec, Bounded):
            low, high = action_bounds(info)
            dist_cls, kwargs = TanhNormal, {"low": low, "high": high}
        else:
            dist_cls = IndependentNormal
    elif isinstance(spec, (Categorical, OneHot)):
        out, post, out_keys = info.n_actions, None, [key("logits")]
        dist_in = {"logits": key("logits")}
        if info.has_action_mask:
            dist_in["mask"] = key("action_mask")
        dist_cls = OneHotCategorical if isinstance(spec, OneHot) else MaskedCategorical
    else:
        raise TypeError(
            f"group {info.label!r}: no policy distribution for {type(spec).__name__} actions"
        )
    head = ProbabilisticTensorDictModule(
        dist_in,
        [key("action")],
        distribution_class=dist_cls,
        distribution_kwargs=kwargs,
        return_log_prob=True,
        log_prob_key=key(log_prob_key),
        default_interaction_type=InteractionType.RANDOM,
    )
    return out, post, out_keys, head


def stochastic_actor(
    info: GroupInfo,
    cells: Sequence[int],
    activation: str,
    *,
    share_params: bool = True,
    log_prob_key: str = "action_log_prob",
    network: str | NetworkSpec = "mlp",
) -> ProbabilisticTensorDictSequential:
    """A sampling policy writing the group's ``action`` and its log-probability.

    - Bounded continuous actions: ``TanhNormal`` rescaled to the bounds.
    - Unbounded continuous actions: a diagonal Normal.
    - Index actions: ``MaskedCategorical`` (with the group's ``action_mask`` if any).
    - One-hot actions: ``OneHotCategorical``.

    Args:
        info: the group.
        cells: hidden widths.
        activation: activation name (see ``ACTIVATIONS``).
        share_params: share the parameters over the group's agents.
        log_prob_key: the leaf name of the log-probability.
        network: the body (see :data:`~marl.algorithms._networks.NETWORKS`).

    Returns:
        A module with ``get_dist(td)``, as the losses expect.
    """
    out_features, post, out_keys, head = actor_distribution(info, log_prob_key)
    options = BodyOptions(network, share_params)
    body = observation_network(
        info, out_features, list(out_keys), cells, activation, options, post=post
    )
    return ProbabilisticTensorDictSequential(body, head)


@dataclass(frozen=True)
class BodyOptions:
    """How :func:`~marl.algorithms._networks.make_network` builds a body: which one, and
    whether its parameters are shared over the agents, it reads every agent
    (``centralized``) or it normalizes its hidden layers."""

    network: str | NetworkSpec = "mlp"
    share_params: bool = True
    centralized: bool = False
    layer_norm: bool = False


def observation_network(
    info: GroupInfo,
    out_features: int,
    out_key: NestedKey | Sequence[NestedKey],
    cells: Sequence[int],
    activation: str,
    options: BodyOptions = BodyOptions(),
    *,
    with_action: bool = False,
    post: nn.Module | None = None,
) -> TensorDictModule:
    """A network of the group's observations (and, ``with_action``, its action) writing
    ``out_features`` per agent to ``out_key`` (or several keys): every network below is
    one of these."""
    in_keys, ndims, in_size = observation_inputs(info)
    if with_action:
        in_keys, ndims = [*in_keys, info.key("action")], [*ndims, len(info.action_shape)]
        in_size += group_action_dim(info)
    o = options
    net = make_network(
        info,
        in_size,
        out_features,
        cells,
        activation,
        network=o.network,
        share_params=o.share_params,
        centralized=o.centralized,
        layer_norm=o.layer_norm,
    )
    out_keys = list(out_key) if isinstance(out_key, list) else [out_key]
    return group_module(info, net, in_keys, ndims, out_keys, post)


def deterministic_actor(
    info: GroupInfo,
    cells: Sequence[int],
    activation: str,
    *,
    share_params: bool = True,
    network: str | NetworkSpec = "mlp",
) -> TensorDictModule:
    """``a = low + (tanh(net(obs)) + 1) * (high - low) / 2`` for DDPG/TD3."""
    options = BodyOptions(network, share_params)
    post = _Scale(*action_bounds(info))
    return observation_network(
        info, group_action_dim(info), info.key("action"), cells, activation, options, post=post
    )


def state_value_critic(
    info: GroupInfo,
    cells: Sequence[int],
    activation: str,
    *,
    centralized: bool = False,
    share_params: bool = True,
    network: str | NetworkSpec = "mlp",
) -> TensorDictModule:
    """``V(s)`` written to the group's ``state_value`` (``[*B, (n_agents,) 1]``)."""
    options = BodyOptions(network, share_params, centralized)
    return observation_network(info, 1, info.key("state_value"), cells, activation, options)


def state_action_value_critic(
    info: GroupInfo,
    cells: Sequence[int],
    activation: str,
    *,
    centralized: bool = False,
    share_params: bool = True,
    network: str | NetworkSpec = "mlp",
) -> TensorDictModule:
    """``Q(s, a)`` from observation and continuous action, written to ``state_action_value``."""
    options, key = BodyOptions(network, share_params, centralized), "state_action_value"
    return observation_network(info, 1, info.key(key), cells, activation, options, with_action=True)


def q_value_network(
    info: GroupInfo,
    cells: Sequence[int],
    activation: str,
    *,
    share_params: bool = True,
    layer_norm: bool = False,
    network: str | NetworkSpec = "mlp",
) -> TensorDictModule:
    """``Q(s, .)`` over every discrete action, written to ``action_value``."""
    options = BodyOptions(network, share_params, layer_norm=layer_norm)
    key = info.key("action_value")
    return observation_network(info, info.n_actions, key, cells, activation, options)


class GreedyAction(TensorDictModuleBase):
    """Write ``argmax_a Q(s, a)`` over legal actions as the group's action.

    Args:
        info: the group (index or one-hot actions; mask read when the env has one).
    """

    def __init__(self, info: GroupInfo) -> None:
        super().__init__()
        self.value_key = info.key("action_value")
        self.mask_key = info.key("action_mask") if info.has_action_mask else None
        self.action_key = info.key("action")
        self.one_hot = isinstance(info.action_spec, OneHot)
        self.in_keys = [self.value_key] + ([self.mask_key] if self.mask_key else [])
        self.out_keys = [self.action_key]

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        values = tensordict.get(self.value_key)
        if self.mask_key is not None:
            values = values.masked_fill(~tensordict.get(self.mask_key), float("-inf"))
        index = values.argmax(-1)
        if self.one_hot:
            action = nn.functional.one_hot(index, values.shape[-1]).to(values.dtype)
        else:
            action = index
        tensordict.set(self.action_key, action)
        return tensordict


class MaskedAgentValues(TensorDictModuleBase):
    """Zero the action values of masked-out agents (the group's ``"mask"``).

    A mixer sums over every agent of the group: zeroing a dead or non-acting
    agent's values removes it from ``Q_tot``, from the target and from the gradients.

    Args:
        qnet: the per-agent Q-network writing ``(group, "action_value")``.
        info: the group (with ``has_agent_mask``).
    """

    def __init__(self, qnet: TensorDictModuleBase, info: GroupInfo) -> None:
        super().__init__()
        self.qnet = qnet
        self.mask_key = info.key("mask")
        self.value_key = info.key("action_value")
        self.in_keys = [*qnet.in_keys, self.mask_key]
        self.out_keys = [self.value_key]

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        tensordict = self.qnet(tensordict)
        mask = tensordict.get(self.mask_key).bool().unsqueeze(-1)
        values = tensordict.get(self.value_key)
        tensordict.set(self.value_key, values.masked_fill(~mask, 0.0))
        return tensordict
