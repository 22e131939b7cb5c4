"""One run over 2 processes: ``torchrun -m marl.experiment`` (gloo on CPU).

One module-scoped run (``marl-run --nproc 2``: 2 ranks, 2 batches of 1200 global
frames) is checked for its folder (rank 0's files only, global frames), then resumed to
4800 frames over 2 ranks with torchrun; ``--nproc`` refuses a bad value;
a non-divisible ``frames_per_batch`` and a resume over another number of processes
are refused; the end-of-run agreement check fails when one rank's parameters differ.
A rank killed (SIGKILL) or stopped (SIGSTOP) after the first batch stops the other
within seconds, with an error naming it, and leaves a resumable folder.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "task=vmas/navigation",
    "experiment=debug",
    "experiment.total_frames=2400",
    "experiment.frames_per_batch=1200",
    "experiment.checkpoint_interval=1200",
    "experiment.evaluation_interval=1200",
]
RUN_FILES = {
    ".hydra",
    "marl-run.log",
    "checkpoints",
    "config.yaml",
    "curves.png",
    "results.json",
    "run.json",
    "scalars.csv",
    "status.json",
}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["OMP_NUM_THREADS"] = "1"
    return env


def _torchrun(*args: str, nproc: int = 2) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}"]
    command += ["--standalone", "-m", "marl.experiment", *args]
    return subprocess.run(
        command, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240
    )


def _frames(folder: Path) -> list[int]:
    lines = (folder / "scalars.csv").read_text().splitlines()[1:]
    return sorted({int(line.split(",")[0]) for line in lines})


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    # marl-run launches the 2 ranks itself (it runs torchrun); the resume below runs
    # torchrun directly
    folder = tmp_path_factory.mktemp("dp") / "run"
    done = subprocess.run(
        ["marl-run", "--nproc", "2", *TINY, f"hydra.run.dir={folder}"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "torch.distributed.run --nproc_per_node=2 --standalone" in done.stderr
    return folder


def test_two_ranks_write_one_run(run):
    assert {p.name for p in run.iterdir()} == RUN_FILES  # rank 1 wrote nothing here
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "checkpoint_1200.pt",
        "checkpoint_2400.pt",
        "latest.pt",
    ]
    assert _frames(run) == [0, 1200, 2400]  # global frames: 2 ranks x 600 per batch
    assert json.loads((run / "status.json").read_text())["status"] == "complete"
    state = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)
    assert state["world_size"] == 2 and state["trainer"]["frames"] == 2400
    # the config keeps the global values the user typed
    assert state["config"]["experiment"]["frames_per_batch"] == 1200
    assert state["config"]["algorithm_config"]["minibatch_size"] == 400


def test_resume_over_two_ranks(run):
    done = _torchrun("--resume", str(run), "experiment.total_frames=4800")
    assert done.returncode == 0, done.stderr[-3000:]
    assert _frames(run) == [0, 1200, 2400, 3600, 4800]
    assert {p.name for p in run.iterdir()} == RUN_FILES
    # a resume in one process of a 2-process checkpoint is refused
    one = subprocess.run(
        [sys.executable, "-m", "marl.experiment", "--resume", str(run)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert one.returncode != 0
    assert "written by a run over 2 process(es)" in one.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nproc", "0"], "--nproc expects the number of processes, an integer >= 1; got '0'"),
        (["--nproc=two"], "--nproc expects the number of processes, an integer >= 1; got 'two'"),
        (["--nproc", "1.5"], "an integer >= 1; got '1.5'"),
        (["--nproc"], "--nproc needs a value"),
        (["--nproc", "2", "--nproc", "2"], "--nproc is given 2 times"),
        (["--nproc", "2", "-m", "seed=0,1"], "does not combine with -m/--multirun"),
    ],
)
def test_nproc_refuses_a_bad_value(args, message):
    from marl.experiment.argv import prepare_launch

    with pytest.raises(ValueError, match=re.escape(message)):
        prepare_launch(args)


def test_nproc_is_refused_under_torchrun_and_bad_values_exit_2():
    done = subprocess.run(
        [sys.executable, "-m", "marl.experiment", "--nproc", "x"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "marl-run: --nproc expects the number of processes, an integer >= 1; got 'x'" in (
        done.stderr
    )
    env = {**_env(), "WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "marl.experiment", "--nproc", "2"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "torchrun already started the processes; drop --nproc" in done.stderr


def test_nproc_with_help_prints_the_help_once_and_launches_nothing():
    done = subprocess.run(
        [sys.executable, "-m", "marl.experiment", "--nproc", "2", "--help"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("marl-run: train an algorithm") == 1
    assert "torch.distributed.run" not in done.stderr


def test_frames_per_batch_not_divisible_is_refused(tmp_path):
    done = _torchrun(
        "task=vmas/navigation",
        "experiment=debug",
        "experiment.frames_per_batch=1201",
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    assert done.returncode != 0
    assert "experiment.frames_per_batch=1201 is global" in done.stderr
    assert "divisible by 2" in done.stderr


def test_a_rank_share_rounded_to_whole_env_steps_is_said_once_in_global_frames(caplog):
    # marl-run --nproc 2 task=vmas/navigation experiment=debug: 100 frames per batch over
    # 2 ranks of 4 envs each; 50 frames a rank round up to 52, so the run trains 1,040
    # frames: rank 0 says so once, in the run's figures (the collector warned per rank)
    from marl.experiment.data_parallel import DataParallel

    rank0, rank1 = (DataParallel(rank=r, world_size=2, sync=None) for r in (0, 1))
    with caplog.at_level("INFO", logger="marl.experiment"):
        assert rank1.rank_frames(100, 1000, 4) == 52
        assert caplog.records == []  # rank 1 writes no log of the run
        assert rank0.rank_frames(100, 1000, 4) == 52
        assert rank0.rank_frames(1200, 2400, 60) == 600  # exact: nothing to say
    [record] = caplog.records
    assert record.getMessage() == (
        "data-parallel over 2 processes: experiment.frames_per_batch=100 gives each 50 "
        "frames, rounded up to 52 (13 steps of its 4 envs): 104 frames per batch, and the "
        "run ends at 1040 frames for total_frames=1000"
    )
    with warnings.catch_warnings():  # the collector is given whole steps: no warning
        warnings.simplefilter("error")
        from marl.collectors import Collector
        from marl.testing import MultiAgentFakeEnv

        assert (
            Collector(MultiAgentFakeEnv(num_envs=4), None, frames_per_batch=52).frames_per_batch
            == 52
        )


def _agreement(rank: int, init: str, corrupt: bool, results) -> None:
    from marl.experiment.data_parallel import DataParallel

    torch.distributed.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        from marl.algorithms.updates import GradientSync

        torch.manual_seed(0)
        module = nn.Linear(4, 3)
        if corrupt and rank == 1:
            with torch.no_grad():
                module.bias[0] += 1e-6
        try:
            DataParallel(rank, 2, GradientSync()).check_agreement(module)
            results.put((rank, "agree"))
        except RuntimeError as err:
            results.put((rank, str(err)))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.parametrize("corrupt", [False, True])
def test_agreement_check(tmp_path, corrupt):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    init = f"file://{tmp_path / 'rendezvous'}"
    procs = [ctx.Process(target=_agreement, args=(r, init, corrupt, results)) for r in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    out = dict(results.get(timeout=5) for _ in procs)
    if corrupt:
        assert all("ranks disagree on the parameters" in out[r] for r in (0, 1))
    else:
        assert out == {0: "agree", 1: "agree"}


# ------------------------------------------------------------------ a lost rank
LONG = [*TINY[:2], "experiment.total_frames=240000", *TINY[3:], "experiment.peer_timeout_s=3"]


def _first_checkpoint(folder: Path, procs: list[subprocess.Popen]) -> None:
    """Wait for the run's first batch (its checkpoint at 1200 frames)."""
    deadline = time.monotonic() + 180
    while not (folder / "checkpoints" / "checkpoint_1200.pt").exists():
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            outs = [p.communicate(timeout=30)[0][-3000:] for p in procs if p.poll() is not None]
            pytest.fail(f"no first batch: {outs}")
        time.sleep(0.2)


def _rank_pid(torchrun: subprocess.Popen, rank: int) -> int:
    """The PID of torchrun's child that runs ``rank``."""
    for proc in Path("/proc").iterdir():
        try:
            parent = proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1]
            environ = proc.joinpath("environ").read_bytes().split(b"\0")
        except (OSError, IndexError):  # not a process, or one that ended
            continue
        if int(parent) == torchrun.pid and f"RANK={rank}".encode() in environ:
            return int(proc.name)
    raise AssertionError(f"no rank {rank} among torchrun's children")


def _check_resumable(folder: Path) -> dict:
    from marl.experiment.resume import load_resumable
    from marl.experiment.runlock import check_run_folder

    status = json.loads((folder / "status.json").read_text())
    assert status["status"] in ("failed", "interrupted"), status
    check_run_folder(folder)  # nobody holds the folder
    _, state = load_resumable(folder)  # rank 0's last checkpoint loads
    assert state["trainer"]["frames"] >= 1200 and state["world_size"] == 2
    return status


def test_a_killed_rank_stops_the_other_with_its_name(tmp_path):
    folder = tmp_path / "run"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2"]
    command += ["--standalone", "-m", "marl.experiment", *LONG, f"hydra.run.dir={folder}"]
    torchrun = subprocess.Popen(
        command, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        _first_checkpoint(folder, [torchrun])
        os.kill(_rank_pid(torchrun, 1), signal.SIGKILL)
        killed = time.monotonic()
        out = torchrun.communicate(timeout=60)[0]
    finally:
        torchrun.kill()
    took = time.monotonic() - killed
    print(f"torchrun ended {took:.1f} s after rank 1 was killed")
    assert torchrun.returncode != 0
    assert took < 20, took
    assert "marl-run: data-parallel rank 1 of 2 is lost: its connection closed" in out, out[-3000:]
    status = _check_resumable(folder)
    if status["status"] == "failed":
        assert "data-parallel rank 1 of 2 is lost" in status["error"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_hung_rank_stops_the_other_with_its_name(tmp_path):
    # without torchrun (as srun would start them): only the heartbeats notice a peer
    # that is alive but silent, which gloo would wait for 30 minutes
    folder, port = tmp_path / "run", str(_free_port())
    procs = []
    for rank in (0, 1):
        env = {**_env(), "WORLD_SIZE": "2", "RANK": str(rank), "LOCAL_RANK": str(rank)}
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "marl.experiment", *LONG, f"hydra.run.dir={folder}"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    try:
        _first_checkpoint(folder, procs)
        os.kill(procs[1].pid, signal.SIGSTOP)
        stopped = time.monotonic()
        out = procs[0].communicate(timeout=60)[0]
        took = time.monotonic() - stopped
    finally:
        for p in procs:
            p.kill()
            p.communicate()
    print(f"rank 0 ended {took:.1f} s after rank 1 was stopped")
    assert procs[0].returncode == 1
    assert took < 20, took  # 3 s without a heartbeat, 5 s of grace, then the exit
    assert "marl-run: data-parallel rank 1 of 2 is lost: no heartbeat for 3 s" in out, out[-3000:]
    status = _check_resumable(folder)
    assert status["status"] == "failed" and "no heartbeat for 3 s" in status["error"]
