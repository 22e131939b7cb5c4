"""The nested spec, :class:`Composite`, and the counter of its structure changes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from marl.specs._base import DeviceLike, NestedKey, ShapeLike, TensorSpec, as_key_tuple, as_size

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


class Composite:
    """Nested specs under string or tuple keys, with shared leading dims ``shape``.

    Args:
        specs: mapping key -> spec (tuple keys create nested composites).
        shape: the batch dims every child shares (e.g. ``[num_envs]``, or
            ``[num_envs, n_agents]`` for a group).
        device: device of the tensors (``None`` lets children decide).

    Examples:
        >>> from marl.specs import Composite, Unbounded
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
        self.shape = as_size(shape)
        self.device = None if device is None else torch.device(device)
        self._specs: dict[str, TensorSpec | Composite] = {}
        for key, spec in (specs or {}).items():
            self[key] = spec

    # ----------------------------------------------------------- access
    def __getitem__(self, key: NestedKey) -> TensorSpec | Composite:
        parts = as_key_tuple(key)
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
        parts = as_key_tuple(key)
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
        parts = as_key_tuple(key)
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
                    (k, *as_key_tuple(sub))
                    for sub in v.keys(include_nested=True, leaves_only=leaves_only)
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
        new = as_size(shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)
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
