"""Samplers: which stored items a replay buffer returns.

A sampler's :meth:`Sampler.sample` gets the storage and a batch size and
returns ``(index, info)``: a ``LongTensor`` of slots and a dict of extra
per-item tensors (e.g. ``"priority_weight"``) that the buffer adds to the batch.
The buffer tells the sampler about writes through :meth:`Sampler.extend`.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
import torch

from marl import _C
from marl.data._trees import MinTree, SumTree, tree_dtype_name
from marl.data.storages import Storage

__all__ = [
    "PrioritizedSampler",
    "RandomSampler",
    "Sampler",
    "SamplerWithoutReplacement",
]


def check_nonempty(storage: Storage, batch_size: int) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    n = len(storage)
    if n == 0:
        raise RuntimeError("cannot sample from an empty replay buffer")
    return n


class Sampler(abc.ABC):
    """Base class of samplers.

    Args:
        generator: the ``torch.Generator`` to draw from; the global one if ``None``.
    """

    def __init__(self, generator: torch.Generator | None = None) -> None:
        self.generator = generator

    @abc.abstractmethod
    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        """Draws ``batch_size`` slots from ``storage``; returns ``(index, info)``."""

    def extend(self, index: torch.Tensor) -> None:  # noqa: B027 - optional hook
        """Called with the slots just written."""

    def add(self, index: int) -> None:
        """Called with the slot of a single written item."""
        self.extend(torch.tensor([index], dtype=torch.long))

    def update_priority(self, index: Any, priority: Any) -> None:  # noqa: B027
        """Sets priorities; a no-op for samplers without priorities."""

    def empty(self) -> None:  # noqa: B027 - optional hook
        """Forgets everything the sampler learned about the storage."""

    def state_dict(self) -> dict[str, Any]:
        """The sampler's state (without the generator, which the caller owns)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027
        """Restores :meth:`state_dict` output."""

    @property
    def ran_out(self) -> bool:
        """Whether an epoch just ended (only samplers without replacement have epochs)."""
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RandomSampler(Sampler):
    """Uniform sampling with replacement over the stored items.

    Args:
        generator: the ``torch.Generator`` to draw from; the global one if ``None``.

    Examples:
        >>> from marl.data import TensorStorage
        >>> storage = TensorStorage(10)
        >>> storage.set(slice(0, 4), torch.arange(4))
        >>> index, info = RandomSampler().sample(storage, 8)
        >>> index.shape, bool((index < 4).all()), info
        (torch.Size([8]), True, {})
    """

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        n = check_nonempty(storage, batch_size)
        return torch.randint(n, (batch_size,), generator=self.generator), {}


class SamplerWithoutReplacement(Sampler):
    """Epochs of sampling without replacement: each item once per epoch.

    An epoch is a permutation of the stored items (or their order, without
    ``shuffle``), served ``batch_size`` at a time. The last batch of an epoch
    is smaller unless ``drop_last``. A new epoch starts when the current one is
    used up or when the number of stored items changed.

    Args:
        drop_last: skip an epoch's last incomplete batch.
        shuffle: permute each epoch; otherwise serve the slots in order.
        generator: the ``torch.Generator`` to draw from; the global one if ``None``.

    Examples:
        >>> from marl.data import TensorStorage
        >>> storage = TensorStorage(10)
        >>> storage.set(slice(0, 5), torch.arange(5))
        >>> sampler = SamplerWithoutReplacement(shuffle=False)
        >>> [sampler.sample(storage, 2)[0].tolist() for _ in range(3)]
        [[0, 1], [2, 3], [4]]
    """

    def __init__(
        self,
        drop_last: bool = False,
        shuffle: bool = True,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(generator)
        self.drop_last = drop_last
        self.shuffle = shuffle
        self._perm: torch.Tensor | None = None
        self._pos = 0
        self._ran_out = False

    def _new_epoch(self, n: int) -> None:
        self._perm = (
            torch.randperm(n, generator=self.generator) if self.shuffle else torch.arange(n)
        )
        self._pos = 0

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        n = check_nonempty(storage, batch_size)
        if self.drop_last and n < batch_size:
            raise ValueError(
                f"drop_last=True needs at least batch_size={batch_size} items, the buffer has {n}"
            )
        left = 0 if self._perm is None else len(self._perm) - self._pos
        if (
            self._perm is None
            or len(self._perm) != n
            or left == 0
            or (self.drop_last and left < batch_size)
        ):
            self._new_epoch(n)
        index = self._perm[self._pos : self._pos + batch_size]
        self._pos += len(index)
        left = len(self._perm) - self._pos
        self._ran_out = left == 0 or (self.drop_last and left < batch_size)
        return index, {}

    @property
    def ran_out(self) -> bool:
        return self._ran_out

    def empty(self) -> None:
        self._perm, self._pos, self._ran_out = None, 0, False

    def state_dict(self) -> dict[str, Any]:
        return {"perm": self._perm, "pos": self._pos, "ran_out": self._ran_out}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._perm, self._pos, self._ran_out = state["perm"], int(state["pos"]), state["ran_out"]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(drop_last={self.drop_last}, shuffle={self.shuffle})"


_FLOATS = (torch.float32, torch.float64)


def _as_numpy(x: Any, dtype: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.device.type != "cpu":
            x = x.cpu()
        x = x.numpy()
    return np.ascontiguousarray(x, dtype=dtype)


class PrioritizedSampler(Sampler):
    """Prioritized experience replay (Schaul et al., 2016) on C++ segment trees.

    Item ``i`` is drawn with probability ``P(i) = p_i^alpha / sum_j p_j^alpha``
    where ``p_i = priority_i + eps``. New items get the largest priority seen
    so far. Each sample carries the importance weight
    ``w_i = (N * P(i))^-beta / max_j (N * P(j))^-beta``; the maximum weight
    belongs to the smallest priority, which the min tree gives in O(1), so
    ``w_i = (p_i^alpha / min_j p_j^alpha)^-beta`` (the minimum is over items
    that can be drawn: a zero priority, possible with ``eps=0``, is skipped).

    Args:
        capacity: number of slots; at least the storage's ``max_size``.
        alpha: priority exponent (0 is uniform).
        beta: importance-weight exponent; settable, to anneal it towards 1.
        eps: added to every priority so none is exactly 0.
        reduction: ``"max"`` or ``"mean"``: how per-agent priorities
            ``[N, n_agents, ...]`` become one per item.
        dtype: the trees' float type, ``torch.float32`` or ``torch.float64``.
        max_priority: the priority of new items before any update.
        generator: the ``torch.Generator`` to draw from; the global one if ``None``.

    Examples:
        >>> from marl.data import TensorStorage
        >>> storage = TensorStorage(4)
        >>> storage.set(slice(0, 4), torch.zeros(4))
        >>> sampler = PrioritizedSampler(4, alpha=1.0, beta=1.0, eps=0.0)
        >>> sampler.extend(torch.arange(4))
        >>> sampler.update_priority(torch.arange(4), torch.tensor([2.0, 1.0, 1.0, 4.0]))
        >>> index, info = sampler.sample(storage, 1000)
        >>> sorted(set(info["priority_weight"].tolist()))  # min priority / priority
        [0.25, 0.5, 1.0]
        >>> sampler.beta = 0.5  # anneal
    """

    def __init__(
        self,
        capacity: int,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        reduction: str = "max",
        dtype: torch.dtype = torch.float32,
        max_priority: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(generator)
        if not (isinstance(alpha, (int, float)) and alpha >= 0):
            raise ValueError(f"alpha must be a number >= 0, got {alpha!r}")
        if not (isinstance(eps, (int, float)) and eps >= 0):
            raise ValueError(f"eps must be a number >= 0, got {eps!r}")
        if reduction not in ("max", "mean"):
            raise ValueError(f"reduction must be 'max' or 'mean', got {reduction!r}")
        if not (np.isfinite(max_priority) and max_priority > 0):
            raise ValueError(f"max_priority must be finite and > 0, got {max_priority!r}")
        self.capacity = int(capacity)
        self.alpha = float(alpha)
        self.beta = beta
        self.eps = float(eps)
        self.reduction = reduction
        self.dtype = dtype
        self._np_dtype = np.float32 if tree_dtype_name(dtype) == "float32" else np.float64
        self._torch_dtype = torch.float32 if self._np_dtype is np.float32 else torch.float64
        self._init_max_priority = float(max_priority)
        self._max_priority = float(max_priority)
        self._sum = SumTree(self.capacity, dtype)
        self._min = MinTree(self.capacity, dtype)

    @property
    def beta(self) -> float:
        """The importance-weight exponent; assign to anneal it."""
        return self._beta

    @beta.setter
    def beta(self, value: float) -> None:
        if not (isinstance(value, (int, float)) and value >= 0):
            raise ValueError(f"beta must be a number >= 0, got {value!r}")
        self._beta = float(value)

    @property
    def max_priority(self) -> float:
        """The largest priority seen so far: what new items get."""
        return self._max_priority

    @property
    def sum_tree(self) -> Any:
        """The sum tree over ``(priority + eps) ** alpha``."""
        return self._sum

    @property
    def min_tree(self) -> Any:
        """The min tree over ``(priority + eps) ** alpha`` (zeros stored as the largest float)."""
        return self._min

    def _to_tree_values(self, priority: np.ndarray) -> np.ndarray:
        return np.power(priority + self.eps, self.alpha).astype(self._np_dtype, copy=False)

    def extend(self, index: torch.Tensor) -> None:
        idx = _as_numpy(index, np.int64).reshape(-1)
        value = float(self._to_tree_values(np.float64(self._max_priority)))
        self._sum.update(idx, value)
        self._min.update(idx, value)

    def add(self, index: int) -> None:
        value = float(self._to_tree_values(np.float64(self._max_priority)))
        self._sum.update(int(index), value)
        self._min.update(int(index), value)

    def reduce_priority(self, priority: Any, num_items: int) -> np.ndarray:
        """Turns a priority argument into one float64 priority per item.

        Args:
            priority: a number, or an array of shape ``[N]`` or ``[N, *agent_dims]``
                (reduced over the agent dims by ``self.reduction``).
            num_items: ``N``, the number of indices.

        Returns:
            A float64 numpy array of shape ``[N]``.

        Raises:
            ValueError: on a shape that does not fit, or a NaN, inf or negative priority.
        """
        p = _as_numpy(priority, np.float64)
        if p.size == 1 and num_items != 1:
            p = np.full(num_items, p.reshape(()), dtype=np.float64)
        elif p.ndim >= 1 and p.shape[0] == num_items:
            if p.ndim > 1:
                flat = p.reshape(num_items, -1)
                p = flat.max(axis=1) if self.reduction == "max" else flat.mean(axis=1)
        elif p.size == num_items:
            p = p.reshape(num_items)
        else:
            raise ValueError(
                f"expected priorities of shape [{num_items}] or [{num_items}, *agent_dims] "
                f"(one row per index), got shape {list(p.shape)}"
            )
        if not (np.isfinite(p).all() and (p >= 0).all()):
            bad = p[~(np.isfinite(p) & (p >= 0))][0]
            raise ValueError(f"priorities must be finite and >= 0, got {bad}")
        return p

    def update_priority(self, index: Any, priority: Any) -> None:
        """Sets the priorities of the items at ``index``.

        Args:
            index: slots, any shape (flattened).
            priority: one per slot, ``[N]`` or per agent ``[N, *agent_dims]``, or a number.

        Raises:
            IndexError: for a slot outside ``[0, capacity)``.
            ValueError: for a NaN, inf or negative priority, or a shape mismatch.
        """
        self.update_priority_below(index, priority, self.capacity)

    def update_priority_below(self, index: Any, priority: Any, bound: int) -> None:
        """:meth:`update_priority` for slots that must lie in ``[0, bound)``.

        The replay buffer calls it with ``bound = len(buffer)``, so that the slot
        check and the write are one compiled call.

        Args:
            index: slots, any shape (flattened).
            priority: as in :meth:`update_priority`.
            bound: one past the highest valid slot (at most the capacity is used).

        Raises:
            IndexError: for a slot outside ``[0, bound)``.
            ValueError: as :meth:`update_priority`; ``bound`` above the capacity.

        Examples:
            >>> sampler = PrioritizedSampler(8, alpha=1.0, beta=1.0, eps=0.0)
            >>> sampler.update_priority_below(torch.tensor([0, 2]), torch.tensor([3.0, 1.0]), 3)
            >>> sampler.sum_tree.total(), sampler.max_priority
            (4.0, 3.0)
            >>> sampler.update_priority_below(torch.tensor([3]), torch.tensor([1.0]), 3)
            Traceback (most recent call last):
            ...
            IndexError: PrioritizedSampler.update_priority: index 3 (at position 0) is out of range for capacity 3; expected 0 <= index < 3
        """
        idx = _as_numpy(index, np.int64).reshape(-1)
        if (
            isinstance(priority, torch.Tensor)
            and priority.dtype in _FLOATS
            and priority.device.type == "cpu"
            and priority.numel() == idx.size
            and (priority.ndim == 1 or idx.size == 1)
        ):
            # The common case, one float per item: read in place, checked in C++.
            p = priority.detach().reshape(-1).numpy()
        else:
            p = self.reduce_priority(priority, idx.size)
        top = _C.prioritized_update(
            self._sum, self._min, idx, p, self.eps, self.alpha, min(int(bound), self.capacity)
        )
        self._max_priority = max(self._max_priority, top)

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        check_nonempty(storage, batch_size)
        if storage.max_size > self.capacity:
            raise ValueError(
                f"PrioritizedSampler capacity={self.capacity} is smaller than the storage's "
                f"max_size={storage.max_size}"
            )
        if not self._sum.total() > 0:
            raise RuntimeError("every stored item has priority 0: nothing to sample")
        # One compiled call: masses = uniforms * total, the scan, and the weights
        # (p_i / min_j p_j) ** -beta, all in the trees' dtype; weights as float32.
        uniforms = torch.rand(batch_size, generator=self.generator, dtype=self._torch_dtype)
        index, weight = _C.prioritized_sample(self._sum, self._min, uniforms.numpy(), self._beta)
        return torch.from_numpy(index), {"priority_weight": torch.from_numpy(weight)}

    def empty(self) -> None:
        self._sum.clear()
        self._min.clear()
        self._max_priority = self._init_max_priority

    def state_dict(self) -> dict[str, Any]:
        # Tensors, not numpy arrays, so that torch.load(weights_only=True) reads it.
        return {
            "capacity": self.capacity,
            "alpha": self.alpha,
            "beta": self._beta,
            "eps": self.eps,
            "max_priority": self._max_priority,
            "sum": torch.from_numpy(self._sum.state_dict()["values"]),
            "min": torch.from_numpy(self._min.state_dict()["values"]),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if int(state["capacity"]) != self.capacity:
            raise ValueError(
                f"PrioritizedSampler: expected a state with capacity={self.capacity}, "
                f"got {state['capacity']}"
            )
        name = tree_dtype_name(self.dtype)
        for tree, key in ((self._sum, "sum"), (self._min, "min")):
            values = _as_numpy(state[key], self._np_dtype)
            tree.load_state_dict({"capacity": self.capacity, "dtype": name, "values": values})
        self.alpha, self.beta, self.eps = float(state["alpha"]), state["beta"], float(state["eps"])
        self._max_priority = float(state["max_priority"])

    def __repr__(self) -> str:
        return (
            f"PrioritizedSampler(capacity={self.capacity}, alpha={self.alpha}, "
            f"beta={self._beta}, eps={self.eps}, reduction={self.reduction!r})"
        )
