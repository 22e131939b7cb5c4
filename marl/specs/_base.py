"""The spec base class, :class:`TensorSpec`, and the argument types and normalisers it shares.

Every leaf spec (``_leaves.py``) derives from :class:`TensorSpec`, which holds the
shape/dtype/device and the behaviour that follows from them and from the
subclass's ``_meta()`` (expand, to, clone, equality, repr).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

NestedKey = str | tuple[str, ...]
DeviceLike = torch.device | str | int | None
ShapeLike = int | Sequence[int] | torch.Size


def as_size(shape: ShapeLike | None) -> torch.Size:
    if shape is None:
        return torch.Size([])
    if isinstance(shape, int):
        return torch.Size([shape])
    return torch.Size(shape)


def _device(device: DeviceLike) -> torch.device:
    return torch.device("cpu") if device is None else torch.device(device)


def as_key_tuple(key: NestedKey) -> tuple[str, ...]:
    if isinstance(key, str):
        return (key,)
    if isinstance(key, tuple) and key and all(isinstance(k, str) for k in key):
        return key
    raise KeyError(f"spec keys are strings or non-empty tuples of strings, got {key!r}")


class TensorSpec:
    """Base class of the leaf specs.

    Args:
        shape: full shape, batch (and agent) dimensions included.
        dtype: tensor dtype.
        device: tensor device (CPU by default).
    """

    def __init__(self, shape: ShapeLike, dtype: torch.dtype, device: DeviceLike = None) -> None:
        self.shape = as_size(shape)
        self.dtype = dtype
        self.device = _device(device)

    # -- to be provided by subclasses ------------------------------------
    def rand(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """A random element of the spec (uniform where that is defined)."""
        raise NotImplementedError

    def _in_domain(self, x: torch.Tensor) -> bool:
        return True

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """Map ``x`` to the closest element of the spec (clamp / round)."""
        return x.to(self.dtype)

    def _meta(self) -> dict[str, Any]:
        """Constructor arguments other than shape/dtype/device."""
        return {}

    def _expand_meta(self, shape: torch.Size) -> dict[str, Any]:
        return self._meta()

    # -- shared behaviour -------------------------------------------------
    def zero(self) -> torch.Tensor:
        """A zero-filled tensor of the spec's shape, dtype and device."""
        return torch.zeros(self.shape, dtype=self.dtype, device=self.device)

    def is_in(self, x: torch.Tensor) -> bool:
        """Whether ``x`` has the spec's shape and dtype and lies in its domain."""
        if not isinstance(x, torch.Tensor) or x.shape != self.shape or x.dtype != self.dtype:
            return False
        return bool(self._in_domain(x))

    def expand(self, *shape: int | Sequence[int]) -> TensorSpec:
        """Prepend batch dimensions: the new shape must end with the current one.

        ``Unbounded(shape=(3,)).expand(8, 3)`` has shape ``(8, 3)``.
        """
        new = as_size(shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)
        if len(new) < len(self.shape) or (
            len(self.shape) and tuple(new[-len(self.shape) :]) != tuple(self.shape)
        ):
            raise ValueError(
                f"cannot expand a spec of shape {tuple(self.shape)} to {tuple(new)}: the new "
                "shape must end with the current one"
            )
        return type(self)(shape=new, dtype=self.dtype, device=self.device, **self._expand_meta(new))

    def to(self, device: DeviceLike) -> TensorSpec:
        """A copy on ``device``."""
        meta = {
            k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in self._meta().items()
        }
        return type(self)(shape=self.shape, dtype=self.dtype, device=device, **meta)

    def clone(self) -> TensorSpec:
        """A deep copy."""
        meta = {
            k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in self._meta().items()
        }
        return type(self)(shape=self.shape, dtype=self.dtype, device=self.device, **meta)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return False
        if (self.shape, self.dtype, self.device) != (other.shape, other.dtype, other.device):
            return False
        mine, theirs = self._meta(), other._meta()
        if mine.keys() != theirs.keys():
            return False
        for k, v in mine.items():
            w = theirs[k]
            if isinstance(v, torch.Tensor) or isinstance(w, torch.Tensor):
                if not (
                    isinstance(v, torch.Tensor)
                    and isinstance(w, torch.Tensor)
                    and v.shape == w.shape
                    and torch.equal(v.cpu(), w.cpu())
                ):
                    return False
            elif v != w:
                return False
        return True

    __hash__ = None  # specs are mutable (masks)

    def __repr__(self) -> str:
        extra = "".join(
            f", {k}={v.tolist() if isinstance(v, torch.Tensor) and v.numel() <= 8 else v}"
            for k, v in self._meta().items()
            if not isinstance(v, torch.Tensor) or v.numel() <= 8
        )
        return (
            f"{type(self).__name__}(shape={tuple(self.shape)}, dtype={self.dtype}, "
            f"device={self.device}{extra})"
        )
