"""``MultiAgentDeepSets``: a permutation-invariant body over a group's agents (Zaheer et al.,
2017, "Deep Sets")."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from marl.modules.mlp import MultiAgentMLP

__all__ = ["MultiAgentDeepSets", "masked_mean"]


def masked_mean(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """The mean of ``x`` ``[*B, n, F]`` over its agents ``-2``, counting only those ``mask``
    ``[*B, n]`` keeps (``None``: all); a batch entry with no agent left pools to zeros.

    Examples:
        >>> x = torch.tensor([[[1.0], [3.0], [100.0]]])
        >>> masked_mean(x, torch.tensor([[True, True, False]]))
        tensor([[2.]])
    """
    if mask is None:
        return x.mean(-2)
    m = mask.unsqueeze(-1).to(x.dtype)
    return (x * m).sum(-2) / m.sum(-2).clamp(min=1.0)


class MultiAgentDeepSets(nn.Module):
    """Each agent's output from its own input and the mean over its group of agents.

    ``e_i = phi(x_i)``, ``p = mean_j e_j`` (over the agents present), then
    ``y_i = rho([e_i, p])``, or ``y_i = rho(p)`` with ``centralized=True`` (a critic of
    the whole group). Permuting the agents of the input permutes the outputs the same
    way (with shared parameters); the pool itself does not depend on their order.

    The pool is a mean, not a sum: its scale does not grow with the number of agents, so
    the decoder's inputs stay in the range its activations work in for 3 agents and for 16
    (a sum of 16 tanh embeddings saturates the decoder), and an agent that leaves the
    episode (masked out) does not shift the others' inputs by a whole embedding.

    Args:
        n_agent_inputs: per-agent input features.
        n_agent_outputs: per-agent output features.
        n_agents: agents in the group.
        centralized: every agent's output is ``rho`` of the pool alone.
        share_params: one ``phi`` and one ``rho`` for every agent (``False``: one per
            agent, vectorized as ``MultiAgentMLP``).
        num_cells: hidden widths of ``phi`` and of ``rho``; the last one is also the
            width of the embeddings ``e_i``.
        activation: activation class.
        device: where to create the parameters.
        layer_norm: normalize the hidden layers (as ``MultiAgentMLP``).

    Examples:
        >>> net = MultiAgentDeepSets(6, 2, n_agents=3, centralized=False, share_params=True,
        ...                          num_cells=[16, 16])
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
        device: torch.device | str | None = None,
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        cells = [int(c) for c in num_cells] or [64]
        width = cells[-1]
        self.n_agents, self.centralized = n_agents, centralized
        common = dict(
            n_agents=n_agents,
            centralized=False,
            share_params=share_params,
            activation=activation,
            device=device,
            layer_norm=layer_norm,
        )
        self.phi = MultiAgentMLP(n_agent_inputs, width, num_cells=cells[:-1], **common)
        self.act = activation()
        rho_in = width if centralized else 2 * width
        self.rho = MultiAgentMLP(rho_in, n_agent_outputs, num_cells=cells, **common)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``[*B, n_agents, in]`` (and the agents present, ``[*B, n_agents]``) to
        ``[*B, n_agents, out]``."""
        e = self.act(self.phi(x))
        pool = masked_mean(e, mask).unsqueeze(-2).expand_as(e)
        return self.rho(pool if self.centralized else torch.cat([e, pool], -1))
