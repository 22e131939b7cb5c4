"""Student-t intervals over seeds, and min-max normalization per task."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from marl.report._bootstrap import Interval

__all__ = ["mean_confidence_interval", "min_max_bounds", "normalize", "t_quantile"]


def _student_two_sided(t: float, df: int) -> float:
    """``P(|T| <= t)`` for Student's t with integer ``df`` (Abramowitz & Stegun 26.7.3-4)."""
    theta = math.atan(t / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2 == 1:
        if df == 1:
            return 2.0 * theta / math.pi
        term = total = math.cos(theta)
        for k in range(3, df - 1, 2):
            term *= c2 * (k - 1) / k
            total += term
        return 2.0 / math.pi * (theta + s * total)
    term = total = 1.0
    for k in range(2, df - 1, 2):
        term *= c2 * (k - 1) / k
        total += term
    return s * total


@functools.lru_cache(maxsize=256)
def t_quantile(confidence: float, df: int) -> float:
    """The two-sided Student-t critical value: ``P(|T| <= t) = confidence``.

    Exact series for integer ``df`` (no scipy needed), solved by bisection.

    Examples:
        >>> round(t_quantile(0.95, 2), 4)
        4.3027
    """
    if not 0.0 < confidence < 1.0 or df < 1:
        raise ValueError(f"need 0 < confidence < 1 and df >= 1, got {confidence}, {df}")
    lo, hi = 0.0, 1.0
    while _student_two_sided(hi, df) < confidence:
        hi *= 2.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _student_two_sided(mid, df) < confidence else (lo, mid)
    return 0.5 * (lo + hi)


def mean_confidence_interval(
    values: Sequence[float] | np.ndarray, confidence: float = 0.95
) -> Interval:
    """Mean with a Student-t interval (sample std, ``n - 1`` dof); NaN bounds when ``n < 2``.

    Examples:
        >>> mean_confidence_interval([1.0, 2.0, 3.0]).format(".4f")
        '2.0000 [-0.4841, 4.4841]'
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"expected a non-empty 1-D array, got shape {x.shape}")
    mean = float(x.mean())
    if x.size < 2:
        return Interval(mean, math.nan, math.nan)
    half = t_quantile(confidence, x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return Interval(mean, mean - half, mean + half)


def min_max_bounds(
    values_by_task: Mapping[str, Any],
    overrides: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, tuple[float, float]]:
    """Per-task ``(min, max)`` for min-max normalization.

    By default (as marl-eval) the bounds are the smallest and largest values
    seen on the task, over every algorithm, seed, evaluation step and episode,
    so normalized run scores lie in ``[0, 1]``. ``overrides`` (task ->
    ``(min, max)``, e.g. random and expert returns) replace them; keys for
    tasks not present are ignored.

    Raises:
        ValueError: if an override does not have ``max > min``.

    Examples:
        >>> min_max_bounds({"t": [3.0, -1.0, 2.0]})
        {'t': (-1.0, 3.0)}
    """
    overrides = dict(overrides or {})
    out = {}
    for task, values in values_by_task.items():
        if task in overrides:
            bound = overrides[task]
            if len(bound) != 2 or not float(bound[1]) > float(bound[0]):
                raise ValueError(
                    f"bounds for task {task!r}: expected [min, max] with max > min, got {bound!r}"
                )
            out[task] = (float(bound[0]), float(bound[1]))
        else:
            arr = np.asarray(values, dtype=np.float64)
            out[task] = (float(arr.min()), float(arr.max()))
    return out


def normalize(values: Any, bounds: tuple[float, float]) -> np.ndarray:
    """``(values - min) / (max - min)``; all zeros when ``max == min`` (a constant task).

    Examples:
        >>> normalize([0.0, 5.0, 10.0], (0.0, 10.0)).tolist()
        [0.0, 0.5, 1.0]
    """
    lo, hi = bounds
    x = np.asarray(values, dtype=np.float64)
    if hi == lo:
        return np.zeros_like(x)
    return (x - lo) / (hi - lo)
