"""Turn a :class:`~marl.report.results.ResultsTable` into the numbers of a report.

:func:`build_report` checks which runs are complete, takes each run's final
score, normalizes scores per task and computes every statistic of the report;
:mod:`marl.report.markdown` and :mod:`marl.report.plots` only present them.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from marl.report import stats
from marl.report.baselines import BaselineEntry
from marl.report.references import Reference, ReferenceCheck, check_references
from marl.report.results import ResultsTable, RunKey

__all__ = [
    "MIN_SEEDS",
    "RECOMMENDED_SEEDS",
    "AlgorithmGroup",
    "Curve",
    "Report",
    "ReportConfig",
    "RunStatus",
    "build_report",
    "evaluation_scores",
    "final_scores",
    "run_statuses",
    "task_groups",
    "task_values",
]

MIN_SEEDS = 5
"""Fewest scored seeds per (algorithm, task) below which the report warns that its
bootstrap CIs (aggregates, profiles, probability of improvement) are unreliable.

Agarwal et al. (2021, rliable) show percentile-bootstrap CIs to be too narrow
with fewer than about 5 runs per task; with 2 seeds a resample can only repeat
the 2 scores, so e.g. ``P(X > Y)`` is ``1.000 [1.000, 1.000]`` whenever both runs
of X beat both runs of Y, however close they are."""

RECOMMENDED_SEEDS = 10
"""Seeds per (algorithm, task) that Gorsane et al. (2022) recommend for MARL results."""


@dataclass(frozen=True)
class ReportConfig:
    """What a report computes.

    Attributes:
        metric: the per-episode metric to report (``"return"``, or e.g.
            ``"agents/return"``).
        score: a run's score: ``"final"``, the mean over the episodes of its
            last evaluation, or ``"absolute"``, the mean of its
            ``absolute_metrics`` (marl-eval's absolute metric).
        bounds: ``"env/task"`` (or ``"task"``) -> ``(min, max)`` normalization
            bounds that replace the observed ones.
        reps: bootstrap replicates.
        confidence: CI level.
        seed: seed of the bootstrap generator (reports are reproducible).
        total_frames: when given, runs whose last evaluation is below it are
            incomplete; otherwise a run is incomplete when it stopped before
            the longest run of its task and algorithm.
        include_incomplete: keep incomplete runs in the final-score statistics.
        progress: show progress bars for long bootstrap loops.
    """

    metric: str = "return"
    score: str = "final"
    bounds: Mapping[str, Sequence[float]] | None = None
    reps: int = 2000
    confidence: float = 0.95
    seed: int = 0
    total_frames: int | None = None
    include_incomplete: bool = False
    progress: bool = False

    def __post_init__(self) -> None:
        if self.score not in ("final", "absolute"):
            raise ValueError(f"score must be 'final' or 'absolute', got {self.score!r}")
        if self.reps < 1:
            raise ValueError(f"reps must be >= 1, got {self.reps}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")


@dataclass(frozen=True)
class RunStatus:
    """One run as found: how far it got and whether its final score counts."""

    run: RunKey
    evaluations: int
    last_step_count: int | None
    complete: bool
    reason: str = ""
    elapsed_time: float | None = None


@dataclass(frozen=True)
class Curve:
    """A sample-efficiency curve: per evaluation frame count, the mean over seeds with a CI."""

    step_counts: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n: np.ndarray


@dataclass(frozen=True)
class AlgorithmGroup:
    """Algorithms that have scored runs on exactly the same tasks.

    Aggregates, performance profiles and probabilities of improvement compare
    the algorithms of one group only: an average over other tasks is another
    quantity, not a better or worse score.
    """

    tasks: tuple[str, ...]
    algorithms: tuple[str, ...]


def task_groups(normalized: Mapping[str, Mapping[str, Any]]) -> list[AlgorithmGroup]:
    """Group algorithms by their set of tasks (``algorithm -> task -> scores``).

    Groups with more tasks come first, then those with more algorithms.

    Examples:
        >>> task_groups({"a": {"t1": 0, "t2": 0}, "b": {"t1": 0}, "c": {"t1": 0, "t2": 0}})
        [AlgorithmGroup(tasks=('t1', 't2'), algorithms=('a', 'c')), AlgorithmGroup(tasks=('t1',), algorithms=('b',))]
    """
    by_tasks: dict[tuple[str, ...], list[str]] = {}
    for algo, tasks in normalized.items():
        by_tasks.setdefault(tuple(sorted(tasks)), []).append(algo)
    groups = [AlgorithmGroup(t, tuple(sorted(a))) for t, a in by_tasks.items()]
    return sorted(groups, key=lambda g: (-len(g.tasks), -len(g.algorithms), g.tasks))


def figure_role(base: str, group: int) -> str:
    """The figure role of group ``group``'s ``base`` figure (``"aggregate"``, ``"profile"``,
    ``"improvement"``): ``base`` for the first group, ``"base:<k>"`` for group ``k`` >= 2.

    Examples:
        >>> figure_role("aggregate", 0), figure_role("aggregate", 1)
        ('aggregate', 'aggregate:2')
    """
    return base if group == 0 else f"{base}:{group + 1}"


@dataclass
class Report:
    """Everything a report shows; see :func:`build_report`."""

    config: ReportConfig
    sources: list[str]
    statuses: list[RunStatus]
    missing: list[RunKey]
    """The planned runs without results (guessed from the grid when ``planned`` is None)."""
    notes: list[str]
    task_ids: list[str]
    algorithms: list[str]
    raw: dict[str, dict[str, dict[str, float]]]
    """task -> algorithm -> seed -> final score (raw) of the runs that count."""
    bounds: dict[str, tuple[float, float]]
    bound_sources: dict[str, str]
    normalized: dict[str, dict[str, np.ndarray]]
    """algorithm -> task -> normalized scores of its runs."""
    per_task: dict[str, dict[str, stats.Interval]] = field(default_factory=dict)
    aggregates: dict[str, dict[str, stats.Interval]] = field(default_factory=dict)
    profiles: dict[str, stats.Profile] = field(default_factory=dict)
    improvement: dict[tuple[str, str], tuple[stats.Interval, int]] = field(default_factory=dict)
    curves: dict[str, dict[str, Curve]] = field(default_factory=dict)
    references: list[ReferenceCheck] = field(default_factory=list)
    """marl's result next to each reference, with the verdict (see :mod:`marl.report.references`)."""
    baselines: dict[str, list[BaselineEntry]] = field(default_factory=dict)
    """task -> the random and no-op baselines of its runs (one entry per evaluation setting)."""
    planned: list[RunKey] | None = None
    """The runs of the benchmark's ``plan.json``, when there was one."""
    groups: list[AlgorithmGroup] = field(default_factory=list)
    """The algorithms by task set: aggregates, profiles and ``P(X > Y)`` compare within a group."""
    lacking: dict[str, list[str]] = field(default_factory=dict)
    """algorithm -> the report's tasks on which it has no scored run (only algorithms lacking some)."""
    across_groups: dict[tuple[str, str], tuple[stats.Interval, tuple[str, ...]]] = field(
        default_factory=dict
    )
    """``P(X > Y)`` of pairs from different groups, over the tasks both ran (named)."""
    warnings: list[str] = field(default_factory=list)
    """What makes the statistics less trustworthy (few seeds, task sets that differ, files
    skipped); the markdown shows them at the top and ``marl-report`` prints them on stderr."""

    def group_of(self, algorithm: str) -> int | None:
        """The index in :attr:`groups` of ``algorithm``'s group (None if it has no scored run)."""
        return next((i for i, g in enumerate(self.groups) if algorithm in g.algorithms), None)

    def baseline_values(
        self, task: str, policy: str, algorithms: Sequence[str] | None = None
    ) -> list[tuple[float, list[str]]]:
        """The ``policy`` baseline of ``task``: ``(mean, algorithms)`` per distinct value.

        One entry per evaluation setting of the task's algorithms (``algorithms``, by
        default those with curves), with entries of equal value merged: settings that
        score the same need one line in a plot and one number in a table.
        """
        present = set(self.curves.get(task, {}) if algorithms is None else algorithms)
        values: dict[float, list[str]] = {}
        for entry in self.baselines.get(task, []):
            algos = [a for a in entry.algorithms if a in present]
            mean = entry.mean(policy, self.config.metric)
            if algos and mean is not None:
                group = values.setdefault(mean, [])
                group.extend(a for a in algos if a not in group)
        return list(values.items())


def run_statuses(
    table: ResultsTable,
    total_frames: int | None = None,
    planned: Sequence[RunKey] | None = None,
) -> tuple[list[RunStatus], list[RunKey]]:
    """Which runs are complete, and which planned runs are missing.

    With ``planned`` (a benchmark's ``plan.json``), the missing runs are the planned
    ones without results. Without it, they are guessed from a grid: every
    algorithm x task x seed seen in an env.

    Returns:
        (a status per run, the missing runs).
    """
    last: dict[RunKey, tuple[int, int | None, float | None]] = {}
    for run in table.runs:
        evals = table.run_evaluations(run)
        last[run] = (
            len(evals),
            evals[-1].step_count if evals else None,
            evals[-1].elapsed_time if evals else None,
        )
    longest: dict[tuple[str, str, str], int] = defaultdict(int)
    for run, (_, count, _) in last.items():
        if count is not None:
            key = (run.env, run.task, run.algorithm)
            longest[key] = max(longest[key], count)
    statuses = []
    for run, (n, count, elapsed) in last.items():
        target = (
            total_frames
            if total_frames is not None
            else longest[(run.env, run.task, run.algorithm)]
        )
        if count is None:
            status = RunStatus(run, 0, None, False, "no evaluation yet")
        elif count < target:
            status = RunStatus(
                run, n, count, False, f"stopped at {count} of {target} frames", elapsed
            )
        else:
            status = RunStatus(run, n, count, True, "", elapsed)
        statuses.append(status)
    if planned is not None:
        present = set(table.runs)
        return statuses, sorted(k for k in dict.fromkeys(planned) if k not in present)
    missing = []
    for env in sorted({r.env for r in table.runs}):
        runs = [r for r in table.runs if r.env == env]
        grid = itertools.product(
            sorted({r.task for r in runs}),
            sorted({r.algorithm for r in runs}),
            sorted({r.seed for r in runs}),
        )
        present = set(runs)
        missing += [RunKey(env, t, a, s) for t, a, s in grid if RunKey(env, t, a, s) not in present]
    return statuses, missing


def task_values(table: ResultsTable, metric: str) -> dict[str, np.ndarray]:
    """Every per-episode value of ``metric`` per task (all runs, steps and absolute metrics)."""
    values: dict[str, list[np.ndarray]] = defaultdict(list)
    for ev in table.evaluations:
        if metric in ev.metrics:
            values[ev.run.task_id].append(ev.metrics[metric])
    for run, metrics in table.absolute.items():
        if metric in metrics:
            values[run.task_id].append(metrics[metric])
    return {t: np.concatenate(v) for t, v in sorted(values.items())}


def evaluation_scores(table: ResultsTable, metric: str) -> dict[str, np.ndarray]:
    """Per task, the score of every evaluation of every run: its mean over episodes.

    One value per (algorithm, seed, evaluation step), plus one per run's
    ``absolute_metrics`` (their mean): each is a score a run had, so the final
    and absolute scores of every run lie between their min and max. These give
    the default normalization bounds: one outlier episode moves its
    evaluation's mean by ``1/episodes`` of its distance, it does not set a bound.

    Examples:
        >>> from marl.report.results import RunResults, load_results
        >>> import tempfile, pathlib
        >>> run = RunResults("env", "task", "a", 0)
        >>> run.add_evaluation(0, [-30.0, 1.0, 1.0, 0.0])
        >>> run.add_evaluation(100, [2.0, 2.0, 2.0, 2.0])
        >>> table = load_results([run.write(pathlib.Path(tempfile.mkdtemp()))])
        >>> evaluation_scores(table, "return")["env/task"].tolist()
        [-7.0, 2.0]
    """
    values: dict[str, list[float]] = defaultdict(list)
    for ev in table.evaluations:
        if metric in ev.metrics:
            values[ev.run.task_id].append(float(np.mean(ev.metrics[metric])))
    for run, metrics in table.absolute.items():
        if metric in metrics:
            values[run.task_id].append(float(np.mean(metrics[metric])))
    return {t: np.asarray(v) for t, v in sorted(values.items())}


def final_scores(
    table: ResultsTable, config: ReportConfig, statuses: Sequence[RunStatus]
) -> tuple[dict[str, dict[str, dict[str, float]]], list[str]]:
    """Each counted run's score (mean over episodes), and notes on runs left out.

    Returns:
        (task -> algorithm -> seed -> score, notes).

    Raises:
        ValueError: if no run has ``config.metric``; the message lists the metrics found.
    """
    found_metrics = {m for ev in table.evaluations for m in ev.metrics}
    if config.metric not in found_metrics:
        raise ValueError(f"no run has the metric {config.metric!r}; found {sorted(found_metrics)}")
    scores: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    notes = []
    for status in statuses:
        run = status.run
        if not status.complete and not config.include_incomplete:
            continue
        if config.score == "absolute":
            values = table.absolute.get(run, {}).get(config.metric)
            if values is None:
                notes.append(f"`{run}` has no `absolute_metrics/{config.metric}`: left out.")
                continue
        else:
            evals = table.run_evaluations(run)
            if not evals:
                continue
            values = evals[-1].metrics.get(config.metric)
            if values is None:
                notes.append(f"`{run}` has no `{config.metric}` at its last evaluation: left out.")
                continue
        scores[run.task_id][run.algorithm][run.seed] = float(np.mean(values))
    return {t: dict(a) for t, a in sorted(scores.items())}, notes


def _curves(table: ResultsTable, metric: str, confidence: float) -> dict[str, dict[str, Curve]]:
    points: dict[str, dict[str, dict[int, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    # Seeds are aligned on the exact frame count of each evaluation: runs of
    # one configuration evaluate at the same counts, and a point with fewer
    # seeds simply gets a wider (or, with one seed, no) interval.
    for ev in table.evaluations:
        if metric in ev.metrics:
            points[ev.run.task_id][ev.run.algorithm][ev.step_count].append(
                float(ev.metrics[metric].mean())
            )
    out: dict[str, dict[str, Curve]] = {}
    for task, algos in sorted(points.items()):
        out[task] = {}
        for algo, by_step in sorted(algos.items()):
            steps = sorted(by_step)
            cis = [stats.mean_confidence_interval(by_step[s], confidence) for s in steps]
            out[task][algo] = Curve(
                np.asarray(steps),
                np.asarray([c.point for c in cis]),
                np.asarray([c.low for c in cis]),
                np.asarray([c.high for c in cis]),
                np.asarray([len(by_step[s]) for s in steps]),
            )
    return out


def resolve_bounds(
    config: ReportConfig, task_ids: Sequence[str]
) -> tuple[dict[str, Sequence[float]], dict[str, str]]:
    """Map user bounds given as ``"env/task"`` or plain ``"task"`` to task ids."""
    given = dict(config.bounds or {})
    out, source = {}, {}
    for task_id in task_ids:
        short = task_id.split("/", 1)[1]
        for key in (task_id, short):
            if key in given:
                out[task_id] = given[key]
                source[task_id] = "user"
                break
        else:
            source[task_id] = "observed"
    return out, source


def _baselines_by_task(
    entries: Sequence[BaselineEntry], task_ids: Sequence[str], notes: list[str]
) -> dict[str, list[BaselineEntry]]:
    out: dict[str, list[BaselineEntry]] = {}
    for entry in entries:
        if entry.task not in task_ids:
            continue
        if entry.error:
            notes.append(f"The baselines of `{entry.task}` could not be computed: {entry.error}")
            continue
        out.setdefault(entry.task, []).append(entry)
    return out


def build_report(
    table: ResultsTable,
    config: ReportConfig | None = None,
    references: Sequence[Reference] = (),
    baselines: Sequence[BaselineEntry] = (),
    planned: Sequence[RunKey] | None = None,
) -> Report:
    """Compute every table and figure's numbers for the runs of ``table``.

    Args:
        table: the loaded runs.
        config: what to compute; defaults to :class:`ReportConfig()`.
        references: reference scores to check the runs against
            (:func:`marl.report.references.check_references`).
        baselines: the random and no-op baselines of the tasks (``baselines.json``).
        planned: the runs the benchmark meant to make (``plan.json``); without it the
            missing runs are guessed from the algorithm x task x seed grid.

    Returns:
        The :class:`Report`.

    Raises:
        ValueError: when there is no run, or no run has the metric.

    Examples:
        >>> from marl.report.results import ResultsTable, RunResults, load_results
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> paths = []
        >>> for algo, offset in (("a", 0.0), ("b", 1.0)):
        ...     for seed in range(2):
        ...         run = RunResults("env", "task", algo, seed)
        ...         run.add_evaluation(100, [offset + seed])
        ...         paths.append(run.write(d / f"{algo}{seed}.json"))
        >>> rep = build_report(load_results(paths), ReportConfig(reps=50))
        >>> rep.aggregates["b"]["Mean"].point, rep.improvement[("a", "b")][0].point
        (0.75, 0.125)
    """
    config = config or ReportConfig()
    if not table.runs:
        raise ValueError("no runs to report on")
    statuses, missing = run_statuses(table, config.total_frames, planned)
    raw, notes = final_scores(table, config, statuses)
    task_ids = table.task_ids
    overrides, bound_sources = resolve_bounds(config, task_ids)
    values = evaluation_scores(table, config.metric)
    bounds = stats.min_max_bounds({t: values[t] for t in task_ids if t in values}, overrides)
    normalized: dict[str, dict[str, np.ndarray]] = defaultdict(dict)
    for task, algos in raw.items():
        if bounds[task][0] == bounds[task][1]:
            notes.append(
                f"`{task}` has the same {config.metric} everywhere: its normalized scores are 0."
            )
        for algo, seeds in algos.items():
            normalized[algo][task] = stats.normalize(list(seeds.values()), bounds[task])
    algorithms = sorted(normalized)
    normalized = {a: dict(sorted(normalized[a].items())) for a in algorithms}
    report = Report(
        config=config,
        sources=sorted({str(p) for p in table.sources.values()}),
        statuses=statuses,
        missing=missing,
        planned=None if planned is None else list(planned),
        notes=notes,
        task_ids=task_ids,
        algorithms=table.algorithms,
        raw=raw,
        bounds=bounds,
        bound_sources=bound_sources,
        normalized=normalized,
    )
    report.per_task = {
        task: {
            a: stats.mean_confidence_interval(list(s.values()), config.confidence)
            for a, s in algos.items()
        }
        for task, algos in raw.items()
    }
    report.curves = _curves(table, config.metric, config.confidence)
    report.references = check_references(table, references, config.confidence)
    report.baselines = _baselines_by_task(baselines, task_ids, report.notes)
    report.warnings += _skipped_warnings(table)
    report.groups = task_groups(normalized)
    scored_tasks = sorted(raw)
    report.lacking = {
        a: [t for t in scored_tasks if t not in normalized[a]]
        for a in algorithms
        if len(normalized[a]) < len(scored_tasks)
    }
    report.warnings += _seed_warnings(raw)
    if len(report.groups) > 1:
        report.warnings.append(
            f"the algorithms did not all run the same tasks: the aggregates, performance "
            f"profiles and probabilities of improvement compare algorithms within "
            f"{len(report.groups)} groups of equal task sets only ("
            + "; ".join(
                f"{', '.join(a)} {'lacks' if len(a) == 1 else 'lack'} {', '.join(t)}"
                for t, a in _by_lacking(report.lacking).items()
            )
            + ")"
        )
    if not normalized:
        report.notes.append("No complete run: the aggregate statistics are left out.")
        return report
    rng = np.random.default_rng(config.seed)
    kw = {
        "reps": config.reps,
        "confidence": config.confidence,
        "rng": rng,
        "progress": config.progress,
    }
    report.aggregates = stats.aggregate_metrics(normalized, **kw)
    every = np.concatenate([s for a in normalized.values() for s in a.values()])
    taus = np.linspace(min(0.0, float(every.min())), max(1.0, float(every.max())), 101)
    report.profiles = stats.performance_profile(normalized, taus, **kw)
    # P(X > Y) only within a group: X and Y on the same tasks, as the aggregates.
    for group in report.groups:
        scores = {a: normalized[a] for a in group.algorithms}
        report.improvement.update(stats.pairwise_probability_of_improvement(scores, **kw))
    # Pairs of different groups: on the tasks both ran, named, in a table of their own.
    for a, b in itertools.combinations(algorithms, 2):
        if report.group_of(a) != report.group_of(b):
            common = tuple(t for t in normalized[a] if t in normalized[b])
            if common:
                xa, xb = ({t: normalized[x][t] for t in common} for x in (a, b))
                ci = stats.probability_of_improvement_ci(xa, xb, **kw)
                report.across_groups[(a, b)] = (ci, common)
    return report


def _by_lacking(lacking: Mapping[str, Sequence[str]]) -> dict[tuple[str, ...], list[str]]:
    """Lacking tasks -> the algorithms that lack exactly them."""
    out: dict[tuple[str, ...], list[str]] = {}
    for algo, tasks in lacking.items():
        out.setdefault(tuple(tasks), []).append(algo)
    return out


def _seed_warnings(raw: Mapping[str, Mapping[str, Mapping[str, float]]]) -> list[str]:
    """A warning when some (algorithm, task) has fewer than :data:`MIN_SEEDS` scored seeds."""
    few = sorted(
        (len(seeds), task, algo)
        for task, algos in raw.items()
        for algo, seeds in algos.items()
        if len(seeds) < MIN_SEEDS
    )
    if not few:
        return []
    pairs = sum(len(algos) for algos in raw.values())
    which = f"all {pairs}" if len(few) == pairs else f"{len(few)} of {pairs}"
    shown = ""
    if len(few) < pairs:
        shown = " (" + ", ".join(f"{a} on {t}: {n}" for n, t, a in few[:4])
        shown += f" and {len(few) - 4} more)" if len(few) > 4 else ")"
    return [
        f"few seeds: {which} (algorithm, task) pairs have fewer than MIN_SEEDS = {MIN_SEEDS} "
        f"scored seeds, as few as {few[0][0]}{shown}. Their bootstrap CIs (aggregates, "
        "profiles, P(X > Y)) are unreliable: a resample can only repeat the few scores there "
        "are, so e.g. P(X > Y) is 1.000 [1.000, 1.000] whenever every run of X beats every "
        f"run of Y. Gorsane et al. (2022) ask for at least {RECOMMENDED_SEEDS} seeds."
    ]


def _skipped_warnings(table: ResultsTable) -> list[str]:
    """A warning per skipped file (malformed, or a link out of its folder)."""
    return [f"skipped `{path}`: {why}" for path, why in getattr(table, "skipped", ())]
