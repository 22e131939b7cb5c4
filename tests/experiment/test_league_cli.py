"""``marl-league`` end to end: a tiny tictactoe league writes its run folder, resumes from
it (in a subprocess, as a user would run it), and ``marl-report`` ranks its snapshots;
a resume that contradicts the checkpoint is refused (in process); a league killed between
two checkpoints and resumed ends exactly as one that was never stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import torch
import yaml

from marl.experiment.league_run import run_league
from marl.experiment.loggers import read_scalars

pytest.importorskip("pettingzoo")

TINY = [
    "task=pettingzoo/tictactoe",
    "algorithm=iql",
    "algorithm.learning_starts=100",
    "algorithm.batch_size=32",
    "algorithm.cells=[32,32]",
    "league.total_frames=1000",
    "league.frames_per_batch=100",
    "league.snapshot_interval=500",
    "league.checkpoint_interval=500",
    "league.strategy=uniform",
    "league.rating_games=2",
    "league.checkpoint_buffers=true",
]


def marl_league(*args: str, cwd, returncode: int = 0, **env: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "marl.experiment.league_cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1", **env},
    )
    if proc.returncode != returncode:
        raise AssertionError(f"marl-league returned {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


def test_marl_league_writes_a_run_folder_and_resumes_it(tmp_path):
    folder = tmp_path / "run"
    proc = marl_league(*TINY, f"hydra.run.dir={folder}", cwd=tmp_path)
    assert "1000 frames" in proc.stdout and "Elo: " in proc.stdout
    config = yaml.safe_load((folder / "config.yaml").read_text())
    assert config["task"] == "pettingzoo/tictactoe" and config["algorithm"]["name"] == "iql"
    assert config["algorithm"]["cells"] == [32, 32] and config["league"]["total_frames"] == 1000
    status = json.loads((folder / "status.json").read_text())
    assert (status["status"], status["frames"], status["kind"]) == ("complete", 1000, "league")
    scalars = read_scalars(folder / "scalars.csv")
    assert [f for f, _ in scalars["pool_size"]] == list(range(100, 1001, 100))
    assert "train/score" in scalars and "train/player/loss_qvalue" in scalars
    checkpoints = sorted(p.name for p in (folder / "checkpoints").glob("*.pt"))
    assert checkpoints == ["checkpoint_1000.pt", "checkpoint_500.pt", "latest.pt"]
    elo = json.loads((folder / "elo.json").read_text())
    names = ["snapshot_0", "snapshot_500", "snapshot_1000", "random"]
    assert [p["name"] for p in elo["players"]] == names
    assert elo["task"] == "pettingzoo/tictactoe" and elo["algorithm"] == "iql"
    assert (folder / "elo.csv").is_file()

    # continue it further: the checkpoint's config, with the new total_frames
    marl_league("--resume", str(folder), "league.total_frames=1500", cwd=tmp_path)
    status = json.loads((folder / "status.json").read_text())
    assert (status["status"], status["frames"], status["total_frames"]) == ("complete", 1500, 1500)
    config = yaml.safe_load((folder / "config.yaml").read_text())
    assert config["league"]["total_frames"] == 1500 and config["algorithm"]["cells"] == [32, 32]
    scalars = read_scalars(folder / "scalars.csv")
    assert [f for f, _ in scalars["pool_size"]] == list(range(100, 1501, 100))  # no repeats
    elo = json.loads((folder / "elo.json").read_text())
    assert [p["name"] for p in elo["players"]] == [*names[:-1], "snapshot_1500", "random"]
    state = torch.load(folder / "checkpoints" / "latest.pt", weights_only=False)
    assert state["league"]["frames"] == 1500 and "buffers" in state["league"]

    from marl.report.cli import main as marl_report

    out = tmp_path / "report"
    assert marl_report([str(folder), "--out", str(out), "--no-figures"]) == 0
    report = (out / "report.md").read_text()
    assert "snapshot_1500" in report and "pettingzoo/tictactoe" in report

    # a resume that contradicts the checkpoint is refused before anything changes
    before = (folder / "scalars.csv").read_text()
    saved = yaml.safe_load((folder / "config.yaml").read_text())
    wrong = {**saved, "algorithm": {**saved["algorithm"], "lr": 0.1}}
    wrong["league"] = {**saved["league"], "restore_file": str(folder / "checkpoints" / "latest.pt")}
    with pytest.raises(ValueError, match=r"algorithm.lr: the checkpoint has 0.0005, the command"):
        run_league(wrong, folder, given=[("algorithm", "lr")])
    assert (folder / "scalars.csv").read_text() == before
    # and a new run into the folder is refused
    fresh = {**saved, "league": {k: v for k, v in saved["league"].items()}}
    with pytest.raises(FileExistsError, match="marl-league --resume"):
        run_league(fresh, folder)


def test_a_killed_league_resumes_and_ends_as_one_never_stopped(tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    marl_league(*TINY, f"hydra.run.dir={whole}", "league.progress=false", cwd=tmp_path)
    # SIGKILL after the scalars of 700 frames, before any checkpoint after 500's
    marl_league(
        *TINY,
        f"hydra.run.dir={killed}",
        "league.progress=false",
        cwd=tmp_path,
        returncode=-signal.SIGKILL,
        MARL_TEST_FAULT="iteration@700",
    )
    status = json.loads((killed / "status.json").read_text())
    assert (status["status"], status["frames"]) == ("running", 500)  # what a kill leaves
    assert max(f for f, _ in read_scalars(killed / "scalars.csv")["pool_size"]) == 700
    assert not (killed / "elo.json").exists()
    marl_league("--resume", str(killed), cwd=tmp_path)
    # the rows of 600 and 700 were dropped and logged again, with the same values
    assert (killed / "scalars.csv").read_text() == (whole / "scalars.csv").read_text()
    a = torch.load(whole / "checkpoints" / "latest.pt", weights_only=False)["league"]
    b = torch.load(killed / "checkpoints" / "latest.pt", weights_only=False)["league"]
    assert a["history"] == b["history"] and a["frames"] == b["frames"] == 1000
    for k, v in a["algorithm"]["modules"].items():
        assert torch.equal(v, b["algorithm"]["modules"][k]), k
    records = [{k: v for k, v in s.items() if k != "state"} for s in a["pool"]["snapshots"]]
    assert records == [{k: v for k, v in s.items() if k != "state"} for s in b["pool"]["snapshots"]]
    elo = [json.loads((f / "elo.json").read_text())["players"] for f in (whole, killed)]
    assert elo[0] == elo[1]


def test_help_lists_only_the_groups_a_league_reads():
    """marl-run's config folder also holds ``experiment``, which a league does not read
    (``marl-league experiment=debug`` is refused): its help must not offer it."""
    from hydra import compose, initialize_config_dir

    from marl.experiment.cli import CONF_DIR
    from marl.experiment.league_cli import _prepare

    _prepare()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        template = compose("league", return_hydra_config=True).hydra.help.template
    groups = template.split("== Configuration groups ==")[1].split("== Config ==")[0]
    assert "algorithm: a2c, ddpg" in groups and "iql" in groups
    models = next(line for line in groups.splitlines() if line.startswith("model: "))
    assert {"default", "large", "small"} <= set(models[len("model: ") :].split(", "))
    assert "experiment" not in groups
