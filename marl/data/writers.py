"""Writers: which slot each new item goes to."""

from __future__ import annotations

import abc
from typing import Any

import torch
from tensordict import TensorDictBase

from marl.data.storages import Stateful, Storage

__all__ = ["MaxValueWriter", "RoundRobinWriter", "Writer"]

NestedKey = str | tuple[str, ...]


def _num_items(data: Any) -> int:
    if isinstance(data, (TensorDictBase, torch.Tensor)):
        if not data.shape:
            raise ValueError("extend needs data with a leading item dimension, got a 0-d batch")
        return data.shape[0]
    return len(data)


def _take(data: Any, index: Any) -> Any:
    """Rows of ``data`` (a TensorDict, a tensor or a list) at ``index``."""
    if isinstance(data, (TensorDictBase, torch.Tensor)):
        return data[index]
    if isinstance(index, slice):
        return data[index]
    return [data[i] for i in index.tolist()]


class Writer(Stateful):
    """Base class of writers. The replay buffer registers its storage on it."""

    def __init__(self) -> None:
        self._storage: Storage | None = None

    def register_storage(self, storage: Storage) -> None:
        """Attaches the storage this writer writes to."""
        self._storage = storage

    @property
    def storage(self) -> Storage:
        """The registered storage."""
        if self._storage is None:
            raise RuntimeError(
                f"{type(self).__name__} has no storage; use it through a ReplayBuffer"
            )
        return self._storage

    @abc.abstractmethod
    def add(self, data: Any) -> int:
        """Writes one item; returns its slot (-1 if it was not kept)."""

    @abc.abstractmethod
    def extend(self, data: Any) -> torch.Tensor:
        """Writes a batch; returns one slot per item (-1 where not kept)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RoundRobinWriter(Writer):
    """Writes to slots 0, 1, 2, ... and wraps around, overwriting the oldest items.

    A batch larger than the storage keeps only its last ``max_size`` items
    (the returned index still has one slot per item; earlier items' slots
    were overwritten within the same call).

    Examples:
        >>> from marl.data import TensorStorage
        >>> writer = RoundRobinWriter()
        >>> writer.register_storage(TensorStorage(4))
        >>> writer.extend(torch.arange(3.0)).tolist(), writer.extend(torch.arange(3.0)).tolist()
        ([0, 1, 2], [3, 0, 1])
    """

    def __init__(self) -> None:
        super().__init__()
        self._cursor = 0
        self._written = 0

    def add(self, data: Any) -> int:
        index = self._cursor
        self.storage.set(index, data)
        self._cursor = (index + 1) % self.storage.max_size
        self._written += 1
        return index

    def extend(self, data: Any) -> torch.Tensor:
        cap = self.storage.max_size
        n = _num_items(data)
        start = self._cursor
        index = (torch.arange(n) + start) % cap
        if n > cap:  # only the last `cap` items survive; write just those
            skip = n - cap
            data, start = _take(data, slice(skip, n)), (start + skip) % cap
            n = cap
        # Contiguous slice writes are much cheaper than scattered index writes.
        first = min(n, cap - start)
        if first:
            self.storage.set(slice(start, start + first), _take(data, slice(0, first)))
        if n > first:
            self.storage.set(slice(0, n - first), _take(data, slice(first, n)))
        self._cursor = (start + n) % cap
        self._written += len(index)
        return index

    def empty(self) -> None:
        self._cursor, self._written = 0, 0

    def state_dict(self) -> dict[str, Any]:
        return {"cursor": self._cursor, "written": self._written}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._cursor, self._written = int(state["cursor"]), int(state["written"])


class MaxValueWriter(Writer):
    """Keeps the ``max_size`` items with the highest rank seen so far.

    An item's rank is ``data[rank_key]`` reduced to a scalar (``reduction``
    over every non-item dimension). While the storage has free slots every
    item is kept; once full, a new item replaces the lowest-ranked stored item
    only if its rank is strictly higher (ties keep the older item).

    Args:
        rank_key: the key to rank items by, e.g. ``("next", "reward")``.
        reduction: ``"sum"``, ``"max"``, ``"min"`` or ``"mean"``.

    Examples:
        >>> from tensordict import TensorDict
        >>> from marl.data import TensorStorage
        >>> writer = MaxValueWriter("r")
        >>> writer.register_storage(TensorStorage(2))
        >>> writer.extend(TensorDict({"r": torch.tensor([1.0, 5.0, 3.0])}, [3])).tolist()
        [-1, 0, 1]
        >>> writer.extend(TensorDict({"r": torch.tensor([4.0])}, [1])).tolist()
        [1]
    """

    _REDUCTIONS = ("sum", "max", "min", "mean")

    def __init__(self, rank_key: NestedKey, reduction: str = "sum") -> None:
        super().__init__()
        if reduction not in self._REDUCTIONS:
            raise ValueError(f"reduction must be one of {self._REDUCTIONS}, got {reduction!r}")
        self.rank_key = rank_key
        self.reduction = reduction
        self._ranks: torch.Tensor | None = None
        self._filled = 0

    def _ensure(self) -> torch.Tensor:
        if self._ranks is None:
            self._ranks = torch.full((self.storage.max_size,), -torch.inf, dtype=torch.float64)
        return self._ranks

    def _rank(self, data: Any, n: int) -> torch.Tensor:
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"MaxValueWriter ranks TensorDicts, got {type(data).__name__}")
        if self.rank_key not in data.keys(True):
            raise KeyError(f"MaxValueWriter: rank_key {self.rank_key!r} is not in the data")
        r = data.get(self.rank_key).detach().to("cpu", torch.float64).reshape(n, -1)
        if self.reduction == "max":
            return r.amax(dim=1)
        if self.reduction == "min":
            return r.amin(dim=1)
        return r.sum(dim=1) if self.reduction == "sum" else r.mean(dim=1)

    def add(self, data: Any) -> int:
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"MaxValueWriter ranks TensorDicts, got {type(data).__name__}")
        return int(self.extend(data.unsqueeze(0))[0])

    def extend(self, data: Any) -> torch.Tensor:
        ranks = self._ensure()
        cap = self.storage.max_size
        n = _num_items(data)
        new_rank = self._rank(data, n)
        out = torch.full((n,), -1, dtype=torch.long)
        free = cap - self._filled
        if n <= free:
            slots = torch.arange(self._filled, self._filled + n)
            keep = torch.arange(n)
        else:
            # Only the k lowest stored items can lose their slot to n newcomers.
            k = min(n, self._filled)
            low = torch.topk(ranks[: self._filled], k, largest=False).indices
            pool_rank = torch.cat([ranks[low], new_rank])
            # Stable sort on descending rank: ties favour stored items, then earlier ones.
            order = torch.sort(-pool_rank, stable=True).indices[: k + free]
            winners_new = order[order >= k] - k
            stay = torch.zeros(k, dtype=torch.bool)
            stay[order[order < k]] = True
            avail = torch.cat([low[~stay], torch.arange(self._filled, cap)])
            keep = winners_new.sort().values
            slots = avail[: len(keep)]
        if len(keep):
            self.storage.set(slots, _take(data, keep))
            ranks[slots] = new_rank[keep]
            out[keep] = slots
        self._filled = min(cap, self._filled + min(n, free))
        return out

    def empty(self) -> None:
        self._ranks, self._filled = None, 0

    def state_dict(self) -> dict[str, Any]:
        return {"ranks": self._ranks, "filled": self._filled}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._ranks, self._filled = state["ranks"], int(state["filled"])

    def __repr__(self) -> str:
        return f"MaxValueWriter(rank_key={self.rank_key!r}, reduction={self.reduction!r})"
