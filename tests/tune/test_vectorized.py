"""marl-tune --backend vectorized: a PBT population (or a random search) in one process.

4 members of mappo on vmas/navigation (5 envs each: one env batch of 20), lr in
{0, 0.01}, 1,500 frames, a boundary every 500 frames (exploits at 500 and 1,000).
"""

import csv
import json
import os
import subprocess
import sys
from collections import Counter

import pytest
import torch
import yaml

pytest.importorskip("vmas")

from marl.experiment.checkpoint import load_checkpoint
from marl.experiment.runs import ExperimentRuns
from marl.testing import run_cli
from marl.tune import SearchSpace, resume_tuning, tune, vectorized
from marl.tune.member import read_reports

SPACE = {
    "overrides": [
        "task=vmas/navigation",
        "algorithm=mappo",
        "experiment.total_frames=1500",
        "experiment.frames_per_batch=500",
        "experiment.num_envs=5",
        "experiment.evaluation_episodes=2",
        "experiment.evaluation_max_steps=20",  # evaluations (the absolute metric's too) short
        "experiment.render=false",
        "experiment.log_interval_s=null",
        "experiment.keep_checkpoints=10",
        "algorithm.epochs=2",
        "algorithm.minibatch_size=250",
    ],
    "space": {"algorithm.lr": {"choice": [0.0, 0.01]}},
    "tune": {"scheduler": "pbt", "members": 4, "interval": 500, "quantile_fraction": 0.5},
}
NAMES = ["member_00", "member_01", "member_02", "member_03"]


def space(**tune_settings):
    data = {**SPACE, "tune": {**SPACE["tune"], **tune_settings}}
    return SearchSpace.from_dict(data)


def modules(path):
    return load_checkpoint(path)["trainer"]["algorithm"]["modules"]


def rows(folder):
    with open(folder / "scalars.csv") as f:
        return Counter((int(r["frames"]), r["key"]) for r in csv.DictReader(f))


def check_members_ended(folder):
    """Every member complete at 1,500 frames, a report and a log row per frame once."""
    members = folder / "members"
    assert sorted(p.name for p in members.glob("member_*")) == NAMES
    for name in NAMES:
        status = json.loads((members / name / "status.json").read_text())
        assert status["status"] == "complete" and status["frames"] == 1500, name
        assert [r["frames"] for r in read_reports(members / name)] == [500, 1000, 1500]
        counts = rows(members / name)
        assert {f for f, _ in counts} == {0, 500, 1000, 1500} and set(counts.values()) == {1}
        assert "absolute_metrics" in (members / name / "results.json").read_text()


def check_exploits(folder, exploits):
    """A cut member holds the donor's networks at the boundary, then its new lr."""
    members = folder / "members"
    for event in exploits:
        member, frames = members / event["member"], event["frames"]
        assert event["donor"] != event["member"] and frames in (500, 1000)
        assert event["member_frames"] == frames and isinstance(event["member_score"], float)
        donor = modules(members / event["donor"] / "checkpoints" / f"checkpoint_{frames}.pt")
        mine = modules(member / "checkpoints" / f"checkpoint_{frames}.pt")
        assert donor.keys() == mine.keys()
        assert all(torch.equal(donor[k], mine[k]) for k in donor)
        if any(e["member"] == event["member"] and e["frames"] > frames for e in exploits):
            continue  # cut again at 1,000: its checkpoint there is the next donor's
        after = load_checkpoint(member / "checkpoints" / f"checkpoint_{frames + 500}.pt")
        new_lr = event["new_values"]["algorithm.lr"]
        assert after["config"]["algorithm_config"]["lr"] == new_lr
        (extra,) = after["trainer"]["algorithm"]["extra"].values()
        assert {g["lr"] for g in extra["optimizer"]["param_groups"]} == {new_lr}
    for name in NAMES:  # its config.yaml holds its last values
        config = yaml.safe_load((members / name / "config.yaml").read_text())
        values = json.loads((members / name / "values.json").read_text())
        assert config["algorithm_config"]["lr"] == values["algorithm.lr"]


def test_pbt_population_trains_in_one_process_and_exploits_on_files(tmp_path, monkeypatch):
    rates = []  # each segment's StackedAdam rates, and the members' values then
    run = ExperimentRuns.run

    def spy(self, until_frames=None):
        out = run(self, until_frames=until_frames)
        lrs = [e.describe()["algorithm_config"]["lr"] for e in self.experiments]
        stacked = [
            g["lr"].tolist()
            for s in self.hub.stacks.values()
            if type(s.optimizer).__name__ == "StackedAdam"
            for g in s.optimizer.param_groups
        ]
        rates.append((lrs, stacked, self.hub.shares_collection))
        return out

    monkeypatch.setattr(ExperimentRuns, "run", spy)
    folder = tmp_path / "tuning"
    result = tune(space(), folder, backend="vectorized")

    # three segments, each in one process, one env batch, one stacked update: the members
    # that differ in lr are stepped with their own rates
    assert len(rates) == 3
    assert any(len(set(lrs)) > 1 for lrs, _, _ in rates)
    for lrs, stacked, shared in rates:
        assert shared
        if len(set(lrs)) > 1:
            assert stacked and all(r == pytest.approx(lrs) for r in stacked)

    check_members_ended(folder)
    spec = json.loads((folder / "tune.json").read_text())
    assert spec["backend"] == "vectorized"
    assert not (folder / "ray").exists()
    lineage = json.loads((folder / "lineage.json").read_text())
    exploits = lineage["exploits"]
    # the worst half is cut at each boundary before the end, never at 1,500
    assert sorted(e["frames"] for e in exploits) == [500, 500, 1000, 1000]
    assert exploits == result.lineage
    check_exploits(folder, exploits)
    for name in NAMES:
        cuts = [e for e in exploits if e["member"] == name]
        if cuts:
            assert lineage["final"][name] == cuts[-1]["new_values"]
    best = json.loads((folder / "best.json").read_text())
    assert best["member"] == result.best_member and best["member"] in NAMES
    assert best["score"] == max(best["scores"].values())
    assert best["command"].startswith("marl-run task=vmas/navigation")
    assert (folder / "tune.png").stat().st_size > 0


@pytest.mark.parametrize(("signal", "code"), [("KILL", -9), ("INT", 130)])
def test_a_killed_run_resumes_from_its_last_boundary(tmp_path, signal, code):
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(SPACE))
    folder = tmp_path / "tuning"
    command = [sys.executable, "-m", "marl.tune.cli", "--backend", "vectorized"]
    # the signal in the second segment, after member_00's iteration at 1,000 frames logged
    # its row and before its checkpoint there (marl's fault hook). SIGKILL: dead there.
    # SIGINT: the round ends, every member pauses at 1,000 with a checkpoint, marl-tune
    # stops before that boundary's reports: the resume discards those checkpoints
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MARL_TEST_FAULT": f"iteration@1000:{signal}"}
    first = subprocess.run(
        [*command, str(path), "--folder", str(folder)], env=env, capture_output=True, text=True
    )
    assert first.returncode == code, first.stderr[-3000:]
    assert "marl-tune: 500/1500 frames" in first.stderr
    if signal == "INT":
        assert f"continue with: marl-tune --resume {folder}" in first.stderr
        assert (folder / "members" / "member_03" / "checkpoints" / "checkpoint_1000.pt").exists()
    state = json.loads((folder / "population.json").read_text())
    assert state["frames"] == 500 and state["pending"] == []
    before = {n: read_reports(folder / "members" / n) for n in NAMES}
    assert all([r["frames"] for r in reports] == [500] for reports in before.values())
    assert any(f == 1000 for f, _ in rows(folder / "members" / "member_00"))  # to be dropped

    env.pop("MARL_TEST_FAULT")
    second = subprocess.run(
        [*command, "--resume", str(folder)], env=env, capture_output=True, text=True
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert "marl-tune: 500/1500 frames" not in second.stderr  # not trained again
    assert "marl-tune: 1000/1500 frames" in second.stderr
    check_members_ended(folder)
    for name in NAMES:  # the reports from before the kill were kept
        assert read_reports(folder / "members" / name)[0] == before[name][0]
    exploits = json.loads((folder / "lineage.json").read_text())["exploits"]
    assert sorted(e["frames"] for e in exploits) == [500, 500, 1000, 1000]
    check_exploits(folder, exploits)


def test_exploits_cut_short_are_applied_once_on_resume(tmp_path, monkeypatch):
    apply = vectorized._apply
    calls = []

    def crash_on_the_second(*args):
        calls.append(args[0]["member"])
        if len(calls) == 2:
            raise RuntimeError("killed while exploiting")
        return apply(*args)

    monkeypatch.setattr(vectorized, "_apply", crash_on_the_second)
    folder = tmp_path / "tuning"
    with pytest.raises(RuntimeError, match="killed while exploiting"):
        tune(space(), folder, backend="vectorized")
    state = json.loads((folder / "population.json").read_text())
    assert state["frames"] == 500 and len(state["pending"]) == 2  # decided, half applied
    monkeypatch.setattr(vectorized, "_apply", apply)

    resume_tuning(folder)
    check_members_ended(folder)
    exploits = json.loads((folder / "lineage.json").read_text())["exploits"]
    at_500 = [e for e in exploits if e["frames"] == 500]
    # the decisions made before the crash, each recorded once, with the old values
    assert sorted(e["member"] for e in at_500) == sorted(p["member"] for p in state["pending"])
    for event in at_500:
        (planned,) = [p for p in state["pending"] if p["member"] == event["member"]]
        assert event["old_values"] == planned["old_values"]
        assert event["new_values"] == planned["new_values"]
    check_exploits(folder, exploits)


def test_random_search_trains_every_member_to_the_end_without_exploits(tmp_path):
    folder = tmp_path / "tuning"
    result = tune(space(scheduler="random"), folder, backend="vectorized")
    check_members_ended(folder)
    assert result.lineage == []
    lineage = json.loads((folder / "lineage.json").read_text())
    # the same values as pbt's first draw (same seed), never changed
    assert lineage["initial"] == lineage["final"] == vectorized.initial_values(space())


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"space": {"algorithm.epochs": [2, 4]}},
            r"--backend vectorized: .* 'algorithm\.epochs' is not one",
        ),
        (
            {"space": {"experiment.num_envs": [4, 8]}, "tune": {"scheduler": "random"}},
            r"'experiment\.num_envs' is not one",
        ),
        ({"tune": {"scheduler": "asha"}}, r"tune\.scheduler 'asha' is not supported"),
        ({"tune": {"members": 1}}, r"expected tune\.members >= 2 .*, got 1"),
        (
            {"overrides": [*SPACE["overrides"], "model.network=gru"]},
            r"--backend vectorized: experiment\.runs=4: recurrent networks",
        ),
    ],
    ids=["epochs", "num_envs", "asha", "members", "recurrent"],
)
def test_a_space_the_backend_cannot_train_is_refused_before_anything_is_written(
    tmp_path, changes, message
):
    data = {**SPACE, **changes, "tune": {**SPACE["tune"], **changes.get("tune", {})}}
    folder = tmp_path / "tuning"
    with pytest.raises(ValueError, match=message):
        tune(SearchSpace.from_dict(data), folder, backend="vectorized")
    assert not folder.exists()


def test_the_command_line_takes_overrides_after_its_options(tmp_path):
    # marl-tune SPACE --backend vectorized key=value: the overrides may follow the options
    # (refused here for asha, after every argument was read, before anything is written)
    out = run_cli(
        "marl.tune.cli",
        "cartpole_ppo",
        "--backend",
        "vectorized",
        "--scheduler",
        "asha",
        "experiment.total_frames=2000",
        "--folder",
        str(tmp_path / "tuning"),
        timeout=120,
    )
    assert out.returncode != 0
    assert "tune.scheduler 'asha' is not supported" in out.stderr, out.stderr
    assert not (tmp_path / "tuning").exists()


def test_ray_placement_settings_are_named_as_not_applying(tmp_path):
    # said first: here the space is then refused (one member)
    with (
        pytest.warns(UserWarning, match=r"the Ray settings \{'cpus_per_member': 0\.5\} do not"),
        pytest.raises(ValueError, match=r"tune\.members >= 2"),
    ):
        vectorized.check_population(space(cpus_per_member=0.5, members=1), {}, tmp_path)


def test_an_unknown_backend_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"backend: expected one of \['ray', 'vectorized'\]"):
        tune(space(), tmp_path / "tuning", backend="ray2")
    assert not (tmp_path / "tuning").exists()
