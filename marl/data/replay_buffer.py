"""The replay buffer: a storage, a sampler, a writer and transforms."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from marl.data.list_storage import ListStorage
from marl.data.samplers import PrioritizedSampler, RandomSampler, Sampler, SamplerWithoutReplacement
from marl.data.storages import Storage
from marl.data.writers import RoundRobinWriter, Writer

__all__ = ["ReplayBuffer"]

NestedKey = str | tuple[str, ...]
Transform = Callable[[Any], Any]


def _collate(items: Any) -> Any:
    """Stacks a list read from a :class:`ListStorage` when its items allow it."""
    if isinstance(items, list) and items:
        if all(isinstance(x, TensorDictBase) for x in items):
            return torch.stack(items)
        if all(isinstance(x, torch.Tensor) for x in items):
            return torch.stack(items)
    return items


def _fit(value: torch.Tensor, batch_size: torch.Size) -> torch.Tensor:
    """Broadcasts a per-item tensor over items' own batch dims (as a stride-0 view)."""
    extra = len(batch_size) - value.ndim
    if extra <= 0:
        return value
    return value.reshape(*value.shape, *([1] * extra)).expand(batch_size)


class ReplayBuffer:
    """One replay buffer for every algorithm, on- and off-policy.

    The writer picks the slots new data goes to, the storage keeps it, the
    sampler picks what :meth:`sample` returns, and transforms run on each
    sampled batch. A sampled TensorDict carries ``"index"`` (its slots), and
    with a :class:`PrioritizedSampler` also ``"priority_weight"``.

    Args:
        storage: where items live (:class:`ListStorage`, :class:`TensorStorage`,
            :class:`MemmapStorage`).
        sampler: what to sample; :class:`RandomSampler` if ``None``.
        writer: where to write; :class:`RoundRobinWriter` if ``None``.
        transform: a callable (or a sequence of callables, applied in order)
            run on every sampled batch.
        batch_size: the default batch size of :meth:`sample` and :meth:`__iter__`.
        priority_key: the key :meth:`update_tensordict_priority` reads, and
            :meth:`extend` uses as initial priorities when present.
        generator: a ``torch.Generator`` given to the sampler (and used by
            :meth:`__iter__`); the global generator if ``None``.

    Examples:
        >>> from tensordict import TensorDict
        >>> from marl.data import PrioritizedSampler, TensorStorage
        >>> rb = ReplayBuffer(
        ...     TensorStorage(1000), sampler=PrioritizedSampler(1000, alpha=0.7, beta=0.5)
        ... )
        >>> rb.extend(TensorDict({"obs": torch.randn(10, 4)}, [10])).tolist()[:3]
        [0, 1, 2]
        >>> batch = rb.sample(4)
        >>> sorted(batch.keys())
        ['index', 'obs', 'priority_weight']
        >>> batch["td_error"] = torch.rand(4)
        >>> rb.update_tensordict_priority(batch)
    """

    def __init__(
        self,
        storage: Storage,
        sampler: Sampler | None = None,
        writer: Writer | None = None,
        transform: Transform | Sequence[Transform] | None = None,
        batch_size: int | None = None,
        priority_key: NestedKey = "td_error",
        generator: torch.Generator | None = None,
    ) -> None:
        if not isinstance(storage, Storage):
            raise TypeError(f"storage must be a marl.data Storage, got {type(storage).__name__}")
        self._storage = storage
        self._sampler = sampler if sampler is not None else RandomSampler()
        self._writer = writer if writer is not None else RoundRobinWriter()
        if not isinstance(self._sampler, Sampler):
            raise TypeError(f"sampler must be a marl.data Sampler, got {type(sampler).__name__}")
        if not isinstance(self._writer, Writer):
            raise TypeError(f"writer must be a marl.data Writer, got {type(writer).__name__}")
        self._writer.register_storage(storage)
        if transform is not None and not callable(transform):
            transform = list(transform)
            if not all(callable(t) for t in transform):
                raise TypeError("transform must be a callable or a sequence of callables")
        self._transform = transform
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(f"batch_size must be a positive int or None, got {batch_size!r}")
        self._batch_size = batch_size
        self.priority_key = priority_key
        if generator is not None:
            self._sampler.generator = generator
        self._generator = generator
        self._prioritized = isinstance(self._sampler, PrioritizedSampler)

    # -- components ---------------------------------------------------------
    @property
    def storage(self) -> Storage:
        """The storage."""
        return self._storage

    @property
    def sampler(self) -> Sampler:
        """The sampler."""
        return self._sampler

    @property
    def writer(self) -> Writer:
        """The writer."""
        return self._writer

    @property
    def batch_size(self) -> int | None:
        """The default batch size."""
        return self._batch_size

    def __len__(self) -> int:
        return len(self._storage)

    # -- writing ------------------------------------------------------------
    def add(self, data: Any) -> int:
        """Adds one item; returns its slot (-1 if the writer did not keep it).

        Args:
            data: one item (a TensorDict with the item's batch size, a tensor, or
                any object for a :class:`ListStorage`).

        Returns:
            The slot the item was written to.
        """
        priority = self._data_priority(data, 1, single=True)  # validated before writing
        index = self._writer.add(data)
        if index >= 0:
            self._sampler.add(index)
            if priority is not None:
                self._sampler.update_priority(index, priority)
        return index

    def _data_priority(self, data: Any, n: int, single: bool = False) -> Any:
        """The per-item priorities ``data`` carries (validated), or ``None``."""
        if not self._prioritized or not isinstance(data, TensorDictBase):
            return None
        priority = data.get(self.priority_key, None)
        if priority is None:
            return None
        if single:
            priority = priority.reshape(1, -1)
        return self._sampler.reduce_priority(priority, n)

    def extend(self, data: Any) -> torch.Tensor:
        """Adds a batch of items along the first dimension; returns their slots.

        With a :class:`PrioritizedSampler`, new items get the largest priority
        seen so far, or ``data[priority_key]`` when the data carries it.

        Args:
            data: a TensorDict or tensor with a leading item dimension, or a list
                (for a :class:`ListStorage`).

        Returns:
            A ``LongTensor`` with one slot per item; -1 for items the writer
            dropped (only :class:`MaxValueWriter` drops items).
        """
        priority = None
        if self._prioritized and isinstance(data, TensorDictBase) and data.batch_dims:
            # Validated before anything is written: a NaN priority leaves no trace.
            priority = self._data_priority(data, data.batch_size[0])
        index = self._writer.extend(data)
        written = index
        if not isinstance(self._writer, RoundRobinWriter):
            kept = index >= 0
            written = index[kept]
            if priority is not None:
                priority = priority[kept.numpy()]
        if written.numel():
            self._sampler.extend(written)
            if priority is not None:
                self._sampler.update_priority(written, priority)
        return index

    # -- reading ------------------------------------------------------------
    def _finish(self, index: torch.Tensor, info: dict[str, Any]) -> Any:
        data = self._storage.get(index)
        if isinstance(self._storage, ListStorage):
            data = _collate(data)
        if isinstance(data, TensorDictBase):
            data.set("index", _fit(index, data.batch_size))
            for key, value in info.items():
                data.set(key, _fit(value, data.batch_size))
        if self._transform is not None:
            if callable(self._transform):
                data = self._transform(data)
            else:
                for t in self._transform:
                    data = t(data)
        return data

    def _resolve_batch_size(self, batch_size: int | None) -> int:
        bs = batch_size if batch_size is not None else self._batch_size
        if bs is None:
            raise ValueError(
                "no batch size: pass sample(batch_size) or ReplayBuffer(batch_size=...)"
            )
        return bs

    def sample(self, batch_size: int | None = None, return_info: bool = False) -> Any:
        """Samples a batch (transformed if the buffer has transforms).

        Args:
            batch_size: the number of items; the buffer's ``batch_size`` if ``None``.
            return_info: also return the sampler's info dict (useful when the
                data is not a TensorDict and cannot carry ``"index"``).

        Returns:
            The batch, or ``(batch, info)`` with ``info`` holding ``"index"`` and
            the sampler's extras.
        """
        index, info = self._sampler.sample(self._storage, self._resolve_batch_size(batch_size))
        data = self._finish(index, info)
        if return_info:
            return data, dict(info, index=index)
        return data

    def __iter__(self) -> Iterator[Any]:
        """One pass over the stored items in minibatches of ``batch_size``.

        Each item is visited exactly once. The order is a fresh permutation
        (or storage order, with a ``SamplerWithoutReplacement(shuffle=False)``),
        and the last short batch is dropped only with ``drop_last=True`` on a
        :class:`SamplerWithoutReplacement`. The sampler's state is not touched.
        """
        bs = self._resolve_batch_size(None)
        n = len(self)
        shuffle, drop_last = True, False
        if isinstance(self._sampler, SamplerWithoutReplacement):
            shuffle, drop_last = self._sampler.shuffle, self._sampler.drop_last
        perm = torch.randperm(n, generator=self._generator) if shuffle else torch.arange(n)
        for start in range(0, n, bs):
            index = perm[start : start + bs]
            if drop_last and len(index) < bs:
                return
            yield self._finish(index, {})

    # -- priorities ---------------------------------------------------------
    def update_priority(self, index: Any, priority: Any) -> None:
        """Sets the priorities of stored items (a no-op without priorities).

        Args:
            index: slots (``td["index"]`` of a sample), any shape.
            priority: one per slot, per agent ``[N, n_agents, ...]`` (reduced by
                the sampler's ``reduction``), or one number for all.

        Raises:
            IndexError: for a slot that holds no item.
            ValueError: for a NaN, inf or negative priority, or a shape mismatch.
        """
        if not self._prioritized:
            return
        if isinstance(index, int):
            index = np.array([index], dtype=np.int64)
        elif isinstance(index, torch.Tensor):
            index = index.detach().cpu().numpy()
        index = np.asarray(index)
        try:
            # The slot check (against the stored items) runs in the compiled write.
            self._sampler.update_priority_below(index, priority, len(self))
        except IndexError:
            raise IndexError(
                f"priority indices must lie in [0, {len(self)}) (the stored items), "
                f"got values in [{index.min()}, {index.max()}]"
            ) from None

    def update_tensordict_priority(self, data: TensorDictBase) -> None:
        """Updates priorities from ``data["index"]`` and ``data[priority_key]``.

        Args:
            data: a sampled batch to which the loss wrote ``priority_key``
                (``"td_error"`` by default).

        Raises:
            KeyError: if ``data`` lacks ``"index"`` or the priority key.
        """
        if not self._prioritized:
            return
        for key in ("index", self.priority_key):
            if key not in data.keys(True):
                raise KeyError(f"update_tensordict_priority: the data has no {key!r} entry")
        index = data.get("index")
        # Undo _fit: an index broadcast over items' own batch dims has stride 0
        # there; the priorities of those rows are then reduced per item.
        while index.ndim > 1 and index.stride(-1) == 0:
            index = index[..., 0]
        self.update_priority(index, data.get(self.priority_key))

    # -- lifecycle ------------------------------------------------------------
    def empty(self) -> None:
        """Removes every item and resets the writer and the sampler."""
        self._storage.empty()
        self._writer.empty()
        self._sampler.empty()

    def state_dict(self) -> dict[str, Any]:
        """The state of the storage, the sampler and the writer."""
        return {
            "storage": self._storage.state_dict(),
            "sampler": self._sampler.state_dict(),
            "writer": self._writer.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores :meth:`state_dict` output into this buffer's components."""
        self._storage.load_state_dict(state["storage"])
        self._sampler.load_state_dict(state["sampler"])
        self._writer.load_state_dict(state["writer"])

    def dumps(self, path: str | os.PathLike) -> None:
        """Saves the buffer in the folder ``path``: storage files plus component states.

        Args:
            path: the folder (created if needed).
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self._storage.dumps(path / "storage")
        torch.save(self._sampler.state_dict(), path / "sampler.pt")
        torch.save(self._writer.state_dict(), path / "writer.pt")
        meta = {
            "storage": type(self._storage).__name__,
            "sampler": type(self._sampler).__name__,
            "writer": type(self._writer).__name__,
        }
        (path / "buffer.json").write_text(json.dumps(meta))

    def loads(self, path: str | os.PathLike) -> None:
        """Loads what :meth:`dumps` saved into this buffer, which must have the same
        kinds of storage, sampler and writer.

        Args:
            path: the folder :meth:`dumps` wrote.

        Raises:
            ValueError: if the saved components are of other kinds.
        """
        path = Path(path)
        meta = json.loads((path / "buffer.json").read_text())
        mine = {
            "storage": type(self._storage).__name__,
            "sampler": type(self._sampler).__name__,
            "writer": type(self._writer).__name__,
        }
        if meta != mine:
            raise ValueError(f"the saved buffer has components {meta}, this buffer has {mine}")
        self._storage.loads(path / "storage")
        self._sampler.load_state_dict(torch.load(path / "sampler.pt", weights_only=True))
        self._writer.load_state_dict(torch.load(path / "writer.pt", weights_only=True))

    def __repr__(self) -> str:
        return (
            f"ReplayBuffer(storage={self._storage!r}, sampler={self._sampler!r}, "
            f"writer={self._writer!r}, batch_size={self._batch_size})"
        )
