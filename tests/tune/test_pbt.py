"""marl-tune end to end: small PBT runs on Ray Tune, one killed and resumed.

4 members on gymnasium/cartpole (ppo), lr in {0, 0.01}, 1,500 frames each, an exploit
check every 500 frames (2 exploit rounds: at 500 and 1,000 frames; in rounds, synch, in
the first test). The second run is killed (SIGKILL, the whole process group) once Ray's
experiment snapshot holds a member's first checkpoint, then resumed with
``marl-tune --resume``. With lr=0 nothing is learned: untrained policies score 9-75 on
cartpole here, ppo at lr=0.01 reaches 100-500 in 1,500 frames.
"""

import itertools
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

pytest.importorskip("ray.tune")

from marl.experiment.checkpoint import load_checkpoint
from marl.tune.member import read_reports

SPACE = """
overrides:
  - task=gymnasium/cartpole
  - algorithm=ppo
  - experiment.total_frames=1500
  - experiment.frames_per_batch=500
  - experiment.num_envs=4
  - experiment.evaluation_episodes=4
  - experiment.render=false
  - experiment.log_interval_s=null
  - experiment.keep_checkpoints=10
  - algorithm.epochs=4
  - algorithm.minibatch_size=250
space:
  algorithm.lr: {choice: [0.0, 0.01]}
tune:
  scheduler: pbt
  members: 4
  interval: 500
  quantile_fraction: 0.5
  cpus_per_member: 0.5
  seed: 0
"""


def _tune(*args, **kwargs):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "marl.tune.cli", *args],
        env=env,
        start_new_session=True,  # its own process group: the kill reaches Ray's processes
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def _finish(proc):
    """Its output once it ended; on a timeout its process group is killed (no Ray leaks)."""
    try:
        out, _ = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return out


def _modules(path):
    return load_checkpoint(path)["trainer"]["algorithm"]["modules"]


@pytest.mark.ray
@pytest.mark.slow
def test_pbt_copies_checkpoints_perturbs_and_ranks_the_members(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE + "  synch: true\n")
    folder = tmp_path / "tuning"
    members = folder / "members"
    run = _tune(str(space), "--folder", str(folder))
    out = _finish(run)
    assert run.returncode == 0, out
    assert "run it with:\nmarl-run task=gymnasium/cartpole" in out
    names = sorted(p.name for p in members.glob("member_*"))
    assert names == ["member_00", "member_01", "member_02", "member_03"]
    for name in names:
        assert [r["frames"] for r in read_reports(members / name)] == [500, 1000, 1500]
        assert json.loads((members / name / "results.json").read_text())  # for marl-report

    # PBT in rounds: the worst half is cut at 500 and at 1,000 frames; a cut member holds
    # the donor's weights from that moment and trains with new values (its optimizer too)
    lineage = json.loads((folder / "lineage.json").read_text())
    assert set(lineage["initial"]) == set(names)
    assert {v["algorithm.lr"] for v in lineage["initial"].values()} == {0.0, 0.01}
    exploits = lineage["exploits"]
    assert {e["frames"] for e in exploits} == {500, 1000}
    for event in exploits:
        assert event["member_frames"] == event["frames"]  # in rounds: cut where the donor is
        _check_exploit(members, event, exploits)

    # the best member is named with its values and command, and beats the worst. Not
    # asserted: that it learned. A choice of two values perturbs to the other one, so a
    # member cut for a donor with lr 0.01 may go on with lr 0; and at 500 frames the ranking
    # is mostly noise. In CI all four ended on lr 0 once (scores 45-49), so whether the
    # best member trained with lr > 0 depends on the draws, not on marl
    best = json.loads((folder / "best.json").read_text())
    scores = best["scores"]
    assert best["score"] == max(scores.values())
    assert min(scores.values()) < best["score"]
    assert best["member"] in scores
    assert f"algorithm.lr={best['values']['algorithm.lr']}" in best["command"]
    # the configuration, not the member's seed luck
    assert "seed=" not in best["command"] and isinstance(best["member_seed"], int)
    assert (folder / "tune.png").stat().st_size > 0


def _check_exploit(members, event, exploits):
    member, frames = members / event["member"], event["frames"]
    assert event["donor"] != event["member"] and frames in (500, 1000)
    # the member's last report: 1,500 too in a killed run, whose member can have reported
    # past the checkpoint Ray's last snapshot knew (CI saw a cut at 1,000 of a member whose
    # killed process had reported 1,500)
    assert event["member_frames"] in (500, 1000, 1500)
    assert isinstance(event["member_score"], float)
    # a later exploit of this member rewrites its checkpoints from where it continues on
    # (CI saw a member cut at 500 and again at 1,000: its checkpoint at 1,000 was the
    # second donor's, with that donor's optimizer lr)
    later = [
        e["frames"]
        for e in exploits
        if e["member"] == event["member"] and e["time"] > event["time"]
    ]
    given = os.path.join(event["donor_checkpoint"], "checkpoint.pt")
    # Ray keeps a trial's last 4 checkpoints (CheckpointConfig(num_to_keep=4)): a resumed
    # trial reports more, and the donor's may be gone by the end (CI saw it once)
    if all(f > frames for f in later) and os.path.exists(given):  # still this donor's
        donor = _modules(given)
        installed = _modules(member / "checkpoints" / f"checkpoint_{frames}.pt")
        assert donor.keys() == installed.keys()
        assert all(torch.equal(donor[k], installed[k]) for k in donor)
    if all(f > frames + 500 for f in later):  # it trained on from there with the new values
        after = load_checkpoint(member / "checkpoints" / f"checkpoint_{frames + 500}.pt")
        new_lr = event["new_values"]["algorithm.lr"]
        assert after["config"]["algorithm_config"]["lr"] == new_lr
        (extra,) = after["trainer"]["algorithm"]["extra"].values()
        assert {g["lr"] for g in extra["optimizer"]["param_groups"]} == {new_lr}


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("synch", [False, True], ids=["async", "synch"])
def test_a_killed_pbt_run_resumes_where_it_stopped(tmp_path, synch):
    # synch: Ray's PBT in rounds hung on a resumed run once (every member stood at the next
    # round, so none was behind it and none ran); marl-tune's PBT moves the round on
    space = tmp_path / "space.yaml"
    space.write_text(SPACE + ("  synch: true\n" if synch else ""))
    folder = tmp_path / "tuning"
    members = folder / "members"

    first = _tune(str(space), "--folder", str(folder))
    deadline = time.time() + 600
    while time.time() < deadline and first.poll() is None:
        # kill once Ray's snapshot of the experiment knows a member's first checkpoint
        reported = [r["time"] for m in members.glob("member_*") for r in read_reports(m)]
        snapshots = [p.stat().st_mtime for p in (folder / "ray").glob("experiment_state-*")]
        if reported and snapshots and max(snapshots) > min(reported) + 0.5:
            break
        time.sleep(0.2)
    assert first.poll() is None, f"the run ended before it was killed:\n{first.stdout.read()}"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    killed_at = time.time()
    trials = sorted(p.name for p in (folder / "ray").glob("train_member_*"))

    second = _tune("--resume", str(folder))
    out = _finish(second)
    assert second.returncode == 0, out
    assert "run it with:\nmarl-run task=gymnasium/cartpole" in out

    # Ray restored the same trials; every member finished in its own folder
    assert sorted(p.name for p in (folder / "ray").glob("train_member_*")) == trials
    names = sorted(p.name for p in members.glob("member_*"))
    assert names == ["member_00", "member_01", "member_02", "member_03"]
    exploits = json.loads((folder / "lineage.json").read_text())["exploits"]
    resumed = 0
    for name in names:
        reports = read_reports(members / name)
        frames = [r["frames"] for r in reports]
        # none lost or repeated: a report every 500 frames, except where an exploit took a
        # donor's checkpoint from further on (asynchronous PBT: the donor's own last check;
        # CI saw a member cut at 500 continue from 1,000): lineage.json holds that jump
        assert frames[0] == 500 and frames[-1] == 1500, (name, frames)
        for before, after in itertools.pairwise(frames):
            assert after - before == 500 or any(
                e["member"] == name and e["member_frames"] == before and e["frames"] == after - 500
                for e in exploits
            ), (name, frames, exploits)
        resumed += reports[0]["time"] < killed_at < reports[-1]["time"]
        status = json.loads((members / name / "status.json").read_text())
        assert status["status"] == "complete" and status["frames"] == 1500
        evaluations = json.loads((members / name / "results.json").read_text())
        assert evaluations  # marl-report reads a member like any run
    assert resumed >= 1  # reports from before the kill were kept, the run went on after it

    # exploits before or after the kill (asynchronous PBT: how many varies) are sound
    for event in exploits:
        _check_exploit(members, event, exploits)
    # not asserted: that the best member learned (see the test above: with two values of lr
    # the draws can leave every member on lr 0; CI saw a best of 71 once)
    best = json.loads((folder / "best.json").read_text())
    assert best["score"] == max(best["scores"].values())
