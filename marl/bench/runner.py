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
from marl.bench.suite import Run, Suite, load_suite

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
_SAFE = re.compile(r"^[\w./:+@-]+$")
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
        job: the subprocess to launch (``None`` when skipped).
    """

    run: Run
    folder: Path
    action: str
    job: Job | None


def _dir_override(key: str, path: Path) -> str:
    text = path.as_posix()
    if not _SAFE.match(text):
        text = "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return f"{key}={text}"


def plan_runs(
    suite: Suite,
    output: str | Path,
    overrides: Sequence[str] = (),
    runner: Sequence[str] | None = None,
) -> list[PlannedRun]:
    """Expand a suite into runs and decide, from their folders, what each needs.

    Args:
        suite: the suite.
        output: the benchmark folder.
        overrides: hydra overrides added to every run (they win over the suite's).
        runner: the command prefix (default: ``python -m marl.experiment``).

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
        command = [*prefix, *run.overrides, _dir_override("hydra.run.dir", folder)]
        if _is_complete(read_status(folder), run.total_frames):
            plan.append(PlannedRun(run, folder, "skip", None))
            continue
        action = "run"
        checkpoint = _checkpoint(folder)
        if checkpoint is not None:
            action = "resume"
            command.append(_dir_override("experiment.restore_file", checkpoint))
        elif any((folder / name).exists() for name in RUN_OUTPUTS):
            action = "restart"
        job = Job(run.name, folder, tuple(command), folder / LOG_FILE, action)
        plan.append(PlannedRun(run, folder, action, job))
    return plan


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How one run ended.

    Attributes:
        run: the run.
        folder: its folder.
        action: ``"skip"``, ``"resume"``, ``"restart"`` or ``"run"``.
        status: ``"done"``, ``"skipped"`` or ``"failed"``.
        wall_s: seconds the run took in this call (0 when skipped).
        reason: why it failed (empty otherwise).
    """

    run: Run
    folder: Path
    action: str
    status: str
    wall_s: float = 0.0
    reason: str = ""

    @property
    def log(self) -> Path:
        """The run's log file."""
        return self.folder / LOG_FILE

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
        return Outcome(planned.run, planned.folder, planned.action, "done", result.wall_s)
    return Outcome(planned.run, planned.folder, planned.action, "failed", result.wall_s, reason)


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
        """A plain-text table: one row per run, then the totals."""
        rows = [("algorithm", "task", "seed", "action", "status", "wall")]
        for o in self.outcomes:
            wall = f"{o.wall_s:.1f}s" if o.status != "skipped" else "-"
            rows.append((o.run.algorithm, o.run.task, str(o.run.seed), o.action, o.status, wall))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(
            f"{len(self.done)} done, {len(self.skipped)} skipped, {len(self.failed)} failed "
            f"of {len(self.outcomes)} runs in {self.wall_s:.1f}s"
        )
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
    plan = plan_runs(suite, output, overrides, runner)
    messages: list[str] = []

    def message(line: str) -> None:
        messages.append(line)
        if on_message is not None:
            on_message(line)

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
    outcomes: dict[int, Outcome] = {}
    bar = _progress_bar(len(todo), suite.name, progress)

    def on_done(i: int, result: JobResult) -> None:
        outcome = _outcome(todo[i], result)
        outcomes[i] = outcome
        if bar is not None:
            bar.set_postfix_str(f"{outcome.run.name}: {outcome.status}")
            bar.update(1)

    try:
        results = launch(
            [p.job for p in todo],  # type: ignore[misc]
            launcher,
            jobs,
            on_done,
            {**suite.slurm, **(slurm or {})},
            output / ".submitit",
        )
    finally:
        if bar is not None:
            bar.close()
    for i, result in enumerate(results):
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
