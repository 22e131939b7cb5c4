"""Advantage standardization, over one process's samples or over every rank's.

PPO and A2C (``normalize_advantage``) and HAPPO (once per batch) standardize the
advantage: ``(A - mean) / std``. In one process the statistics are those of the
samples at hand. In a data-parallel run each rank holds a share of the samples: with
a :class:`RankSum` (the learner's :class:`~marl.algorithms.updates.GradientSync`)
the count, sum and sum of squares are summed over the ranks (one collective, in
float64), so that every rank standardizes with the statistics of the union of the
shares, as one process on the union would.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch

__all__ = ["RankSum", "standardize"]


@runtime_checkable
class RankSum(Protocol):
    """Sums a tensor over the ranks of a data-parallel run (every rank calls it alike).

    :class:`~marl.algorithms.updates.GradientSync` is one; this package only needs the
    method, so it does not import the algorithms layer.
    """

    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """The elementwise sum of ``tensor`` over the ranks (a new tensor)."""
        ...


def standardize(
    adv: torch.Tensor,
    mask: torch.Tensor | None = None,
    exclude_dims: Sequence[int] = (),
    sync: RankSum | None = None,
) -> torch.Tensor:
    """``(adv - mean) / std``, with the statistics of this process's samples or of every rank's.

    Args:
        adv: the advantages.
        mask: agent mask (broadcast to ``adv`` from the left): the statistics are over
            the unmasked entries only, and the masked entries come back zeroed.
        exclude_dims: dims kept separate (e.g. ``(-2,)``: per-agent statistics of
            ``[*B, n_agents, 1]`` advantages); ignored with a ``mask``.
        sync: sums the statistics over the ranks (``None``: this process's samples).

    Returns:
        The standardized advantages (``adv`` itself when it has a single entry).

    Examples:
        >>> adv = torch.tensor([1.0, 2.0, 3.0, 6.0])
        >>> standardize(adv)
        tensor([-0.9258, -0.4629,  0.0000,  1.3887])
        >>> standardize(adv, mask=torch.tensor([True, True, True, False]))
        tensor([-1.,  0.,  1.,  0.])
    """
    if mask is not None:
        m = mask.reshape(mask.shape + (1,) * (adv.ndim - mask.ndim)).to(adv.dtype)
        if sync is not None:
            return _masked_over_ranks(adv, m, sync)
        count = m.sum().clamp_min(1.0)
        mean = (adv * m).sum() / count
        var = ((adv - mean).pow(2) * m).sum() / (count - 1).clamp_min(1.0)
        return (adv - mean) / var.sqrt().clamp_min(1e-6) * m
    keep = {d % adv.ndim for d in exclude_dims} if adv.ndim else set()
    dims = tuple(d for d in range(adv.ndim) if d not in keep)
    if sync is not None and dims:
        return _over_ranks(adv, dims, sync)
    if adv.numel() <= 1:
        return adv
    mean = adv.mean(dims, keepdim=True)
    std = adv.std(dims, keepdim=True) if dims else torch.ones_like(adv)
    return (adv - mean) / std.clamp_min(1e-6)


@torch.no_grad()
def _moments(parts: list[torch.Tensor], sync: RankSum) -> list[torch.Tensor]:
    """``parts`` (float64) summed over the ranks in one collective, split back."""
    flat = torch.cat([p.reshape(-1) for p in parts])
    total = sync.all_sum(flat)
    return [t.view_as(p) for t, p in zip(total.split([p.numel() for p in parts]), parts)]


def _masked_over_ranks(adv: torch.Tensor, m: torch.Tensor, sync: RankSum) -> torch.Tensor:
    """The masked statistics of one process (count of the mask, unbiased variance), summed
    over the ranks: ``sum((a - mean)^2 m) = sum(a^2 m) - 2 mean sum(a m) + mean^2 sum(m)``,
    with ``sum(m)`` over ``adv``'s shape (the mask broadcast), as the local form sums it."""
    a, w = adv.detach().double(), m.double()
    count, spread, total, squares = _moments(
        [w.sum(), w.expand_as(a).sum(), (a * w).sum(), (a * a * w).sum()], sync
    )
    n = count.clamp_min(1.0)
    mean = total / n
    var = (squares - 2 * mean * total + mean * mean * spread) / (count - 1).clamp_min(1.0)
    std = var.clamp_min(0.0).sqrt().to(adv.dtype)
    return (adv - mean.to(adv.dtype)) / std.clamp_min(1e-6) * m


def _over_ranks(adv: torch.Tensor, dims: tuple[int, ...], sync: RankSum) -> torch.Tensor:
    """Per kept index, the mean and unbiased std over ``dims`` of every rank's entries."""
    a = adv.detach().double()
    local = torch.tensor(float(math.prod(a.shape[d] for d in dims)), dtype=a.dtype, device=a.device)
    count, total, squares = _moments(
        [local, a.sum(dims, keepdim=True), (a * a).sum(dims, keepdim=True)], sync
    )
    mean = total / count.clamp_min(1.0)
    var = (squares - count * mean * mean) / (count - 1).clamp_min(1.0)
    std = var.clamp_min(0.0).sqrt().to(adv.dtype)
    out = (adv - mean.to(adv.dtype)) / std.clamp_min(1e-6)
    # a single entry over all ranks is left as it is (as one process leaves it)
    return torch.where(count > 1, out, adv)
