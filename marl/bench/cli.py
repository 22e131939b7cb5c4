"""``marl-bench``: run a benchmark suite (algorithms x tasks x seeds) with a launcher."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marl.bench.launchers import LAUNCHERS
from marl.bench.suite import SuiteError, list_suites, load_suite

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="marl-bench",
        description="Run a benchmark suite: every algorithm x task x seed as an isolated "
        "`python -m marl.experiment` run in OUTPUT/<algorithm>/<task>/seed_<k>/. Complete "
        "runs are skipped and runs with a checkpoint are resumed, so the same command "
        "carries on after an interruption.",
        epilog="Shipped suites: " + ", ".join(list_suites()) + ". Example: marl-bench "
        "vmas_small --launcher joblib --jobs 2 --report experiment.sampling_device=cpu",
    )
    p.add_argument("suite", nargs="?", help="a shipped suite's name or a suite YAML file")
    p.add_argument(
        "overrides", nargs="*", metavar="OVERRIDE", help="hydra overrides added to every run"
    )
    p.add_argument("--launcher", default="local", help=f"one of {', '.join(LAUNCHERS)}")
    p.add_argument("--jobs", type=int, default=1, help="runs at a time (default 1)")
    p.add_argument("--output", help="benchmark folder (default: bench_runs/<suite name>)")
    p.add_argument(
        "--slurm",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="submitit parameter (repeatable), e.g. --slurm timeout_min=240 "
        "--slurm slurm_partition=gpu; wins over the suite's slurm section",
    )
    p.add_argument("--algorithms", help="only these of the suite's algorithms (comma-separated)")
    p.add_argument("--tasks", help="only these of the suite's tasks (comma-separated)")
    p.add_argument("--seeds", type=int, help="only the first N of the suite's seeds")
    p.add_argument(
        "--vectorize-seeds",
        action="store_true",
        help="train the consecutive seeds of each algorithm x task in one process "
        "(marl-run experiment.runs=R seed=S, in OUTPUT/<algorithm>/<task>/): one job per "
        "group instead of one per seed, the same seed folders",
    )
    p.add_argument("--dry-run", action="store_true", help="print the runs and what would happen")
    p.add_argument("--report", action="store_true", help="run marl-report on OUTPUT at the end")
    p.add_argument(
        "--check",
        action="store_true",
        help="with --report: marl-report --check (exit 3 when a result misses a reference "
        "of the suite)",
    )
    p.add_argument(
        "--no-baselines",
        action="store_true",
        help="do not compute the random and no-op baselines (OUTPUT/baselines.json)",
    )
    p.add_argument("--list", action="store_true", help="list the shipped suites and exit")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _slurm(items: Sequence[str]) -> dict[str, Any]:
    import yaml

    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--slurm expects KEY=VALUE, got {item!r}")
        params[key] = yaml.safe_load(value)
    return params


def _list() -> None:
    for name in list_suites():
        suite = load_suite(name)
        runs = len(suite.runs())
        print(f"{name:16s} {runs:4d} runs  {suite.description.splitlines()[0]}")


def _dry_run(suite: Any, output: Path, overrides: Sequence[str], vectorize: bool) -> None:
    from marl.bench.runner import plan_runs

    plan = plan_runs(
        suite,
        output,
        overrides,
        vectorize_seeds=vectorize,
        on_message=lambda line: print(f"marl-bench: {line}"),
    )
    shown: list[Any] = []
    for p in plan:
        print(f"[{p.action}] {p.run.name} -> {p.folder}")
        if p.job is not None and p.job in shown:  # a group's command, printed at its first seed
            print(f"    (the same job as above: {p.job.name})")
        elif p.job is not None:
            shown.append(p.job)
            print(f"    {shlex.join(p.job.command)}")
    jobs = f" in {len(shown)} jobs" if vectorize else ""
    counts = {a: sum(p.action == a for p in plan) for a in ("run", "restart", "resume", "skip")}
    print(f"{len(plan)} runs: {counts['run']} to run, {counts['restart']} to restart, "
          f"{counts['resume']} to resume, {counts['skip']} complete{jobs}")  # fmt: skip


def _subset(suite: Any, field: str, wanted: str | None) -> Any:
    """The suite restricted to ``wanted`` (comma-separated) values of ``field``."""
    if wanted is None:
        return suite
    have = getattr(suite, field)
    names = [w.strip() for w in wanted.split(",") if w.strip()]
    unknown = [n for n in names if n not in have]
    if unknown or not names:
        raise ValueError(f"--{field}: {unknown or wanted!r} not in suite {suite.name!r}: {have}")
    return dataclasses.replace(suite, **{field: [h for h in have if h in names]})


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``marl-bench``; returns the exit status.

    0: every run complete; 1: a run failed; 2: bad input or a missing package;
    with ``--report``, marl-report's status when higher (3: ``--check`` failed).
    """
    parser = _parser()
    args = parser.parse_intermixed_args(list(sys.argv[1:] if argv is None else argv))
    if args.list:
        _list()
        return 0
    if args.suite is None:
        parser.error("give a SUITE (a shipped suite's name or a YAML file); --list lists them")
    if args.check and not args.report:
        parser.error("--check checks the report: give --report too")
    from marl.bench.runner import run_suite

    try:
        suite = load_suite(args.suite)
        suite = _subset(suite, "algorithms", args.algorithms)
        suite = _subset(suite, "tasks", args.tasks)
        if args.seeds is not None:
            if not 1 <= args.seeds <= len(suite.seeds):
                raise ValueError(f"--seeds: expected 1..{len(suite.seeds)}, got {args.seeds}")
            suite = dataclasses.replace(suite, seeds=suite.seeds[: args.seeds])
        output = Path(args.output or Path("bench_runs") / Path(suite.name).stem)
        if args.dry_run:
            _dry_run(suite, output, args.overrides, args.vectorize_seeds)
            return 0
        summary = run_suite(
            suite,
            output,
            launcher=args.launcher,
            jobs=args.jobs,
            overrides=args.overrides,
            slurm=_slurm(args.slurm),
            progress=not args.quiet,
            baselines=not args.no_baselines,
            on_message=lambda line: print(f"marl-bench: {line}", flush=True),
            vectorize_seeds=args.vectorize_seeds,
        )
    except ImportError as err:
        print(f"marl-bench: {err}", file=sys.stderr)
        return 2
    except (SuiteError, ValueError, FileNotFoundError) as err:
        print(f"marl-bench: error: {err}", file=sys.stderr)
        return 2
    print(summary.table())
    for o in summary.failed:
        print(f"\nFAILED {o.run.name} ({o.reason}); log {o.log}:", file=sys.stderr)
        tail = o.log_tail(20)
        print("\n".join("    " + line for line in tail.splitlines()), file=sys.stderr)
    status = 0 if summary.ok else 1
    if args.report and (summary.done or summary.skipped):
        from marl.report.cli import main as report_main

        report_args = [str(summary.output), *(["--check"] if args.check else [])]
        print(f"marl-bench: marl-report {shlex.join(report_args)}")
        status = max(status, report_main(report_args))
    else:
        print(f"aggregate the runs with: marl-report {shlex.quote(str(summary.output))}")
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
