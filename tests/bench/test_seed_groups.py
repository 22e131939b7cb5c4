"""marl-bench --vectorize-seeds: which seeds share a job, and how each layout restarts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from marl.bench import cli as bench_cli
from marl.bench import load_suite, plan_runs
from marl.bench import runner as bench_runner
from marl.bench.seed_groups import consecutive, vectorize_refusal

PREFIX = ("marl-run",)
SUITE = {
    "description": "tiny",
    "algorithms": ["mappo"],
    "tasks": ["vmas/navigation"],
    "seeds": 3,
    "frames": 100,
    "overrides": ["experiment.frames_per_batch=50"],
}


def suite(tmp_path: Path, **changes):
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump({**SUITE, **changes}))
    return load_suite(path)


def plan(tmp_path: Path, s, overrides=()):
    lines: list[str] = []
    out = plan_runs(
        s, tmp_path / "out", overrides, PREFIX, vectorize_seeds=True, on_message=lines.append
    )
    return out, lines


def jobs(planned) -> list:
    """Each job once, in order."""
    seen: list = []
    for p in planned:
        if p.job is not None and p.job not in seen:
            seen.append(p.job)
    return seen


def run_folder(tmp_path: Path, seed: int, status=None, checkpoints=()) -> Path:
    folder = tmp_path / "out" / "mappo" / "vmas_navigation" / f"seed_{seed}"
    (folder / "checkpoints").mkdir(parents=True, exist_ok=True)
    if status is not None:
        frames = status[1]
        (folder / "status.json").write_text(
            json.dumps({"status": status[0], "frames": frames, "total_frames": 100})
        )
    for frames in checkpoints:
        (folder / "checkpoints" / f"checkpoint_{frames}.pt").write_bytes(b"")
        (folder / "checkpoints" / "latest.pt").write_bytes(b"")
    return folder


def runs_file(tmp_path: Path, seeds) -> Path:
    group = tmp_path / "out" / "mappo" / "vmas_navigation"
    group.mkdir(parents=True, exist_ok=True)
    folders = [f"seed_{s}" for s in seeds]
    (group / "runs.json").write_text(json.dumps({"runs": len(seeds), "folders": folders}))
    return group


def test_consecutive_splits_and_sorts():
    assert consecutive([5, 0, 1, 2, 9, 6]) == [[0, 1, 2], [5, 6], [9]]
    assert consecutive([4]) == [[4]] and consecutive([]) == []


def test_consecutive_seeds_share_one_job_in_the_task_folder(tmp_path):
    planned, lines = plan(tmp_path, suite(tmp_path, algorithms=["mappo", "ippo"]))
    assert not lines and len(jobs(planned)) == 2  # one per algorithm, not one per seed
    for algorithm, runs in (("mappo", planned[:3]), ("ippo", planned[3:])):
        group = (tmp_path / "out" / algorithm / "vmas_navigation").resolve()
        job = runs[0].job
        assert all(p.job is job and p.group == group and p.action == "run" for p in runs)
        assert [p.folder for p in runs] == [group / f"seed_{s}" for s in (0, 1, 2)]  # unchanged
        assert job.folder == group and job.log == group / "run.log"
        assert f"algorithm={algorithm}" in job.command and "seed=0" in job.command
        assert job.command[-2:] == ("experiment.runs=3", f"hydra.run.dir={group}")
    plain = plan_runs(suite(tmp_path), tmp_path / "out", (), PREFIX)
    assert len(jobs(plain)) == 3 and all(p.group is None for p in plain)


def test_non_consecutive_seeds_split_into_groups(tmp_path):
    planned, lines = plan(tmp_path, suite(tmp_path, seeds=[0, 1, 2, 5, 6, 9]))
    by_seed = {p.run.seed: p for p in planned}
    # 0-2: one group (the longest); the folder holds one runs.json, so 5-6 run apart
    assert by_seed[0].job is by_seed[2].job and "experiment.runs=3" in by_seed[0].job.command
    assert by_seed[5].job is not by_seed[6].job and by_seed[5].group is None
    assert by_seed[9].group is None and "experiment.runs=1" not in str(by_seed[9].job.command)
    assert len(jobs(planned)) == 4
    assert lines == [
        f"mappo vmas/navigation: seeds 5-6 run as separate jobs: {by_seed[0].group} holds one "
        "group (runs.json) at a time and another group trains there now"
    ]


@pytest.mark.parametrize(
    "override",
    ["experiment.collector=sync", "experiment.collector=async", "model=gru", "model.network=lstm"],
)
def test_settings_the_runs_mode_refuses_fall_back_to_separate_jobs(tmp_path, override):
    planned, lines = plan(tmp_path, suite(tmp_path, overrides=[override]))
    assert len(jobs(planned)) == 3 and all(p.group is None for p in planned)
    assert len(lines) == 1 and lines[0].startswith("mappo vmas/navigation: seeds run as separate")
    assert override in lines[0]
    assert vectorize_refusal(["experiment.collector=inline"]) is None


def test_complete_group_is_skipped(tmp_path):
    runs_file(tmp_path, [0, 1, 2])
    for seed in (0, 1, 2):
        run_folder(tmp_path, seed, ("complete", 100), [100])
    planned, lines = plan(tmp_path, suite(tmp_path))
    assert [p.action for p in planned] == ["skip"] * 3 and not jobs(planned) and not lines


def test_unfinished_group_resumes_as_a_group(tmp_path):
    group = runs_file(tmp_path, [0, 1, 2]).resolve()
    run_folder(tmp_path, 0, ("running", 50), [50])
    run_folder(tmp_path, 1, ("running", 50), [50])
    run_folder(tmp_path, 2, ("running", 0), [50, 75])  # a newer one: the common frame wins
    planned, lines = plan(tmp_path, suite(tmp_path))
    (job,) = jobs(planned)
    # the suite's experiment settings (marl-run --resume takes no others)
    settings = ("experiment.total_frames=100", "experiment.frames_per_batch=50")
    assert job.command == (*PREFIX, "--resume", str(group), *settings)
    assert job.action == "resume" and not lines
    assert [p.action for p in planned] == ["resume"] * 3 and {p.group for p in planned} == {group}


def test_group_without_a_common_checkpoint_falls_back_to_separate_jobs(tmp_path):
    group = runs_file(tmp_path, [0, 1]).resolve()
    run_folder(tmp_path, 0, ("running", 50), [50])
    run_folder(tmp_path, 1, ("failed", 0))  # stopped before its first checkpoint
    planned, lines = plan(tmp_path, suite(tmp_path))
    assert [p.action for p in planned] == ["resume", "restart", "run"]
    assert all(p.group is None for p in planned) and len(jobs(planned)) == 3
    # seed 0, trained in a group, resumes alone: marl-run needs experiment.runs=1 for it
    assert planned[0].job.command[-2] == "experiment.runs=1"
    assert "experiment.runs=1" not in planned[2].job.command
    assert len(lines) == 1 and f"the runs of {group} cannot resume as a group" in lines[0]
    assert "holds no checkpoint" in lines[0]


def test_seeds_missing_beside_single_runs_train_as_a_group(tmp_path):
    """A suite first run without the flag: its complete seeds are skipped, its seeds with
    a checkpoint resume alone, and only the missing ones train together."""
    run_folder(tmp_path, 0, ("complete", 100), [100])
    planned, lines = plan(tmp_path, suite(tmp_path, seeds=4))
    assert [p.action for p in planned] == ["skip", "run", "run", "run"]
    (job,) = jobs(planned)
    assert "seed=1" in job.command and "experiment.runs=3" in job.command and not lines
    run_folder(tmp_path, 2, ("running", 50), [50])
    planned, lines = plan(tmp_path, suite(tmp_path, seeds=4))
    assert [p.action for p in planned] == ["skip", "run", "resume", "run"]
    assert all(p.group is None for p in planned) and len(jobs(planned)) == 3 and not lines
    assert "experiment.runs=1" not in planned[2].job.command  # a single run's checkpoint


def test_cli_dry_run_shows_the_grouped_commands(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_runner, "DEFAULT_RUNNER", (sys.executable, "-m", "x"))
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(SUITE))
    argv = [str(path), "--output", str(tmp_path / "o"), "--dry-run", "--vectorize-seeds"]
    assert bench_cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("experiment.runs=3") == 1 and out.count("[run] mappo") == 3
    assert "(the same job as above: mappo vmas/navigation seeds=0-2)" in out
    assert "3 runs: 3 to run, 0 to restart, 0 to resume, 0 complete in 1 jobs" in out


def test_group_whose_checkpoints_share_no_frame_falls_back_to_separate_jobs(tmp_path):
    runs_file(tmp_path, [0, 1])
    run_folder(tmp_path, 0, ("running", 50), [50])
    run_folder(tmp_path, 1, ("running", 75), [75])
    planned, lines = plan(tmp_path, suite(tmp_path, seeds=2))
    assert [p.action for p in planned] == ["resume", "resume"] and len(jobs(planned)) == 2
    assert all(p.job.command[-2] == "experiment.runs=1" for p in planned)
    assert len(lines) == 1 and "its runs have no checkpoint frame in common" in lines[0]
