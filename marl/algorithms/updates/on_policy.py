"""The on-policy update: advantages on the whole batch, then epochs of minibatches."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch
from tensordict import TensorDictBase

from marl.algorithms.contracts import AdvantageLoss, OnPolicySettings
from marl.algorithms.updates.gradient import GradientStepUpdater, UpdateStats
from marl.algorithms.updates.sync import GradientSync

__all__ = ["OnPolicyUpdater", "shuffled_minibatches"]


def shuffled_minibatches(
    data: TensorDictBase, size: int, epochs: int, *extra: torch.Tensor
) -> Iterator[tuple[TensorDictBase | torch.Tensor, ...]]:
    """``epochs`` passes over ``data`` (flat, ``[n]``) in shuffled minibatches of ``size``.

    Each epoch gathers ``data`` (and each ``extra`` tensor, in the same order) once; its
    minibatches are contiguous slices of that gather (views). An incomplete last
    minibatch is dropped: a handful of samples gives a noisy step.

    Args:
        data: the samples, one batch dim.
        size: samples per minibatch (``n`` at most: the whole batch when larger).
        epochs: passes over the data.
        *extra: ``[n, ...]`` tensors shuffled and cut alongside (HAPPO's correction ``M``).

    Yields:
        ``(minibatch, *extra_minibatches)``.

    Examples:
        >>> from tensordict import TensorDict
        >>> data = TensorDict(x=torch.arange(10), batch_size=[10])
        >>> parts = list(shuffled_minibatches(data, 4, epochs=2))
        >>> len(parts), [tuple(mb.batch_size) for (mb,) in parts]
        (4, [(4,), (4,), (4,), (4,)])
    """
    n = data.shape[0]
    size = min(size, n)
    for _ in range(epochs):
        perm = torch.randperm(n, device=data.device)
        shuffled, rest = data[perm], [t[perm] for t in extra]
        for start in range(0, n - size + 1, size):
            end = start + size
            yield shuffled[start:end], *(t[start:end] for t in rest)


class OnPolicyUpdater(GradientStepUpdater[AdvantageLoss]):
    """Advantages on the whole ``[*B, T]`` batch, then ``epochs`` x minibatches over it.

    MAPPO's and IPPO's whole update, in call order:

    1. :meth:`process`: the loss's value estimator (GAE; ``V(s)`` and ``V(s')`` in one
       critic call) writes the advantages and value targets on the batch.
    2. :meth:`update`: the entries the loss reads (``loss.in_keys``) are selected once,
       flattened, and each epoch gathers them in one shuffled order; minibatches are
       contiguous slices of it (views). Each goes through :class:`GradientStep`:
       :func:`loss_and_backward` runs ``PPOLoss.forward`` (advantage standardization
       over the unmasked agents, the clipped objective, the critic loss), then the
       per-role clipping and the optimizer step. An incomplete last minibatch is
       dropped: a handful of samples gives a noisy step.

    Args:
        loss: the loss, with the value estimator that writes its advantages.
        optimizer: the optimizer over its trained parameters.
        epochs: passes over each batch.
        minibatch_size: transitions per optimizer step (the whole batch when larger).
        max_grad_norm: per-role gradient clipping (``None``: off).
        compile: compile the loss and its backward (:class:`GradientStep`).
        sync: average the gradients over data-parallel ranks before each step
            (:class:`~marl.algorithms.updates.GradientSync`; ``None``: off).
        sequence_length: train on sequences (a recurrent policy): each env's ``T`` steps
            are cut into chunks of this many steps (``T`` at most; the last ``T % length``
            steps are left out), and a minibatch is ``minibatch_size // length`` whole
            chunks, shuffled as chunks, time kept in order: a ``[chunks, length]``
            TensorDict whose first step holds the hidden state stored at collection.
            ``None``: single steps.
    """

    on_policy = True

    def __init__(
        self,
        *,
        loss: AdvantageLoss,
        optimizer: torch.optim.Optimizer,
        epochs: int,
        minibatch_size: int,
        max_grad_norm: float | None,
        compile: bool = False,
        sequence_length: int | None = None,
        sync: GradientSync | None = None,
    ) -> None:
        if epochs < 1 or minibatch_size < 1:
            raise ValueError(
                f"epochs and minibatch_size must be >= 1, got {epochs}, {minibatch_size}"
            )
        if sequence_length is not None and sequence_length < 1:
            raise ValueError(f"sequence_length must be >= 1 or None, got {sequence_length}")
        self._sequence_length = sequence_length
        super().__init__(loss, optimizer, AdvantageLoss, max_grad_norm, compile, sync)
        if loss.value_estimator is None:
            raise ValueError(
                f"{type(loss).__name__} has no value estimator (no critic): the on-policy "
                "updater writes the advantages with it"
            )
        self._epochs = epochs
        self._minibatch_size = minibatch_size

    @property
    def buffer(self) -> None:
        """No buffer: each batch is used once, straight from the collector."""
        return None

    @property
    def epochs(self) -> int:
        return self._epochs

    @property
    def minibatch_size(self) -> int:
        return self._minibatch_size

    @classmethod
    def from_settings(
        cls,
        config: OnPolicySettings,
        loss: AdvantageLoss,
        optimizer: torch.optim.Optimizer,
        *,
        compile: bool = False,
        sequence_length: int | None = None,
        sync: GradientSync | None = None,
    ) -> OnPolicyUpdater:
        """The updater of an on-policy config (PPO's, PQN's...): its ``epochs``,
        ``minibatch_size`` and ``max_grad_norm``; the other arguments as in the class."""
        return cls(
            loss=loss,
            optimizer=optimizer,
            epochs=config.epochs,
            minibatch_size=config.minibatch_size,
            max_grad_norm=config.max_grad_norm,
            compile=compile,
            sequence_length=sequence_length,
            sync=sync,
        )

    def process(self, batch: TensorDictBase) -> TensorDictBase:
        """Write the group's advantage and value target on the ``[*B, T]`` batch."""
        with torch.no_grad():
            self.loss.value_estimator(batch)
        return batch

    @property
    def sequence_length(self) -> int | None:
        """Steps per training sequence (``None``: single steps)."""
        return self._sequence_length

    def sequences(self, batch: TensorDictBase) -> TensorDictBase:
        """The loss's entries of a ``[*B, T]`` batch as ``[chunks, length]`` sequences."""
        data = batch.select(*self._keys, strict=False)
        if data.batch_dims < 1:
            raise ValueError("sequence training needs a [*B, T] batch with a time dim")
        steps = data.batch_size[-1]
        length = min(self._sequence_length or steps, steps)
        data = data.reshape(-1, steps)[:, : steps - steps % length]
        return data.reshape(-1, length)

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        """``epochs`` passes of shuffled minibatches over the loss's entries of ``batch``."""
        if self._sequence_length is not None:
            data = self.sequences(batch)
            size = max(1, self._minibatch_size // data.shape[1])
        else:
            data = batch.select(*self._keys, strict=False).reshape(-1)
            size = self._minibatch_size
        stats = UpdateStats()
        for (minibatch,) in shuffled_minibatches(data, size, self._epochs):
            stats.add(self._step(minibatch))
        return stats.means()

    def state_dict(self) -> dict[str, Any]:
        """No state between batches: ``{}``."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Nothing to restore (see :meth:`state_dict`)."""
