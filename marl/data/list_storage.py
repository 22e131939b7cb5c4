"""A storage of arbitrary Python objects."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from marl.data.storages import Index, Storage

__all__ = ["LEGACY_GLOBALS", "ListStorage"]


class _Unset:
    """Marks a slot below ``len(storage)`` that was never written."""

    def __repr__(self) -> str:
        return "<unset>"

    def __reduce__(self) -> str:
        return "_UNSET"  # pickles as a reference: the sentinel stays a singleton


_UNSET = _Unset()

LEGACY_GLOBALS = ((_UNSET, "marl.data.list_storage._UNSET"),)
"""What earlier versions pickled of this module (the unset marker): data, allowed when a
file names it (``marl.serialization.load(..., extra_globals=LEGACY_GLOBALS)``)."""
_TD = "__marl_tensordict__"  # marks a TensorDict item in state_dict()


class ListStorage(Storage):
    """Stores arbitrary Python objects in a list.

    ``get`` returns a list of items (or one item for an int index); the replay
    buffer stacks TensorDicts and tensors into a batch.

    Any slot in ``[0, max_size)`` may be written in any order, as in
    :class:`~marl.data.TensorStorage`: a writer that wraps around (a first
    ``extend`` larger than the storage) fills the upper slots first. Slots
    below ``len(storage)`` that were never written raise on ``get``, where a
    ``TensorStorage`` would return zeros.

    Args:
        max_size: the number of slots.

    Examples:
        >>> storage = ListStorage(3)
        >>> storage.set(slice(0, 2), ["a", "b"])
        >>> len(storage), storage.get(torch.tensor([1, 0]))
        (2, ['b', 'a'])
    """

    legacy_globals = LEGACY_GLOBALS

    def __init__(self, max_size: int) -> None:
        super().__init__(max_size)
        self._items: list[Any] = []

    def set(self, index: Index, data: Any) -> None:
        self._check_index(index)
        if isinstance(index, int):
            index, data = [index], [data]
        elif isinstance(index, slice):
            index = range(index.start or 0, index.stop)
        else:
            index = index.reshape(-1).tolist()
        if isinstance(data, (TensorDictBase, torch.Tensor)):
            data = data.unbind(0)
        if len(data) != len(index):
            raise ValueError(f"ListStorage: got {len(data)} items for {len(index)} slots")
        if len(index):
            end = max(index) + 1
            if end > len(self._items):
                self._items.extend([_UNSET] * (end - len(self._items)))
        for i, item in zip(index, data):
            self._items[i] = item
        self._len = len(self._items)

    def _read(self, i: int) -> Any:
        item = self._items[i]
        if item is _UNSET:
            raise IndexError(
                f"slot {i} of the ListStorage was never written (slots below {self._len} "
                "were skipped by the writer)"
            )
        return item

    def get(self, index: Index) -> Any:
        if isinstance(index, int):
            return self._read(index)
        if isinstance(index, slice):
            return [self._read(i) for i in range(*index.indices(self._len))]
        return [self._read(i) for i in index.reshape(-1).tolist()]

    def empty(self) -> None:
        self._items = []
        self._len = 0

    def state_dict(self) -> dict[str, Any]:
        """The items (TensorDicts as plain dicts of tensors) and the unwritten slots.

        Tensors, TensorDicts, numbers, strings and plain containers load back from a
        checkpoint as data (``weights_only``). Items of other types are saved as they
        are, and such a checkpoint loads only with ``trusted=True`` (their unpickling
        can run code): see :mod:`marl.serialization`.
        """
        from marl.serialization import td_to_plain

        items = [
            None
            if item is _UNSET
            else {_TD: td_to_plain(item)}
            if isinstance(item, TensorDictBase)
            else item
            for item in self._items
        ]
        unset = [i for i, item in enumerate(self._items) if item is _UNSET]
        return {"max_size": self.max_size, "items": items, "unset": unset}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        from marl.serialization import td_from_plain

        if len(state["items"]) > self.max_size:
            raise ValueError(
                f"ListStorage: cannot load {len(state['items'])} items into max_size={self.max_size}"
            )
        items = [
            td_from_plain(item[_TD]) if isinstance(item, dict) and set(item) == {_TD} else item
            for item in state["items"]
        ]
        for i in state.get("unset", ()):
            items[i] = _UNSET
        self._items = items
        self._len = len(self._items)
