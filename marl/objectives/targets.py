"""Target-network updaters: ``SoftUpdate`` (Polyak averaging) and ``HardUpdate`` (periodic copy)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn

__all__ = ["HardUpdate", "SoftUpdate"]

Pairs = Iterable[tuple[nn.Module, nn.Module]]


def _pairs(source: object) -> list[tuple[list[torch.Tensor], list[torch.Tensor]]]:
    """``(online tensors, target tensors)`` per pair, from a loss or explicit pairs."""
    pairs = list(source.target_pairs()) if hasattr(source, "target_pairs") else list(source)
    if not pairs:
        raise ValueError("no (online, target) module pairs to update")
    out = []
    for online, target in pairs:
        src = [*online.parameters(), *online.buffers()]
        dst = [*target.parameters(), *target.buffers()]
        if len(src) != len(dst) or any(a.shape != b.shape for a, b in zip(src, dst)):
            raise ValueError(
                f"online and target modules differ in structure: {type(online).__name__} "
                f"vs {type(target).__name__}"
            )
        out.append((src, dst))
    return out


class SoftUpdate:
    """Polyak averaging ``target <- (1 - tau) * target + tau * online`` on each ``step()``.

    Args:
        source: a loss exposing ``target_pairs()``, or an iterable of
            ``(online, target)`` module pairs.
        tau: interpolation factor in ``(0, 1]``.

    Examples:
        >>> online, target = nn.Linear(2, 2), nn.Linear(2, 2)
        >>> upd = SoftUpdate([(online, target)], tau=1.0)
        >>> upd.step()
        >>> bool(torch.equal(online.weight, target.weight))
        True
    """

    def __init__(self, source: object, tau: float = 0.005) -> None:
        if not 0.0 < tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {tau}")
        self.tau = tau
        self._pairs = _pairs(source)

    @torch.no_grad()
    def step(self) -> None:
        """Move every target parameter a fraction ``tau`` towards its online one."""
        for src, dst in self._pairs:
            floats = [(s, d) for s, d in zip(src, dst) if d.is_floating_point()]
            if floats:
                torch._foreach_lerp_([d for _, d in floats], [s for s, _ in floats], self.tau)
            for s, d in zip(src, dst):
                if not d.is_floating_point():
                    d.copy_(s)

    def state_dict(self) -> dict[str, Any]:
        """No state besides the networks (saved with the loss): ``{}``."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Nothing to restore (see :meth:`state_dict`)."""


class HardUpdate:
    """Copy the online parameters into the targets every ``period`` calls to ``step()``.

    Args:
        source: a loss exposing ``target_pairs()``, or ``(online, target)`` pairs.
        period: number of ``step()`` calls between copies.

    Examples:
        >>> online, target = nn.Linear(2, 2), nn.Linear(2, 2)
        >>> upd = HardUpdate([(online, target)], period=2)
        >>> upd.step(); bool(torch.equal(online.weight, target.weight))
        False
        >>> upd.step(); bool(torch.equal(online.weight, target.weight))
        True
    """

    def __init__(self, source: object, period: int = 1000) -> None:
        if period < 1:
            raise ValueError(f"period must be >= 1, got {period}")
        self.period = period
        self.counter = 0
        self._pairs = _pairs(source)

    @torch.no_grad()
    def step(self) -> None:
        """Count one call; copy the parameters when ``period`` calls have passed."""
        self.counter += 1
        if self.counter % self.period == 0:
            for src, dst in self._pairs:
                torch._foreach_copy_(dst, src)

    def state_dict(self) -> dict[str, Any]:
        """The step counter (the phase of the next copy)."""
        return {"counter": self.counter}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.counter = int(state["counter"])
