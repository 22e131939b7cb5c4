"""``MultiAgentConvNet``: a CNN per agent, vectorized with grouped convolutions."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["MultiAgentConvNet"]


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
    ) -> None:
        super().__init__()
        self.n_agents, self.in_channels = n_agents, in_channels
        self.centralized, self.share_params = centralized, share_params
        depth = len(num_cells)
        kernels = _per_layer(kernel_sizes, depth, "kernel_sizes")
        strides_ = _per_layer(strides, depth, "strides")
        groups = 1 if share_params else n_agents
        c_in = in_channels * (n_agents if centralized else 1)
        layers: list[nn.Module] = []
        for c_out, k, s in zip(num_cells, kernels, strides_):
            layers += [nn.Conv2d(c_in * groups, c_out * groups, k, s, groups=groups), activation()]
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
