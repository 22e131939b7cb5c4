"""Which network body an algorithm's networks use, and the one place that builds it.

Every actor, critic and Q-network the builders of ``_policies.py`` and ``_critics.py``
make has a *body* chosen by the algorithm config's ``network`` field (``model.network``
on the command line): :data:`NETWORKS` lists them. :func:`make_network` builds the
body; :func:`~marl.algorithms.spec.check_network` (called by ``Algorithm.build`` for every
group, before the group's builder, with :func:`group_refusal` for what the env adds) refuses an algorithm-network-group combination that cannot work,
naming the algorithm, the network, the group and why. Which bodies an algorithm takes
whatever the env is its own to say (``AlgorithmSpec.network_refusals``);
``marl.algorithms.network_table`` collects them (``docs/basic/models.md`` prints it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms.settings import (
    NETWORKS,
    RECURRENT_BODIES,
    CentralCritic,
    NetworkSettings,
    NetworkSpec,
)
from marl.modules import MLP, MultiAgentCNN, MultiAgentDeepSets, MultiAgentGNN, MultiAgentMLP
from marl.specs import Composite

__all__ = [
    "ACTIVATIONS",
    "NETWORKS",
    "NetworkSpec",
    "activation_class",
    "cnn_layers",
    "group_refusal",
    "make_network",
    "observation_shapes",
]

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
    "elu": nn.ELU,
    "silu": nn.SiLU,
    "leaky_relu": nn.LeakyReLU,
}


def activation_class(name: str) -> type[nn.Module]:
    """The activation class named ``name`` (see :data:`ACTIVATIONS`)."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; expected one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def observation_shapes(info: GroupInfo) -> dict[str, tuple[int, ...]]:
    """The group's observation leaves and their per-agent shapes (env batch and agent dims
    removed): ``{"observation": shape}``, or one entry per leaf of a named observation."""
    spec, lead = info.observation_spec, info.feature_dims
    if isinstance(spec, Composite):
        return {
            "/".join(k if isinstance(k, tuple) else (k,)): tuple(spec[k].shape[lead:])
            for k in spec.keys(include_nested=True, leaves_only=True)
        }
    return {"observation": tuple(spec.shape[lead:])}


def group_refusal(info: GroupInfo, network: str, config: NetworkSettings | None) -> str | None:
    """Why ``network`` cannot serve this group (its env), or ``None``.

    Args:
        info: the group.
        network: the body's name.
        config: the algorithm config's network settings (its sharing and ``gnn`` options,
            and whether its critic is centralized); ``None``: the env's reasons only.
    """
    if network == "mlp":
        return None
    if network in RECURRENT_BODIES:
        if info.name is not None and config is not None and not config.share_policy_params:
            return (
                f"a {network} network is one cell shared by the group's agents (each agent "
                "its own hidden state); per-agent parameters are not built: set "
                "share_policy_params=True"
            )
        return None
    if network == "cnn":
        shapes = observation_shapes(info)
        images = [k for k, shape in shapes.items() if len(shape) == 3]
        if len(images) != 1:
            return (
                "a cnn reads one image observation per agent, [C, H, W] or [H, W, C], but the "
                f"group's observations have per-agent shapes {shapes}"
            )
    if network in ("deepsets", "gnn") and info.name is None:
        what = "pool over" if network == "deepsets" else "pass messages between"
        return f"a single-agent env (its root group) has no agents to {what}: use mlp"
    if network == "gnn" and config is not None and config.gnn_radius is not None:
        radius, position = config.gnn_radius, tuple(config.gnn_position)
        size = sum(math.prod(shape) for shape in observation_shapes(info).values())
        if not radius > 0:
            return f"gnn_radius must be > 0 (or None for a complete graph), got {radius!r}"
        if len(position) != 2 or not 0 <= position[0] < position[1] <= size:
            return (
                f"gnn_position must be (start, stop) within the group's {size} observation "
                f"features (where each agent's position is), got {position}"
            )
    if network in ("deepsets", "gnn", "cnn") and isinstance(config, CentralCritic):
        # a centralized critic: the body must read the group's own per-agent observations
        if config.use_state and info.has_state:
            return (
                "the centralized critic reads the env's global 'state', which has no agent "
                f"dim for a {network} body: set use_state=False to read the group's agents"
            )
        if config.critic_scope == "all" and len(info.groups) > 1:
            return (
                "critic_scope='all' feeds the centralized critic every group's agents, whose "
                f"observations differ in shape; a {network} body reads one group's agents: "
                "set critic_scope='group'"
            )
    return None


def image_layout(shape: Sequence[int]) -> bool:
    """Whether a per-agent image of ``shape`` is stored channels-last, ``[H, W, C]``.

    The channels are the end dim that differs more (as a ratio) from the middle dim, a
    spatial one: ``[10, 10, 5]`` (MAgent2), ``[88, 88, 3]`` (Melting Pot) and
    ``[5, 4, 26]`` (Overcooked's 26 channels over a 5 x 4 kitchen) are ``[H, W, C]``,
    ``[3, 84, 84]`` is ``[C, H, W]``; a tie (``[5, 5, 5]``) is read as torch's
    ``[C, H, W]``. (Taking the smaller end dim, as before, read Overcooked's kitchens,
    which have more channels than cells a side, as ``[C, H, W]``.)

    Examples:
        >>> image_layout((10, 10, 5)), image_layout((3, 84, 84)), image_layout((5, 4, 26))
        (True, False, True)
    """
    first, middle, last = (math.log(max(int(s), 1)) for s in shape)
    return abs(last - middle) > abs(first - middle)


def _image_slice(info: GroupInfo) -> tuple[tuple[int, ...], tuple[int, int], float]:
    """The group's image observation: its per-agent shape, its features in the
    concatenated observation (the builders concatenate the leaves in spec order) and the
    scale that brings its values to [0, 1] (``1 / 255`` for ``uint8`` pixels, else 1)."""
    start = 0
    spec = info.observation_spec
    for name, shape in observation_shapes(info).items():
        size = math.prod(shape)
        if len(shape) == 3:
            leaf = spec[tuple(name.split("/"))] if isinstance(spec, Composite) else spec
            scale = 1 / 255 if leaf.dtype == torch.uint8 else 1.0
            return shape, (start, start + size), scale
        start += size
    raise ValueError(f"group {info.label!r} has no image observation for a cnn")


def make_network(
    info: GroupInfo,
    in_features: int,
    out_features: int,
    cells: Sequence[int],
    activation: str,
    *,
    network: str | NetworkSpec = "mlp",
    centralized: bool = False,
    share_params: bool = True,
    layer_norm: bool = False,
) -> nn.Module:
    """The body of one of the group's networks: the one place that picks it.

    Input ``[*B, n_agents, in_features]`` for a group (``[*B, in_features]`` for the
    root of a single-agent env), output ``[*B, n_agents, out_features]``. The
    ``deepsets`` and ``gnn`` bodies also take the agents present, ``mask=[*B, n_agents]``
    (their ``takes_mask`` is True); the ``cnn`` body finds the image in its input where
    the group's observation puts it (the builders put the observation leaves first).

    Args:
        info: the group.
        in_features: input features per agent (all of them concatenated).
        out_features: outputs per agent.
        cells: hidden widths.
        activation: activation name (see :data:`ACTIVATIONS`).
        network: the body, one of :data:`NETWORKS`, or a :class:`NetworkSpec`.
        centralized: every agent's output depends on every agent's input (a critic).
        share_params: one set of parameters for every agent of the group.
        layer_norm: normalize the hidden layers (PQN's Q-networks).

    Returns:
        ``MLP`` for the root, ``MultiAgentMLP``, ``MultiAgentDeepSets``,
        ``MultiAgentGNN`` or ``MultiAgentCNN`` for a group.

    Raises:
        ValueError: for a network that is not one of :data:`NETWORKS`, or one that cannot
            serve the group (see :func:`check_network`).

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("picker")
        >>> type(make_network(info, 6, 2, [16], "tanh")).__name__
        'MultiAgentMLP'
        >>> type(make_network(info, 6, 2, [16], "tanh", network="gnn")).__name__
        'MultiAgentGNN'
    """
    spec = network if isinstance(network, NetworkSpec) else NetworkSpec(name=network)
    name = spec.name
    if name not in NETWORKS:
        raise ValueError(f"unknown network {name!r}; expected one of {list(NETWORKS)}")
    act = activation_class(activation)
    root = info.name is None
    if name == "mlp":
        if root:
            return MLP(
                in_features,
                out_features,
                num_cells=list(cells),
                activation=act,
                device=info.device,
                layer_norm=layer_norm,
            )
        return MultiAgentMLP(
            in_features,
            out_features,
            info.n_agents,
            centralized=centralized,
            share_params=share_params,
            num_cells=list(cells),
            activation=act,
            device=info.device,
            layer_norm=layer_norm,
        )
    why = (
        f"a {name} body is built by the recurrent builders (marl.algorithms._recurrent)"
        if name in RECURRENT_BODIES
        else None
    ) or group_refusal(info, name, None)
    if why is not None:
        raise ValueError(f"network {name!r} for group {info.label!r}: {why}")
    common = dict(
        centralized=centralized,
        share_params=share_params,
        num_cells=list(cells),
        activation=act,
        device=info.device,
    )
    if name == "deepsets":
        return MultiAgentDeepSets(
            in_features, out_features, info.n_agents, layer_norm=layer_norm, **common
        )
    if name == "gnn":
        return MultiAgentGNN(
            in_features,
            out_features,
            info.n_agents,
            position=spec.gnn_position if spec.gnn_radius is not None else None,
            radius=spec.gnn_radius,
            layer_norm=layer_norm,
            **common,
        )
    # cnn: the root's image is one agent's. See cnn_layers for the layers by image size.
    shape, image, scale = _image_slice(info)
    last = image_layout(shape)
    hw = shape[:2] if last else shape[1:]
    layers = cnn_layers(hw)
    body = MultiAgentCNN(
        in_features,
        out_features,
        1 if root else info.n_agents,
        image_shape=shape,
        image=image,
        image_scale=scale,
        channels_last=last,
        layer_norm=layer_norm,
        **layers,
        **common,
    )
    return _RootAgent(body) if root else body


def cnn_layers(hw: Sequence[int]) -> dict[str, Any]:
    """The ``cnn`` body's conv layers for images of ``hw`` (height, width) pixels.

    - 64 pixels a side and more (84x84 pixel tasks, Melting Pot's 88x88 frames): the
      first two layers of the 2013 Atari DQN (Mnih et al.), 16 8x8 filters at stride 4
      then 32 4x4 at stride 2: an 84x84 frame gives 2,592 features. Two 3x3 layers at
      stride 2 (used before) gave 6,400 and cost 6 times as much per frame (3.6 ms
      forward and backward against 0.57, one thread, measured): the 41x41x16 maps of
      their first layer dominate a PPO update's time and memory.
    - 32 to 63 pixels: two 3x3 layers of 16 filters at stride 2.
    - smaller (MAgent2's 10x10 views: 576 features): two 3x3 layers of 16 at stride 1,
      padded 1 under 5 cells a side (Overcooked's 5x4 ``cramped_room``), which two
      unpadded layers would use up.

    Returns:
        ``MultiAgentCNN``'s ``conv_cells``, ``kernel_size``, ``stride`` and ``padding``.

    Examples:
        >>> cnn_layers((84, 84))["kernel_size"], cnn_layers((10, 10))["kernel_size"]
        ([8, 4], 3)
    """
    side = min(int(x) for x in hw)
    if side >= 64:
        return {"conv_cells": [16, 32], "kernel_size": [8, 4], "stride": [4, 2], "padding": 0}
    return {
        "conv_cells": [16, 16],
        "kernel_size": 3,
        "stride": 2 if side >= 32 else 1,
        "padding": 1 if side < 5 else 0,
    }


class _RootAgent(nn.Module):
    """A one-agent body on the root's ``[*B, F]``: an agent dim added, then removed."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x.unsqueeze(-2)).squeeze(-2)
