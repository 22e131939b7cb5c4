"""``MultiAgentConvNet``: a CNN per agent, vectorized with grouped convolutions, and
``MultiAgentCNN``: that CNN and an MLP head, the ``cnn`` body of the algorithms."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from marl.modules.mlp import MultiAgentMLP

__all__ = ["MultiAgentCNN", "MultiAgentConvNet"]


def _per_layer(x: int | Sequence[int], n: int, name: str) -> list[int]:
    if isinstance(x, int):
        return [x] * n
    if len(x) != n:
        raise ValueError(f"{name} has {len(x)} entries, expected {n} (one per conv layer)")
    return list(x)


class MultiAgentConvNet(nn.Module):
    """Per-agent convolutional encoders over ``[*B, n_agents, C, H, W]`` images.

    Output: ``[*B, n_agents, features]`` (the flattened final feature maps).

    - ``share_params=False``: agents are stacked along channels and every layer is one
      ``Conv2d`` with ``groups=n_agents``: independent filters per agent, one call.
    - ``share_params=True``: agents are folded into the batch and share one CNN.
    - ``centralized=True``: each agent's CNN sees all agents' images (stacked along
      channels). With shared parameters, the single output is broadcast to all agents.

    Args:
        n_agents: number of agents.
        in_channels: image channels per agent.
        centralized: whether each agent sees all agents' images.
        share_params: whether agents share the CNN.
        num_cells: output channels per layer (its length sets the depth).
        kernel_sizes: kernel size, or one per layer.
        strides: stride, or one per layer.
        activation: activation class.
        paddings: zero padding on each side, or one per layer (``1`` keeps a 3x3
            conv's output the size of its input at stride 1).

    Examples:
        >>> net = MultiAgentConvNet(2, 3, centralized=False, share_params=False,
        ...                         num_cells=[8, 8], kernel_sizes=3, strides=1)
        >>> net(torch.zeros(4, 2, 3, 7, 7)).shape
        torch.Size([4, 2, 72])
    """

    def __init__(
        self,
        n_agents: int,
        in_channels: int,
        *,
        centralized: bool,
        share_params: bool,
        num_cells: Sequence[int] = (32, 32, 32),
        kernel_sizes: int | Sequence[int] = 3,
        strides: int | Sequence[int] = 1,
        activation: type[nn.Module] = nn.ELU,
        paddings: int | Sequence[int] = 0,
    ) -> None:
        super().__init__()
        self.n_agents, self.in_channels = n_agents, in_channels
        self.centralized, self.share_params = centralized, share_params
        depth = len(num_cells)
        kernels = _per_layer(kernel_sizes, depth, "kernel_sizes")
        strides_ = _per_layer(strides, depth, "strides")
        paddings_ = _per_layer(paddings, depth, "paddings")
        groups = 1 if share_params else n_agents
        c_in = in_channels * (n_agents if centralized else 1)
        layers: list[nn.Module] = []
        for c_out, k, s, p in zip(num_cells, kernels, strides_, paddings_):
            conv = nn.Conv2d(c_in * groups, c_out * groups, k, s, padding=p, groups=groups)
            layers += [conv, activation()]
            c_in = c_out
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Encode the agents' images.

        Args:
            x: ``[*B, n_agents, C, H, W]``.

        Returns:
            ``[*B, n_agents, features]``.
        """
        n, c = self.n_agents, self.in_channels
        if x.ndim < 4 or x.shape[-4:-2] != (n, c):
            raise ValueError(
                f"MultiAgentConvNet expected [*B, {n}, {c}, H, W], got {tuple(x.shape)}"
            )
        batch, hw = x.shape[:-4], x.shape[-2:]
        x = x.reshape(-1, n, c, *hw)
        N = x.shape[0]
        if self.share_params and not self.centralized:
            out = self.net(x.reshape(N * n, c, *hw)).reshape(N, n, -1)
        elif self.share_params:
            out = self.net(x.reshape(N, n * c, *hw)).reshape(N, 1, -1).expand(N, n, -1)
        elif self.centralized:
            # every agent group gets the full n*c channel stack
            out = self.net(x.reshape(N, 1, n * c, *hw).expand(N, n, n * c, *hw).reshape(N, -1, *hw))
            out = out.reshape(N, n, -1)
        else:
            out = self.net(x.reshape(N, n * c, *hw)).reshape(N, n, -1)
        return out.reshape(*batch, n, out.shape[-1])


class MultiAgentCNN(nn.Module):
    """Per-agent image encoders (:class:`MultiAgentConvNet`), then a per-agent MLP head.

    Reads flat per-agent inputs ``[*B, n_agents, F]`` in which the features
    ``image[0]:image[1]`` are the agent's image, stored ``[C, H, W]`` or, with
    ``channels_last``, ``[H, W, C]`` (MAgent2's and Melting Pot's layout); the other
    features (another observation, an action) are concatenated to the image's encoding
    before the head. This lets the networks' builders feed every body the same
    concatenated input.

    Args:
        n_agent_inputs: per-agent input features ``F``.
        n_agent_outputs: per-agent output features.
        n_agents: agents in the group.
        image_shape: the image's shape as stored (``[C, H, W]``, or ``[H, W, C]``).
        image: ``(start, stop)``: where the image's features are in the input.
        image_scale: a factor on the image's values first (``1 / 255`` brings ``uint8``
            pixels to [0, 1], where the default initialization expects inputs).
        channels_last: the image is stored ``[H, W, C]``.
        centralized: every agent's head sees every agent's image (a critic).
        share_params: one CNN and head for every agent.
        conv_cells: output channels of the conv layers.
        stride: the conv layers' stride, or one per layer (2 shrinks a large image's
            features 4x a layer).
        padding: the conv layers' zero padding (0: unpadded; 1 keeps the image's size
            at stride 1, for images too small to lose 2 cells a side per layer).
        kernel_size: the conv layers' kernel size, or one per layer (3: 3x3).
        num_cells: hidden widths of the head.
        activation: activation class.
        device: where to create the parameters.
        layer_norm: normalize the head's hidden layers (as ``MultiAgentMLP``'s).

    Examples:
        >>> net = MultiAgentCNN(5 * 5 * 3 + 2, 4, n_agents=2, image_shape=(5, 5, 3),
        ...                     image=(0, 75), channels_last=True, centralized=False,
        ...                     share_params=True, conv_cells=[8], num_cells=[16])
        >>> net(torch.zeros(7, 2, 77)).shape
        torch.Size([7, 2, 4])
    """

    def __init__(
        self,
        n_agent_inputs: int,
        n_agent_outputs: int,
        n_agents: int,
        *,
        image_shape: Sequence[int],
        image: tuple[int, int],
        image_scale: float = 1.0,
        channels_last: bool,
        centralized: bool,
        share_params: bool,
        conv_cells: Sequence[int] = (32, 32),
        stride: int | Sequence[int] = 1,
        padding: int = 0,
        kernel_size: int | Sequence[int] = 3,
        num_cells: Sequence[int] = (64, 64),
        activation: type[nn.Module] = nn.ELU,
        device: torch.device | str | None = None,
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        shape = tuple(int(s) for s in image_shape)
        if len(shape) != 3 or image[1] - image[0] != shape[0] * shape[1] * shape[2]:
            raise ValueError(
                f"image {image} must span the {shape} image's features (3 dims), got "
                f"{image[1] - image[0]} features"
            )
        self.n_agents, self.image, self.channels_last = n_agents, image, channels_last
        self.image_scale = float(image_scale)
        self.shape = shape
        channels, h, w = (shape[2], shape[0], shape[1]) if channels_last else shape
        kernels = _per_layer(kernel_size, len(conv_cells), "kernel_size")
        strides = _per_layer(stride, len(conv_cells), "stride")
        out_h, out_w = h, w
        for k, s in zip(kernels, strides):  # each conv: (size + 2 * padding - k) // s + 1
            out_h = (out_h + 2 * padding - k) // s + 1
            out_w = (out_w + 2 * padding - k) // s + 1
        if min(out_h, out_w) < 1:
            raise ValueError(
                f"a {h}x{w} image is too small for {len(conv_cells)} convs (kernel sizes "
                f"{kernels}, strides {strides}, padding {padding})"
            )
        self.conv = MultiAgentConvNet(
            n_agents,
            channels,
            centralized=centralized,
            share_params=share_params,
            num_cells=list(conv_cells),
            kernel_sizes=kernels,
            strides=strides,
            activation=activation,
            paddings=padding,
        ).to(device)
        size = conv_cells[-1] * out_h * out_w
        rest = n_agent_inputs - (image[1] - image[0])
        self.head = MultiAgentMLP(
            size + rest * (n_agents if centralized else 1),
            n_agent_outputs,
            n_agents,
            centralized=False,
            share_params=share_params,
            num_cells=list(num_cells),
            activation=activation,
            device=device,
            layer_norm=layer_norm,
        )
        self.centralized = centralized

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[*B, n_agents, F]`` to ``[*B, n_agents, out]``."""
        start, stop = self.image
        img = x[..., start:stop].reshape(*x.shape[:-1], *self.shape)
        if self.image_scale != 1.0:
            img = img * self.image_scale
        if self.channels_last:
            img = img.movedim(-1, -3)
        feats = self.conv(img)
        rest = torch.cat([x[..., :start], x[..., stop:]], -1)
        if rest.shape[-1]:
            if self.centralized:  # every agent's head sees every agent's other features
                rest = rest.flatten(-2).unsqueeze(-2).expand(*rest.shape[:-2], self.n_agents, -1)
            feats = torch.cat([feats, rest], -1)
        return self.head(feats)
