"""Gym-style spaces (gymnasium, and the legacy ``gym`` that VMAS uses) to marl specs.

The conversion is duck-typed on the space's class name, so it works for
``gymnasium.spaces`` and ``gym.spaces`` alike without importing either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from marl.specs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    OneHot,
    TensorSpec,
    Unbounded,
    stack_specs,
)

__all__ = [
    "numpy_to_torch_dtype",
    "space_to_spec",
    "stack_agent_specs",
    "to_numpy_action",
]

SpecLike = TensorSpec | Composite


def numpy_to_torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype matching a numpy dtype (``np.float64`` -> ``torch.float64``)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return torch.bool
    return torch.from_numpy(np.empty(0, dtype=dtype)).dtype


def space_kind(space: Any) -> str:
    for cls in type(space).__mro__:
        if cls.__name__ in ("Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple"):
            return cls.__name__
    return type(space).__name__


def space_to_spec(
    space: Any,
    batch: Sequence[int] = (),
    *,
    categorical: bool = True,
    device: Any = None,
    float_dtype: torch.dtype | None = None,
    keep_float64: bool = True,
) -> SpecLike:
    """Convert a gym(nasium) space to a spec with leading ``batch`` dims.

    Args:
        space: a ``Box``, ``Discrete``, ``MultiDiscrete``, ``MultiBinary``,
            ``Dict`` or ``Tuple`` space (gymnasium or legacy gym).
        batch: leading dims (env batch, then agent dim).
        categorical: ``Discrete`` becomes ``Categorical`` (an index) when True,
            ``OneHot`` otherwise.
        device: device of the spec.
        float_dtype: override the dtype of float ``Box`` spaces.
        keep_float64: when False, float64 ``Box`` spaces become float32 specs
            (the wrappers' default: policies and losses compute in float32).

    Returns:
        A ``TensorSpec`` (or a ``Composite`` for ``Dict``/``Tuple`` spaces).

    Raises:
        NotImplementedError: for space types with no spec equivalent.

    Examples:
        >>> import gymnasium as gym
        >>> space_to_spec(gym.spaces.Discrete(3), (4,)).shape
        torch.Size([4])
    """
    batch = tuple(batch)
    kind = space_kind(space)
    if kind == "Box":
        dtype = numpy_to_torch_dtype(space.dtype)
        if float_dtype is not None and dtype.is_floating_point:
            dtype = float_dtype
        elif not keep_float64 and dtype == torch.float64:
            dtype = torch.float32
        shape = (*batch, *space.shape)
        low = np.asarray(space.low, dtype=np.float64)
        high = np.asarray(space.high, dtype=np.float64)
        if dtype == torch.bool:
            return Unbounded(shape, dtype=dtype, device=device)
        if np.isfinite(low).all() and np.isfinite(high).all():
            return Bounded(
                torch.as_tensor(low, dtype=dtype),
                torch.as_tensor(high, dtype=dtype),
                shape,
                dtype=dtype,
                device=device,
            )
        return Unbounded(shape, dtype=dtype, device=device)
    if kind == "Discrete":
        n = int(space.n)
        if int(getattr(space, "start", 0)) != 0:
            raise NotImplementedError(
                f"Discrete spaces with start != 0 are not supported, got {space}"
            )
        if categorical:
            return Categorical(n, batch, device=device)
        return OneHot(n, (*batch, n), device=device)
    if kind == "MultiDiscrete":
        nvec = np.asarray(space.nvec)
        if nvec.ndim != 1:
            raise NotImplementedError(
                f"MultiDiscrete spaces must be 1-D, got nvec shape {nvec.shape}"
            )
        return MultiCategorical(torch.as_tensor(nvec), (*batch, len(nvec)), device=device)
    if kind == "MultiBinary":
        n = space.n if isinstance(space.n, int) else int(np.prod(space.n))
        shape = (*batch, *np.atleast_1d(space.n).tolist())
        return Binary(shape=shape, dtype=torch.int8, device=device) if n else Unbounded(shape)
    if kind in ("Dict", "Tuple"):
        # a Tuple's entries are named by their positions
        if kind == "Dict":
            subs = space.spaces.items()
        else:
            subs = ((str(i), sub) for i, sub in enumerate(space.spaces))
        return Composite(
            {
                k: space_to_spec(
                    sub,
                    batch,
                    categorical=categorical,
                    device=device,
                    float_dtype=float_dtype,
                    keep_float64=keep_float64,
                )
                for k, sub in subs
            },
            shape=batch,
            device=device,
        )
    raise NotImplementedError(
        f"cannot convert a {type(space).__name__} space to a spec; supported: Box, Discrete, "
        "MultiDiscrete, MultiBinary, Dict, Tuple"
    )


def stack_agent_specs(
    specs: list[SpecLike], names: list[str], group: str, key: str, batch_ndim: int
) -> SpecLike:
    """Stack one group's per-agent specs along a new agent dim after the batch dims.

    Raises:
        ValueError: naming the group, the key, the two agents and their shapes
            when the agents' specs differ.
    """
    wrapped = [Composite({key: s}, shape=s.shape[:batch_ndim]) for s in specs]
    try:
        stacked = stack_specs(wrapped, dim=batch_ndim, names=names)
    except ValueError as err:
        raise ValueError(
            f"group {group!r}: {err}. Agents of one group need identical specs: put them in "
            "different groups (group_map='by_prefix', 'one_per_agent' or a dict)"
        ) from None
    return stacked[key]


def to_numpy_action(value: Any, space: Any, one_hot: bool = False) -> Any:
    """Turn a (CPU) action tensor or TensorDict into what ``space`` expects.

    With ``one_hot``, discrete actions (last dim ``n``) become an index;
    ``Dict`` and ``Tuple`` spaces take a TensorDict with matching keys.
    """
    kind = space_kind(space)
    if kind == "Dict":
        return {k: to_numpy_action(value.get(k), sub, one_hot) for k, sub in space.spaces.items()}
    if kind == "Tuple":
        return tuple(
            to_numpy_action(value.get(str(i)), sub, one_hot) for i, sub in enumerate(space.spaces)
        )
    array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    if kind == "Discrete":
        if one_hot:
            array = array.argmax(-1)
        return array.astype(np.int64)
    if kind in ("MultiDiscrete", "MultiBinary"):
        return array.astype(space.dtype)
    # a copy: envs may clip actions in place, and the array shares the policy's tensor memory
    return np.array(array, dtype=space.dtype if kind == "Box" else None)
