"""Checkpoints are data: loading one cannot run code, a folder resumes only from its own
run's checkpoints (never through a link into another folder), and damaged files or a
full disk are named as such."""

import errno
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict
from torch import _weights_only_unpickler as wo

from marl.data import ListStorage, TensorStorage
from marl.experiment import Experiment
from marl.experiment.argv import prepare_resume
from marl.experiment.checkpoint import (
    CheckpointError,
    CheckpointManager,
    UntrustedCheckpointError,
    load_checkpoint,
)
from marl.experiment.league_run import load_league_checkpoint
from marl.experiment.resume import RUN_FILE, load_resumable, read_run_id
from marl.testing import MultiAgentFakeEnv

LEGACY = Path(__file__).parent / "data" / "legacy_2619eaf"


def fake_task(num_envs, seed, device):
    return MultiAgentFakeEnv(num_envs=num_envs, seed=seed)


def make(folder, algorithm="mappo", **kw):
    config = dict(
        num_envs=4,
        frames_per_batch=64,
        total_frames=128,
        evaluation_interval=64,
        evaluation_episodes=2,
        checkpoint_interval=64,
        render=False,
        progress=False,
        save_folder=str(folder),
    )
    config.update(kw)
    return Experiment(fake_task, algorithm, task_name="fake/multiagent", config=config)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two finished runs (MAPPO and MASAC with its replay buffer), kept pristine: copy them."""
    root = tmp_path_factory.mktemp("runs")
    make(root / "mappo").run()
    make(root / "masac", "masac", checkpoint_buffers=True).run()
    return root


def copy_run(runs, name, tmp_path):
    return Path(shutil.copytree(runs / name, tmp_path / name))


class Pwn:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def evil_checkpoint(path, marker):
    torch.save({"trainer": Pwn(marker), "league": Pwn(marker), "config": {}}, path)
    return path


def snapshot(folder):
    """The bytes of a run folder's logs and the names in checkpoints/."""
    return {
        "scalars": (folder / "scalars.csv").read_bytes(),
        "results": (folder / "results.json").read_bytes(),
        "checkpoints": sorted(p.name for p in (folder / "checkpoints").iterdir()),
        "run": (folder / RUN_FILE).read_bytes() if (folder / RUN_FILE).exists() else None,
    }


def extra_globals(path):
    """The globals a checkpoint's pickle names beyond torch's own weights_only allowlist
    (tensordict's process-wide additions not counted as allowed)."""
    with zipfile.ZipFile(path) as archive:
        data = archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl")))
    return set(wo.get_globals_in_pkl(io.BytesIO(data))) - set(wo._get_allowed_globals())


# ------------------------------------------------------------------ code execution
def test_every_loader_refuses_a_checkpoint_that_runs_code(tmp_path):
    marker = tmp_path / "pwned"
    path = evil_checkpoint(tmp_path / "evil.pt", marker)
    with pytest.raises(UntrustedCheckpointError, match=r"evil\.pt: its pickle names posix\.system"):
        load_checkpoint(path)
    with pytest.raises(UntrustedCheckpointError, match="trusted=True"):
        load_league_checkpoint(path)
    storage_dir = tmp_path / "storage"
    storage_dir.mkdir()
    evil_checkpoint(storage_dir / "storage.pt", marker)
    with pytest.raises(UntrustedCheckpointError, match="replay-buffer storage"):
        ListStorage(10).loads(storage_dir)
    assert not marker.exists()
    # the opt-in unpickles it in full: the code runs (which is what it is for)
    load_checkpoint(path, trusted=True)
    assert marker.exists()


def test_the_environment_opt_in(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    path = evil_checkpoint(tmp_path / "evil.pt", marker)
    monkeypatch.setenv("MARL_TRUST_CHECKPOINTS", "1")
    load_league_checkpoint(path)
    assert marker.exists()


def test_resume_refuses_a_checkpoint_that_runs_code(runs, tmp_path):
    folder = copy_run(runs, "mappo", tmp_path)
    marker = tmp_path / "pwned"
    evil_checkpoint(folder / "checkpoints" / "checkpoint_9999.pt", marker)
    before = snapshot(folder)
    with pytest.raises(UntrustedCheckpointError, match=r"checkpoint_9999\.pt"):
        Experiment.resume(folder, {"total_frames": 256}, task=fake_task)
    assert not marker.exists() and snapshot(folder) == before


def test_marl_run_resume_refuses_a_checkpoint_that_runs_code(tmp_path):
    pytest.importorskip("vmas")
    folder = Path(shutil.copytree(LEGACY / "mappo_navigation", tmp_path / "run"))
    marker = tmp_path / "pwned"
    evil_checkpoint(folder / "checkpoints" / "checkpoint_600.pt", marker)
    before = snapshot(folder)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("MARL_TRUST_CHECKPOINTS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "marl.experiment", "--resume", str(folder)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "refusing to load checkpoint" in proc.stderr and "posix.system" in proc.stderr
    assert not marker.exists() and snapshot(folder) == before


# ------------------------------------------------------------------ the format
def test_new_checkpoints_are_plain_data(runs, tmp_path):
    for name in ("mappo", "masac"):
        for path in (runs / name / "checkpoints").glob("checkpoint_*.pt"):
            assert torch.serialization.get_unsafe_globals_in_checkpoint(path) == []
            assert extra_globals(path) == set(), path
            torch.load(path, weights_only=True)  # torch's own safe loader reads it
    state = load_checkpoint(runs / "masac" / "checkpoints" / "latest.pt")
    assert state["trainer"]["buffers"], "the off-policy checkpoint holds its replay buffer"
    assert state["run_id"] == read_run_id(runs / "masac")


def test_a_legacy_mappo_folder_resumes(tmp_path):
    pytest.importorskip("vmas")
    folder = Path(shutil.copytree(LEGACY / "mappo_navigation", tmp_path / "run"))
    assert not (folder / RUN_FILE).exists()
    summary = Experiment.resume(folder, {"total_frames": 1000}).run()
    assert summary["frames"] == 1000
    run_id = read_run_id(folder)
    assert run_id and load_checkpoint(folder / "checkpoints" / "latest.pt")["run_id"] == run_id
    assert extra_globals(folder / "checkpoints" / "checkpoint_1000.pt") == set()


def test_a_legacy_checkpoint_with_its_replay_buffer_loads():
    state = load_checkpoint(LEGACY / "iql_simple_spread_buffers_500.pt")
    saved = state["trainer"]["buffers"]["agent"]["storage"]
    assert type(saved["data"]) is TensorDict and saved["len"] == 500
    storage = TensorStorage(saved["max_size"])
    storage.load_state_dict(saved)
    assert len(storage) == 500
    assert set(state["rng"]) >= {"python", "numpy", "torch"}


def test_storages_save_tensordicts_as_data(tmp_path):
    storage = ListStorage(4)
    storage.set(slice(0, 2), [TensorDict({"a": torch.ones(2)}, []), torch.zeros(3)])
    storage.set(3, "x")  # slot 2 never written
    storage.dumps(tmp_path / "a")
    assert extra_globals(tmp_path / "a" / "storage.pt") == set()
    back = ListStorage(4)
    back.loads(tmp_path / "a")
    assert back.get(0)["a"].tolist() == [1.0, 1.0] and back.get(3) == "x"
    with pytest.raises(IndexError, match="never written"):
        back.get(2)
    storage.set(1, Path("/tmp"))  # an object that is not data: only with the opt-in
    storage.dumps(tmp_path / "b")
    with pytest.raises(UntrustedCheckpointError, match="pathlib"):
        ListStorage(4).loads(tmp_path / "b")
    ListStorage(4).loads(tmp_path / "b", trusted=True)


# ------------------------------------------------------------------ run identity
def test_a_checkpoint_of_another_run_is_refused(runs, tmp_path):
    folder = copy_run(runs, "mappo", tmp_path)
    other = runs / "masac" / "checkpoints" / "checkpoint_128.pt"
    shutil.copy(other, folder / "checkpoints" / "checkpoint_9999.pt")
    before = snapshot(folder)
    exp = Experiment.resume(folder, {"total_frames": 99999}, task=fake_task)
    with pytest.raises(ValueError) as err:
        exp.run()
    assert read_run_id(runs / "masac") in str(err.value)
    assert read_run_id(folder) in str(err.value)
    assert snapshot(folder) == before


def test_legacy_checkpoints_of_another_run_are_refused_by_config(runs, tmp_path):
    folder = copy_run(runs, "mappo", tmp_path)
    (folder / RUN_FILE).unlink()  # a folder and a checkpoint from before run ids
    state = load_checkpoint(runs / "masac" / "checkpoints" / "checkpoint_128.pt")
    del state["run_id"]
    torch.save(state, folder / "checkpoints" / "checkpoint_9999.pt")
    before = snapshot(folder)
    exp = Experiment.resume(folder, {"total_frames": 99999}, task=fake_task)
    with pytest.raises(ValueError, match="algorithm: the checkpoint's run has 'masac'"):
        exp.run()
    assert snapshot(folder) == before


def test_run_id_is_written_once(runs, tmp_path):
    folder = copy_run(runs, "mappo", tmp_path)
    before = (folder / RUN_FILE).read_bytes()
    Experiment.resume(folder, {"total_frames": 192}, task=fake_task).run()
    assert (folder / RUN_FILE).read_bytes() == before
    assert load_checkpoint(folder / "checkpoints" / "latest.pt")["run_id"] == read_run_id(folder)


def test_a_symlinked_checkpoint_is_refused(runs, tmp_path):
    folder = copy_run(runs, "mappo", tmp_path)
    other = copy_run(runs, "masac", tmp_path)
    link = folder / "checkpoints" / "checkpoint_9999.pt"
    link.symlink_to(other / "checkpoints" / "checkpoint_128.pt")
    before, before_other = snapshot(folder), snapshot(other)
    with pytest.raises(CheckpointError, match="symbolic link"):
        Experiment.resume(folder, {"total_frames": 99999}, task=fake_task)
    with pytest.raises(ValueError, match="symbolic link"):
        prepare_resume(["--resume", str(folder)])
    with pytest.raises(ValueError, match="symbolic link"):
        prepare_resume([f"experiment.restore_file={link}"])
    assert snapshot(folder) == before and snapshot(other) == before_other


# ------------------------------------------------------------------ damaged files
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous(runs, tmp_path, caplog):
    folder = copy_run(runs, "mappo", tmp_path)
    newest = folder / "checkpoints" / "checkpoint_128.pt"
    data = newest.read_bytes()
    with open(newest, "r+b") as f:  # in place: latest.pt, a hard link, is damaged too
        f.truncate(len(data) // 2)
    with caplog.at_level(logging.WARNING, logger="marl.experiment"):
        checkpoint, state = load_resumable(folder)
    assert checkpoint.name == "checkpoint_64.pt" and state["trainer"]["frames"] == 64
    assert "checkpoint_128.pt is damaged" in caplog.text
    assert (folder / "checkpoints" / "checkpoint_128.pt.damaged").stat().st_size == len(data) // 2
    summary = Experiment.resume(folder, {"total_frames": 128}, task=fake_task).run()
    assert summary["frames"] == 128
    assert load_checkpoint(folder / "checkpoints" / "latest.pt")["trainer"]["frames"] == 128
    assert (folder / "checkpoints" / "checkpoint_128.pt.damaged").exists()


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda b: b"", "empty file (0 bytes)"),
        (lambda b: b[: len(b) // 2], "truncated or not a torch file"),
        (lambda b: os.urandom(len(b)), "not a torch file"),
    ],
)
def test_damaged_files_are_named(runs, tmp_path, damage, message):
    folder = copy_run(runs, "mappo", tmp_path)
    newest = folder / "checkpoints" / "checkpoint_128.pt"
    data = newest.read_bytes()
    (folder / "checkpoints" / "latest.pt").unlink()
    newest.write_bytes(damage(data))
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(newest)
    text = str(err.value)
    assert str(newest) in text and message in text
    assert "Intact checkpoints in" in text and "checkpoint_64.pt" in text
    loose = tmp_path / "loose.pt"
    loose.write_bytes(damage(data))
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(loose)
    assert message in str(err.value) and "Intact" not in str(err.value)


class FullDisk(io.BytesIO):
    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("failure", ["enospc", "unexpected pos"])
def test_a_full_disk_is_named(tmp_path, monkeypatch, failure):
    import marl.experiment.checkpoint as checkpoint

    manager = CheckpointManager(tmp_path / "checkpoints")
    manager.save({"trainer": {"frames": 1}}, 1)
    if failure == "enospc":
        real_fdopen = os.fdopen

        def fake_fdopen(fd, mode="r", *a, **k):  # marl.atomic's temp file
            if "w" in mode:
                real_fdopen(fd, mode, *a, **k).close()  # the temp file exists, as on a real disk
                return FullDisk()
            return real_fdopen(fd, mode, *a, **k)

        monkeypatch.setattr(os, "fdopen", fake_fdopen)
    else:

        def fake_save(obj, f):
            f.write(b"PK\x03\x04")
            raise RuntimeError(
                "[enforce fail at inline_container.cc:664] . unexpected pos 105216 vs 105104"
            )

        monkeypatch.setattr(checkpoint.torch, "save", fake_save)
    with pytest.raises(OSError) as err:
        manager.save({"trainer": {"frames": 2}}, 2)
    assert err.value.errno == errno.ENOSPC
    assert "checkpoint_2.pt" in str(err.value) and "the disk is full" in str(err.value)
    monkeypatch.undo()
    assert sorted(p.name for p in manager.folder.iterdir()) == ["checkpoint_1.pt", "latest.pt"]
    assert load_checkpoint(manager.latest)["trainer"]["frames"] == 1


def test_status_json_still_names_the_checkpoint(runs):
    status = json.loads((runs / "mappo" / "status.json").read_text())
    assert status["checkpoint"].endswith("latest.pt")
