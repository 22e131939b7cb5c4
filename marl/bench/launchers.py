"""Launchers: run a list of :class:`Job` subprocesses locally, with joblib, Ray or SLURM.

Each job is one ``python -m marl.experiment ...`` subprocess whose output goes to
its ``run.log``, so runs are isolated from each other and from the launcher.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["LAUNCHERS", "Job", "JobResult", "execute_job", "launch", "require_launcher"]

LAUNCHERS = ("local", "joblib", "ray", "submitit")
_PACKAGES = {
    "joblib": ("joblib", "pip install joblib"),
    "ray": ("ray", "pip install 'marl[ray]'"),
    "submitit": ("submitit", "pip install submitit"),
}


@dataclasses.dataclass(frozen=True)
class Job:
    """One subprocess to run.

    Attributes:
        name: the run's name, for messages.
        folder: the run's folder (created before the subprocess starts).
        command: the full command line.
        log: the file receiving stdout and stderr (appended to).
        action: ``"run"`` (fresh), ``"restart"`` (fresh, after removing a previous
            attempt's outputs) or ``"resume"`` (from a checkpoint).
    """

    name: str
    folder: Path
    command: tuple[str, ...]
    log: Path
    action: str = "run"


@dataclasses.dataclass(frozen=True)
class JobResult:
    """How a job's process ended: its exit code (127: could not start) and wall seconds."""

    returncode: int
    wall_s: float
    error: str = ""


def require_launcher(launcher: str) -> None:
    """Check the launcher name and that its package is installed.

    Raises:
        ValueError: for an unknown launcher.
        ImportError: when the launcher's package is missing (naming the pip command).

    Examples:
        >>> require_launcher("local")
        >>> require_launcher("slurm")
        Traceback (most recent call last):
        ...
        ValueError: unknown launcher 'slurm'; expected one of: local, joblib, ray, submitit
    """
    if launcher not in LAUNCHERS:
        raise ValueError(f"unknown launcher {launcher!r}; expected one of: {', '.join(LAUNCHERS)}")
    if launcher in _PACKAGES:
        module, command = _PACKAGES[launcher]
        try:
            __import__(module)
        except ImportError:
            raise ImportError(
                f"the {launcher} launcher needs the {module} package: {command}"
            ) from None


def execute_job(job: Job) -> JobResult:
    """Run one job's subprocess to the end, appending its output to ``job.log``.

    Examples:
        >>> import sys, tempfile
        >>> from pathlib import Path
        >>> folder = Path(tempfile.mkdtemp())
        >>> job = Job("demo", folder, (sys.executable, "-c", "print('hi')"), folder / "run.log")
        >>> execute_job(job).returncode
        0
        >>> (folder / "run.log").read_text().splitlines()[-1]
        'hi'
    """
    job.folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "1"}
    start = time.perf_counter()
    with open(job.log, "a", encoding="utf-8") as log:
        stamp = datetime.now().isoformat(timespec="seconds")
        log.write(f"=== marl-bench {stamp} {job.action}: {shlex.join(job.command)}\n")
        log.flush()
        try:
            proc = subprocess.run(
                list(job.command), stdout=log, stderr=subprocess.STDOUT, env=env, check=False
            )
        except OSError as err:
            log.write(f"marl-bench: could not start the run: {err}\n")
            return JobResult(127, time.perf_counter() - start, str(err))
    return JobResult(proc.returncode, time.perf_counter() - start)


Callback = Callable[[int, JobResult], None]


def launch(
    jobs: Sequence[Job],
    launcher: str = "local",
    n_jobs: int = 1,
    on_done: Callback | None = None,
    slurm: Mapping[str, Any] | None = None,
    workdir: Path | None = None,
) -> list[JobResult]:
    """Run every job with a launcher; returns the results in the order of ``jobs``.

    Args:
        jobs: the jobs.
        launcher: ``"local"`` (one after the other), ``"joblib"`` (``n_jobs`` at a
            time, in threads each waiting on its subprocess), ``"ray"`` (remote
            tasks; ``ray.init(num_cpus=n_jobs)`` unless Ray is already initialized)
            or ``"submitit"`` (a SLURM job array through ``submitit.AutoExecutor``).
        n_jobs: runs at a time (joblib, ray; the array parallelism for submitit).
        on_done: called with ``(index, result)`` as each job ends.
        slurm: ``submitit`` executor parameters, e.g. ``{"timeout_min": 240,
            "slurm_partition": "gpu", "gpus_per_node": 1, "cpus_per_task": 8}``.
        workdir: where submitit keeps its job files (default: ``./.submitit``).

    Raises:
        ValueError: for an unknown launcher or ``n_jobs < 1``.
        ImportError: when the launcher's package is missing.
    """
    require_launcher(launcher)
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be >= 1, got {n_jobs}")
    results: list[JobResult | None] = [None] * len(jobs)

    def done(i: int, result: JobResult) -> None:
        results[i] = result
        if on_done is not None:
            on_done(i, result)

    if jobs:
        runner = {"local": _local, "joblib": _joblib, "ray": _ray, "submitit": _submitit}[launcher]
        runner(jobs, n_jobs, done, dict(slurm or {}), workdir)
    return [r if r is not None else JobResult(-1, 0.0, "no result") for r in results]


def _local(jobs: Sequence[Job], n_jobs: int, done: Callback, slurm: dict, workdir: Any) -> None:
    for i, job in enumerate(jobs):
        done(i, execute_job(job))


def _indexed(i: int, job: Job) -> tuple[int, JobResult]:
    return i, execute_job(job)


def _joblib(jobs: Sequence[Job], n_jobs: int, done: Callback, slurm: dict, workdir: Any) -> None:
    from joblib import Parallel, delayed

    # threads suffice: each one only waits on its own subprocess
    parallel = Parallel(n_jobs=n_jobs, backend="threading", return_as="generator_unordered")
    for i, result in parallel(delayed(_indexed)(i, job) for i, job in enumerate(jobs)):
        done(i, result)


def _ray(jobs: Sequence[Job], n_jobs: int, done: Callback, slurm: dict, workdir: Any) -> None:
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=n_jobs, include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(execute_job)
        refs = {remote.remote(job): i for i, job in enumerate(jobs)}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                try:
                    result = ray.get(ref)
                except Exception as err:  # the task itself failed (worker died, ...)
                    result = JobResult(-1, 0.0, f"ray task failed: {err}")
                done(refs[ref], result)
    finally:
        if started:
            ray.shutdown()


def _submitit(
    jobs: Sequence[Job], n_jobs: int, done: Callback, slurm: dict, workdir: Path | None
) -> None:
    import submitit

    executor = submitit.AutoExecutor(folder=str(workdir or Path(".submitit")))
    params = {"name": "marl-bench", **slurm}
    if n_jobs > 1:
        params.setdefault("slurm_array_parallelism", n_jobs)
    executor.update_parameters(**params)
    with executor.batch():
        submitted = [executor.submit(execute_job, job) for job in jobs]
    pending = dict(enumerate(submitted))
    while pending:
        for i, job in list(pending.items()):
            if not job.done():
                continue
            del pending[i]
            try:
                result = job.result()
            except Exception as err:  # the SLURM job failed, was cancelled or timed out
                result = JobResult(-1, 0.0, f"submitit job {job.job_id} failed: {err}")
            done(i, result)
        if pending:
            time.sleep(5.0)
