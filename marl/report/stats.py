"""Statistics for benchmark reports, after Agarwal et al. (2021), "Deep RL at the Edge
of the Statistical Precipice" (the rliable library), implemented with numpy.

Scores of one algorithm are given per task, as runs: a 2-D numpy array
``[runs, tasks]`` (as in rliable), a sequence with one entry per task, each a
1-D array of runs (so tasks may have different numbers of runs), or a mapping
``task -> 1-D array``. Mind the difference: in a nested *list* the inner lists
are tasks; in a 2-D *array* the columns are.

- **Aggregates**, as rliable defines them: the IQM (interquartile mean) and
  the optimality gap pool the runs of all tasks; the median and the mean are
  over tasks of each task's mean score. Their CIs come from the *stratified* bootstrap: each replicate
  resamples runs with replacement within each task independently, so every
  replicate keeps every task. CIs are percentile intervals.
- **Performance profiles**: the fraction of runs (over runs x tasks) whose
  score is strictly above ``tau``, with stratified-bootstrap bands.
- **Probability of improvement** ``P(X > Y)``: per task the Mann-Whitney
  statistic ``U / (n m)`` (ties count 1/2), averaged over tasks; CIs resample
  ``X`` and ``Y`` independently, each stratified by task.
- **Sample-efficiency curves and per-task tables** use Student-t intervals
  over seeds (:func:`mean_confidence_interval`): with 3-10 seeds the
  bootstrap's percentile interval is too narrow, the t-interval is not.

Every bootstrap takes ``rng``: an int seed (the default 0, so reports are
reproducible), a ``numpy.random.Generator``, or None for fresh entropy.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from marl.report._bootstrap import (
    Interval,
    Profile,
    RngLike,
    TaskScores,
    as_generator,
    as_task_arrays,
    flatten_tasks,
    percentile_bounds,
    rep_chunks,
    resample_tasks,
)
from marl.report.intervals import mean_confidence_interval, min_max_bounds, normalize, t_quantile

__all__ = [
    "AGGREGATE_METRICS",
    "Interval",
    "Profile",
    "aggregate_metrics",
    "bootstrap_difference",
    "iqm",
    "mean_confidence_interval",
    "min_max_bounds",
    "normalize",
    "optimality_gap",
    "pairwise_probability_of_improvement",
    "performance_profile",
    "probability_of_improvement",
    "probability_of_improvement_ci",
    "stratified_bootstrap_ci",
    "t_quantile",
]


# ----------------------------------------------------------------- point statistics
# A statistic takes the runs per task, each ``[..., n_runs_of_task]`` (the
# leading axes are bootstrap replicates), and reduces them to ``[...]``.
# The definitions are rliable's: the IQM and the optimality gap pool runs
# and tasks; the median and the mean are over tasks of each task's mean
# score, so every task weighs the same whatever its number of runs.
Statistic = Callable[[list[np.ndarray]], np.ndarray]


def _task_means(tasks: list[np.ndarray]) -> np.ndarray:
    return np.stack([t.mean(-1) for t in tasks])


def _mean(tasks: list[np.ndarray]) -> np.ndarray:
    return _task_means(tasks).mean(0)


def _median(tasks: list[np.ndarray]) -> np.ndarray:
    return np.median(_task_means(tasks), 0)


def _iqm_rows(x: np.ndarray) -> np.ndarray:
    # Same cut as scipy.stats.trim_mean(x, 0.25), which rliable uses:
    # drop floor(n/4) values at each end, average the rest.
    n = x.shape[-1]
    k = int(0.25 * n)
    return np.sort(x, -1)[..., k : n - k].mean(-1)


def _iqm(tasks: list[np.ndarray]) -> np.ndarray:
    return _iqm_rows(np.concatenate(tasks, -1))


def _optimality_gap(tasks: list[np.ndarray], gamma: float = 1.0) -> np.ndarray:
    return gamma - np.concatenate(tasks, -1).clip(max=gamma).mean(-1)


AGGREGATE_METRICS: dict[str, Statistic] = {
    "IQM": _iqm,
    "Median": _median,
    "Mean": _mean,
    "Optimality gap": _optimality_gap,
}
"""Name -> statistic. IQM: interquartile mean of all runs of all tasks. Median,
Mean: of the per-task mean scores. Optimality gap: ``1 - mean(min(score, 1))``
over all runs."""


def _point(fn: Statistic, tasks: list[np.ndarray]) -> float:
    return float(fn([t[None] for t in tasks])[0])


def iqm(scores: TaskScores) -> float:
    """Interquartile mean of all runs of all tasks: the mean of the middle 50%.

    ``floor(n/4)`` values are dropped at each end (as ``scipy.stats.trim_mean``).

    Examples:
        >>> iqm([[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 100.0]])
        3.5
    """
    return _point(_iqm, as_task_arrays(scores))


def optimality_gap(scores: TaskScores, gamma: float = 1.0) -> float:
    """How far scores fall short of ``gamma`` on average; scores above it count as ``gamma``.

    Examples:
        >>> optimality_gap([[0.5, 1.5]])
        0.25
    """
    return _point(lambda ts: _optimality_gap(ts, gamma), as_task_arrays(scores))


# ----------------------------------------------------------------- bootstrap estimates
def stratified_bootstrap_ci(
    scores: TaskScores,
    statistic: str | Statistic = "IQM",
    reps: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
    progress: bool = False,
) -> Interval:
    """A statistic of the pooled runs with a stratified-bootstrap percentile CI.

    Args:
        scores: runs per task (see the module docstring).
        statistic: a name of :data:`AGGREGATE_METRICS`, or a function of the
            list of per-task ``[replicates, runs]`` arrays that returns ``[replicates]``.
        reps: bootstrap replicates.
        confidence: CI level.
        rng: seed or generator.
        progress: show a progress bar for long loops.

    Returns:
        The point estimate on the data and the CI.

    Examples:
        >>> # Two tasks whose runs all agree: every replicate is the same, so the CI is a point.
        >>> stratified_bootstrap_ci([[0.25, 0.25], [0.5, 0.5]], "Mean", reps=100)
        Interval(point=0.375, low=0.375, high=0.375)
    """
    fn = AGGREGATE_METRICS[statistic] if isinstance(statistic, str) else statistic
    return aggregate_metrics(
        {"_": scores}, {"_": fn}, reps=reps, confidence=confidence, rng=rng, progress=progress
    )["_"]["_"]


def aggregate_metrics(
    scores: Mapping[str, TaskScores],
    metrics: Mapping[str, Statistic] | None = None,
    reps: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
    progress: bool = False,
) -> dict[str, dict[str, Interval]]:
    """Aggregate metrics per algorithm with stratified-bootstrap CIs.

    All metrics of an algorithm are computed on the same replicates.

    Args:
        scores: algorithm -> its runs per task (normalized scores).
        metrics: name -> statistic; defaults to :data:`AGGREGATE_METRICS`.
        reps: bootstrap replicates.
        confidence: CI level.
        rng: seed or generator.
        progress: show a progress bar for long loops.

    Returns:
        algorithm -> metric name -> :class:`Interval`.

    Examples:
        >>> out = aggregate_metrics({"a": np.ones((3, 2))}, reps=50)
        >>> out["a"]["IQM"], out["a"]["Optimality gap"].point
        (Interval(point=1.0, low=1.0, high=1.0), 0.0)
    """
    metrics = AGGREGATE_METRICS if metrics is None else metrics
    gen = as_generator(rng)
    out: dict[str, dict[str, Interval]] = {}
    for algo, algo_scores in scores.items():
        tasks = as_task_arrays(algo_scores)
        boots: dict[str, list[np.ndarray]] = {m: [] for m in metrics}
        for size in rep_chunks(reps, progress, f"bootstrap {algo}"):
            sample = resample_tasks(tasks, size, gen)
            for name, fn in metrics.items():
                boots[name].append(fn(sample))
        out[algo] = {}
        for name, fn in metrics.items():
            low, high = percentile_bounds(np.concatenate(boots[name]), confidence)
            out[algo][name] = Interval(_point(fn, tasks), float(low), float(high))
    return out


def performance_profile(
    scores: Mapping[str, TaskScores],
    taus: Sequence[float] | np.ndarray,
    reps: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
    progress: bool = False,
) -> dict[str, Profile]:
    """Score distributions: the fraction of runs (over runs x tasks) with score > tau.

    Args:
        scores: algorithm -> its runs per task (normalized scores).
        taus: thresholds.
        reps: bootstrap replicates for the CI bands.
        confidence: CI level.
        rng: seed or generator.
        progress: show a progress bar for long loops.

    Returns:
        algorithm -> :class:`Profile`.

    Examples:
        >>> p = performance_profile({"a": [[0.0, 0.5, 1.0, 1.0]]}, [-0.1, 0.5, 1.0], reps=10)
        >>> p["a"].point.tolist()
        [1.0, 0.5, 0.0]
    """
    taus = np.asarray(taus, dtype=np.float64)
    gen = as_generator(rng)
    out = {}
    for algo, algo_scores in scores.items():
        tasks = as_task_arrays(algo_scores)
        point = (flatten_tasks(tasks)[:, None] > taus).mean(0)
        boot = [
            (np.concatenate(resample_tasks(tasks, size, gen), -1)[..., None] > taus).mean(1)
            for size in rep_chunks(reps, progress, f"profile {algo}")
        ]
        low, high = percentile_bounds(np.concatenate(boot), confidence)
        out[algo] = Profile(taus, point, low, high)
    return out


def _paired_tasks(x: TaskScores, y: TaskScores) -> tuple[list[np.ndarray], list[np.ndarray]]:
    if isinstance(x, Mapping) and isinstance(y, Mapping):
        common = [t for t in x if t in y]
        if not common:
            raise ValueError("probability of improvement: the two score sets share no task")
        return as_task_arrays([x[t] for t in common]), as_task_arrays([y[t] for t in common])
    xs, ys = as_task_arrays(x), as_task_arrays(y)
    if len(xs) != len(ys):
        raise ValueError(f"probability of improvement: {len(xs)} tasks for X but {len(ys)} for Y")
    return xs, ys


def _poi_rows(xs: list[np.ndarray], ys: list[np.ndarray]) -> np.ndarray:
    # xs[i]: [..., n_i], ys[i]: [..., m_i]; Mann-Whitney U / (n m) per task, ties 1/2.
    total = 0.0
    for x, y in zip(xs, ys):
        diff = x[..., :, None] - y[..., None, :]
        total = total + (diff > 0).mean((-2, -1)) + 0.5 * (diff == 0).mean((-2, -1))
    return np.asarray(total) / len(xs)


def probability_of_improvement(x: TaskScores, y: TaskScores) -> float:
    """``P(X > Y)``: the chance a run of X beats a run of Y on a task, averaged over tasks.

    Args:
        x: runs of X per task.
        y: runs of Y per task (the same tasks, in the same order, or mappings
            by task name, in which case the common tasks are used).

    Returns:
        A probability; ties count one half, so identical score sets give 0.5.

    Examples:
        >>> probability_of_improvement([[1.0, 2.0]], [[0.0, 0.5]])
        1.0
        >>> probability_of_improvement([[1.0, 2.0]], [[1.0, 2.0]])
        0.5
    """
    xs, ys = _paired_tasks(x, y)
    return float(_poi_rows(xs, ys))


def probability_of_improvement_ci(
    x: TaskScores,
    y: TaskScores,
    reps: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
    progress: bool = False,
) -> Interval:
    """``P(X > Y)`` with a CI from independent stratified bootstraps of X and Y."""
    xs, ys = _paired_tasks(x, y)
    gen = as_generator(rng)
    boot = []
    for size in rep_chunks(reps, progress, "probability of improvement"):
        boot.append(_poi_rows(resample_tasks(xs, size, gen), resample_tasks(ys, size, gen)))
    low, high = percentile_bounds(np.concatenate(boot), confidence)
    return Interval(float(_poi_rows(xs, ys)), float(low), float(high))


def pairwise_probability_of_improvement(
    scores: Mapping[str, Mapping[str, Any]],
    reps: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
    progress: bool = False,
) -> dict[tuple[str, str], tuple[Interval, int]]:
    """``P(X > Y)`` for every pair of algorithms, on the tasks both ran.

    ``P(Y > X) = 1 - P(X > Y)``, so each unordered pair appears once, in the
    order of ``scores``. Pairs without a common task are left out.

    Args:
        scores: algorithm -> task -> runs.
        reps: bootstrap replicates.
        confidence: CI level.
        rng: seed or generator.
        progress: show a progress bar for long loops.

    Returns:
        ``(X, Y)`` -> (``P(X > Y)`` with CI, number of common tasks).
    """
    gen = as_generator(rng)
    out = {}
    for a, b in itertools.combinations(scores, 2):
        common = [t for t in scores[a] if t in scores[b]]
        if common:
            xa = {t: scores[a][t] for t in common}
            xb = {t: scores[b][t] for t in common}
            ci = probability_of_improvement_ci(xa, xb, reps, confidence, gen, progress)
            out[(a, b)] = (ci, len(common))
    return out


def bootstrap_difference(
    x: TaskScores,
    y: TaskScores,
    statistic: str | Statistic = "Mean",
    reps: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
) -> Interval:
    """``statistic(Y) - statistic(X)`` with a CI from independent stratified bootstraps.

    Examples:
        >>> bootstrap_difference([[1.0, 1.0]], [[3.0, 3.0]], reps=20)
        Interval(point=2.0, low=2.0, high=2.0)
    """
    fn = AGGREGATE_METRICS[statistic] if isinstance(statistic, str) else statistic
    xs, ys = as_task_arrays(x), as_task_arrays(y)
    gen = as_generator(rng)
    boot = [
        fn(resample_tasks(ys, size, gen)) - fn(resample_tasks(xs, size, gen))
        for size in rep_chunks(reps, False, "")
    ]
    low, high = percentile_bounds(np.concatenate(boot), confidence)
    point = _point(fn, ys) - _point(fn, xs)
    return Interval(float(point), float(low), float(high))
