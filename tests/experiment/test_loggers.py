"""CSV, TensorBoard and wandb (offline) loggers: files that read back, and resume."""

import pytest

from marl.experiment import (
    CheckpointManager,
    CSVLogger,
    TensorboardLogger,
    WandbLogger,
    check_logger,
    load_checkpoint,
    read_scalars,
)


def test_csv_logger_round_trip_and_resume_drops_later_rows(tmp_path):
    log = CSVLogger(tmp_path)
    for frames in (100, 200, 300):
        log.log_scalars(
            {"train/episode_reward": frames / 100, "train/a/episode_reward": 1.0}, frames
        )
    log.log_scalars({"bad": float("nan")}, 300)  # non-finite values are skipped
    log.close()
    resumed = CSVLogger(tmp_path)
    resumed.load_state_dict({"frames": 200})  # the checkpoint was at 200 frames
    resumed.log_scalars({"train/episode_reward": 9.0}, 300)
    resumed.close()
    scalars = read_scalars(tmp_path / "scalars.csv")
    assert scalars["train/episode_reward"] == [(100, 1.0), (200, 2.0), (300, 9.0)]
    assert scalars["train/a/episode_reward"] == [(100, 1.0), (200, 1.0)]
    assert "bad" not in scalars


def test_read_scalars_skips_a_truncated_last_line(tmp_path):
    path = tmp_path / "scalars.csv"
    path.write_text("frames,key,value\n10,a,1.0\n20,a")  # killed in the middle of a row
    assert read_scalars(path) == {"a": [(10, 1.0)]}


def test_tensorboard_event_files_read_back(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = TensorboardLogger(tmp_path)
    log.log_config({"seed": 0})
    log.log_scalars({"train/agent/episode_reward": 1.5}, 100)
    log.log_scalars({"train/agent/episode_reward": 2.5}, 200)
    log.close()
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    events = acc.Scalars("train/agent/episode_reward")
    assert [(e.step, e.value) for e in events] == [(100, 1.5), (200, 2.5)]


def test_wandb_offline_writes_a_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    log = WandbLogger(tmp_path, project="marl-test", name="run")
    log.log_config({"seed": 0})
    log.log_scalars({"train/episode_reward": 1.0}, 100)
    state = log.state_dict()
    log.close()
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and state["id"] in runs[0].name
    assert list(runs[0].glob("*.wandb")), "no wandb data file written"


@pytest.mark.parametrize("kind", ["csv", "tensorboard", "wandb"])
def test_check_logger_on_every_builtin_logger(kind, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    make = {
        "csv": lambda: CSVLogger(tmp_path),
        "tensorboard": lambda: TensorboardLogger(tmp_path),
        "wandb": lambda: WandbLogger(tmp_path, "marl-test", "check"),
    }[kind]
    check_logger(make())


def test_check_logger_names_missing_methods():
    with pytest.raises(TypeError, match="missing"):
        check_logger(object())


def test_checkpoint_manager_is_atomic_and_prunes(tmp_path):
    manager = CheckpointManager(tmp_path, keep=2)
    for frames in (10, 20, 30):
        manager.save({"trainer": {"frames": frames}}, frames)
    assert [p.name for p in manager.checkpoints()] == ["checkpoint_20.pt", "checkpoint_30.pt"]
    assert load_checkpoint(manager.latest)["trainer"]["frames"] == 30
    assert not list(tmp_path.glob(".*tmp*")), "temporary files left behind"

    # a write that fails half-way leaves the previous latest.pt intact
    class Boom:
        def __reduce__(self):
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        manager.save({"trainer": {"frames": 40}, "bad": Boom()}, 40)
    assert load_checkpoint(manager.latest)["trainer"]["frames"] == 30
    assert not list(tmp_path.glob(".*tmp*"))


def test_load_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "missing.pt")
    import torch

    torch.save([1, 2], tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a marl experiment checkpoint"):
        load_checkpoint(tmp_path / "other.pt")
