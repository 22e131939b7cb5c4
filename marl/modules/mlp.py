"""Multi-layer perceptrons: a plain ``MLP`` and the vectorized ``MultiAgentMLP``."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["MLP", "MultiAgentMLP"]


def _cells(depth: int | None, num_cells: int | Sequence[int]) -> list[int]:
    """Hidden widths: ``depth`` copies of an int, or the given sequence."""
    if isinstance(num_cells, int):
        depth = 2 if depth is None else depth
        if depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        return [num_cells] * depth
    cells = [int(c) for c in num_cells]
    if depth is not None and len(cells) != depth:
        raise ValueError(f"num_cells has {len(cells)} entries but depth={depth}")
    return cells


class MLP(nn.Sequential):
    """A plain MLP: ``depth`` hidden layers of ``num_cells`` units, then a linear output.

    Args:
        in_features: size of the last input dim.
        out_features: size of the last output dim.
        depth: number of hidden layers (default 2; must match ``num_cells`` if a sequence).
        num_cells: hidden width, or one width per hidden layer.
        activation: activation class, instantiated after each hidden layer.
        activate_last: also apply the activation to the output.
        device: where to create the parameters.
        layer_norm: normalize each hidden layer's pre-activations over its features
            (no learned scale and shift: the next layer's weights absorb them). PQN's
            Q-networks need it to train without a target network.

    Examples:
        >>> net = MLP(4, 2, depth=2, num_cells=32)
        >>> net(torch.zeros(10, 4)).shape
        torch.Size([10, 2])
        >>> MLP(4, 2, depth=1, num_cells=8, layer_norm=True)
        MLP(
          (0): Linear(in_features=4, out_features=8, bias=True)
          (1): LayerNorm((8,), eps=1e-05, elementwise_affine=False, bias=False)
          (2): Tanh()
          (3): Linear(in_features=8, out_features=2, bias=True)
        )
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        depth: int | None = None,
        num_cells: int | Sequence[int] = 256,
        activation: type[nn.Module] = nn.Tanh,
        activate_last: bool = False,
        device: torch.device | str | None = None,
        layer_norm: bool = False,
    ) -> None:
        cells = _cells(depth, num_cells)
        sizes = [in_features, *cells, out_features]
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(itertools.pairwise(sizes)):
            layers.append(nn.Linear(a, b, device=device))
            hidden = i < len(sizes) - 2
            if hidden and layer_norm:
                layers.append(nn.LayerNorm(b, elementwise_affine=False, device=device))
            if hidden or activate_last:
                layers.append(activation())
        super().__init__(*layers)
        self.in_features = in_features
        self.out_features = out_features


# Activation elements per CPU chunk of MultiAgentMLP (2 MB of float32): small enough
# to stay in cache on common CPUs (see MultiAgentMLP.forward).
_CPU_CHUNK_ELEMENTS = 1 << 19


class MultiAgentMLP(nn.Module):
    """An MLP per agent, evaluated for all agents in one vectorized call.

    Input ``[*B, n_agents, n_agent_inputs]``, output ``[*B, n_agents, n_agent_outputs]``.

    - ``share_params=True``: one MLP applied to every agent.
    - ``share_params=False``: each layer keeps stacked weights ``[n_agents, in, out]`` and
      runs one batched matmul (``torch.baddbmm``) for all agents; no Python loop over
      agents. Every agent's parameters are drawn independently.
    - ``centralized=True``: every agent receives the concatenation of all agents'
      inputs (a centralized critic). With shared parameters the output is then the same
      for every agent, computed once.

    Args:
        n_agent_inputs: per-agent input features.
        n_agent_outputs: per-agent output features.
        n_agents: number of agents (size of the agent dim, ``-2`` of the input).
        centralized: whether every agent sees all agents' inputs.
        share_params: whether all agents use the same parameters.
        depth: number of hidden layers (default 2; must match ``num_cells`` if a sequence).
        num_cells: hidden width, or one width per hidden layer.
        activation: activation class.
        device: where to create the parameters.
        layer_norm: normalize each hidden layer over its features, per agent (as
            :class:`MLP`'s ``layer_norm``).

    Examples:
        >>> net = MultiAgentMLP(6, 2, n_agents=3, centralized=False, share_params=False,
        ...                     depth=2, num_cells=32)
        >>> net(torch.zeros(5, 3, 6)).shape
        torch.Size([5, 3, 2])
    """

    def __init__(
        self,
        n_agent_inputs: int,
        n_agent_outputs: int,
        n_agents: int,
        *,
        centralized: bool,
        share_params: bool,
        depth: int | None = None,
        num_cells: int | Sequence[int] = 256,
        activation: type[nn.Module] = nn.Tanh,
        device: torch.device | str | None = None,
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        if n_agents < 1:
            raise ValueError(f"n_agents must be >= 1, got {n_agents}")
        self.n_agents = n_agents
        self.n_agent_inputs = n_agent_inputs
        self.n_agent_outputs = n_agent_outputs
        self.centralized = centralized
        self.share_params = share_params
        in_features = n_agent_inputs * (n_agents if centralized else 1)
        cells = _cells(depth, num_cells)
        sizes = [in_features, *cells, n_agent_outputs]
        self.activation = activation()
        self.layer_norm = layer_norm
        if share_params:
            self.mlp = MLP(
                in_features,
                n_agent_outputs,
                depth=len(cells),
                num_cells=cells,
                activation=activation,
                device=device,
                layer_norm=layer_norm,
            )
        else:
            self.weights = nn.ParameterList(
                nn.Parameter(torch.empty(n_agents, a, b, device=device))
                for a, b in itertools.pairwise(sizes)
            )
            self.biases = nn.ParameterList(
                nn.Parameter(torch.empty(n_agents, 1, b, device=device)) for b in sizes[1:]
            )
            self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draw every parameter (independently per agent), like ``nn.Linear``'s init."""
        if self.share_params:
            for m in self.mlp.modules():
                if isinstance(m, nn.Linear):
                    m.reset_parameters()
            return
        with torch.no_grad():
            for w, b in zip(self.weights, self.biases):
                bound = 1.0 / math.sqrt(w.shape[1])
                w.uniform_(-bound, bound)
                b.uniform_(-bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the per-agent MLPs.

        Args:
            x: ``[*B, n_agents, n_agent_inputs]``.

        Returns:
            ``[*B, n_agents, n_agent_outputs]``.
        """
        if x.ndim < 2 or x.shape[-2:] != (self.n_agents, self.n_agent_inputs):
            raise ValueError(
                f"MultiAgentMLP expected input [*B, {self.n_agents}, {self.n_agent_inputs}], "
                f"got {tuple(x.shape)}"
            )
        batch = x.shape[:-2]
        if self.centralized:
            x = x.flatten(-2)  # [*B, n * in]: every agent sees everything
            if self.share_params:
                out = self.mlp(x)
                return out.unsqueeze(-2).expand(*batch, self.n_agents, self.n_agent_outputs)
            h = x.reshape(1, -1, x.shape[-1]).expand(self.n_agents, -1, -1)
        else:
            if self.share_params:
                return self.mlp(x)
            # agent-major layout [n, N, in] so each layer is a single baddbmm.
            h = x.reshape(-1, self.n_agents, self.n_agent_inputs).transpose(0, 1)
        rows = h.shape[1]
        chunk = self._cpu_chunk_rows()
        # not on a symbolic row count (torch.export or torch.compile with a dynamic batch):
        # a branch on it would fix the traced program to one side of it, and an exported
        # policy would then refuse batches above the chunk size
        if h.device.type == "cpu" and isinstance(rows, int) and rows > chunk:
            # On a CPU, large batches are memory bound: activations of all agents at
            # once ([n, N, cells]) fall out of cache, and the elementwise ops and the
            # backward then stream them from RAM. Row chunks that fit in cache keep
            # the vectorized net at least as fast as a loop over per-agent MLPs.
            h = torch.cat([self._layers(c) for c in h.split(chunk, dim=1)], dim=1)
        else:
            h = self._layers(h)
        return h.transpose(0, 1).reshape(*batch, self.n_agents, self.n_agent_outputs)

    def _cpu_chunk_rows(self) -> int:
        widest = max(w.shape[-1] for w in self.weights)
        return max(64, _CPU_CHUNK_ELEMENTS // (self.n_agents * widest))

    def _layers(self, h: torch.Tensor) -> torch.Tensor:
        """The stacked layers on agent-major input ``[n_agents, rows, in]``."""
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = torch.baddbmm(b, h, w)
            if i < last:
                if self.layer_norm:
                    h = nn.functional.layer_norm(h, h.shape[-1:])
                h = self.activation(h)
        return h
