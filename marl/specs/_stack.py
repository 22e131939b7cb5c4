"""Stacking per-agent specs into one spec with an agent dimension: :func:`stack_specs`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from marl.specs._base import TensorSpec
from marl.specs._composite import Composite

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
        >>> from marl.specs import Bounded, stack_specs
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
