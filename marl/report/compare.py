"""Compare two sets of runs (e.g. two versions of an algorithm): differences with CIs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from marl.report import stats
from marl.report.report import (
    ReportConfig,
    evaluation_scores,
    final_scores,
    resolve_bounds,
    run_statuses,
)
from marl.report.results import ResultsTable
from marl.report.tables import table as md_table
from marl.report.tables import title_lines

__all__ = ["Comparison", "compare_results", "render_comparison"]


@dataclass
class Comparison:
    """Differences B - A, per task (raw scores) and aggregated (normalized scores).

    Attributes:
        label_a: name of the first set of runs.
        label_b: name of the second set.
        pairs: (algorithm in A, algorithm in B) compared.
        per_task: rows ``(task, algo_a, algo_b, mean_a, mean_b, diff, n_a, n_b)``.
        aggregate: rows ``(algo_a, algo_b, tasks, {metric: diff}, P(B > A))``.
        notes: runs left out and other remarks.
    """

    label_a: str
    label_b: str
    config: ReportConfig
    pairs: list[tuple[str, str]]
    per_task: list[tuple] = field(default_factory=list)
    aggregate: list[tuple] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _pairs(algos_a: Sequence[str], algos_b: Sequence[str]) -> list[tuple[str, str]]:
    common = [a for a in algos_a if a in algos_b]
    if common:
        return [(a, a) for a in common]
    if len(algos_a) == 1 and len(algos_b) == 1:
        # Two versions of one algorithm, saved under different names.
        return [(algos_a[0], algos_b[0])]
    raise ValueError(
        f"nothing to compare: no algorithm is in both sets (A has {list(algos_a)}, B has {list(algos_b)})"
    )


def compare_results(
    table_a: ResultsTable,
    table_b: ResultsTable,
    config: ReportConfig | None = None,
    label_a: str = "A",
    label_b: str = "B",
) -> Comparison:
    """Compare the final scores of two sets of runs.

    Algorithms are matched by name; when each set holds a single algorithm
    under different names, those two are matched. Per task, the difference of
    mean raw scores B - A gets a bootstrap CI (seeds resampled independently on
    each side). Aggregates use scores min-max normalized per task with bounds
    taken over both sets (the min and max evaluation score, as in
    :func:`~marl.report.report.evaluation_scores`), and stratified bootstraps on
    each side.

    Args:
        table_a: the first runs.
        table_b: the second runs.
        config: metric, score, bounds and bootstrap settings.
        label_a: name of the first set in the output.
        label_b: name of the second set.

    Returns:
        The :class:`Comparison`.

    Raises:
        ValueError: when the two sets share no algorithm (or single pair) or no task.
    """
    config = config or ReportConfig()
    scores = []
    notes: list[str] = []
    for label, tab in ((label_a, table_a), (label_b, table_b)):
        if not tab.runs:
            raise ValueError(f"{label}: no runs found")
        statuses, _ = run_statuses(tab, config.total_frames)
        raw, n = final_scores(tab, config, statuses)
        scores.append(raw)
        notes += [f"{label}: {x}" for x in n]
        notes += [f"{label}: skipped `{path}`: {why}" for path, why in tab.skipped]
        notes += [
            f"{label}: `{s.run}` is incomplete ({s.reason})." for s in statuses if not s.complete
        ]
    raw_a, raw_b = scores
    algos_a = sorted({a for t in raw_a.values() for a in t})
    algos_b = sorted({a for t in raw_b.values() for a in t})
    cmp = Comparison(label_a, label_b, config, _pairs(algos_a, algos_b), notes=notes)

    tasks = sorted(set(raw_a) & set(raw_b))
    if not tasks:
        raise ValueError(
            f"nothing to compare: no task has scored runs in both {label_a} and {label_b}"
        )
    values_a = evaluation_scores(table_a, config.metric)
    values_b = evaluation_scores(table_b, config.metric)
    overrides, _ = resolve_bounds(config, tasks)
    both = {t: np.concatenate([values_a[t], values_b[t]]) for t in tasks}
    bounds = stats.min_max_bounds(both, overrides)
    rng = np.random.default_rng(config.seed)
    kw = {"reps": config.reps, "confidence": config.confidence, "rng": rng}
    metrics = ("IQM", "Mean")
    for algo_a, algo_b in cmp.pairs:
        norm_a, norm_b = {}, {}
        for task in tasks:
            if algo_a not in raw_a[task] or algo_b not in raw_b[task]:
                continue
            xa = np.asarray(list(raw_a[task][algo_a].values()))
            xb = np.asarray(list(raw_b[task][algo_b].values()))
            diff = stats.bootstrap_difference([xa], [xb], "Mean", **kw)
            cmp.per_task.append(
                (
                    task,
                    algo_a,
                    algo_b,
                    stats.mean_confidence_interval(xa, config.confidence),
                    stats.mean_confidence_interval(xb, config.confidence),
                    diff,
                    xa.size,
                    xb.size,
                )
            )
            norm_a[task], norm_b[task] = (
                stats.normalize(xa, bounds[task]),
                stats.normalize(xb, bounds[task]),
            )
        if not norm_a:
            cmp.notes.append(f"`{algo_a}` vs `{algo_b}`: no common task with scored runs.")
            continue
        diffs = {m: stats.bootstrap_difference(norm_a, norm_b, m, **kw) for m in metrics}
        poi = stats.probability_of_improvement_ci(norm_b, norm_a, **kw)
        cmp.aggregate.append((algo_a, algo_b, len(norm_a), diffs, poi))
    return cmp


def render_comparison(cmp: Comparison, command: str | None = None) -> str:
    """The comparison as markdown (``compare.md``)."""
    c = cmp.config
    pct = f"{100 * c.confidence:g}%"
    a, b = cmp.label_a, cmp.label_b
    lines = title_lines("Comparison", command)
    lines += [
        f"A = `{a}`, B = `{b}`. Differences are B - A, with {pct} bootstrap CIs "
        f"({c.reps} replicates, seed {c.seed}; the seeds of A and B are resampled independently). "
        "With few seeds, percentile-bootstrap CIs are optimistic: read them as a guide.",
        "",
        f"## Final {c.metric} per task",
        "",
    ]
    rows = [
        [
            task,
            pa if pa == pb else f"{pa} -> {pb}",
            ma.format(".4g"),
            mb.format(".4g"),
            d.format(".4g"),
            f"{na}/{nb}",
        ]
        for task, pa, pb, ma, mb, d, na, nb in cmp.per_task
    ]
    lines += [
        md_table(
            ["task", "algorithm", f"A mean ({pct} t)", f"B mean ({pct} t)", "B - A", "seeds A/B"],
            rows,
        )
    ]
    lines += [
        "",
        "## Aggregate (min-max normalized per task, bounds over A and B)",
        "",
    ]
    rows = [
        [
            pa if pa == pb else f"{pa} -> {pb}",
            n,
            diffs["IQM"].format(".3f"),
            diffs["Mean"].format(".3f"),
            poi.format(".3f"),
        ]
        for pa, pb, n, diffs, poi in cmp.aggregate
    ]
    lines += [md_table(["algorithm", "tasks", "IQM B - A", "Mean B - A", "P(B > A)"], rows), ""]
    if cmp.notes:
        lines += ["Notes:", ""] + [f"- {n}" for n in cmp.notes] + [""]
    return "\n".join(lines)
