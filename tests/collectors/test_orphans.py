"""Worker processes end with their parent, however it dies, and never hang a run silently."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from marl.collectors import CollectorWorkerError, MultiAsyncCollector, MultiSyncCollector
from marl.testing import SingleAgentFakeEnv


def _children(pid: int) -> list[int]:
    """Live (not zombie) processes whose parent is ``pid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == pid and state != "Z":
            out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # an unreaped orphan has ended


def _wait_gone(pids: list[int], seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


BUILD = {
    "sync": "MultiSyncCollector(make, None, num_workers=2, frames_per_batch=8)",
    "async": "MultiAsyncCollector(make, None, num_workers=2, frames_per_batch=8)",
    "parallel_env": "ParallelEnv(2, make)",
}


@pytest.mark.parametrize("kind", sorted(BUILD))
def test_workers_exit_when_their_parent_is_sigkilled(kind):
    # the parent installs marl-run's kind of SIGTERM handler (one that does not exit), as
    # the workers inherit it by fork
    script = textwrap.dedent(f"""
        import json, signal, sys, time
        from marl.collectors import MultiAsyncCollector, MultiSyncCollector
        from marl.envs import ParallelEnv
        from marl.testing import SingleAgentFakeEnv
        signal.signal(signal.SIGTERM, lambda *a: None)
        make = lambda: SingleAgentFakeEnv(num_envs=2)
        thing = {BUILD[kind]}
        print(json.dumps([p.pid for p in thing._procs]), flush=True)
        time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        workers = json.loads(proc.stdout.readline())
        assert len(workers) == 2 and all(_alive(p) for p in workers)
        proc.kill()
        proc.wait(10)
        assert _wait_gone(workers) == [], "workers outlived their SIGKILLed parent"
    finally:
        proc.kill()


def test_workers_obey_sigterm_despite_the_parents_handler():
    previous = signal.signal(signal.SIGTERM, lambda *a: None)
    try:
        collector = MultiSyncCollector(
            lambda: SingleAgentFakeEnv(num_envs=2), None, num_workers=1, frames_per_batch=8
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    with collector:
        worker = collector._procs[0]
        os.kill(worker.pid, signal.SIGTERM)
        worker.join(5)
        assert worker.exitcode == -signal.SIGTERM


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_a_stopped_worker_fails_the_run_with_a_timeout(cls):
    collector = cls(
        lambda: SingleAgentFakeEnv(num_envs=2),
        None,
        num_workers=2,
        frames_per_batch=8,
        timeout=1.5,
    )
    stopped = collector._procs[1]
    os.kill(stopped.pid, signal.SIGSTOP)
    start = time.monotonic()
    try:
        # async: worker 0 keeps answering, which must not hide the silent worker 1
        with pytest.raises(CollectorWorkerError, match=r"worker 1 did not .* within 1.5s"):
            for _ in range(10_000):
                collector.next_batch()
    finally:
        os.kill(stopped.pid, signal.SIGCONT) if stopped.is_alive() else None
        collector.shutdown()
    assert time.monotonic() - start < 10
    assert not any(p.is_alive() for p in collector._procs)


def test_marl_run_async_leaves_no_process_after_sigkill(tmp_path):
    run = subprocess.Popen(
        [
            "marl-run",
            "experiment=debug",
            "experiment.collector=async",
            "experiment.total_frames=100000000",
            "experiment.evaluation=false",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while time.monotonic() < deadline and not workers:
            time.sleep(0.2)
            workers = _children(run.pid)
        assert workers, "marl-run started no worker process"
        time.sleep(1.0)  # the worker is collecting
        run.kill()
        run.wait(10)
        assert _wait_gone(workers) == [], "a worker outlived the SIGKILLed marl-run"
    finally:
        run.kill()
