"""Render a :class:`~marl.report.report.Report` as ``report.md``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from marl.report.baselines import POLICIES
from marl.report.league import LeagueTable, league_section
from marl.report.report import MIN_SEEDS, Report, figure_role
from marl.report.tables import table, title_lines

__all__ = ["render_markdown", "table"]


def _display(path: str) -> str:
    # Relative to the working directory when under it, so a committed report
    # does not carry the absolute paths of the machine that made it.
    try:
        return Path(path).relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path


def _pct(confidence: float) -> str:
    return f"{100 * confidence:g}%"


def _runs_section(rep: Report) -> list[str]:
    out = ["## Runs", ""]
    counted = {
        (t, a, s) for t, algos in rep.raw.items() for a, seeds in algos.items() for s in seeds
    }
    rows = []
    for st in rep.statuses:
        r = st.run
        used = (r.task_id, r.algorithm, r.seed) in counted
        state = "complete" if st.complete else f"incomplete ({st.reason})"
        elapsed = "" if st.elapsed_time is None else f"{st.elapsed_time:.0f}"
        frames = "" if st.last_step_count is None else st.last_step_count
        rows.append(
            [
                r.task_id,
                r.algorithm,
                r.seed,
                st.evaluations,
                frames,
                elapsed,
                state,
                "yes" if used else "no",
            ]
        )
    header = [
        "task",
        "algorithm",
        "seed",
        "evaluations",
        "frames",
        "time (s)",
        "status",
        "in statistics",
    ]
    out += [table(header, rows), ""]
    n_complete = sum(st.complete for st in rep.statuses)
    of_plan = "" if rep.planned is None else f" of the {len(rep.planned)} planned (`plan.json`)"
    out.append(
        f"{len(rep.statuses)} runs found, {n_complete} complete, "
        f"{len(rep.missing)} missing{of_plan}."
    )
    if rep.missing:
        where = (
            "in the algorithm x task x seed grid of their env"
            if rep.planned is None
            else "planned by the benchmark"
        )
        out += ["", f"Missing runs ({where}, but not found):", ""]
        out += [f"- `{m}`" for m in rep.missing]
    incomplete = [st for st in rep.statuses if not st.complete]
    if incomplete:
        kept = "kept in" if rep.config.include_incomplete else "left out of"
        out += ["", f"Incomplete runs ({kept} the final-score statistics):", ""]
        out += [f"- `{st.run}`: {st.reason}" for st in incomplete]
    if rep.notes:
        out += ["", "Notes:", ""] + [f"- {n}" for n in rep.notes]
    return [*out, ""]


def _task_algorithms(rep: Report, task: str) -> list[str]:
    return sorted({st.run.algorithm for st in rep.statuses if st.run.task_id == task})


def _baseline_cell(rep: Report, task: str, policy: str) -> str:
    """The ``policy`` baseline of ``task`` for the report's metric: one value, or one per
    distinct value of its evaluation settings labelled with their algorithms
    (``"-0.23 (mappo, ippo); -0.82 (qmix)"``)."""
    parts = rep.baseline_values(task, policy, _task_algorithms(rep, task))
    if not parts:
        return "-"
    if len(parts) == 1:
        return f"{parts[0][0]:.4g}"
    return "; ".join(f"{mean:.4g} ({', '.join(algos)})" for mean, algos in parts)


def _per_task_section(rep: Report) -> list[str]:
    c = rep.config
    what = "last evaluation" if c.score == "final" else "absolute metric"
    out = [
        f"## Final {c.metric} per task",
        "",
        f"Mean over seeds of each run's mean episode `{c.metric}` at its {what}, with the "
        f"{_pct(c.confidence)} Student-t interval over seeds and the number of seeds (raw, not normalized).",
        "",
    ]
    policies = [p for p in POLICIES if any(_baseline_cell(rep, t, p) != "-" for t in rep.task_ids)]
    rows = []
    for task in rep.task_ids:
        row: list[object] = [task]
        for algo in rep.algorithms:
            ci = rep.per_task.get(task, {}).get(algo)
            row.append("-" if ci is None else f"{ci.format('.4g')} (n={len(rep.raw[task][algo])})")
        row += [_baseline_cell(rep, task, p) for p in policies]
        rows.append(row)
    header = ["task", *rep.algorithms, *(POLICIES[p] for p in policies)]
    out += [table(header, rows), ""]
    if policies:
        out += [
            "Baselines (`baselines.json`, written by marl-bench): the uniformly random and the "
            "no-op policy (zero action; index 0, or the first legal one, for discrete actions), "
            "evaluated like the runs: same task options, episodes, envs and evaluation seeds, "
            "mean over seeds of the mean episode value. Where the runs of some algorithms use "
            "other evaluation settings (e.g. discrete actions), each setting has its value, "
            "followed by its algorithms.",
            "",
        ]
    else:
        out += [
            "No baselines: no `baselines.json` next to the runs (marl-bench writes it), "
            f"or none for `{c.metric}`.",
            "",
        ]
    return out


def _references_section(rep: Report) -> list[str]:
    if not rep.references:
        return []
    pct = _pct(rep.config.confidence)
    out = [
        "## References",
        "",
        "marl's result is the mean over seeds of each run's mean episode metric at its first "
        "evaluation at or after the reference's frames (the frames used are shown when they "
        f"differ), with the {pct} Student-t interval over seeds. **Verdict**: *reproduced* when "
        "|mean - reference| <= tolerance; *missed (below)* or *missed (above)* otherwise; "
        "*missing* when no run reached the frames. The CI does not enter the verdict; "
        "'CI meets band' says whether it overlaps [reference - tolerance, reference + tolerance], "
        "i.e. whether a miss may be seed noise. `marl-report --check` fails on a miss or a "
        "missing result.",
        "",
    ]
    rows = []
    for check in rep.references:
        ref = check.reference
        frames = str(ref.frames)
        used = sorted(set(check.evaluated_at))
        if used and used != [ref.frames]:
            frames += f" (evaluated at {', '.join(map(str, used))})"
        if check.result is None:
            result, n, overlap = "-", "0", "-"
        else:
            result, n = check.result.format(".4g"), str(len(check.seeds))
            overlap = {None: "-", True: "yes", False: "no"}[check.ci_overlaps]
        verdict = {
            "reproduced": "reproduced",
            "below": "**missed (below)**",
            "above": "**missed (above)**",
        }.get(check.verdict, f"**missing**: {check.reason}")
        rows.append(
            [
                ref.task,
                ref.algorithm,
                ref.metric,
                frames,
                result,
                n,
                f"{ref.value:.4g} {ref.tolerance_text}",
                overlap,
                verdict,
                ref.source,
            ]
        )
    header = [
        "task",
        "algorithm",
        "metric",
        "frames",
        f"marl ({pct} CI)",
        "seeds",
        "reference",
        "CI meets band",
        "verdict",
        "source",
    ]
    passed = sum(c.passed for c in rep.references)
    missing = sum(c.verdict == "missing" for c in rep.references)
    missed = len(rep.references) - passed - missing
    out += [table(header, rows), ""]
    out += [f"{passed} of {len(rep.references)} references reproduced, {missed} missed, "
            f"{missing} missing.", ""]  # fmt: skip
    return out


def _seeds(rep: Report, algorithms: Sequence[str], tasks: Sequence[str]) -> str:
    """The fewest scored seeds of ``algorithms`` on ``tasks``, with a mark below MIN_SEEDS."""
    counts = [len(rep.raw[t][a]) for t in tasks for a in algorithms if a in rep.raw.get(t, {})]
    low, high = min(counts), max(counts)
    text = str(low) if low == high else f"{low}-{high}"
    return f"{text} (few)" if low < MIN_SEEDS else text


def _group_title(rep: Report, i: int) -> str:
    g = rep.groups[i]
    return f"Group {i + 1}: {', '.join(g.algorithms)} on {', '.join(f'`{t}`' for t in g.tasks)}"


def _bounds_text(rep: Report) -> str:
    return (
        "Each task's bounds are the smallest and largest *evaluation score* seen on it: the mean "
        f"`{rep.config.metric}` over the episodes of one evaluation of one run, over every "
        "algorithm, seed and evaluation step (and each run's absolute metric), so one outlier "
        "episode cannot set a bound and every run score lies in [0, 1]; `--bounds FILE` "
        "replaces them (source `user`)."
    )


def _aggregate_section(rep: Report, figures: Mapping[str, str]) -> list[str]:
    c = rep.config
    out = [
        "## Aggregate scores",
        "",
        "Scores are min-max normalized per task. IQM (interquartile mean) and optimality gap "
        "pool the runs of all tasks; median and mean are over tasks of each task's mean score. "
        f"{_pct(c.confidence)} CIs from the stratified bootstrap "
        f"({c.reps} replicates; seeds resampled within each task; seed {c.seed}). "
        "Higher is better, except for the optimality gap. "
        f"'seeds': scored seeds per task (*few*: under {MIN_SEEDS}, CIs unreliable).",
        "",
    ]
    if not rep.aggregates:
        return [*out, "No complete run to aggregate.", ""]
    groups = rep.groups
    if len(groups) > 1:
        out += [
            "**The algorithms did not all run the same tasks.** An aggregate over other tasks "
            "is another quantity, so algorithms are only compared on the same tasks: each "
            "group below holds the algorithms with scored runs on exactly the same tasks, and "
            "has its own table, figures and probabilities of improvement. Compare algorithms "
            "of different groups task by task, in the per-task table, or on the tasks both "
            "ran in the last table of the probability of improvement.",
            "",
        ]
        out += [
            f"- `{a}` has no scored run on {', '.join(f'`{t}`' for t in lacking)}: its "
            f"aggregates are over its other tasks only (group {rep.group_of(a) + 1})."
            for a, lacking in rep.lacking.items()
        ]
        out.append("")
    elif groups:
        out += [
            f"Every algorithm ran the same tasks: {', '.join(f'`{t}`' for t in groups[0].tasks)}.",
            "",
        ]
    metrics = list(next(iter(rep.aggregates.values())))
    for i, group in enumerate(groups):
        if len(groups) > 1:
            out += [f"### {_group_title(rep, i)}", ""]
        rows = []
        for algo in group.algorithms:
            by_metric = rep.aggregates[algo]
            tasks = rep.normalized[algo]
            runs = sum(len(v) for v in tasks.values())
            rows.append(
                [algo, len(tasks), runs, _seeds(rep, [algo], list(tasks)),
                 *(by_metric[m].format(".3f") for m in metrics)]
            )  # fmt: skip
        out += [table(["algorithm", "tasks", "runs", "seeds", *metrics], rows), ""]
        role = figure_role("aggregate", i)
        if role in figures:
            out += [f"![Aggregate metrics]({figures[role]})", ""]
        role = figure_role("profile", i)
        if role in figures:
            out += [
                "Performance profiles: fraction of runs (over all tasks of the group) whose "
                "normalized score is above tau, with stratified-bootstrap bands. A curve above "
                "another is better everywhere.",
                "",
                f"![Performance profiles]({figures[role]})",
                "",
            ]
    out += ["**Normalization bounds.** " + _bounds_text(rep), ""]
    rows = [
        [t, f"{lo:.4g}", f"{hi:.4g}", rep.bound_sources.get(t, "")]
        for t, (lo, hi) in rep.bounds.items()
    ]
    out += [table(["task", "min", "max", "source"], rows), ""]
    return out


def _improvement_section(rep: Report, figures: Mapping[str, str]) -> list[str]:
    if not rep.improvement and not rep.across_groups:
        return []
    c = rep.config
    out = [
        "## Probability of improvement",
        "",
        "P(X > Y): the probability that a run of X scores above a run of Y on a task, averaged over "
        f"the tasks of their group (ties count 1/2), with {_pct(c.confidence)} stratified-bootstrap "
        "CIs. P(Y > X) = 1 - P(X > Y). A CI that excludes 0.5 shows a difference. With few "
        f"seeds (under {MIN_SEEDS}, marked *few*) the CI cannot be trusted: a resample only "
        "repeats the seeds' scores, so when every run of X beats every run of Y the CI is "
        "[1, 1] however close the scores are.",
        "",
    ]
    for i, group in enumerate(rep.groups):
        pairs = [(xy, v) for xy, v in rep.improvement.items() if xy[0] in group.algorithms]
        if not pairs:
            continue
        if len(rep.groups) > 1:
            out += [f"### {_group_title(rep, i)}", ""]
        rows = [
            [x, y, ci.format(".3f"), n, _seeds(rep, [x, y], group.tasks)]
            for (x, y), (ci, n) in pairs
        ]
        out += [table(["X", "Y", "P(X > Y)", "tasks", "seeds"], rows), ""]
        role = figure_role("improvement", i)
        if role in figures:
            out += [f"![Probability of improvement]({figures[role]})", ""]
    if rep.across_groups:
        out += [
            "### Across groups, on the tasks both ran",
            "",
            "Algorithms of different groups, compared on the tasks both ran only (named in "
            "the table): each row is a comparison on its own tasks, not a ranking.",
            "",
        ]
        rows = [
            [x, y, ci.format(".3f"), ", ".join(f"`{t}`" for t in tasks), _seeds(rep, [x, y], tasks)]
            for (x, y), (ci, tasks) in rep.across_groups.items()
        ]
        out += [table(["X", "Y", "P(X > Y)", "tasks", "seeds"], rows), ""]
    return out


def _curves_section(rep: Report, figures: Mapping[str, str]) -> list[str]:
    names = [(t, figures[f"curve:{t}"]) for t in rep.curves if f"curve:{t}" in figures]
    if not names:
        return []
    out = [
        "## Sample-efficiency curves",
        "",
        f"Mean evaluation `{rep.config.metric}` over seeds against frames, with "
        f"{_pct(rep.config.confidence)} Student-t bands (all runs, incomplete ones included).",
        "",
    ]
    for task, path in names:
        out += [f"### {task}", "", f"![{task}]({path})", ""]
    return out


def render_markdown(
    rep: Report,
    figures: Mapping[str, str | Path] | None = None,
    command: str | None = None,
    leagues: Sequence[LeagueTable] = (),
) -> str:
    """The report as markdown.

    Args:
        rep: the computed report.
        figures: figure role -> path relative to ``report.md`` (roles
            ``"aggregate"``, ``"profile"``, ``"improvement"`` for the first group of
            algorithms, ``"aggregate:<k>"``... for group ``k`` >= 2 (see
            :func:`marl.report.report.figure_role`), and ``"curve:<env/task>"``);
            figures not given are left out.
        command: the command line that made the report, to quote.
        leagues: league ratings (``elo.json``) to rank in a section of their own.

    Returns:
        The markdown text.
    """
    figures = {k: Path(v).as_posix() for k, v in (figures or {}).items()}
    from marl import __version__

    c = rep.config
    lines = title_lines("Benchmark report", command, __version__)
    lines += [
        f"{len(rep.sources)} results files; {len(rep.task_ids)} tasks; {len(rep.algorithms)} algorithms "
        f"({', '.join(rep.algorithms)}). Metric `{c.metric}`; run score: "
        + ("the last evaluation." if c.score == "final" else "the absolute metric."),
        "",
    ]
    if rep.warnings:
        lines += ["**Warnings**:", ""] + [f"- {w}" for w in rep.warnings] + [""]
    lines += _runs_section(rep)
    lines += _per_task_section(rep)
    lines += _references_section(rep)
    lines += _aggregate_section(rep, figures)
    lines += _improvement_section(rep, figures)
    lines += _curves_section(rep, figures)
    lines += league_section(leagues)
    lines += ["## Sources", ""] + [f"- `{_display(s)}`" for s in rep.sources] + [""]
    return "\n".join(lines)
