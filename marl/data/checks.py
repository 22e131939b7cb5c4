"""Public checkers for the replay-buffer extension points.

Each runs a new storage, sampler or writer through the contract that
:class:`~marl.data.ReplayBuffer` relies on, and raises ``AssertionError`` with
a message naming the broken rule. The built-in components are tested with them.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from marl.data.samplers import Sampler
from marl.data.storages import Storage, TensorStorage
from marl.data.writers import Writer

__all__ = ["check_sampler", "check_storage", "check_writer"]


def _fail(component: Any, message: str) -> None:
    raise AssertionError(f"{type(component).__name__}: {message}")


def _example_data(n: int) -> TensorDictBase:
    """Items with nested group keys, trajectory ids (runs of 4) and a rank."""
    t = torch.arange(n, dtype=torch.float32)
    return TensorDict(
        {
            "obs": t[:, None].expand(n, 3).clone(),
            ("agents", "observation"): t[:, None, None].expand(n, 2, 5).clone(),
            ("collector", "traj_ids"): torch.arange(n) // 4,
            ("next", "reward"): t[:, None].clone(),
        },
        [n],
    )


def _as_batch(data: Any) -> Any:
    return torch.stack(data) if isinstance(data, list) else data


def check_storage(storage: Storage) -> None:
    """Checks a fresh, empty storage with ``max_size >= 4``.

    It must store and return items, overwrite a slot, round-trip its
    ``state_dict`` and forget everything on ``empty()``.

    Args:
        storage: the storage to check; it is emptied afterwards.

    Raises:
        AssertionError: naming the rule the storage broke.

    Examples:
        >>> check_storage(TensorStorage(16))
    """
    if len(storage) != 0 or storage.max_size < 4:
        _fail(storage, "expected an empty storage with max_size >= 4")
    n = min(storage.max_size, 8)
    data = _example_data(n)
    storage.set(slice(0, n), data)
    if len(storage) != n:
        _fail(storage, f"len is {len(storage)} after writing {n} items")
    index = torch.tensor([n - 1, 0, 2])
    if not (_as_batch(storage.get(index)) == data[index]).all():
        _fail(storage, "get(index) does not return the items written at index")
    storage.set(0, data[1])
    if not (_as_batch(storage.get(torch.tensor([0]))) == data[1:2]).all():
        _fail(storage, "set(int, item) did not overwrite the slot")
    state = copy.deepcopy(storage.state_dict())
    expected = _as_batch(storage.get(torch.arange(n)))
    storage.empty()
    if len(storage) != 0:
        _fail(storage, "len is not 0 after empty()")
    storage.load_state_dict(state)
    if len(storage) != n or not (_as_batch(storage.get(torch.arange(n))) == expected).all():
        _fail(storage, "load_state_dict(state_dict()) does not restore the items")
    storage.empty()


def check_sampler(sampler: Sampler, batch_size: int = 4) -> None:
    """Checks a sampler against a 12-item :class:`TensorStorage`.

    Indices must be ``int64`` slots of stored items; info entries must be
    tensors with one row per index; the same generator seed must give the same
    sample after a ``state_dict`` round trip; ``empty()`` must work.

    Args:
        sampler: the sampler to check (fresh, with no knowledge of a storage).
        batch_size: the batch size to draw (a multiple of a slice length).

    Raises:
        AssertionError: naming the rule the sampler broke.

    Examples:
        >>> from marl.data import RandomSampler
        >>> check_sampler(RandomSampler())
    """
    storage = TensorStorage(16)
    storage.set(slice(0, 12), _example_data(12))
    sampler.extend(torch.arange(12))
    sampler.generator = torch.Generator().manual_seed(0)
    index, info = sampler.sample(storage, batch_size)
    if not isinstance(index, torch.Tensor) or index.dtype != torch.long:
        _fail(sampler, f"indices must be an int64 tensor, got {index!r}")
    if index.numel() != batch_size or index.min() < 0 or index.max() >= len(storage):
        _fail(sampler, f"expected {batch_size} slots in [0, {len(storage)}), got {index.tolist()}")
    for key, value in info.items():
        if not isinstance(value, torch.Tensor) or value.shape[: index.ndim] != index.shape:
            _fail(sampler, f"info[{key!r}] must be a tensor with leading shape {index.shape}")
    clone = copy.deepcopy(sampler)
    clone.load_state_dict(sampler.state_dict())
    for s in (sampler, clone):
        s.generator = torch.Generator().manual_seed(1)
    if not torch.equal(
        sampler.sample(storage, batch_size)[0], clone.sample(storage, batch_size)[0]
    ):
        _fail(sampler, "the same seed after a state_dict round trip gave a different sample")
    sampler.empty()


def check_writer(writer: Writer) -> None:
    """Checks a writer on a 6-slot :class:`TensorStorage`.

    ``extend`` must return one ``int64`` slot per item (``-1`` for dropped
    items), the items must be at those slots, ``add`` must return an int, and
    ``state_dict`` must round-trip.

    Args:
        writer: the writer to check (fresh); it is registered on a new storage.

    Raises:
        AssertionError: naming the rule the writer broke.

    Examples:
        >>> from marl.data import RoundRobinWriter
        >>> check_writer(RoundRobinWriter())
    """
    storage = TensorStorage(6)
    writer.register_storage(storage)
    for start in (0, 4):  # the second batch wraps around or competes for slots
        data = _example_data(start + 4)[start:]
        index = writer.extend(data)
        if not isinstance(index, torch.Tensor) or index.dtype != torch.long or index.shape != (4,):
            _fail(writer, f"extend must return an int64 tensor of shape [4], got {index!r}")
        kept = index >= 0
        if (index[kept] >= storage.max_size).any():
            _fail(writer, f"slots out of range: {index.tolist()}")
        if kept.any() and not (storage.get(index[kept]) == data[kept]).all():
            _fail(writer, "the items are not at the slots extend returned")
    slot = writer.add(_example_data(10)[9])
    if not isinstance(slot, int) or not -1 <= slot < storage.max_size:
        _fail(writer, f"add must return an int slot or -1, got {slot!r}")
    state = copy.deepcopy(writer.state_dict())
    writer.empty()
    writer.load_state_dict(state)
    if writer.state_dict().keys() != state.keys():
        _fail(writer, "load_state_dict(state_dict()) changed the state's keys")
