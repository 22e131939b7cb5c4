"""``ExperimentRuns.run(until_frames=...)``: runs trained together pause at a frame count,
each with a checkpoint there, and resume together (marl-tune's vectorized backend)."""

import csv
import json
from collections import Counter

import pytest

from marl.experiment import RunInterrupted
from marl.experiment.runs import ExperimentRuns
from marl.testing import MultiAgentFakeEnv


def fake_task(num_envs, seed, device):
    return MultiAgentFakeEnv(num_envs=num_envs, seed=seed)


CONFIG = dict(
    runs=2,
    num_envs=4,
    frames_per_batch=64,
    total_frames=256,
    evaluation_interval=128,
    evaluation_episodes=2,
    checkpoint_interval=10_000,  # none on its own: the pause writes the one at 128
    render=False,
    progress=False,
)


def two_runs(folder):
    """Seeds 0 and 1 of MAPPO on the fake task, trained together into ``folder``."""
    return ExperimentRuns.create(
        fake_task,
        "mappo",
        seed=0,
        task_name="fake/task",
        config={**CONFIG, "save_folder": str(folder)},
    )


def status(folder):
    return json.loads((folder / "status.json").read_text())


def rows(folder):
    with open(folder / "scalars.csv") as f:
        return Counter((int(r["frames"]), r["key"]) for r in csv.DictReader(f))


def test_runs_pause_at_until_frames_with_a_checkpoint_and_resume_together(tmp_path):
    runs = two_runs(tmp_path)
    # 100 is not a multiple of the batch: they pause after the round that passes it
    summaries = runs.run(until_frames=100)
    assert [s["frames"] for s in summaries] == [128, 128]
    assert all(s["paused"] for s in summaries)
    folders = [tmp_path / "seed_0", tmp_path / "seed_1"]
    for folder in folders:
        # stopped on purpose: neither failed nor interrupted, and no end written
        assert status(folder)["status"] == "stopped" and status(folder)["frames"] == 128
        assert sorted(p.name for p in (folder / "checkpoints").glob("checkpoint_*")) == [
            "checkpoint_128.pt"
        ]
        assert "absolute_metrics" not in (folder / "results.json").read_text()
    # resumed: from 128, the runs end complete, each log row written once
    resumed = ExperimentRuns.resume(tmp_path, task=fake_task)
    assert [e.trainer is None for e in resumed.experiments] == [True, True]
    assert [s["frames"] for s in resumed.run()] == [256, 256]
    for folder in folders:
        assert status(folder)["status"] == "complete" and status(folder)["frames"] == 256
        counts = rows(folder)
        assert {f for f, _ in counts} >= {64, 128, 192, 256}
        assert set(counts.values()) == {1}
        assert "absolute_metrics" in (folder / "results.json").read_text()


def test_until_frames_at_or_past_the_end_trains_to_the_end(tmp_path):
    runs = two_runs(tmp_path)
    summaries = runs.run(until_frames=256)
    assert [s["frames"] for s in summaries] == [256, 256]
    assert not any(s.get("paused") for s in summaries)
    assert status(tmp_path / "seed_1")["status"] == "complete"


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "100"])
def test_until_frames_is_value_checked(tmp_path, bad):
    runs = two_runs(tmp_path)
    with pytest.raises(ValueError, match=r"until_frames: expected None or an integer >= 1, got"):
        runs.run(until_frames=bad)
    assert not (tmp_path / "seed_0").exists()  # refused before anything was written


def test_a_signal_in_the_round_that_pauses_the_runs_is_raised(tmp_path, monkeypatch):
    # SIGINT at run 0's iteration at 128 frames (marl's fault hook): the round ends, every
    # run pauses there with its checkpoint, and the caller hears of the signal
    monkeypatch.setenv("MARL_TEST_FAULT", "iteration@128:INT")
    monkeypatch.setattr("marl.experiment.checkpoint._FIRED", set())  # fires once a process
    runs = two_runs(tmp_path)
    with pytest.raises(RunInterrupted, match="SIGINT"):
        runs.run(until_frames=128)
    for folder in (tmp_path / "seed_0", tmp_path / "seed_1"):
        assert status(folder)["frames"] == 128
        assert (folder / "checkpoints" / "checkpoint_128.pt").exists()
