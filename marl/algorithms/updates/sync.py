"""Data-parallel training: :class:`GradientSync` averages gradients over processes.

One run's learning spread over ``world_size`` processes with ``torch.distributed``:
each rank computes the gradient of its share of a minibatch, :class:`GradientSync`
averages the gradients over the ranks before every optimizer step (inside
:class:`~marl.algorithms.updates.GradientStep`, before the clipping), and every rank
steps the same optimizer on the same averaged gradient. Started from equal parameters
(:meth:`GradientSync.broadcast_`, which ``Algorithm.build(gradient_sync=...)`` runs),
the ranks stay equal, and equal to one process stepping on the union of the shares
when the loss is a mean over equally sized shares. The statistics a loss takes over
its samples (PPO's advantage standardization) are summed over the ranks with
:meth:`GradientSync.all_sum`, so they are the union's too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

__all__ = ["GradientSync"]


def _grouped(tensors: Iterable[torch.Tensor]) -> dict[tuple[torch.dtype, torch.device], list]:
    """``tensors`` by ``(dtype, device)``, in order: one flat buffer, one collective each."""
    groups: dict[tuple[torch.dtype, torch.device], list] = {}
    for t in tensors:
        groups.setdefault((t.dtype, t.device), []).append(t)
    return groups


class GradientSync:
    """Averages parameters' gradients over the ranks of a ``torch.distributed`` group.

    ``sync(params)`` all-reduces the ``.grad`` of ``params``: one ``all_reduce`` per
    ``(dtype, device)`` on a flat buffer of those gradients, then a division by
    :attr:`world_size`. A parameter whose gradient is ``None`` on a rank counts as
    zeros there; it gets the average back as its gradient when some rank had a
    gradient for it, and keeps ``None`` when none had (so an optimizer still skips a
    parameter that no rank trained this step: TD3's delayed actor, HAPPO's critic
    during an agent's turn). Each buffer carries one extra entry per parameter, the
    number of ranks with a gradient, so this costs no second collective.

    Every rank must call it with the same parameters in the same order (the learners
    of ranks built from one config do).

    Args:
        group: the process group (``None``: the default group).

    Raises:
        RuntimeError: when ``torch.distributed`` is not available or not initialized.

    Example:
        >>> import torch
        >>> GradientSync()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        RuntimeError: GradientSync needs an initialized torch.distributed ...

        In each of ``world_size`` processes::

            torch.distributed.init_process_group("gloo", init_method=..., rank=r, world_size=n)
            sync = GradientSync()
            algo = Algorithm("mappo").build(env, seed=0, gradient_sync=sync)
            # every optimizer step of algo's learners now averages the gradients first
    """

    def __init__(self, group: Any = None) -> None:
        dist = torch.distributed
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                "GradientSync needs an initialized torch.distributed process group: call "
                "torch.distributed.init_process_group(...) in every rank first"
            )
        self.group = group
        self.rank: int = dist.get_rank(group)
        self.world_size: int = dist.get_world_size(group)

    def __repr__(self) -> str:
        return f"GradientSync(rank={self.rank}, world_size={self.world_size})"

    def __deepcopy__(self, memo: dict) -> GradientSync:
        # a communicator, not state: a copied learner talks to the same ranks
        return self

    def __call__(self, params: Iterable[torch.Tensor]) -> None:
        """Average the gradients of ``params`` over the ranks, in place."""
        params = list(dict.fromkeys(params))  # a parameter listed twice is reduced once
        if self.world_size == 1 or not params:
            return
        for (dtype, device), group in _grouped(params).items():
            numels = [p.numel() for p in group]
            parts = [
                torch.zeros(n, dtype=dtype, device=device) if p.grad is None else p.grad.reshape(-1)
                for p, n in zip(group, numels)
            ]
            # the last len(group) entries count the ranks that had each gradient
            present = torch.tensor([p.grad is not None for p in group], dtype=dtype, device=device)
            flat = torch.cat([*parts, present])
            torch.distributed.all_reduce(flat, group=self.group)
            flat[: -len(group)].div_(self.world_size)
            counts = flat[-len(group) :].tolist()
            for p, chunk, count in zip(group, flat[: -len(group)].split(numels), counts):
                if count == 0:
                    continue
                grad = chunk.view_as(p)
                if p.grad is None:
                    p.grad = grad.clone()
                else:
                    p.grad.copy_(grad)

    # a compiled loss (experiment.compile) calls it: the collective runs eagerly, a graph
    # break, rather than being traced
    @torch.compiler.disable
    @torch.no_grad()
    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """The elementwise sum of ``tensor`` over the ranks, as a new tensor.

        What the losses sum their statistics with (the advantage's count, sum and sum
        of squares: :meth:`marl.objectives.PPOLoss.share_advantage_statistics`). Every
        rank must call it with a tensor of the same shape and dtype.

        Args:
            tensor: this rank's values (on the group's device: CPU for gloo, CUDA for nccl).

        Returns:
            The sum over the ranks (a copy of ``tensor`` with one rank).
        """
        out = tensor.detach().clone()
        if self.world_size > 1:
            torch.distributed.all_reduce(out, group=self.group)
        return out

    @torch.no_grad()
    def broadcast_(self, tensors: nn.Module | Iterable[torch.Tensor], src: int = 0) -> None:
        """Copy parameters and buffers from rank ``src`` to every rank, in place.

        Args:
            tensors: a module (its parameters and buffers) or tensors.
            src: the rank whose values every rank gets (a rank of :attr:`group`).
        """
        if isinstance(tensors, nn.Module):
            tensors = [*tensors.parameters(), *tensors.buffers()]
        tensors = list({id(t): t for t in tensors}.values())
        if self.world_size == 1 or not tensors:
            return
        src = src if self.group is None else torch.distributed.get_global_rank(self.group, src)
        for group in _grouped(tensors).values():
            flat = torch.cat([t.detach().reshape(-1) for t in group])
            torch.distributed.broadcast(flat, src=src, group=self.group)
            for t, chunk in zip(group, flat.split([t.numel() for t in group])):
                t.copy_(chunk.view_as(t))
