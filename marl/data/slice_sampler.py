"""Sampling contiguous trajectory slices, for recurrent training."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from marl.data.samplers import Sampler, check_nonempty
from marl.data.storages import Storage, TensorStorage

__all__ = ["SliceSampler"]

NestedKey = str | tuple[str, ...]


class SliceSampler(Sampler):
    """Samples contiguous slices of stored trajectories that never cross a boundary.

    Trajectories are runs of consecutive slots with the same ``traj_key``
    value. If the storage has no ``traj_key`` but an ``end_key`` (e.g.
    ``("next", "done")``) is given, a trajectory ends after every slot whose
    end flag is set. Runs are also cut at the slot after the last write (where
    new data meets the oldest data of a circular buffer) and at the end of the
    storage, so a slice never joins data from different writes by accident.

    Every valid slice start is equally likely. The returned index has shape
    ``[num_slices, slice_len]``, so a sample is a ``[num_slices, slice_len]``
    TensorDict with time as the last batch dimension.

    Give exactly one of ``slice_len`` and ``num_slices``; the other is
    ``batch_size // given`` (``batch_size`` must be divisible by it).

    Args:
        slice_len: the length of each slice.
        num_slices: the number of slices per batch.
        traj_key: the per-item trajectory id key.
        end_key: a per-item end-of-trajectory flag, used when ``traj_key`` is absent.
        generator: the ``torch.Generator`` to draw from; the global one if ``None``.

    Examples:
        >>> from tensordict import TensorDict
        >>> from marl.data import TensorStorage
        >>> storage = TensorStorage(10)
        >>> ids = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 2])
        >>> storage.set(slice(0, 10), TensorDict({("collector", "traj_ids"): ids}, [10]))
        >>> sampler = SliceSampler(slice_len=3)
        >>> sampler.extend(torch.arange(10))
        >>> index, _ = sampler.sample(storage, 6)
        >>> index.shape, bool((ids[index] == ids[index[:, :1]]).all())
        (torch.Size([2, 3]), True)
    """

    def __init__(
        self,
        slice_len: int | None = None,
        num_slices: int | None = None,
        traj_key: NestedKey = ("collector", "traj_ids"),
        end_key: NestedKey | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(generator)
        if (slice_len is None) == (num_slices is None):
            raise ValueError(
                "give exactly one of slice_len and num_slices, got "
                f"slice_len={slice_len!r}, num_slices={num_slices!r}"
            )
        for name, value in (("slice_len", slice_len), ("num_slices", num_slices)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.slice_len = slice_len
        self.num_slices = num_slices
        self.traj_key = traj_key
        self.end_key = end_key
        self._cut: int | None = None  # first slot after the last write
        self._cache: tuple[int, torch.Tensor, torch.Tensor] | None = None

    def extend(self, index: torch.Tensor) -> None:
        if index.numel():
            self._cut = int(index.reshape(-1)[-1]) + 1
        self._cache = None

    def add(self, index: int) -> None:
        self._cut = int(index) + 1
        self._cache = None

    def _shape(self, batch_size: int) -> tuple[int, int]:
        given = self.slice_len if self.slice_len is not None else self.num_slices
        if batch_size % given:
            raise ValueError(
                f"batch_size={batch_size} is not divisible by "
                f"{'slice_len' if self.slice_len is not None else 'num_slices'}={given}"
            )
        other = batch_size // given
        return (other, given) if self.slice_len is not None else (given, other)

    def _runs(self, storage: Storage) -> tuple[torch.Tensor, torch.Tensor]:
        """Start slot and length of every run of one trajectory, in storage order."""
        n = len(storage)
        if self._cache is not None and self._cache[0] == n:
            return self._cache[1], self._cache[2]
        if not isinstance(storage, TensorStorage) or storage.storage is None:
            raise TypeError("SliceSampler needs a TensorStorage (or MemmapStorage) of TensorDicts")
        data: TensorDictBase = storage.storage[:n]
        boundary = torch.zeros(n, dtype=torch.bool)  # boundary[i]: a run starts at i
        boundary[0] = True
        if self.traj_key in data.keys(True):
            ids = data.get(self.traj_key).reshape(n, -1)[:, 0]
            boundary[1:] |= ids[1:] != ids[:-1]
        elif self.end_key is not None and self.end_key in data.keys(True):
            ends = data.get(self.end_key).reshape(n, -1).any(dim=1)
            boundary[1:] |= ends[:-1].to("cpu")
        else:
            raise KeyError(
                f"SliceSampler: the storage has neither traj_key={self.traj_key!r} "
                f"nor end_key={self.end_key!r}"
            )
        if self._cut is not None and 0 < self._cut < n:
            boundary[self._cut] = True
        starts = boundary.nonzero().reshape(-1).to("cpu")
        lengths = torch.diff(starts, append=torch.tensor([n]))
        self._cache = (n, starts, lengths)
        return starts, lengths

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        check_nonempty(storage, batch_size)
        num_slices, slice_len = self._shape(batch_size)
        starts, lengths = self._runs(storage)
        # Valid starts per run; each valid start is one equally likely slice.
        counts = (lengths - slice_len + 1).clamp_min(0)
        cum = counts.cumsum(0)
        total = int(cum[-1])
        if total == 0:
            raise RuntimeError(
                f"no stored trajectory is at least slice_len={slice_len} long "
                f"(longest: {int(lengths.max())})"
            )
        draw = torch.randint(total, (num_slices,), generator=self.generator)
        run = torch.searchsorted(cum, draw, right=True)
        offset = draw - (cum[run] - counts[run])
        first = starts[run] + offset
        index = first[:, None] + torch.arange(slice_len)
        return index, {}

    def empty(self) -> None:
        self._cut, self._cache = None, None

    def state_dict(self) -> dict[str, Any]:
        return {"cut": -1 if self._cut is None else self._cut}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        cut = int(state["cut"])
        self._cut, self._cache = (None if cut < 0 else cut), None

    def __repr__(self) -> str:
        return (
            f"SliceSampler(slice_len={self.slice_len}, num_slices={self.num_slices}, "
            f"traj_key={self.traj_key!r})"
        )
