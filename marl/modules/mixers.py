"""Value-decomposition mixers: ``VDNMixer`` (sum) and ``QMixer`` (monotonic hypernetwork)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["QMixer", "VDNMixer"]


def _agent_qs(agent_qs: torch.Tensor, n_agents: int) -> torch.Tensor:
    """Accept ``[*B, n_agents]`` or ``[*B, n_agents, 1]``; return ``[*B, n_agents]``."""
    if agent_qs.ndim >= 2 and agent_qs.shape[-2:] == (n_agents, 1):
        agent_qs = agent_qs.squeeze(-1)
    if agent_qs.ndim < 1 or agent_qs.shape[-1] != n_agents:
        raise ValueError(
            f"expected agent Q-values [*B, {n_agents}] or [*B, {n_agents}, 1], "
            f"got {tuple(agent_qs.shape)}"
        )
    return agent_qs


class VDNMixer(nn.Module):
    """Value decomposition network: ``Q_tot = sum_i Q_i``.

    Args:
        n_agents: number of agents.

    Examples:
        >>> VDNMixer(3)(torch.ones(5, 3, 1)).shape
        torch.Size([5, 1])
    """

    def __init__(self, n_agents: int) -> None:
        super().__init__()
        self.n_agents = n_agents

    def forward(self, agent_qs: torch.Tensor, state: torch.Tensor | None = None) -> torch.Tensor:
        """Mix the chosen per-agent Q-values.

        Args:
            agent_qs: ``[*B, n_agents]`` or ``[*B, n_agents, 1]``.
            state: ignored (VDN needs no global state).

        Returns:
            ``[*B, 1]``.
        """
        return _agent_qs(agent_qs, self.n_agents).sum(-1, keepdim=True)


class QMixer(nn.Module):
    """QMIX mixer (Rashid et al., 2018): a state-conditioned monotonic mixing network.

    Hypernetworks map the global state to non-negative mixing weights (``abs``), so
    ``dQ_tot / dQ_i >= 0``: the joint greedy action is the per-agent greedy actions.

    Args:
        state_shape: shape of the global state (flattened internally).
        mixing_embed_dim: width of the mixing layer.
        n_agents: number of agents.
        hypernet_embed: hidden width of the weight hypernetworks.
        init_scale: a factor on the initial weights of the hypernetworks' output layers,
            whose biases then start at 0 (``None``: PyTorch's initialization, PyMARL's).
            With PyTorch's, ``Q_tot`` starts at the scale of the state: about 50 on
            SMAX's world state (raw positions in [0, 32]) where every return is below 2,
            and it grows from there. A small factor (0.01) starts ``Q_tot`` near 0
            whatever the state, as JaxMARL's QMIX does (its hypernetworks are
            initialized at scale 0.001).

    Examples:
        >>> mixer = QMixer(state_shape=(8,), mixing_embed_dim=16, n_agents=3)
        >>> mixer(torch.randn(5, 3), torch.randn(5, 8)).shape
        torch.Size([5, 1])
    """

    def __init__(
        self,
        state_shape: int | Sequence[int],
        mixing_embed_dim: int,
        n_agents: int,
        hypernet_embed: int = 64,
        init_scale: float | None = None,
    ) -> None:
        super().__init__()
        if init_scale is not None and not (isinstance(init_scale, (int, float)) and init_scale > 0):
            raise ValueError(f"QMixer: init_scale must be None or > 0, got {init_scale!r}")
        self.state_shape = (
            (state_shape,) if isinstance(state_shape, int) else tuple(int(s) for s in state_shape)
        )
        self.state_dim = int(torch.Size(self.state_shape).numel())
        self.n_agents = n_agents
        self.embed_dim = mixing_embed_dim
        s, e = self.state_dim, mixing_embed_dim
        self.hyper_w1 = nn.Sequential(
            nn.Linear(s, hypernet_embed), nn.ReLU(), nn.Linear(hypernet_embed, e * n_agents)
        )
        self.hyper_b1 = nn.Linear(s, e)
        self.hyper_w2 = nn.Sequential(
            nn.Linear(s, hypernet_embed), nn.ReLU(), nn.Linear(hypernet_embed, e)
        )
        self.hyper_b2 = nn.Sequential(nn.Linear(s, e), nn.ReLU(), nn.Linear(e, 1))
        if init_scale is not None:
            with torch.no_grad():
                for layer in (
                    self.hyper_w1[-1],
                    self.hyper_b1,
                    self.hyper_w2[-1],
                    self.hyper_b2[-1],
                ):
                    layer.weight.mul_(init_scale)
                    layer.bias.zero_()

    def forward(self, agent_qs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """Mix the chosen per-agent Q-values conditioned on the global state.

        Args:
            agent_qs: ``[*B, n_agents]`` or ``[*B, n_agents, 1]``.
            state: ``[*B, *state_shape]``.

        Returns:
            ``[*B, 1]``.
        """
        qs = _agent_qs(agent_qs, self.n_agents)
        batch = qs.shape[:-1]
        nd = len(self.state_shape)
        if state is None or tuple(state.shape[state.ndim - nd :]) != self.state_shape:
            got = None if state is None else tuple(state.shape)
            raise ValueError(f"QMixer expected a state [*B, *{self.state_shape}], got {got}")
        s = state.reshape(*state.shape[: state.ndim - nd], self.state_dim).expand(
            *batch, self.state_dim
        )
        w1 = self.hyper_w1(s).abs().view(*batch, self.n_agents, self.embed_dim)
        b1 = self.hyper_b1(s)
        hidden = F.elu((qs.unsqueeze(-2) @ w1).squeeze(-2) + b1)  # [*B, E]
        w2 = self.hyper_w2(s).abs()
        return (hidden * w2).sum(-1, keepdim=True) + self.hyper_b2(s)
