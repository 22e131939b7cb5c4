"""Replay-buffer storages: where items live.

A storage holds up to ``max_size`` items in slots ``0 .. max_size - 1``. The
writer decides which slot each new item goes to; the sampler decides which
slots to read. ``len(storage)`` is one past the highest slot ever written,
which for the built-in writers is the number of valid items (they fill slots
in order before overwriting).

- :class:`~marl.data.ListStorage` (in ``list_storage.py``) keeps arbitrary
  Python objects in a list.
- :class:`TensorStorage` keeps a preallocated ``TensorDict`` (or tensor) whose
  first dimension is the slot, shaped lazily from the first data, on any device.
- :class:`MemmapStorage` is a :class:`TensorStorage` whose leaves are
  ``tensordict.MemoryMappedTensor`` files on disk.
"""

from __future__ import annotations

import abc
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from marl import _C

__all__ = ["MemmapStorage", "Stateful", "Storage", "TensorStorage"]

Index = int | slice | torch.Tensor

# Plain tensors are stored as the single leaf of a TensorDict so that one code
# path (preallocation, memmap, save/load) serves both kinds of data.
_TENSOR_KEY = "_tensor"
# torch's intra-op grain (at::internal::GRAIN_SIZE): smaller copies stay serial.
_SERIAL_COPY_ELEMS = 32768


def _check_max_size(max_size: int) -> int:
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
        raise ValueError(f"max_size must be a positive int, got {max_size!r}")
    return max_size


def _end_of(index: Index) -> int:
    """One past the highest slot that ``index`` writes."""
    if isinstance(index, int):
        return index + 1
    if isinstance(index, slice):
        return index.stop
    return int(index.max()) + 1 if index.numel() else 0


class Stateful(abc.ABC):
    """What a replay buffer's storage and writer share: they can be emptied, and saved
    and restored (the buffer's ``state_dict`` holds theirs)."""

    @abc.abstractmethod
    def empty(self) -> None:
        """Forgets what was written: the items (a storage) or the bookkeeping (a writer)."""

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """A copy of the state: a storage's valid items and bookkeeping, a writer's own."""

    @abc.abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores :meth:`state_dict` output."""


class Storage(Stateful):
    """Base class of storages.

    Args:
        max_size: the number of slots.
    """

    legacy_globals: tuple[tuple[Any, str], ...] = ()
    """``(object, "module.name")`` pairs of this storage's own that files written by
    earlier versions pickled: allowed as data by :meth:`loads`."""

    def __init__(self, max_size: int) -> None:
        self.max_size = _check_max_size(max_size)
        self._len = 0

    def __len__(self) -> int:
        return self._len

    @abc.abstractmethod
    def set(self, index: Index, data: Any) -> None:
        """Writes ``data`` at ``index``: one item for an int, a batch otherwise."""

    @abc.abstractmethod
    def get(self, index: Index) -> Any:
        """Reads the items at ``index``."""

    def dumps(self, path: str | os.PathLike) -> None:
        """Saves the storage in the folder ``path`` (created if needed)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        torch.save(self.state_dict(), path / "storage.pt")

    def loads(self, path: str | os.PathLike, *, trusted: bool = False) -> None:
        """Loads what :meth:`dumps` saved in ``path`` into this storage.

        The file is read as data (``weights_only``, :func:`marl.serialization.load`):
        items that are tensors, TensorDicts, numbers, strings and plain containers load;
        other objects (a ``ListStorage`` may hold any) are refused unless ``trusted=True``
        (only a file you trust: unpickling it can run code).
        """
        from marl.serialization import load

        file = Path(path) / "storage.pt"
        state = load(
            file, trusted=trusted, what="replay-buffer storage", extra_globals=self.legacy_globals
        )
        self.load_state_dict(state)

    def _check_index(self, index: Index) -> None:
        end = _end_of(index)
        start = index if isinstance(index, int) else 0
        if isinstance(index, slice):
            start = index.start or 0
        elif isinstance(index, torch.Tensor) and index.numel():
            start = int(index.min())
        if start < 0 or end > self.max_size:
            raise IndexError(
                f"{type(self).__name__}: slots must lie in [0, {self.max_size}), "
                f"got [{start}, {end})"
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_size={self.max_size}, len={len(self)})"


def _available_memory(device: torch.device) -> int | None:
    """Bytes that an allocation on ``device`` may take now, or ``None`` when unknown.

    CPU: Linux's ``MemAvailable`` plus free swap (``/proc/meminfo``); CUDA: the device's
    free memory. Elsewhere (macOS, Windows, other devices) ``None``: no check is made.
    """
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type != "cpu":
        return None
    try:
        with open("/proc/meminfo") as f:
            fields = {line.split(":")[0]: line.split()[1] for line in f if ":" in line}
        return (int(fields["MemAvailable"]) + int(fields.get("SwapFree", 0))) * 1024
    except (OSError, KeyError, ValueError, IndexError):
        return None


def _check_fits(max_size: int, item: TensorDictBase, device: torch.device) -> None:
    """Refuse a preallocation larger than the memory available, before making it.

    The zero-filled preallocation touches every page at once: without this check a
    buffer too large for the machine gets the process killed by the OS (exit 137), with
    no Python error saying why.
    """
    row = sum(x.numel() * x.element_size() for x in item.values(True, True))
    needed = row * max_size
    available = _available_memory(device)
    if available is None or needed <= available:
        return
    gib = 1024**3
    largest = max(item.items(True, True), key=lambda kv: kv[1].numel() * kv[1].element_size())
    raise MemoryError(
        f"a replay storage of {max_size:,} items needs {needed / gib:.1f} GiB on {device} "
        f"({row:,} bytes an item; the largest entry {largest[0]!r} has shape "
        f"{tuple(largest[1].shape)}), but {available / gib:.1f} GiB are available: lower the "
        f"buffer size (the algorithm's buffer_size), or store on disk with MemmapStorage"
    )


class TensorStorage(Storage):
    """Preallocated TensorDict (or tensor) storage, shaped from the first data.

    The first write fixes the keys, shapes and dtypes: the storage becomes a
    ``TensorDict`` of batch size ``[max_size, *item_batch]`` on ``device``.
    Nested keys (e.g. ``("agents", "observation")`` of shape ``[n_agents, obs]``)
    are stored as they are. Later writes must carry the same keys.

    Args:
        max_size: the number of slots.
        device: where the data lives (``"cpu"`` or a CUDA device).

    Examples:
        >>> from tensordict import TensorDict
        >>> storage = TensorStorage(100)
        >>> storage.set(slice(0, 4), TensorDict({"obs": torch.ones(4, 3)}, [4]))
        >>> storage.get(torch.tensor([0, 3]))["obs"].shape
        torch.Size([2, 3])
    """

    def __init__(self, max_size: int, device: str | torch.device = "cpu") -> None:
        super().__init__(max_size)
        self.device = torch.device(device)
        self._storage: TensorDictBase | None = None
        self._is_tensor = False
        self._keys: frozenset | None = None
        self._leaves: list[tuple[Any, torch.Tensor]] = []
        self._arrays: list[np.ndarray] | None = None  # see _host_arrays
        self._item_batch: tuple[int, ...] = ()

    # -- allocation ---------------------------------------------------------
    def _allocate(self, item: TensorDictBase) -> TensorDictBase:
        _check_fits(self.max_size, item, self.device)
        # zeros, not empty: one up-front fill faults the pages in far faster than
        # the first chunked writes would (measured 10x on 1M-item buffers), and
        # unwritten slots hold zeros rather than garbage.
        return item.apply(
            lambda x: torch.zeros((self.max_size, *x.shape), dtype=x.dtype, device=self.device),
            batch_size=[self.max_size, *item.batch_size],
            device=self.device,
        )

    def _wrap(self, data: Any, single: bool) -> TensorDictBase:
        is_tensor = isinstance(data, torch.Tensor)
        if not is_tensor and not isinstance(data, TensorDictBase):
            raise TypeError(
                f"{type(self).__name__} stores TensorDicts or tensors, got {type(data).__name__}"
            )
        if self._storage is not None and is_tensor != self._is_tensor:
            kinds = ("TensorDicts", "plain tensors")
            raise TypeError(
                f"{type(self).__name__} holds {kinds[self._is_tensor]}; got {kinds[is_tensor]}"
            )
        if self._storage is None:
            self._is_tensor = is_tensor
        if is_tensor:
            bs = data.shape[:0] if single else data.shape[:1]
            return TensorDict({_TENSOR_KEY: data}, batch_size=bs)
        return data

    def _ensure_storage(self, data: TensorDictBase, single: bool) -> None:
        if self._storage is not None:
            return
        item = data if single else data[0]
        self._storage = self._allocate(item)
        self._keys = frozenset(self._storage.keys(True, True))
        self._leaves = [(k, self._storage.get(k)) for k in self._storage.keys(True, True)]
        self._arrays = None
        self._item_batch = tuple(item.batch_size)

    # -- api ----------------------------------------------------------------
    def set(self, index: Index, data: Any) -> None:
        self._check_index(index)
        single = isinstance(index, int)
        data = self._wrap(data, single)
        if not single and data.batch_dims == 0:
            raise ValueError(
                f"{type(self).__name__}: a batch write needs data with a leading item "
                f"dimension, got batch_size={list(data.batch_size)}"
            )
        self._ensure_storage(data, single)
        keys = frozenset(data.keys(True, True))
        if keys != self._keys:
            raise KeyError(
                f"{type(self).__name__}: expected the keys {sorted(map(str, self._keys))}, "
                f"got {sorted(map(str, keys))}"
            )
        if data.device != self.device:
            data = data.to(self.device)
        item_batch = tuple(data.batch_size[0 if single else 1 :])
        if item_batch != self._item_batch:
            raise ValueError(
                f"{type(self).__name__}: items have batch size {list(self._item_batch)}, "
                f"got data whose items have {list(item_batch)}"
            )
        if isinstance(index, slice) and self.device.type == "cpu":
            self._write_rows(index.start or 0, data)
        else:
            self._storage[index] = data
        self._len = max(self._len, _end_of(index))

    def _write_rows(self, start: int, data: TensorDictBase) -> None:
        # Copy in blocks under torch's parallel grain (32768 elements): each
        # block is copied on this thread. One big copy forks intra-op threads,
        # and on a busy machine waits milliseconds for a descheduled worker
        # (measured: 8 ms instead of 60 us for a 10k x 32 float block).
        n = data.batch_size[0]
        pairs = [(dst, data.get(key)) for key, dst in self._leaves]
        for (key, dst), (_, src) in zip(self._leaves, pairs):  # validate all before writing
            if src.shape[1:] != dst.shape[1:]:
                raise ValueError(
                    f"{type(self).__name__}: {key!r} has item shape {list(dst.shape[1:])}, "
                    f"got {list(src.shape[1:])}"
                )
        for dst, src in pairs:
            step = max(1, _SERIAL_COPY_ELEMS // max(1, dst[0].numel()))
            for i in range(0, n, step):
                j = min(n, i + step)
                dst[start + i : start + j].copy_(src[i:j])

    def get(self, index: Index) -> Any:
        if self._storage is None:
            raise RuntimeError(f"{type(self).__name__} is empty: nothing has been written")
        if isinstance(index, torch.Tensor) and index.dtype in (torch.int64, torch.int32):
            out = self._gather(index)
        else:
            out = self._storage[index]
        return out.get(_TENSOR_KEY) if self._is_tensor else out

    def _gather(self, index: torch.Tensor) -> TensorDictBase:
        flat = index.reshape(-1)
        shape = tuple(index.shape)
        arrays = self._host_arrays()
        if arrays is not None and flat.device.type == "cpu":
            # Sampled rows are random in a buffer larger than the caches: one
            # compiled call gathers every leaf, prefetching rows ahead so that
            # their cache misses overlap (index_select takes them one at a time).
            rows = _C.gather_rows(arrays, flat.numpy())
            leaves = {
                k: torch.from_numpy(r).view(*shape, *x.shape[1:])
                for (k, x), r in zip(self._leaves, rows)
            }
        else:
            # index_select, not td[index]: aten::index may fork intra-op threads
            # and stall when another process holds the other core.
            flat = flat.to(self.device)
            leaves = {
                k: x.index_select(0, flat).view(*shape, *x.shape[1:]) for k, x in self._leaves
            }
        return TensorDict(leaves, batch_size=[*shape, *self._item_batch], device=self.device)

    def _host_arrays(self) -> list[np.ndarray] | None:
        """Numpy views of the leaves for the compiled gather (``None`` off the CPU, or
        for dtypes numpy lacks). Made on first use and never pickled, so that they
        always alias this storage's own tensors."""
        if self._arrays is None:
            arrays: list[np.ndarray] = []
            if self.device.type == "cpu" and all(x.is_contiguous() for _, x in self._leaves):
                try:
                    arrays = [x.detach().numpy() for _, x in self._leaves]
                except TypeError:  # a dtype numpy lacks (bfloat16...): index_select
                    arrays = []
            self._arrays = arrays
        return self._arrays or None

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__, _arrays=None)

    @property
    def storage(self) -> TensorDictBase | None:
        """The preallocated TensorDict (``None`` before the first write)."""
        return self._storage

    def empty(self) -> None:
        # Keep the allocation: the next writes overwrite it in place.
        self._len = 0

    def state_dict(self) -> dict[str, Any]:
        """The valid items and the bookkeeping; TensorDicts as plain nested dicts of
        tensors (:func:`marl.serialization.td_to_plain`), so that a checkpoint holding
        them loads with ``torch.load(weights_only=True)``."""
        from marl.serialization import td_to_plain

        data = None
        if self._storage is not None:
            data = self._storage[: self._len].to_tensordict()
            data = data.to("cpu").clone() if data.device != torch.device("cpu") else data
        return {
            "max_size": self.max_size,
            "len": self._len,
            "is_tensor": self._is_tensor,
            "data": None if data is None else td_to_plain(data),
            "template": None
            if self._storage is None
            else td_to_plain(self._storage[0].to("cpu").clone()),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        n = int(state["len"])
        if n > self.max_size:
            raise ValueError(
                f"{type(self).__name__}: cannot load {n} items into max_size={self.max_size}"
            )
        template = _as_td(state.get("template"))
        if template is None:
            self._len = 0
            return
        self._is_tensor = bool(state["is_tensor"])
        if self._storage is None:
            self._ensure_storage(template, single=True)
        if n:
            self._storage[:n] = _as_td(state["data"]).to(self.device)
        self._len = n

    def dumps(self, path: str | os.PathLike) -> None:
        """Saves the valid items as memory-mapped files under ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        meta = {"max_size": self.max_size, "len": self._len, "is_tensor": self._is_tensor}
        if self._storage is not None:
            self._storage[0].memmap(prefix=path / "template", copy_existing=True)
            self._storage[: max(self._len, 1)].memmap(prefix=path / "data", copy_existing=True)
        (path / "storage.json").write_text(json.dumps(meta))

    def loads(self, path: str | os.PathLike) -> None:
        """Loads what :meth:`dumps` saved under ``path`` into this storage."""
        path = Path(path)
        meta = json.loads((path / "storage.json").read_text())
        state = dict(meta, data=None, template=None)
        if (path / "template").exists():
            state["template"] = TensorDict.load_memmap(path / "template")
            state["data"] = TensorDict.load_memmap(path / "data")[: meta["len"]]
        self.load_state_dict(state)

    def __repr__(self) -> str:
        shape = None if self._storage is None else self._storage.batch_size
        return (
            f"{type(self).__name__}(max_size={self.max_size}, len={len(self)}, "
            f"device={self.device}, batch_size={shape})"
        )


def _as_td(value: Any) -> Any:
    """A saved TensorDict: the plain form of :meth:`TensorStorage.state_dict`, or a
    TensorDict (older checkpoints and in-memory states)."""
    if value is None or isinstance(value, TensorDictBase):
        return value
    from marl.serialization import td_from_plain

    return td_from_plain(value)


class MemmapStorage(TensorStorage):
    """A :class:`TensorStorage` kept on disk in memory-mapped files.

    The first write creates one ``MemoryMappedTensor`` file per leaf under
    ``path`` (through ``TensorDict.memmap_like``). :meth:`dumps` copies the
    valid items to another folder; :meth:`loads` reads them back, in this or in
    a fresh process, with identical content.

    Args:
        max_size: the number of slots.
        path: the folder of the memmap files; a new temporary folder if ``None``.

    Examples:
        >>> from tensordict import TensorDict
        >>> storage = MemmapStorage(1000)
        >>> storage.set(0, TensorDict({"obs": torch.arange(3.0)}, []))
        >>> storage.get(0)["obs"].tolist()
        [0.0, 1.0, 2.0]
    """

    def __init__(self, max_size: int, path: str | os.PathLike | None = None) -> None:
        super().__init__(max_size, device="cpu")
        self.path = Path(path) if path is not None else Path(tempfile.mkdtemp(prefix="marl_rb_"))

    def _allocate(self, item: TensorDictBase) -> TensorDictBase:
        self.path.mkdir(parents=True, exist_ok=True)
        # expand() is a view; memmap_like allocates full-size files from its shape.
        expanded = item.expand(self.max_size, *item.batch_size)
        return expanded.memmap_like(prefix=self.path, existsok=True)

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", path={str(self.path)!r})"
