"""``marl-report``: aggregate runs' ``results.json`` into ``report.md`` and PNG figures."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marl.report.baselines import BASELINES_FILENAME, BaselineEntry, load_baselines, write_baselines
from marl.report.league import find_leagues, render_league_report
from marl.report.plan import PLAN_FILENAME, load_plan, write_plan
from marl.report.references import (
    REFERENCES_FILENAME,
    Reference,
    ReferenceFormatError,
    load_references,
    write_references,
)
from marl.report.results import (
    RESULTS_FILENAME,
    ResultsFormatError,
    ResultsTable,
    RunKey,
    find_results_files,
    load_results,
)

__all__ = ["CHECK_FAILED", "MERGED_FILENAME", "load_folders", "load_side_files", "main"]

CHECK_FAILED = 3
"""Exit status of ``marl-report --check`` when a result missed its reference or is missing."""

MERGED_FILENAME = "merged_results.json"
"""All runs of a report, merged into one marl-eval file, saved next to ``report.md``.

A folder with no ``results.json`` but a ``merged_results.json`` (a report
folder) loads from that file, so ``--compare`` takes report folders too.
"""


def load_folders(
    folders: Sequence[str | Path], strict: bool = False
) -> tuple[ResultsTable, list[Path]]:
    """Load every ``results.json`` under the folders (or their ``merged_results.json``).

    A malformed results file is skipped, and so is a link that leads out of its
    folder (symlinked folders are not searched): each lands in the table's
    :attr:`~marl.report.results.ResultsTable.skipped` with the reason, and the
    report is made from the rest. With ``strict``, a malformed file raises.

    Returns:
        (the table, the results files found, skipped ones included).

    Raises:
        FileNotFoundError: if a folder does not exist or holds no results.
        ResultsFormatError: on a run found in two files; with ``strict``, on a
            malformed file; when every file was skipped.
    """
    paths: list[Path] = []
    links: list[tuple[Path, str]] = []
    for folder in folders:
        found = find_results_files([folder], skipped=links)
        if not found and Path(folder).is_dir():
            found = find_results_files([folder], MERGED_FILENAME, skipped=links)
        if not found:
            raise FileNotFoundError(f"no {RESULTS_FILENAME} (or {MERGED_FILENAME}) under {folder}")
        paths += [p for p in found if p not in paths]
    links = list(dict.fromkeys(links))
    table = load_results(paths, errors="raise" if strict else "skip")
    table.skipped[:0] = links
    if not table.runs and len(table.skipped) > len(links):
        what = "; ".join(f"{p}: {why}" for p, why in table.skipped)
        raise ResultsFormatError(f"no readable results: every file was skipped ({what})")
    return table, paths


def _merge_references(found: list[tuple[Path, list[Reference]]]) -> list[Reference]:
    merged: dict[tuple, tuple[Path, Reference]] = {}
    for path, refs in found:
        for ref in refs:
            if ref.key in merged and merged[ref.key][1] != ref:
                raise ReferenceFormatError(
                    f"{path}: {ref} (metric {ref.metric!r}) differs from the reference in "
                    f"{merged[ref.key][0]}; pass the one to use with --references FILE"
                )
            merged.setdefault(ref.key, (path, ref))
    return [ref for _, ref in merged.values()]


def load_side_files(
    folders: Sequence[str | Path], references: Sequence[str | Path] = ()
) -> tuple[list[Reference], list[BaselineEntry], list[RunKey] | None]:
    """The references, baselines and planned runs that go with the runs of ``folders``.

    Each folder may hold ``references.json``, ``baselines.json`` and ``plan.json``
    (marl-bench writes them into its output folder, marl-report copies them into
    its report folder). The plan is ``None`` unless every folder has one.
    Files given in ``references`` (JSON or YAML: a list, or a mapping with a
    ``references`` key, such as a suite file) replace the folders' references.

    Raises:
        ReferenceFormatError: for a malformed references file, or two folders whose
            references disagree.
        ResultsFormatError: for a malformed ``baselines.json``.
        FileNotFoundError: for a missing ``references`` file.
    """
    dirs = [Path(f) for f in folders if Path(f).is_dir()]
    if references:
        found = [(Path(p), load_references(p)) for p in references]
    else:
        found = [(d / REFERENCES_FILENAME, load_references(d / REFERENCES_FILENAME))
                 for d in dirs if (d / REFERENCES_FILENAME).is_file()]  # fmt: skip
    baselines: list[BaselineEntry] = []
    for d in dirs:
        if (d / BASELINES_FILENAME).is_file():
            baselines += [e for e in load_baselines(d / BASELINES_FILENAME) if e not in baselines]
    plans = [d / PLAN_FILENAME for d in dirs]
    planned = None
    if dirs and all(p.is_file() for p in plans):
        planned = list(dict.fromkeys(k for p in plans for k in load_plan(p)))
    return _merge_references(found), baselines, planned


def _load_bounds(path: str | None) -> dict[str, list[float]] | None:
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"--bounds {path}: cannot read JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"--bounds {path}: expected an object {{task: [min, max]}}, got {data!r:.60}"
        )
    for task, bound in data.items():
        ok = isinstance(bound, list) and len(bound) == 2
        if not ok or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in bound
        ):
            raise ValueError(f"--bounds {path}: {task!r} must map to [min, max], got {bound!r}")
    return data


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="marl-report",
        description="Aggregate runs' results.json files into report.md and PNG figures "
        "(IQM, median, mean, optimality gap with stratified-bootstrap CIs, performance "
        "profiles, probability of improvement, sample-efficiency curves).",
    )
    p.add_argument("folders", nargs="*", metavar="FOLDER", help="folders searched for results.json")
    p.add_argument(
        "--out",
        help="report folder (default: FOLDER/report of the first FOLDER; ./compare with --compare)",
    )
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("FOLDER_A", "FOLDER_B"),
        help="compare two sets of runs or report folders: writes compare.md with B - A differences",
    )
    p.add_argument(
        "--metric", default="return", help="per-episode metric to report (default: return)"
    )
    p.add_argument(
        "--score",
        choices=("final", "absolute"),
        default="final",
        help="run score: its last evaluation (default) or its absolute_metrics",
    )
    p.add_argument("--bounds", help='JSON file {"env/task": [min, max]} of normalization bounds')
    p.add_argument("--reps", type=int, default=2000, help="bootstrap replicates (default: 2000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    p.add_argument("--confidence", type=float, default=0.95, help="CI level (default: 0.95)")
    p.add_argument("--total-frames", type=int, help="runs that stopped below this are incomplete")
    p.add_argument(
        "--include-incomplete", action="store_true", help="keep incomplete runs in the statistics"
    )
    p.add_argument(
        "--no-figures", action="store_true", help="write report.md only (no matplotlib needed)"
    )
    p.add_argument(
        "--references",
        action="append",
        default=[],
        metavar="FILE",
        help="reference scores (JSON or YAML: a list, or a suite file with a references: "
        "section); replaces the FOLDERs' references.json; repeatable",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help=f"exit {CHECK_FAILED} when a result misses its reference or has no runs "
        "(after writing the report)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first malformed results.json (default: skip it with a warning)",
    )
    p.add_argument(
        "--quiet", action="store_true", help="no progress bar and no summary (warnings still shown)"
    )
    return p


def _run(args: argparse.Namespace, command: str) -> tuple[str, Any]:
    from marl.report.report import ReportConfig

    config = ReportConfig(
        metric=args.metric,
        score=args.score,
        bounds=_load_bounds(args.bounds),
        reps=args.reps,
        confidence=args.confidence,
        seed=args.seed,
        total_frames=args.total_frames,
        include_incomplete=args.include_incomplete,
        progress=not args.quiet and sys.stderr.isatty(),
    )
    if args.compare:
        from marl.report.compare import compare_results, render_comparison

        a, b = args.compare
        out = Path(args.out or "compare")
        table_a, _ = load_folders([a], strict=args.strict)
        table_b, _ = load_folders([b], strict=args.strict)
        _warn_skipped(table_a)
        _warn_skipped(table_b)
        cmp = compare_results(table_a, table_b, config, label_a=a, label_b=b)
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(render_comparison(cmp, command))
        return (
            f"wrote {out / 'compare.md'}: {len(cmp.per_task)} task rows, "
            f"{len(cmp.aggregate)} algorithm rows",
            None,
        )

    from marl.report.markdown import render_markdown
    from marl.report.report import build_report

    if not args.no_figures:
        from marl.report.plots import require_matplotlib

        require_matplotlib()  # fail before the bootstrap work, not after it
    first = Path(args.folders[0])
    out = Path(args.out) if args.out else (first.parent if first.is_file() else first) / "report"
    leagues = find_leagues([f for f in args.folders if Path(f).exists()])
    try:
        table, paths = load_folders(args.folders, strict=args.strict)
    except FileNotFoundError:
        if not leagues or not all(Path(f).exists() for f in args.folders):
            raise
        # league runs (marl.league) only: a report of their Elo rankings
        if args.check:
            raise ValueError(
                "--check compares results.json runs with references: none found"
            ) from None
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(render_league_report(leagues, command))
        players = sum(len(t.players) for t in leagues)
        return f"wrote {out / 'report.md'}: {len(leagues)} leagues, {players} rated players", None
    references, baselines, planned = load_side_files(args.folders, args.references)
    if args.check and not references:
        raise ValueError(
            f"--check: no references to check: no {REFERENCES_FILENAME} in "
            f"{', '.join(map(str, args.folders))} and no --references FILE"
        )
    _warn_skipped(table)
    rep = build_report(table, config, references, baselines, planned)
    for warning in rep.warnings:
        print(f"marl-report: warning: {warning}", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    figures = {}
    if not args.no_figures:
        from marl.report.plots import write_figures

        figures = write_figures(rep, out)
    (out / "report.md").write_text(render_markdown(rep, figures, command, leagues))
    table.write(out / MERGED_FILENAME)
    # the report folder carries what it was made with, so it can be re-read on its own
    if references:
        write_references(out / REFERENCES_FILENAME, references, f"copied by {command}")
    if baselines:
        write_baselines(out / BASELINES_FILENAME, baselines, f"copied by {command}")
    if planned is not None:
        seeds = [k.seed.removeprefix("seed_") for k in planned]
        runs = [(k.task_id, k.algorithm, int(s) if s.isdigit() else s)
                for k, s in zip(planned, seeds)]  # fmt: skip
        write_plan(out / PLAN_FILENAME, runs, f"copied by {command}", merge=False)
    incomplete = sum(not s.complete for s in rep.statuses)
    summary = (
        f"wrote {out / 'report.md'} and {len(figures)} figures: {len(paths)} files "
        f"({len(table.skipped)} skipped), "
        f"{len(rep.statuses)} runs ({incomplete} incomplete, {len(rep.missing)} missing), "
        f"{len(rep.task_ids)} tasks, {len(rep.algorithms)} algorithms"
    )
    if rep.references:
        passed = sum(c.passed for c in rep.references)
        summary += f"; {passed} of {len(rep.references)} references reproduced"
    return summary, rep


def _warn_skipped(table: ResultsTable) -> None:
    for path, why in table.skipped:
        print(f"marl-report: warning: skipped {path}: {why}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``marl-report``; returns the exit status.

    0: ok; 1: a missing dependency; 2: bad input; 3 (:data:`CHECK_FAILED`): with
    ``--check``, a result missed its reference or has no runs.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.compare and not args.folders:
        parser.error("give at least one FOLDER, or --compare FOLDER_A FOLDER_B")
    if args.compare and args.folders:
        parser.error("--compare takes its two folders itself; give no other FOLDER")
    if args.compare and (args.check or args.references):
        parser.error("--check and --references apply to a report, not to --compare")
    command = shlex.join(["marl-report", *argv])
    try:
        summary, rep = _run(args, command)
    except ImportError as e:
        print(f"marl-report: {e}", file=sys.stderr)
        return 1
    except (ResultsFormatError, ValueError, FileNotFoundError) as e:
        print(f"marl-report: error: {e}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(summary)
    if args.check:
        return _check(rep.references)
    return 0


def _check(checks: Sequence[Any]) -> int:
    """Print every result that misses its reference (or is missing); the exit status."""
    failed = [c for c in checks if not c.passed]
    for c in failed:
        print(f"marl-report --check: {c.describe()}", file=sys.stderr)
    print(
        f"marl-report --check: {len(checks) - len(failed)} of {len(checks)} references "
        f"reproduced" + (f"; {len(failed)} failed" if failed else ""),
        file=sys.stderr if failed else sys.stdout,
    )
    return CHECK_FAILED if failed else 0
