"""Shared pieces of the bootstrap: result types, score inputs, resampling, progress."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

TaskScores = np.ndarray | Sequence[Any] | Mapping[str, Any]
RngLike = int | np.random.Generator | None
_CHUNK = 500  # replicates per vectorized block: bounds memory, paces the progress bar


@dataclass(frozen=True)
class Interval:
    """A point estimate with a confidence interval ``[low, high]`` (NaN when undefined)."""

    point: float
    low: float
    high: float

    def format(self, spec: str = ".3g") -> str:
        """``"point [low, high]"``, or just the point when the CI is undefined."""
        if math.isnan(self.low):
            return format(self.point, spec)
        return f"{self.point:{spec}} [{self.low:{spec}}, {self.high:{spec}}]"

    def __str__(self) -> str:
        return self.format()


@dataclass(frozen=True)
class Profile:
    """A performance profile: fraction of runs with score > ``taus[i]``, and its CI band."""

    taus: np.ndarray
    point: np.ndarray
    low: np.ndarray
    high: np.ndarray


def as_task_arrays(scores: TaskScores) -> list[np.ndarray]:
    if isinstance(scores, Mapping):
        columns = list(scores.values())
    elif isinstance(scores, np.ndarray) and scores.ndim == 2:
        columns = list(scores.T)
    elif isinstance(scores, np.ndarray) and scores.ndim == 1:
        columns = [scores]
    else:
        columns = list(scores)
    if not columns:
        raise ValueError("scores: expected at least one task, got none")
    out = []
    for i, col in enumerate(columns):
        col = np.asarray(col, dtype=np.float64)
        if col.ndim != 1 or col.size == 0 or not np.isfinite(col).all():
            raise ValueError(
                f"scores of task {i}: expected a non-empty 1-D finite array, got {col!r}"
            )
        out.append(col)
    return out


def flatten_tasks(tasks: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(tasks)


def as_generator(rng: RngLike) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def rep_chunks(reps: int, progress: bool, desc: str) -> Iterator[int]:
    """Yield block sizes summing to ``reps``, under a tqdm bar when asked and installed."""
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    bar = None
    if progress:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            pass
        else:
            # delay=1: the bar appears only for loops that take more than a second.
            bar = tqdm(total=reps, desc=desc, delay=1.0, leave=False, unit="rep")
    done = 0
    while done < reps:
        size = min(_CHUNK, reps - done)
        yield size
        done += size
        if bar is not None:
            bar.update(size)
    if bar is not None:
        bar.close()


def resample_tasks(
    tasks: list[np.ndarray], size: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """``size`` stratified replicates: runs resampled within each task, ``[size, n_runs]`` per task."""
    return [t[rng.integers(0, t.size, size=(size, t.size))] for t in tasks]


def percentile_bounds(boot: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    alpha = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(boot, [alpha, 100.0 - alpha], axis=0)
    return low, high
