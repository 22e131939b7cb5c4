"""Typed front doors to the compiled segment trees in :mod:`marl._C`.

The extension exposes one class per (operation, dtype): ``SumTreeF32``,
``SumTreeF64``, ``MinTreeF32`` and ``MinTreeF64``. ``SumTree(capacity, dtype)``
and ``MinTree(capacity, dtype)`` pick the right one and return it directly, so
calls go straight to C++ with no Python wrapper in between. ``isinstance``
works against ``SumTree``/``MinTree`` through ABC registration.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
import torch

from marl import _C

__all__ = ["MinTree", "SumTree", "tree_dtype_name"]

_DTYPE_NAMES = {
    torch.float32: "float32",
    torch.float64: "float64",
    np.dtype(np.float32): "float32",
    np.dtype(np.float64): "float64",
    "float32": "float32",
    "float64": "float64",
}


def tree_dtype_name(dtype: Any) -> str:
    """Normalizes a torch/numpy/string float dtype to ``"float32"`` or ``"float64"``.

    Args:
        dtype: ``torch.float32``, ``torch.float64``, the numpy equivalents, or
            their names.

    Returns:
        ``"float32"`` or ``"float64"``.

    Raises:
        TypeError: for any other dtype.
    """
    key = dtype
    if isinstance(dtype, type) and issubclass(dtype, np.generic):
        key = np.dtype(dtype)
    try:
        return _DTYPE_NAMES[key]
    except (KeyError, TypeError):
        raise TypeError(f"segment trees support float32 and float64, got dtype={dtype!r}") from None


class SumTree(abc.ABC):  # noqa: B024 - a virtual base: isinstance via register()
    """Sum segment tree with batched ``update``/``get``/``query``/``scan_lower_bound``.

    Constructing ``SumTree(capacity, dtype)`` returns a compiled
    ``marl._C.SumTreeF32`` or ``SumTreeF64``. Leaves start at 0. Values must be
    finite and non-negative (``ValueError`` otherwise); indices must lie in
    ``[0, capacity)`` (``IndexError`` otherwise). A failed call changes nothing.

    Constructor arguments (it returns the compiled tree):

    - ``capacity``: number of leaves, 1 to 2**40.
    - ``dtype``: ``torch.float32`` (default) or ``torch.float64``, or numpy/string
      equivalents.

    Examples:
        >>> import numpy as np
        >>> tree = SumTree(4)
        >>> tree.update(np.arange(4), np.array([1.0, 0.0, 2.0, 1.0], dtype=np.float32))
        >>> tree.total(), tree.query(1, 3)
        (4.0, 2.0)
        >>> tree.scan_lower_bound(np.array([0.5, 1.0, 2.9, 3.5], dtype=np.float32)).tolist()
        [0, 2, 2, 3]
    """

    def __new__(cls, capacity: int, dtype: Any = torch.float32) -> Any:
        name = tree_dtype_name(dtype)
        return _C.SumTreeF32(capacity) if name == "float32" else _C.SumTreeF64(capacity)


class MinTree(abc.ABC):  # noqa: B024 - a virtual base: isinstance via register()
    """Min segment tree with batched ``update``/``get``/``query``.

    Constructing ``MinTree(capacity, dtype)`` returns a compiled
    ``marl._C.MinTreeF32`` or ``MinTreeF64``. Leaves start at ``+inf`` (the
    identity of min), so unwritten slots never win. Same validation rules as
    :class:`SumTree`.

    Constructor arguments (it returns the compiled tree):

    - ``capacity``: number of leaves, 1 to 2**40.
    - ``dtype``: ``torch.float32`` (default) or ``torch.float64``.

    Examples:
        >>> tree = MinTree(8, torch.float64)
        >>> tree.total()
        inf
        >>> tree[3] = 0.5
        >>> tree.total(), tree.query(4, 8)
        (0.5, inf)
    """

    def __new__(cls, capacity: int, dtype: Any = torch.float32) -> Any:
        name = tree_dtype_name(dtype)
        return _C.MinTreeF32(capacity) if name == "float32" else _C.MinTreeF64(capacity)


SumTree.register(_C.SumTreeF32)
SumTree.register(_C.SumTreeF64)
MinTree.register(_C.MinTreeF32)
MinTree.register(_C.MinTreeF64)
