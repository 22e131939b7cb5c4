"""One live writer per run folder (marl.experiment.runlock): a live run's folder refuses a
new run and a resume (Python API and ``marl-run``), naming the holder's PID and changing
nothing; a killed holder's lock is taken over; forked children do not hold it."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from marl.algorithms import TrainerCallback
from marl.experiment import Experiment, RunFolderInUse, lock_run_folder, read_scalars, runlock
from marl.testing import MultiAgentFakeEnv, run_cli

# the holders import runlock.py alone (no torch): they hold the lock within a second
LOAD_RUNLOCK = (
    "import importlib.util, os, sys, time\n"
    f"spec = importlib.util.spec_from_file_location('runlock', {runlock.__file__!r})\n"
    "runlock = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(runlock)\n"
)


def fake_task(num_envs, seed, device):
    return MultiAgentFakeEnv(num_envs=num_envs, seed=seed)


def make(folder, callbacks=(), **kw):
    config = dict(
        num_envs=4,
        frames_per_batch=64,
        total_frames=256,
        evaluation_interval=128,
        evaluation_episodes=2,
        checkpoint_interval=128,
        render=False,
        progress=False,
        save_folder=str(folder),
    )
    config.update(kw)
    return Experiment(
        fake_task, "mappo", task_name="fake/multiagent", config=config, callbacks=callbacks
    )


def spawn(code, *args):
    """A ``python -c`` process that has runlock loaded and prints a line once ready."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LOAD_RUNLOCK + textwrap.dedent(code), *map(str, args)],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line, f"the helper process ended early ({proc.wait()})"
    return proc, line.strip()


@pytest.fixture
def hold():
    """``hold(folder)``: another live process holds ``folder``; returns that process."""
    procs = []

    def start(folder):
        code = """
            lock = runlock.lock_run_folder(sys.argv[1])
            print("held", flush=True)
            time.sleep(120)
        """
        proc, _ = spawn(code, folder)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def lock_elsewhere(folder):
    """Another process tries to take ``folder``: its error ('' when it could)."""
    code = "runlock.lock_run_folder(sys.argv[1])"
    proc = subprocess.run(
        [sys.executable, "-c", LOAD_RUNLOCK + code, str(folder)], capture_output=True, text=True
    )
    return proc.stderr.strip().splitlines()[-1] if proc.returncode else ""


def snapshot(folder):
    """Every file's bytes and mtime (``.lock`` and ``.hydra/`` included)."""
    return {
        p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def assert_names(err, pid, folder):
    message = str(err)
    assert f"{folder} is in use by a live run" in message and f"(pid {pid}," in message, message
    assert err.pid == pid


# ----------------------------------------------------------------- Python API
def test_a_live_runs_folder_refuses_a_new_run_and_a_resume(tmp_path, hold):
    """Finding 1 (API side): the resume loaded the checkpoint and cut the live run's rows."""
    make(tmp_path, total_frames=128).run()
    holder = hold(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(RunFolderInUse) as err:
        Experiment.resume(tmp_path, {"total_frames": 256}, task=fake_task).run()
    assert_names(err.value, holder.pid, tmp_path)
    with pytest.raises(FileExistsError) as err:  # the PID, not "already holds a run"
        make(tmp_path).run()
    assert_names(err.value, holder.pid, tmp_path)
    assert snapshot(tmp_path) == before


def test_a_new_run_into_a_folder_a_live_run_just_took_is_refused(tmp_path, hold):
    """Finding 2: two Experiments started together into one save_folder both wrote."""
    holder = hold(tmp_path)  # the other run took the folder and wrote nothing yet
    before = snapshot(tmp_path)
    with pytest.raises(RunFolderInUse) as err:
        make(tmp_path).run()
    assert_names(err.value, holder.pid, tmp_path)
    assert snapshot(tmp_path) == before and list(before) == [".lock"]
    assert json.loads(before[".lock"][0])["pid"] == holder.pid


def test_a_second_experiment_in_the_same_process_is_refused(tmp_path):
    """POSIX locks are per process: the in-process registry refuses the second writer."""
    refused = []

    class StartAnother(TrainerCallback):
        def on_train_start(self, trainer):
            with pytest.raises(RunFolderInUse) as err:
                make(tmp_path).run()
            refused.append(err.value)

    summary = make(tmp_path, callbacks=[StartAnother()]).run()
    assert summary["frames"] == 256 and len(refused) == 1
    assert_names(refused[0], os.getpid(), tmp_path)
    assert "in this process" in str(refused[0])
    rows = [
        (f, k) for k, points in read_scalars(tmp_path / "scalars.csv").items() for f, _ in points
    ]
    assert len(rows) == len(set(rows))  # no duplicated rows
    assert not (tmp_path / ".lock").exists()  # released and removed at the end
    make(tmp_path / "next").run()  # and the process can take folders again


def test_a_hold_without_a_writer_is_handed_to_the_experiment(tmp_path):
    """What marl-run does: it holds the folder before hydra starts, then runs in it."""
    with lock_run_folder(tmp_path):
        assert make(tmp_path).run()["frames"] == 256
        assert f"(pid {os.getpid()}," in lock_elsewhere(tmp_path)  # the outer hold holds on
    assert not (tmp_path / ".lock").exists()
    assert lock_elsewhere(tmp_path) == ""


def test_the_lock_of_a_killed_run_is_taken_over(tmp_path, hold):
    holder = hold(tmp_path)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert (tmp_path / ".lock").exists()  # left behind: stale, not held
    assert make(tmp_path).run()["frames"] == 256
    assert not (tmp_path / ".lock").exists()


def test_a_forked_child_does_not_keep_the_lock(tmp_path):
    """The collectors fork workers, which may outlive a parent killed with SIGKILL."""
    code = """
        lock = runlock.lock_run_folder(sys.argv[1])
        child = os.fork()
        if child == 0:
            time.sleep(60)
            os._exit(0)
        print(child, flush=True)
        time.sleep(60)
    """
    parent, line = spawn(code, tmp_path)
    child = int(line)
    try:
        with pytest.raises(RunFolderInUse) as err:
            lock_run_folder(tmp_path)
        assert err.value.pid == parent.pid
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        os.kill(child, 0)  # the child lives on, with the parent's descriptor open
        with lock_run_folder(tmp_path):
            # (never open the lock file in the process that holds it: closing it would
            # drop the lock; another process checks)
            assert f"(pid {os.getpid()}," in lock_elsewhere(tmp_path)
    finally:
        os.kill(child, signal.SIGKILL)


# -------------------------------------------------------------------- marl-run
def marl_run(cwd, *args):
    return run_cli("marl.experiment", *args, cwd=cwd)


@pytest.fixture
def run_folder(tmp_path):
    """A folder laid out like a marl-run run (``.hydra/``, a checkpoint, ``status.json``)."""
    folder = tmp_path / "run"
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text("seed: 0\n")
    (folder / ".hydra" / "overrides.yaml").write_text("[]\n")
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "checkpoint_1500.pt").write_bytes(b"checkpoint")
    (folder / "status.json").write_text('{"status": "running", "frames": 1500}')
    (folder / "marl-run.log").write_text("the live run's log\n")
    return folder


@pytest.mark.parametrize(
    "args",
    [
        ["--resume", "{run}"],
        ["experiment.restore_file={run}/checkpoints/checkpoint_1500.pt"],
        ["hydra.run.dir={run}", "experiment=debug"],
    ],
    ids=["--resume", "restore_file", "hydra.run.dir"],
)
def test_marl_run_refuses_a_live_runs_folder_before_hydra_writes(args, run_folder, hold):
    """Finding 1: ``marl-run --resume DIR`` against a live run trained its frames again;
    a new run into it rewrote its ``.hydra/`` before being refused."""
    if args[0].startswith("hydra.run.dir"):
        # a run started a moment earlier with the same hydra.run.dir: only .hydra/ yet,
        # so the check of a folder that holds a run's files cannot see it
        (run_folder / "status.json").unlink()
        shutil.rmtree(run_folder / "checkpoints")
    holder = hold(run_folder)
    before = snapshot(run_folder)
    proc = marl_run(run_folder.parent, *(a.format(run=run_folder) for a in args))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"marl-run: {run_folder} is in use by a live run (pid {holder.pid}," in proc.stderr
    assert snapshot(run_folder) == before


def test_marl_run_takes_over_a_killed_runs_lock(tmp_path, hold):
    """The lock of a run killed with SIGKILL is stale: a new run in that folder goes ahead
    (marl-run holds the folder before hydra starts and hands it to its Experiment)."""
    pytest.importorskip("vmas")
    holder = hold(tmp_path)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    start = time.time()
    proc = marl_run(
        tmp_path,
        "experiment=debug",
        "experiment.total_frames=200",
        "experiment.evaluation_interval=200",
        "experiment.checkpoint_interval=200",
        "+task_overrides.max_steps=20",
        f"hydra.run.dir={tmp_path}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "status.json").read_text())["status"] == "complete"
    assert (tmp_path / ".hydra" / "config.yaml").exists()
    assert not (tmp_path / ".lock").exists()
    assert time.time() - start < 120


def test_marl_bench_never_clears_a_live_runs_folder(tmp_path, hold):
    """marl-bench restarts a run without a checkpoint by clearing its outputs first: not
    while a live run holds the folder (that run's marl-run then refuses to start)."""
    from marl.bench import load_suite, plan_runs, run_suite

    suite = load_suite("ci_tiny")
    folder = plan_runs(suite, tmp_path)[0].folder
    folder.mkdir(parents=True)
    (folder / "status.json").write_text('{"status": "running", "frames": 0}')
    holder = hold(folder)
    refused = [sys.executable, "-c", "import sys; sys.exit(2)"]  # what marl-run does then
    summary = run_suite(suite, tmp_path, runner=refused, baselines=False)
    assert summary.outcomes[0].action == "restart" and summary.outcomes[0].status == "failed"
    assert (folder / "status.json").read_text() == '{"status": "running", "frames": 0}'
    log = (folder / "run.log").read_text()
    assert f"marl-bench: left as it is: {folder} is in use by a live run (pid {holder.pid}," in log


def test_a_league_into_a_live_runs_folder_is_refused(tmp_path, hold):
    from marl.experiment import run_league

    holder = hold(tmp_path)
    config = {"task": "pettingzoo/tictactoe", "seed": 0, "algorithm": {"name": "iql"}}
    with pytest.raises(RunFolderInUse) as err:
        run_league(config, tmp_path)
    assert_names(err.value, holder.pid, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [".lock"]
