"""Benchmark suites over the experiment runner: ``marl-bench``.

A suite is a YAML file naming algorithms, tasks, seeds and frames (see
:mod:`marl.bench.suite` for the format). ``marl-bench`` expands it into runs
(algorithm x task x seed), runs each as an isolated ``python -m marl.experiment``
subprocess in ``OUTPUT/<algorithm>/<task with / replaced by _>/seed_<k>/`` (its
output in ``run.log``), and prints a summary. Complete runs (``status.json``
says ``complete``) are skipped and runs with ``checkpoints/latest.pt`` are
resumed, so re-running the same command carries on after an interruption.

Shipped suites: ``ci_tiny`` (seconds, for CI), ``vmas_small`` (about an hour on
2 CPU cores), ``vmas_paper`` (BenchMARL scale, for a GPU), ``pettingzoo_mpe``
and ``single_agent``.

Command line::

    marl-bench --list
    marl-bench ci_tiny --dry-run                       # the runs and their commands
    marl-bench vmas_small --launcher joblib --jobs 2 --report
    marl-bench vmas_paper --output runs/paper experiment.sampling_device=cuda
    marl-bench my_suite.yaml --launcher submitit --slurm timeout_min=240 \\
        --slurm slurm_partition=gpu --slurm gpus_per_node=1
    marl-report bench_runs/vmas_small                   # aggregate (or pass --report)

Before the runs, ``marl-bench`` writes ``OUTPUT/baselines.json``: the random and
the no-op policy's scores on each task, evaluated like the runs
(:mod:`marl.bench.baselines`), and, when the suite lists ``references:``,
``OUTPUT/references.json``; ``marl-report`` shows both, and
``marl-report --check`` fails when a result misses its reference.
``python -m marl.bench.baselines --out FILE`` writes the baselines of every
catalogue task as a markdown page.

Launchers: ``local`` (one run after the other), ``joblib`` (``--jobs`` at a
time), ``ray`` (Ray tasks; ``ray.init(num_cpus=jobs)`` unless Ray is running)
and ``submitit`` (a SLURM job array; parameters from the suite's ``slurm:``
section and ``--slurm KEY=VALUE``). The exit status is 1 when a run failed
(the run and the tail of its log are printed) and 2 on bad input.

Examples:
    >>> from marl.bench import load_suite
    >>> suite = load_suite("ci_tiny")
    >>> [run.name for run in suite.runs()][:2]
    ['mappo vmas/navigation seed=0', 'mappo vmas/navigation seed=1']
    >>> suite.runs()[0].overrides[:3]
    ('algorithm=mappo', 'task=vmas/navigation', 'seed=0')

    Running it (here with ``summary = run_suite(suite, "bench_runs/ci_tiny",
    launcher="joblib", jobs=2)``) gives a :class:`BenchSummary` with
    ``summary.ok``, ``summary.failed`` and ``summary.table()``.
"""

from marl.bench.baselines import (
    EvalSettings,
    evaluate_baselines,
    evaluation_settings,
    suite_baselines,
)
from marl.bench.launchers import LAUNCHERS, Job, JobResult, launch
from marl.bench.runner import BenchSummary, Outcome, PlannedRun, plan_runs, read_status, run_suite
from marl.bench.suite import Run, Suite, SuiteError, list_suites, load_suite, merge_overrides

__all__ = [
    "LAUNCHERS",
    "BenchSummary",
    "EvalSettings",
    "Job",
    "JobResult",
    "Outcome",
    "PlannedRun",
    "Run",
    "Suite",
    "SuiteError",
    "evaluate_baselines",
    "evaluation_settings",
    "launch",
    "list_suites",
    "load_suite",
    "merge_overrides",
    "plan_runs",
    "read_status",
    "run_suite",
    "suite_baselines",
]
