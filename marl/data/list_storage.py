"""A storage of arbitrary Python objects."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from marl.data.storages import Index, Storage

__all__ = ["ListStorage"]


class ListStorage(Storage):
    """Stores arbitrary Python objects in a list.

    ``get`` returns a list of items (or one item for an int index); the replay
    buffer stacks TensorDicts and tensors into a batch.

    Args:
        max_size: the number of slots.

    Examples:
        >>> storage = ListStorage(3)
        >>> storage.set(slice(0, 2), ["a", "b"])
        >>> len(storage), storage.get(torch.tensor([1, 0]))
        (2, ['b', 'a'])
    """

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
        for i, item in zip(index, data):
            if i > len(self._items):
                raise IndexError(
                    f"ListStorage: slot {i} would leave a gap; {len(self._items)} are filled"
                )
            if i == len(self._items):
                self._items.append(item)
            else:
                self._items[i] = item
        self._len = len(self._items)

    def get(self, index: Index) -> Any:
        if isinstance(index, int):
            return self._items[index]
        if isinstance(index, slice):
            return self._items[index]
        return [self._items[i] for i in index.reshape(-1).tolist()]

    def empty(self) -> None:
        self._items = []
        self._len = 0

    def state_dict(self) -> dict[str, Any]:
        return {"max_size": self.max_size, "items": list(self._items)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if len(state["items"]) > self.max_size:
            raise ValueError(
                f"ListStorage: cannot load {len(state['items'])} items into max_size={self.max_size}"
            )
        self._items = list(state["items"])
        self._len = len(self._items)
