"""Specs: the shape, dtype, device and domain of every tensor an env reads or writes.

A spec's ``shape`` always includes the env batch dimensions (and the agent
dimension for grouped data), so ``spec.rand()`` gives a tensor that could go
straight into the env. :class:`Composite` nests specs under (tuple) keys, and
its ``rand()``/``zero()`` return TensorDicts.

Examples:
    >>> import torch
    >>> from marl.specs import Bounded, Categorical, Composite
    >>> spec = Composite(
    ...     {"agents": Composite({"action": Categorical(5, shape=(4, 3))}, shape=(4, 3))},
    ...     shape=(4,),
    ... )
    >>> spec["agents", "action"].rand().shape
    torch.Size([4, 3])
    >>> spec.rand().batch_size
    torch.Size([4])
    >>> Bounded(-1.0, 1.0, shape=(2,)).project(torch.tensor([3.0, -0.5]))
    tensor([ 1.0000, -0.5000])
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

# Counts every entry set into or deleted from any Composite. A cache of a
# composite's keys (EnvBase keeps one: its per-step key lookups) stays valid
# while this does not move, whichever composite of a tree changed.
_structure_version = 0


def _bump_structure_version() -> None:
    global _structure_version
    _structure_version += 1


def structure_version() -> int:
    """A counter that moves whenever an entry is set into or deleted from any ``Composite``."""
    return _structure_version


__all__ = [
    "Binary",
    "Bounded",
    "Categorical",
    "Composite",
    "MultiCategorical",
    "OneHot",
    "TensorSpec",
    "Unbounded",
    "stack_specs",
]

NestedKey = str | tuple[str, ...]
DeviceLike = torch.device | str | int | None
ShapeLike = int | Sequence[int] | torch.Size


def _size(shape: ShapeLike | None) -> torch.Size:
    if shape is None:
        return torch.Size([])
    if isinstance(shape, int):
        return torch.Size([shape])
    return torch.Size(shape)


def _device(device: DeviceLike) -> torch.device:
    return torch.device("cpu") if device is None else torch.device(device)


def _key(key: NestedKey) -> tuple[str, ...]:
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
        self.shape = _size(shape)
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
        new = _size(shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)
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


class Unbounded(TensorSpec):
    """Any real (or integer) value. ``rand()`` draws from a standard normal.

    Examples:
        >>> Unbounded(shape=(2, 3)).zero().shape
        torch.Size([2, 3])
    """

    def __init__(
        self,
        shape: ShapeLike = (),
        dtype: torch.dtype = torch.float32,
        device: DeviceLike = None,
    ) -> None:
        super().__init__(shape, dtype, device)

    def rand(self, generator: torch.Generator | None = None) -> torch.Tensor:
        if self.dtype.is_floating_point:
            return torch.randn(self.shape, generator=generator, device=self.device).to(self.dtype)
        if self.dtype == torch.bool:
            return torch.randint(0, 2, self.shape, generator=generator, device=self.device).bool()
        return torch.randint(-100, 100, self.shape, generator=generator, device=self.device).to(
            self.dtype
        )

    def _in_domain(self, x: torch.Tensor) -> bool:
        return True


class Bounded(TensorSpec):
    """Values in a box ``[low, high]``; ``low``/``high`` broadcast to ``shape``.

    Examples:
        >>> spec = Bounded(-2.0, 2.0, shape=(3,))
        >>> spec.is_in(spec.rand())
        True
    """

    def __init__(
        self,
        low: float | torch.Tensor,
        high: float | torch.Tensor,
        shape: ShapeLike | None = None,
        dtype: torch.dtype = torch.float32,
        device: DeviceLike = None,
    ) -> None:
        low_t = torch.as_tensor(low, dtype=dtype)
        high_t = torch.as_tensor(high, dtype=dtype)
        if shape is None:
            shape = torch.broadcast_shapes(low_t.shape, high_t.shape)
        super().__init__(shape, dtype, device)
        try:
            self.low = low_t.to(self.device).expand(self.shape).clone()
            self.high = high_t.to(self.device).expand(self.shape).clone()
        except RuntimeError as err:
            raise ValueError(
                f"low {tuple(low_t.shape)} and high {tuple(high_t.shape)} do not broadcast to "
                f"shape {tuple(self.shape)}"
            ) from err
        if (self.low > self.high).any():
            raise ValueError(f"Bounded needs low <= high, got low={low} high={high}")

    def rand(self, generator: torch.Generator | None = None) -> torch.Tensor:
        if self.dtype.is_floating_point:
            u = torch.rand(self.shape, generator=generator, device=self.device, dtype=self.dtype)
            return self.low + u * (self.high - self.low)
        u = torch.rand(self.shape, generator=generator, device=self.device)
        span = (self.high - self.low + 1).to(torch.float64)
        return (self.low + (u * span).floor().to(self.dtype)).clamp(self.low, self.high)

    def _in_domain(self, x: torch.Tensor) -> bool:
        return bool(((x >= self.low) & (x <= self.high)).all())

    def project(self, x: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.minimum(x.to(self.dtype), self.high), self.low)

    def _meta(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high}

    def _expand_meta(self, shape: torch.Size) -> dict[str, Any]:
        return {"low": self.low.expand(shape), "high": self.high.expand(shape)}


class _Discrete(TensorSpec):
    """Shared logic of the specs over ``n`` choices with an optional legal mask."""

    n: int
    mask: torch.Tensor | None

    def _mask_shape(self) -> torch.Size:
        raise NotImplementedError

    def _set_mask(self, mask: torch.Tensor | None) -> None:
        if mask is None:
            self.mask = None
            return
        mask = torch.as_tensor(mask, device=self.device)
        if mask.dtype != torch.bool:
            raise ValueError(f"a mask must be a boolean tensor, got dtype {mask.dtype}")
        try:
            self.mask = mask.expand(self._mask_shape()).clone()
        except RuntimeError as err:
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not broadcast to "
                f"{tuple(self._mask_shape())}"
            ) from err

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Set (or clear with ``None``) the legal-choice mask."""
        self._set_mask(mask)

    def _sample_index(
        self, generator: torch.Generator | None, mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Uniform legal indices of shape ``mask_shape[:-1]``."""
        mask = self.mask if mask is None else mask
        batch = self._mask_shape()[:-1]
        if mask is None:
            return torch.randint(0, self.n, batch, generator=generator, device=self.device)
        flat = mask.reshape(-1, self.n)
        if not flat.any(-1).all():
            raise ValueError("cannot sample: the mask leaves no legal choice for some entry")
        probs = flat.to(torch.float32)
        idx = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        return idx.reshape(batch)

    def _meta(self) -> dict[str, Any]:
        return {"n": self.n, "mask": self.mask}


class Categorical(_Discrete):
    """An integer in ``[0, n)``; with a mask ``[*shape, n]``, only legal ones.

    Args:
        n: number of choices.
        shape: shape of the index tensor (batch and agent dims, no ``n`` dim).
        dtype: integer dtype (``torch.int64``).
        device: device.
        mask: optional boolean legal-choice mask broadcastable to ``[*shape, n]``.

    Examples:
        >>> spec = Categorical(4, shape=(2,), mask=torch.tensor([False, False, True, False]))
        >>> spec.rand()
        tensor([2, 2])
    """

    def __init__(
        self,
        n: int,
        shape: ShapeLike = (),
        dtype: torch.dtype = torch.int64,
        device: DeviceLike = None,
        mask: torch.Tensor | None = None,
    ) -> None:
        if int(n) < 1:
            raise ValueError(f"Categorical needs n >= 1, got {n}")
        super().__init__(shape, dtype, device)
        self.n = int(n)
        self._set_mask(mask)

    def _mask_shape(self) -> torch.Size:
        return torch.Size([*self.shape, self.n])

    def rand(
        self, generator: torch.Generator | None = None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self._sample_index(generator, mask).to(self.dtype)

    def _in_domain(self, x: torch.Tensor) -> bool:
        if not bool(((x >= 0) & (x < self.n)).all()):
            return False
        if self.mask is not None:
            return bool(self.mask.gather(-1, x.long().unsqueeze(-1)).all())
        return True

    def project(self, x: torch.Tensor) -> torch.Tensor:
        return x.round().clamp(0, self.n - 1).to(self.dtype)


class OneHot(_Discrete):
    """A one-hot vector over ``n`` choices; ``shape[-1] == n``.

    Examples:
        >>> OneHot(3, shape=(2, 3)).rand().sum(-1)
        tensor([1, 1])
    """

    def __init__(
        self,
        n: int,
        shape: ShapeLike | None = None,
        dtype: torch.dtype = torch.long,
        device: DeviceLike = None,
        mask: torch.Tensor | None = None,
    ) -> None:
        shape = _size(shape) if shape is not None else torch.Size([n])
        if not shape or shape[-1] != n:
            raise ValueError(f"OneHot shape must end with n={n}, got {tuple(shape)}")
        super().__init__(shape, dtype, device)
        self.n = int(n)
        self._set_mask(mask)

    def _mask_shape(self) -> torch.Size:
        return self.shape

    def rand(
        self, generator: torch.Generator | None = None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        idx = self._sample_index(generator, mask)
        return torch.nn.functional.one_hot(idx, self.n).to(self.dtype)

    def _in_domain(self, x: torch.Tensor) -> bool:
        ok = bool(((x == 0) | (x == 1)).all()) and bool((x.sum(-1) == 1).all())
        if ok and self.mask is not None:
            ok = bool((x.bool() <= self.mask).all())
        return ok

    def project(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(x.argmax(-1), self.n).to(self.dtype)

    def to_categorical(self, x: torch.Tensor) -> torch.Tensor:
        """Index form of a one-hot tensor."""
        return x.argmax(-1)

    def _expand_meta(self, shape: torch.Size) -> dict[str, Any]:
        mask = None if self.mask is None else self.mask.expand(shape)
        return {"n": self.n, "mask": mask}


class MultiCategorical(TensorSpec):
    """Several categorical choices, ``nvec[i]`` options each; ``shape[-1] == len(nvec)``.

    Examples:
        >>> MultiCategorical([2, 3]).rand().shape
        torch.Size([2])
    """

    def __init__(
        self,
        nvec: Sequence[int] | torch.Tensor,
        shape: ShapeLike | None = None,
        dtype: torch.dtype = torch.int64,
        device: DeviceLike = None,
    ) -> None:
        nvec_t = torch.as_tensor(nvec, dtype=torch.long).reshape(-1)
        shape = _size(shape) if shape is not None else torch.Size([nvec_t.numel()])
        if not shape or shape[-1] != nvec_t.numel():
            raise ValueError(
                f"MultiCategorical shape must end with len(nvec)={nvec_t.numel()}, got {tuple(shape)}"
            )
        super().__init__(shape, dtype, device)
        self.nvec = nvec_t.to(self.device)

    def rand(self, generator: torch.Generator | None = None) -> torch.Tensor:
        u = torch.rand(self.shape, generator=generator, device=self.device)
        return (u * self.nvec).floor().clamp(max=self.nvec - 1).to(self.dtype)

    def _in_domain(self, x: torch.Tensor) -> bool:
        return bool(((x >= 0) & (x < self.nvec)).all())

    def project(self, x: torch.Tensor) -> torch.Tensor:
        return torch.minimum(x.round().clamp(min=0), self.nvec - 1).to(self.dtype)

    def _meta(self) -> dict[str, Any]:
        return {"nvec": self.nvec}

    def _expand_meta(self, shape: torch.Size) -> dict[str, Any]:
        return {"nvec": self.nvec}


class Binary(TensorSpec):
    """``n`` independent 0/1 values; ``shape[-1] == n``.

    Examples:
        >>> Binary(3).rand().shape
        torch.Size([3])
    """

    def __init__(
        self,
        n: int | None = None,
        shape: ShapeLike | None = None,
        dtype: torch.dtype = torch.int8,
        device: DeviceLike = None,
    ) -> None:
        if shape is None:
            if n is None:
                raise ValueError("Binary needs n or shape")
            shape = (n,)
        shape = _size(shape)
        if n is not None and (not shape or shape[-1] != n):
            raise ValueError(f"Binary shape must end with n={n}, got {tuple(shape)}")
        super().__init__(shape, dtype, device)
        self.n = shape[-1] if shape else 1

    def rand(self, generator: torch.Generator | None = None) -> torch.Tensor:
        return torch.randint(0, 2, self.shape, generator=generator, device=self.device).to(
            self.dtype
        )

    def _in_domain(self, x: torch.Tensor) -> bool:
        return bool(((x == 0) | (x == 1)).all())

    def project(self, x: torch.Tensor) -> torch.Tensor:
        return (x > 0.5).to(self.dtype)

    def _meta(self) -> dict[str, Any]:
        return {"n": self.n}


class Composite:
    """Nested specs under string or tuple keys, with shared leading dims ``shape``.

    Args:
        specs: mapping key -> spec (tuple keys create nested composites).
        shape: the batch dims every child shares (e.g. ``[num_envs]``, or
            ``[num_envs, n_agents]`` for a group).
        device: device of the tensors (``None`` lets children decide).

    Examples:
        >>> spec = Composite({("agents", "observation"): Unbounded((2, 3, 5))}, shape=(2,))
        >>> sorted(spec.keys(include_nested=True, leaves_only=True))
        [('agents', 'observation')]
        >>> spec.zero()["agents", "observation"].shape
        torch.Size([2, 3, 5])
    """

    def __init__(
        self,
        specs: Mapping[NestedKey, TensorSpec | Composite] | None = None,
        shape: ShapeLike = (),
        device: DeviceLike = None,
    ) -> None:
        self.shape = _size(shape)
        self.device = None if device is None else torch.device(device)
        self._specs: dict[str, TensorSpec | Composite] = {}
        for key, spec in (specs or {}).items():
            self[key] = spec

    # ----------------------------------------------------------- access
    def __getitem__(self, key: NestedKey) -> TensorSpec | Composite:
        parts = _key(key)
        node: Any = self
        for i, part in enumerate(parts):
            if not isinstance(node, Composite) or part not in node._specs:
                raise KeyError(
                    f"no spec at key {key!r} (missing {parts[: i + 1]!r}); keys are "
                    f"{sorted(self.keys(include_nested=True), key=str)}"
                )
            node = node._specs[part]
        return node

    def __setitem__(self, key: NestedKey, spec: TensorSpec | Composite) -> None:
        parts = _key(key)
        if not isinstance(spec, (TensorSpec, Composite)):
            raise TypeError(f"spec at {key!r} must be a TensorSpec or Composite, got {type(spec)}")
        node = self
        for part in parts[:-1]:
            child = node._specs.get(part)
            if child is None:
                child = Composite(shape=node.shape, device=node.device)
                node._specs[part] = child
                _bump_structure_version()
            elif not isinstance(child, Composite):
                raise KeyError(f"cannot nest under {part!r}: it holds a leaf spec")
            node = child
        if tuple(spec.shape[: len(node.shape)]) != tuple(node.shape):
            raise ValueError(
                f"spec at {key!r} has shape {tuple(spec.shape)}, which does not start with the "
                f"composite's batch shape {tuple(node.shape)}"
            )
        node._specs[parts[-1]] = spec
        _bump_structure_version()

    def __delitem__(self, key: NestedKey) -> None:
        parts = _key(key)
        parent = self[parts[:-1]] if len(parts) > 1 else self
        del parent._specs[parts[-1]]
        _bump_structure_version()

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def get(self, key: NestedKey, default: Any = None) -> Any:
        """The spec at ``key`` or ``default``."""
        try:
            return self[key]
        except KeyError:
            return default

    def keys(self, include_nested: bool = False, leaves_only: bool = False) -> list[NestedKey]:
        """Keys of the composite.

        Args:
            include_nested: also list nested keys, as tuples.
            leaves_only: skip keys that hold composites.
        """
        out: list[NestedKey] = []
        for k, v in self._specs.items():
            is_comp = isinstance(v, Composite)
            if not (leaves_only and is_comp):
                out.append(k)
            if include_nested and is_comp:
                out.extend(
                    (k, *_key(sub)) for sub in v.keys(include_nested=True, leaves_only=leaves_only)
                )
        return out

    def items(
        self, include_nested: bool = False, leaves_only: bool = False
    ) -> list[tuple[NestedKey, TensorSpec | Composite]]:
        """``(key, spec)`` pairs, as selected by :meth:`keys`."""
        return [(k, self[k]) for k in self.keys(include_nested, leaves_only)]

    def values(
        self, include_nested: bool = False, leaves_only: bool = False
    ) -> list[TensorSpec | Composite]:
        """Specs, as selected by :meth:`keys`."""
        return [self[k] for k in self.keys(include_nested, leaves_only)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def is_empty(self) -> bool:
        """True when no leaf spec is held (nested empty composites count as empty)."""
        return not self.keys(include_nested=True, leaves_only=True)

    # ----------------------------------------------------------- tensors
    def _build(self, fn: str, **kwargs: Any) -> TensorDict:
        data = {}
        for k, v in self._specs.items():
            data[k] = (
                v._build(fn, **kwargs) if isinstance(v, Composite) else getattr(v, fn)(**kwargs)
            )
        return TensorDict(data, batch_size=self.shape, device=self.device)

    def rand(self, generator: torch.Generator | None = None) -> TensorDict:
        """A TensorDict of random elements of every leaf."""
        return self._build("rand", generator=generator)

    def zero(self) -> TensorDict:
        """A TensorDict of zeros."""
        return self._build("zero")

    def is_in(self, td: TensorDictBase) -> bool:
        """Whether every leaf of ``td`` present in the spec lies in its spec."""
        for key, spec in self.items(include_nested=True, leaves_only=True):
            value = td.get(key, None)
            if value is None or not spec.is_in(value):
                return False
        return True

    def project(self, td: TensorDictBase) -> TensorDictBase:
        """Project every leaf of ``td`` that the spec knows, in place."""
        for key, spec in self.items(include_nested=True, leaves_only=True):
            value = td.get(key, None)
            if value is not None:
                td.set(key, spec.project(value))
        return td

    # ----------------------------------------------------------- transforms
    def expand(self, *shape: int | Sequence[int]) -> Composite:
        """Prepend batch dims to the composite and every child."""
        new = _size(shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)
        if len(new) < len(self.shape) or (
            len(self.shape) and tuple(new[-len(self.shape) :]) != tuple(self.shape)
        ):
            raise ValueError(
                f"cannot expand a composite of shape {tuple(self.shape)} to {tuple(new)}"
            )
        lead = new[: len(new) - len(self.shape)]
        return Composite(
            {k: v.expand(*lead, *v.shape) for k, v in self._specs.items()},
            shape=new,
            device=self.device,
        )

    def to(self, device: DeviceLike) -> Composite:
        """A copy with every leaf on ``device``."""
        return Composite(
            {k: v.to(device) for k, v in self._specs.items()}, shape=self.shape, device=device
        )

    def clone(self) -> Composite:
        """A deep copy."""
        return Composite(
            {k: v.clone() for k, v in self._specs.items()}, shape=self.shape, device=self.device
        )

    def select(self, *keys: NestedKey, strict: bool = True) -> Composite:
        """A composite holding only ``keys`` (nested keys allowed)."""
        out = Composite(shape=self.shape, device=self.device)
        for key in keys:
            if key in self:
                out[key] = self[key].clone()
            elif strict:
                raise KeyError(f"no spec at key {key!r}")
        return out

    def update(self, other: Composite | Mapping[NestedKey, Any]) -> Composite:
        """Set every entry of ``other`` into this composite (in place)."""
        items = other._specs.items() if isinstance(other, Composite) else other.items()
        for k, v in items:
            if isinstance(v, Composite) and isinstance(self._specs.get(k), Composite):
                self._specs[k].update(v)
            else:
                self[k] = v
        return self

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Composite)
            and self.shape == other.shape
            and self._specs.keys() == other._specs.keys()
            and all(v == other._specs[k] for k, v in self._specs.items())
        )

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        inner = ",\n".join(
            f"    {k}: " + repr(v).replace("\n", "\n    ") for k, v in self._specs.items()
        )
        return f"Composite(\n{inner},\n    shape={tuple(self.shape)})"


SpecLike = TensorSpec | Composite


def stack_specs(
    specs: Sequence[SpecLike], dim: int = 0, *, names: Sequence[str] | None = None
) -> SpecLike:
    """Stack identical specs along a new dimension (e.g. the agent dimension).

    Args:
        specs: one spec per agent (all with identical shapes, dtypes and domains).
        dim: where the new dimension goes, counted within the specs' shapes.
        names: optional agent names, used in error messages.

    Returns:
        A spec whose shape has ``len(specs)`` inserted at ``dim``.

    Raises:
        ValueError: when two specs differ; the message names the key, the two
            agents and both shapes.

    Examples:
        >>> stack_specs([Bounded(-1.0, 1.0, (2,)), Bounded(-1.0, 1.0, (2,))]).shape
        torch.Size([2, 2])
    """
    if not specs:
        raise ValueError("stack_specs needs at least one spec")
    names = list(names) if names is not None else [f"#{i}" for i in range(len(specs))]
    first = specs[0]

    if isinstance(first, Composite):
        for i, s in enumerate(specs[1:], 1):
            if not isinstance(s, Composite) or set(s.keys(True, True)) != set(
                first.keys(True, True)
            ):
                mine = set(first.keys(True, True))
                theirs = set(s.keys(True, True)) if isinstance(s, Composite) else set()
                diff = sorted(mine ^ theirs, key=str)
                raise ValueError(
                    f"cannot stack specs: agents {names[0]!r} and {names[i]!r} have different "
                    f"keys (differing: {diff})"
                )
        d = dim if dim >= 0 else len(first.shape) + 1 + dim
        shape = list(first.shape)
        shape.insert(min(d, len(shape)), len(specs))
        out = Composite(shape=shape, device=first.device)
        for key in first.keys(include_nested=False):
            out[key] = _stack_named([s[key] for s in specs], dim, names, key)
        return out
    return _stack_named(list(specs), dim, names, "")


def _describe(spec: SpecLike) -> str:
    if isinstance(spec, Composite):
        return f"Composite(shape={tuple(spec.shape)})"
    return f"shape {tuple(spec.shape)} ({type(spec).__name__}, {spec.dtype})"


def _stack_named(specs: list[SpecLike], dim: int, names: list[str], key: Any) -> SpecLike:
    first = specs[0]
    if isinstance(first, Composite):
        try:
            return stack_specs(specs, dim, names=names)
        except ValueError as err:
            raise ValueError(f"{err} (under {key!r})") from None
    for i, s in enumerate(specs[1:], 1):
        if s != first:
            raise ValueError(
                f"cannot stack specs: at key {key!r}, agent {names[0]!r} has "
                f"{_describe(first)} but agent {names[i]!r} has {_describe(s)}"
            )
    d = dim if dim >= 0 else len(first.shape) + 1 + dim
    shape = list(first.shape)
    shape.insert(d, len(specs))
    return first.expand(*shape) if d == 0 else _insert_dim(first, shape, d)


def _insert_dim(spec: TensorSpec, shape: list[int], d: int) -> TensorSpec:
    meta = spec._meta()
    new_meta = {}
    for k, v in meta.items():
        if isinstance(v, torch.Tensor) and v.dim() >= d and k != "nvec":
            new_meta[k] = v.unsqueeze(d).expand(*shape, *v.shape[len(shape) - 1 :])
        else:
            new_meta[k] = v
    return type(spec)(shape=shape, dtype=spec.dtype, device=spec.device, **new_meta)
