"""``MultiAgentGNN``: message passing between a group's agents, in pure torch.

A group's agents are the nodes of one small dense graph per env step (3 to a few dozen
agents): the adjacency is a ``[*B, n, n]`` boolean matrix and every layer is a few
batched matmuls over it, vectorized over the batch. torch_geometric is not used: its
sparse edge lists and scatter kernels pay off on large sparse graphs, not on dense
graphs of a handful of nodes, and it would be a compiled dependency for one module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from marl.modules.mlp import MultiAgentMLP
from marl.modules.sets import masked_mean

__all__ = ["GATv2Layer", "MultiAgentGNN", "adjacency"]


def adjacency(
    n_agents: int,
    *,
    mask: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    radius: float | None = None,
    batch: Sequence[int] = (),
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Who receives messages from whom: ``A[..., i, j]`` is True when ``j`` sends to ``i``.

    A complete graph, or with ``radius`` the agents within ``radius`` of each other
    (``positions`` ``[*B, n, d]``); edges of absent agents (``mask`` ``[*B, n]`` False)
    are removed. Every agent keeps its self-loop, so that its attention is defined.

    Examples:
        >>> pos = torch.tensor([[[0.0, 0.0], [0.5, 0.0], [3.0, 0.0]]])
        >>> adjacency(3, positions=pos, radius=1.0).int()
        tensor([[[1, 1, 0],
                 [1, 1, 0],
                 [0, 0, 1]]], dtype=torch.int32)
    """
    if radius is not None:
        if positions is None:
            raise ValueError("a distance graph (radius set) needs the agents' positions")
        # not torch.cdist: an exported policy's ONNX graph has no operator for it
        a = (positions.unsqueeze(-3) - positions.unsqueeze(-2)).norm(dim=-1) <= radius
    else:
        like = positions if positions is not None else mask
        shape = (
            (*like.shape[:-1], n_agents, n_agents)
            if like is not None
            else (*batch, n_agents, n_agents)
        )
        a = torch.ones(shape, dtype=torch.bool, device=like.device if like is not None else device)
    if mask is not None:
        a = a & mask.unsqueeze(-1) & mask.unsqueeze(-2)
    return a | torch.eye(n_agents, dtype=torch.bool, device=a.device)


class GATv2Layer(nn.Module):
    """One graph attention layer (GATv2, Brody et al., 2022) on dense ``[*B, n, n]`` graphs.

    ``s_ij = a . act(W_r h_i + W_s h_j + W_e e_ij)`` scores the message of ``j`` to ``i``
    (``e_ij``: optional edge features, e.g. the relative position ``p_j - p_i``);
    ``alpha_i = softmax_j(s_ij)`` over ``i``'s neighbours; ``h_i' = h_i + sum_j alpha_ij
    W_v h_j`` (a residual: an isolated agent keeps its own features).

    Args:
        features: node features in and out.
        edge_features: edge features (0: none).
        device: where to create the parameters.

    Examples:
        >>> layer = GATv2Layer(8)
        >>> h = torch.randn(4, 3, 8)
        >>> layer(h, torch.ones(4, 3, 3, dtype=torch.bool)).shape
        torch.Size([4, 3, 8])
    """

    def __init__(
        self, features: int, edge_features: int = 0, device: torch.device | str | None = None
    ) -> None:
        super().__init__()
        self.receiver = nn.Linear(features, features, device=device)
        self.sender = nn.Linear(features, features, bias=False, device=device)
        self.value = nn.Linear(features, features, device=device)
        self.edge = (
            nn.Linear(edge_features, features, bias=False, device=device) if edge_features else None
        )
        self.score = nn.Parameter(torch.empty(features, device=device))
        nn.init.uniform_(self.score, -1 / math.sqrt(features), 1 / math.sqrt(features))

    def forward(
        self, h: torch.Tensor, adj: torch.Tensor, edges: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``h`` ``[*B, n, F]``, ``adj`` ``[*B, n, n]`` and ``edges`` ``[*B, n, n, E]`` to
        ``[*B, n, F]``."""
        pair = self.receiver(h).unsqueeze(-2) + self.sender(h).unsqueeze(-3)  # [*B, i, j, F]
        if self.edge is not None and edges is not None:
            pair = pair + self.edge(edges)
        scores = nn.functional.leaky_relu(pair, 0.2) @ self.score  # [*B, i, j]
        alpha = scores.masked_fill(~adj, float("-inf")).softmax(-1)
        return h + alpha @ self.value(h)


class MultiAgentGNN(nn.Module):
    """Agents encode their inputs, exchange messages over a graph, then decode.

    ``h_i = enc(x_i)``; ``layers`` GATv2 rounds over a complete graph or, with
    ``radius``, the graph of agents within ``radius`` of each other, where each agent's
    position is ``x_i[position]`` (the relative positions are then edge features too);
    ``y_i = dec(h_i)``, or with ``centralized=True`` ``dec`` of the mean of the ``h_i``
    (a critic of the whole group). Absent agents (``mask`` False) send and receive
    nothing. Permuting the agents permutes the outputs (with shared parameters).

    Args:
        n_agent_inputs: per-agent input features.
        n_agent_outputs: per-agent output features.
        n_agents: agents in the group.
        centralized: every agent's output is decoded from the pooled graph.
        share_params: one encoder and one decoder for every agent (``False``: one per
            agent, vectorized as ``MultiAgentMLP``); the message layers are shared.
        num_cells: hidden widths of the encoder and of the decoder; the last one is the
            width of the node features.
        activation: activation class.
        layers: message passing rounds.
        position: ``(start, stop)``: the input features holding the agent's position.
        radius: connect the agents within this distance (``None``: a complete graph).
        device: where to create the parameters.
        layer_norm: normalize the hidden layers of the encoder and decoder, and each
            message round's output.

    Examples:
        >>> net = MultiAgentGNN(6, 2, n_agents=3, centralized=False, share_params=True,
        ...                     num_cells=[16], position=(0, 2), radius=0.5)
        >>> net(torch.zeros(5, 3, 6)).shape
        torch.Size([5, 3, 2])
    """

    takes_mask = True
    """``forward`` takes the agents present as ``mask``."""

    def __init__(
        self,
        n_agent_inputs: int,
        n_agent_outputs: int,
        n_agents: int,
        *,
        centralized: bool,
        share_params: bool,
        num_cells: Sequence[int] = (64, 64),
        activation: type[nn.Module] = nn.Tanh,
        layers: int = 1,
        position: tuple[int, int] | None = None,
        radius: float | None = None,
        device: torch.device | str | None = None,
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        if radius is not None and position is None:
            raise ValueError("a distance graph (radius set) needs position=(start, stop)")
        if position is not None and not 0 <= position[0] < position[1] <= n_agent_inputs:
            raise ValueError(
                f"position must be (start, stop) within the {n_agent_inputs} input features, "
                f"got {position}"
            )
        cells = [int(c) for c in num_cells] or [64]
        width = cells[-1]
        self.n_agents, self.centralized = n_agents, centralized
        self.position, self.radius = position, radius
        common = dict(
            n_agents=n_agents,
            centralized=False,
            share_params=share_params,
            activation=activation,
            device=device,
            layer_norm=layer_norm,
        )
        self.encoder = MultiAgentMLP(n_agent_inputs, width, num_cells=cells[:-1], **common)
        edge = 0 if position is None else position[1] - position[0] + 1
        self.layers = nn.ModuleList(GATv2Layer(width, edge, device=device) for _ in range(layers))
        # as MLP's layer_norm: each message round's output normalized, no learned affine
        self.norm = (
            nn.LayerNorm(width, elementwise_affine=False, device=device) if layer_norm else None
        )
        self.act = activation()
        self.decoder = MultiAgentMLP(width, n_agent_outputs, num_cells=cells[:-1], **common)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``[*B, n_agents, in]`` (and the agents present, ``[*B, n_agents]``) to
        ``[*B, n_agents, out]``."""
        n = self.n_agents
        edges = pos = None
        if self.position is not None:
            pos = x[..., self.position[0] : self.position[1]]
            rel = pos.unsqueeze(-3) - pos.unsqueeze(-2)  # [*B, i, j, d]: p_j - p_i
            edges = torch.cat([rel, rel.norm(dim=-1, keepdim=True)], -1)
        adj = adjacency(
            n, mask=mask, positions=pos, radius=self.radius, batch=x.shape[:-2], device=x.device
        )
        h = self.act(self.encoder(x))
        for layer in self.layers:
            h = layer(h, adj, edges)
            h = self.act(h if self.norm is None else self.norm(h))
        if self.centralized:
            h = masked_mean(h, mask).unsqueeze(-2).expand_as(h)
        return self.decoder(h)
