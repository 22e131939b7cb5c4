"""``AgentAdam``: Adam that can step chosen agents' slices of stacked per-agent parameters.

HAPPO updates the agents of a group one after another, but a group's actor is one
vectorized network whose parameters are stacked ``[n_agents, ...]``
(:class:`~marl.modules.MultiAgentMLP` with ``share_params=False``). Masking the loss to
agent ``i`` zeroes the other agents' gradients, yet ``torch.optim.Adam`` still moves
their slices (its momentum) and decays their moments on every step. Here a param
group marked ``n_agents=n`` keeps per-agent step counts (Adam's bias correction), and
``step(agents=[i])`` reads and writes only the slices ``[i]`` of the parameters and of
both moments: the other agents' parameters and optimizer state stay bit for bit as
they were.

The alternative, one module and one optimizer per agent, would cost the vectorized
network (one batched matmul for every agent) that collection and the critic share
with the other algorithms; stepping slices keeps the network and the checkpoint
layout of MAPPO with unshared actors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

__all__ = ["AgentAdam"]


class AgentAdam(torch.optim.Optimizer):
    """Adam (Kingma & Ba, 2015) whose per-agent param groups step one agent's slice at a time.

    A param group with ``"n_agents": n`` holds parameters stacked over agents (leading dim
    ``n``); every other group is plain Adam. ``step()`` updates every parameter that has a
    gradient, as ``torch.optim.Adam`` (no weight decay, no amsgrad) does; ``step(agents=[i])``
    updates only the slices ``[i]`` of the per-agent groups (and still the whole of the
    other groups' parameters that have gradients). Parameters without a gradient
    (``grad is None``) are skipped entirely.

    Args:
        params: parameters or param groups (dicts; ``"n_agents"`` marks a per-agent group).
        lr: learning rate.
        betas: the moments' decay rates.
        eps: added to the denominator.

    Raises:
        ValueError: when a per-agent group holds a parameter whose leading dim is not its
            ``n_agents``.

    Examples:
        >>> import torch
        >>> w = torch.nn.Parameter(torch.ones(3, 2))  # 3 agents' weights, stacked
        >>> opt = AgentAdam([{"params": [w], "n_agents": 3}], lr=0.1)
        >>> w.sum().backward()
        >>> opt.step(agents=[1])
        >>> w.detach()
        tensor([[1.0000, 1.0000],
                [0.9000, 0.9000],
                [1.0000, 1.0000]])
        >>> opt.state[w]["step"]
        tensor([0., 1., 0.])
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        if lr < 0 or eps < 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(
                f"expected lr >= 0, eps >= 0 and betas in [0, 1), got {lr}, {eps}, {betas}"
            )
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "n_agents": None})
        for group in self.param_groups:
            n = group["n_agents"]
            if n is None:
                continue
            for p in group["params"]:
                if p.ndim == 0 or p.shape[0] != n:
                    raise ValueError(
                        f"param group {group.get('name', '?')!r} is stacked over {n} agents, "
                        f"but holds a parameter of shape {tuple(p.shape)} (expected [{n}, ...])"
                    )

    @torch.no_grad()
    def step(  # type: ignore[override]
        self,
        closure: Callable[[], torch.Tensor] | None = None,
        *,
        agents: Sequence[int] | None = None,
    ) -> torch.Tensor | None:
        """One Adam step; with ``agents``, only those slices of the per-agent groups move.

        Args:
            closure: re-evaluates the loss (as for any torch optimizer).
            agents: the agents (indices along the leading dim) whose slices step;
                ``None``: all of them.

        Returns:
            The closure's loss, or ``None``.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            n = group["n_agents"]
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    steps = (n,) if n is not None else ()
                    state["step"] = torch.zeros(steps, dtype=torch.float32, device=p.device)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                if n is None or agents is None:
                    index: Any = ...
                else:
                    index = torch.as_tensor(list(agents), dtype=torch.long, device=p.device)
                self._update(p, state, index, group["lr"], beta1, beta2, group["eps"])
        return loss

    @staticmethod
    def _update(
        p: torch.Tensor,
        state: dict[str, torch.Tensor],
        index: Any,
        lr: float,
        beta1: float,
        beta2: float,
        eps: float,
    ) -> None:
        """Adam on ``p[index]`` with its moments and step counts ``[index]``."""
        grad = p.grad[index]
        exp_avg = state["exp_avg"][index].lerp(grad, 1 - beta1)
        exp_avg_sq = state["exp_avg_sq"][index].mul(beta2).addcmul(grad, grad, value=1 - beta2)
        step = state["step"][index] + 1
        # per-agent bias corrections, broadcast over each agent's slice
        shape = step.shape + (1,) * (grad.ndim - step.ndim)
        bias1 = (1 - beta1**step).reshape(shape)
        bias2 = (1 - beta2**step).reshape(shape)
        # the order of torch.optim.Adam's (single-tensor) operations
        denom = (exp_avg_sq.sqrt() / bias2.sqrt()).add_(eps)
        p[index] = p[index] - (lr / bias1) * (exp_avg / denom)
        state["exp_avg"][index] = exp_avg
        state["exp_avg_sq"][index] = exp_avg_sq
        state["step"][index] = step
