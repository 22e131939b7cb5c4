"""A real ``marl-run`` killed at several points, resumed each time with the one-line command.

The kills are deterministic: ``MARL_TEST_FAULT=<point>@<frames>[:<SIGNAL>]`` makes the run
send itself the signal there (see ``marl.experiment.checkpoint``). The run must end at
exactly its frame budget with every ``(frames, key)`` row of ``scalars.csv`` and every
evaluation of ``results.json`` present once, and ``status.json`` ``complete``.
"""

import json
import os
import signal

import pytest
import yaml

from marl.report import load_results
from marl.testing import run_cli

pytest.importorskip("vmas")

TOTAL = 2400
RUN = [
    "seed=3",  # not the default: the resumes must take it from the checkpoint
    "+task_overrides.max_steps=50",
    "experiment.num_envs=4",
    "experiment.frames_per_batch=200",
    f"experiment.total_frames={TOTAL}",
    "experiment.checkpoint_interval=400",
    "experiment.evaluation_interval=600",  # evaluations between checkpoints, too
    "experiment.evaluation_episodes=2",
    "experiment.render=false",
    "experiment.progress=false",
]


def marl_run(cwd, *args, fault=None):
    return run_cli("marl.experiment", *args, cwd=cwd, fault=fault)


def status(folder):
    return json.loads((folder / "status.json").read_text())


def latest_frames(folder):
    """The frame count of the checkpoint ``latest.pt`` names (a hard link)."""
    latest = folder / "checkpoints" / "latest.pt"
    for ckpt in (folder / "checkpoints").glob("checkpoint_*.pt"):
        if os.path.samefile(ckpt, latest):
            return int(ckpt.stem.split("_")[1])
    raise AssertionError("latest.pt names no numbered checkpoint")


def test_killed_at_several_points_and_resumed_with_one_line(tmp_path):
    run = tmp_path / "run"
    one_line = f"experiment.restore_file={run}/checkpoints/latest.pt"

    # 1. SIGKILL while checkpoint_800.pt is being written: its temp file is complete,
    #    not yet renamed. latest.pt stays at 400; the rows and the evaluation at 600 and
    #    the rows at 800 were written after it.
    proc = marl_run(tmp_path, *RUN, f"hydra.run.dir={run}", fault="checkpoint@800")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert status(run)["status"] == "running" and latest_frames(run) == 400
    assert [p.name for p in (run / "checkpoints").glob(".checkpoint_800.pt.tmp-*")]

    # 2. --resume <run folder>, SIGKILLed between renaming checkpoint_1600.pt and
    #    pointing latest.pt at it
    proc = marl_run(tmp_path, "--resume", str(run), fault="latest@1600")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert (run / "checkpoints" / "checkpoint_1600.pt").exists() and latest_frames(run) == 1200
    assert not list((run / "checkpoints").glob(".*tmp*"))  # the stale temp file is gone

    # 3. the one-line resume from latest.pt (1200: checkpoint_1600.pt and the rows after
    #    1200 belong to an abandoned stretch), then SIGTERM during the iteration that ends
    #    at 2000 frames: it stops there with a final checkpoint, status "interrupted",
    #    exit code 128 + 15
    proc = marl_run(tmp_path, one_line, fault="iteration@2000:TERM")
    assert proc.returncode == 143, proc.stderr[-2000:]
    st = status(run)
    assert (st["status"], st["signal"], st["frames"]) == ("interrupted", "SIGTERM", 2000)
    assert latest_frames(run) == 2000
    assert f"continue with: marl-run --resume {run}" in proc.stdout + proc.stderr

    # 4. the one-line resume runs to the end
    proc = marl_run(tmp_path, one_line)
    assert proc.returncode == 0, proc.stderr[-3000:]

    st = status(run)
    assert (st["status"], st["frames"], st["total_frames"], st["seed"]) == (
        "complete",
        TOTAL,
        TOTAL,
        3,
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no new run folder
    lines = (run / "scalars.csv").read_text().splitlines()
    assert lines[0] == "frames,key,value"
    pairs = [tuple(line.split(",")[:2]) for line in lines[1:]]
    assert len(pairs) == len(set(pairs)), "a (frames, key) row is duplicated"
    frames = sorted({int(f) for f, key in pairs if key == "train/agent/loss_objective"})
    assert frames == list(range(200, TOTAL + 1, 200))  # every iteration, once
    evals = sorted(int(f) for f, key in pairs if key == "eval/episode_reward")
    assert evals == [0, 600, 1200, 1800, 2400]
    table = load_results([run / "results.json"])
    assert [ev.step_count for ev in table.evaluations] == [0, 600, 1200, 1800, 2400]
    assert all(len(ev.metrics["return"]) == 2 for ev in table.evaluations)
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["seed"] == 3 and config["task_overrides"] == {"max_steps": 50}
    hydra_overrides = yaml.safe_load((run / ".hydra" / "overrides.yaml").read_text())
    assert "seed=3" in hydra_overrides  # the resumes kept the run's own .hydra/
    log = (run / "marl-run.log").read_text()
    assert log.count("resumed from") == 3
