"""``run_suite``: expand a suite into runs, skip finished ones, resume the rest, launch.

Each run lives in ``OUTPUT/<algorithm>/<task with / replaced by _>/seed_<k>/``. The
experiment runner writes ``status.json`` there (``{"status": "running" |
"complete", "frames": N, "total_frames": N}``) and ``checkpoints/latest.pt``:

- a run whose ``status.json`` says ``complete`` with at least the suite's frames
  is skipped;
- a run with a checkpoint is resumed from its newest one (``experiment.restore_file=``
  next to the suite's overrides: the runner refuses the resume, naming them, if the
  suite now contradicts the checkpoint, e.g. another ``frames_per_batch``; a longer
  ``total_frames`` is applied);
- a run that left outputs but no checkpoint (killed or failed before its first one)
  is restarted: those outputs are removed first, since the runner refuses to write
  into a folder that holds a run (its rows would mix); a folder that a live run holds
  (:mod:`marl.experiment.runlock`) is left alone, and its run refused with that PID;
- any other run starts from scratch.

Before launching, ``run_suite`` writes ``OUTPUT/references.json`` (the suite's
``references:``, for ``marl-report --check``) and ``OUTPUT/baselines.json`` (the
random and no-op policy's scores under each run's evaluation settings, see
:mod:`marl.bench.baselines`) and ``OUTPUT/plan.json`` (every run of the suite, so
that ``marl-report`` names the missing ones, see :mod:`marl.report.plan`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from marl.bench.launchers import Job, JobResult, launch, require_launcher
from marl.bench.suite import Run, Suite, dir_override, load_suite

__all__ = [
    "BenchSummary",
    "Outcome",
    "PlannedRun",
    "clear_outputs",
    "plan_runs",
    "read_status",
    "run_suite",
]

DEFAULT_RUNNER = (sys.executable, "-m", "marl.experiment")
STATUS_FILE = "status.json"
CHECKPOINT = Path("checkpoints") / "latest.pt"
LOG_FILE = "run.log"
_NUMBERED = re.compile(r"^checkpoint_(\d+)\.pt$")
# what an experiment leaves in its folder; the first three mean "this folder holds a run"
# for the experiment runner (marl.experiment.lifecycle.RUN_FILES), which then refuses it
RUN_OUTPUTS = ("status.json", "scalars.csv", "results.json")
_OTHER_OUTPUTS = (
    "config.yaml",
    "curves.png",
    "marl-run.log",
    ".hydra",
    "videos",
    "checkpoints",
    "tensorboard",
    "wandb",
)


def read_status(folder: str | Path) -> dict[str, Any] | None:
    """A run folder's ``status.json``, or ``None`` when missing or unreadable."""
    try:
        data = json.loads((Path(folder) / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _is_complete(status: Mapping[str, Any] | None, total_frames: int) -> bool:
    if not status or status.get("status") != "complete":
        return False
    reached = max(int(status.get("frames") or 0), int(status.get("total_frames") or 0))
    return reached >= total_frames


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    """A run, its folder and what ``run_suite`` will do with it.

    Attributes:
        run: the suite's run.
        folder: the run's folder.
        action: ``"skip"`` (complete), ``"resume"`` (checkpoint present), ``"restart"``
            (outputs but no checkpoint: they are removed, then it runs) or ``"run"``.
        job: the subprocess to launch (``None`` when skipped); with
            ``--vectorize-seeds`` the runs of a group share one job.
        group: the folder of runs that trains this run with others in one job
            (:mod:`marl.bench.seed_groups`), else ``None``.
    """

    run: Run
    folder: Path
    action: str
    job: Job | None
    group: Path | None = None


def plan_runs(
    suite: Suite,
    output: str | Path,
    overrides: Sequence[str] = (),
    runner: Sequence[str] | None = None,
    *,
    vectorize_seeds: bool = False,
    on_message: Callable[[str], None] | None = None,
) -> list[PlannedRun]:
    """Expand a suite into runs and decide, from their folders, what each needs.

    Args:
        suite: the suite.
        output: the benchmark folder.
        overrides: hydra overrides added to every run (they win over the suite's).
        runner: the command prefix (default: ``python -m marl.experiment``).
        vectorize_seeds: the seeds of a run that can train together share one job
            (``experiment.runs``, see :mod:`marl.bench.seed_groups`).
        on_message: called with a line for each group that falls back to separate jobs.

    Examples:
        >>> import tempfile
        >>> plan = plan_runs(load_suite("ci_tiny"), tempfile.mkdtemp())
        >>> [(p.run.algorithm, p.run.seed, p.action) for p in plan]
        [('mappo', 0, 'run'), ('mappo', 1, 'run'), ('ippo', 0, 'run'), ('ippo', 1, 'run')]
        >>> plan[0].job.command[-1].startswith("hydra.run.dir=")
        True
    """
    output = Path(output).resolve()
    prefix = tuple(runner) if runner is not None else DEFAULT_RUNNER
    plan = []
    for run in suite.runs(overrides):
        folder = output / run.relpath
        command = [*prefix, *run.overrides, dir_override("hydra.run.dir", folder)]
        if _is_complete(read_status(folder), run.total_frames):
            plan.append(PlannedRun(run, folder, "skip", None))
            continue
        action = "run"
        checkpoint = _checkpoint(folder)
        if checkpoint is not None:
            action = "resume"
            if _trained_in_group(folder):  # it resumes alone, not with its group
                command.append("experiment.runs=1")
            command.append(dir_override("experiment.restore_file", checkpoint))
        elif any((folder / name).exists() for name in RUN_OUTPUTS):
            action = "restart"
        job = Job(run.name, folder, tuple(command), folder / LOG_FILE, action)
        plan.append(PlannedRun(run, folder, action, job))
    if vectorize_seeds:
        from marl.bench.seed_groups import group_plan

        plan = group_plan(plan, prefix, on_message or (lambda line: None), LOG_FILE)
    return plan


def _trained_in_group(folder: Path) -> bool:
    """Whether ``folder`` is one of the runs that its parent's ``runs.json`` lists."""
    try:
        # marl.experiment.lifecycle.RUNS_FILE, written by marl-run experiment.runs=R
        data = json.loads((folder.parent / "runs.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and folder.name in (data.get("folders") or [])


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How one run ended.

    Attributes:
        run: the run.
        folder: its folder.
        action: ``"skip"``, ``"resume"``, ``"restart"`` or ``"run"``.
        status: ``"done"``, ``"skipped"`` or ``"failed"``.
        wall_s: seconds the run took in this call (0 when skipped); for a run trained
            in a group, the group's job's (the same for each of its seeds).
        reason: why it failed (empty otherwise).
        group: the folder of runs of its group (``--vectorize-seeds``), else ``None``.
    """

    run: Run
    folder: Path
    action: str
    status: str
    wall_s: float = 0.0
    reason: str = ""
    group: Path | None = None

    @property
    def log(self) -> Path:
        """The run's log file (its group's, for a run trained in a group)."""
        return (self.group or self.folder) / LOG_FILE

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the run's log (empty when there is none)."""
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _checkpoint(folder: Path) -> Path | None:
    """The run's newest checkpoint: the numbered one with the most frames, else latest.pt
    (as ``marl-run --resume`` picks it)."""
    numbered = sorted(
        (int(m.group(1)), p)
        for p in ((folder / CHECKPOINT).parent.glob("checkpoint_*.pt"))
        if (m := _NUMBERED.match(p.name))
    )
    if numbered:
        return numbered[-1][1]
    return folder / CHECKPOINT if (folder / CHECKPOINT).is_file() else None


def clear_outputs(folder: Path) -> list[str]:
    """Remove what a run without a checkpoint left in ``folder`` (not ``run.log``, the
    bench's own log); returns the names removed.

    Examples:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "scalars.csv").write_text("frames,key,value\\n")
        >>> _ = (folder / "run.log").write_text("...")
        >>> clear_outputs(folder), sorted(p.name for p in folder.iterdir())
        (['scalars.csv'], ['run.log'])
    """
    removed = []
    for name in (*RUN_OUTPUTS, *_OTHER_OUTPUTS):
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        else:
            continue
        removed.append(name)
    return removed


def _outcome(planned: PlannedRun, result: JobResult) -> Outcome:
    status = read_status(planned.folder)
    if result.returncode != 0:
        reason = result.error or f"exit code {result.returncode}"
    elif not _is_complete(status, planned.run.total_frames):
        reason = f"exited 0 but {STATUS_FILE} is {status!r}, not complete"
    else:
        reason = ""
    ended = "failed" if reason else "done"
    return Outcome(
        planned.run, planned.folder, planned.action, ended, result.wall_s, reason, planned.group
    )


@dataclasses.dataclass
class BenchSummary:
    """The outcome of every run of a :func:`run_suite` call.

    Attributes:
        suite: the suite.
        output: the benchmark folder.
        outcomes: one per run, in the suite's order.
        wall_s: wall seconds of the whole call.
        baselines: the ``baselines.json`` written (``None`` when not computed).
        messages: what the call did besides the runs (baselines, references), a line each.
    """

    suite: Suite
    output: Path
    outcomes: list[Outcome]
    wall_s: float = 0.0
    baselines: Path | None = None
    messages: list[str] = dataclasses.field(default_factory=list)

    def _with(self, status: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def done(self) -> list[Outcome]:
        """Runs that ran (or resumed) to completion in this call."""
        return self._with("done")

    @property
    def skipped(self) -> list[Outcome]:
        """Runs already complete before this call."""
        return self._with("skipped")

    @property
    def failed(self) -> list[Outcome]:
        """Runs that failed."""
        return self._with("failed")

    @property
    def ok(self) -> bool:
        """Whether no run failed."""
        return not self.failed

    def table(self) -> str:
        """A plain-text table: one row per run, then the totals.

        Each seed of a group (``--vectorize-seeds``) has its own row, its status read
        from its own folder; a ``group`` column then names the group's folder of runs
        (``-`` for a run of its own), and ``wall`` is the group's one job's.
        """
        grouped = any(o.group is not None for o in self.outcomes)
        head = ("algorithm", "task", "seed", "action", "status", "wall")
        rows = [(*head, "group") if grouped else head]
        for o in self.outcomes:
            wall = f"{o.wall_s:.1f}s" if o.status != "skipped" else "-"
            row = (o.run.algorithm, o.run.task, str(o.run.seed), o.action, o.status, wall)
            if grouped:
                group = "-" if o.group is None else o.group.relative_to(self.output).as_posix()
                row = (*row, group)
            rows.append(row)
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(
            f"{len(self.done)} done, {len(self.skipped)} skipped, {len(self.failed)} failed "
            f"of {len(self.outcomes)} runs in {self.wall_s:.1f}s"
        )
        if grouped:
            lines.append("a group's seeds trained together in one job; wall is that job's")
        return "\n".join(lines)


def run_suite(
    suite: Suite | str | Path,
    output: str | Path,
    launcher: str = "local",
    jobs: int = 1,
    overrides: Sequence[str] = (),
    *,
    slurm: Mapping[str, Any] | None = None,
    progress: bool = False,
    runner: Sequence[str] | None = None,
    baselines: bool = True,
    on_message: Callable[[str], None] | None = None,
    vectorize_seeds: bool = False,
) -> BenchSummary:
    """Run every run of a suite that is not complete yet.

    Args:
        suite: a :class:`Suite`, a shipped suite's name or a suite file.
        output: the benchmark folder (one sub-folder per run).
        launcher: ``"local"``, ``"joblib"``, ``"ray"`` or ``"submitit"``.
        jobs: runs at a time (joblib, ray; array parallelism for submitit).
        overrides: hydra overrides added to every run (they win over the suite's).
        slurm: submitit parameters, merged over the suite's ``slurm`` section.
        progress: show a tqdm progress bar over runs (when tqdm is installed).
        runner: the command prefix of a run (default ``python -m marl.experiment``);
            tests swap in a fake runner.
        baselines: compute the random and no-op baselines of the runs' tasks into
            ``OUTPUT/baselines.json`` first (entries already there are reused).
        on_message: called with each line of ``BenchSummary.messages`` as it happens
            (before the runs start), e.g. ``print``.
        vectorize_seeds: train the consecutive seeds of a run together in one job
            (``marl-run experiment.runs=R seed=S``, :mod:`marl.bench.seed_groups`); the
            seeds' folders are those of separate jobs.

    Returns:
        The :class:`BenchSummary`; ``summary.ok`` is ``False`` if any run failed.

    Raises:
        ValueError: for an unknown launcher, ``jobs < 1`` or a malformed suite.
        ImportError: when the launcher's package is missing.
        FileNotFoundError: for an unknown suite.

    Examples:
        >>> import sys, tempfile
        >>> fake = [sys.executable, "-c", "import sys; sys.exit(0)"]  # writes no status.json
        >>> summary = run_suite("ci_tiny", tempfile.mkdtemp(), runner=fake, baselines=False)
        >>> len(summary.failed), summary.failed[0].reason
        (4, 'exited 0 but status.json is None, not complete')
    """
    import time

    start = time.perf_counter()
    require_launcher(launcher)
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    if not isinstance(suite, Suite):
        suite = load_suite(suite)
    output = Path(output).resolve()
    output.mkdir(parents=True, exist_ok=True)
    messages: list[str] = []

    def message(line: str) -> None:
        messages.append(line)
        if on_message is not None:
            on_message(line)

    plan = plan_runs(
        suite, output, overrides, runner, vectorize_seeds=vectorize_seeds, on_message=message
    )

    if suite.references:
        from marl.report.references import REFERENCES_FILENAME, write_references

        where = suite.path or suite.name
        write_references(output / REFERENCES_FILENAME, suite.references, f"suite {where}")
        message(f"{len(suite.references)} references -> {output / REFERENCES_FILENAME}")
    # the report calls missing exactly the planned runs without results (not the
    # pairs a suite excludes on purpose)
    from marl.report.plan import PLAN_FILENAME, write_plan

    runs = [(p.run.task, p.run.algorithm, p.run.seed) for p in plan]
    write_plan(output / PLAN_FILENAME, runs, f"marl-bench {suite.path or suite.name}")
    baselines_file = None
    if baselines:
        from marl.bench.baselines import suite_baselines

        try:
            baselines_file = suite_baselines(suite, output, overrides, message)
        except Exception as err:  # e.g. inside a running hydra app: the runs matter more
            message(f"baselines not computed: {type(err).__name__}: {err}")
    todo = [p for p in plan if p.job is not None]
    # a group's seeds share one job: each job once, and the runs it trains
    jobs_todo: list[Job] = []
    runs_of: dict[int, list[int]] = {}
    for i, p in enumerate(todo):
        if p.job not in jobs_todo:
            jobs_todo.append(p.job)  # type: ignore[arg-type]
        runs_of.setdefault(jobs_todo.index(p.job), []).append(i)  # type: ignore[arg-type]
    from marl.experiment.runlock import lock_run_folder

    for p in todo:
        if p.action == "restart":
            try:
                with lock_run_folder(p.folder):  # never a live run's files (its run refuses)
                    removed = clear_outputs(p.folder)
                note = (
                    "no checkpoint to resume from; removed the previous attempt's "
                    f"{', '.join(removed)} to start again"
                )
            except FileExistsError as err:
                note = f"left as it is: {err}"
            with open(p.folder / LOG_FILE, "a", encoding="utf-8") as log:
                log.write(f"marl-bench: {note}\n")
        if p.group is not None and p.job is not None:  # where this seed's output goes
            p.folder.mkdir(parents=True, exist_ok=True)
            with open(p.folder / LOG_FILE, "a", encoding="utf-8") as log:
                log.write(f"marl-bench: {p.action} with the group {p.job.name} in one job; "
                          f"its log is {p.job.log}\n")  # fmt: skip
    outcomes: dict[int, Outcome] = {}
    bar = _progress_bar(len(jobs_todo), suite.name, progress)

    def on_done(j: int, result: JobResult) -> None:
        for i in runs_of[j]:
            outcomes[i] = _outcome(todo[i], result)
        if bar is not None:
            statuses = sorted({outcomes[i].status for i in runs_of[j]})
            bar.set_postfix_str(f"{jobs_todo[j].name}: {'/'.join(statuses)}")
            bar.update(1)

    try:
        results = launch(
            jobs_todo,
            launcher,
            jobs,
            on_done,
            {**suite.slurm, **(slurm or {})},
            output / ".submitit",
        )
    finally:
        if bar is not None:
            bar.close()
    for j, result in enumerate(results):
        for i in runs_of[j]:
            if i not in outcomes:  # pragma: no cover - every launcher reports each job
                outcomes[i] = _outcome(todo[i], result)
    ran = iter(outcomes[i] for i in range(len(todo)))
    final = [
        Outcome(p.run, p.folder, p.action, "skipped") if p.job is None else next(ran) for p in plan
    ]
    return BenchSummary(suite, output, final, time.perf_counter() - start, baselines_file, messages)


def _progress_bar(total: int, name: str, enabled: bool) -> Any:
    if not enabled or total == 0:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=f"marl-bench {name}", unit="run", dynamic_ncols=True)
