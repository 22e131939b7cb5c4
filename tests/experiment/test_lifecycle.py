"""How runs end and continue (Python API): status.json, interrupts, re-runs, Experiment.resume."""

import json
import os
import signal
import sys
import time

import pytest
import yaml

from marl.algorithms import TrainerCallback
from marl.experiment import Experiment, RunInterrupted, read_scalars
from marl.experiment.lifecycle import InterruptGuard
from marl.report import load_results
from marl.testing import MultiAgentFakeEnv


def fake_task(num_envs, seed, device):
    return MultiAgentFakeEnv(num_envs=num_envs, seed=seed)


def config(folder, **kw):
    out = dict(
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
    out.update(kw)
    return out


def make(folder, algorithm="mappo", callbacks=(), **kw):
    return Experiment(
        fake_task,
        algorithm,
        task_name="fake/multiagent",
        config=config(folder, **kw),
        callbacks=callbacks,
    )


def status(folder):
    return json.loads((folder / "status.json").read_text())


def rows(folder):
    """``(frames, key)`` of every row of scalars.csv."""
    lines = (folder / "scalars.csv").read_text().splitlines()[1:]
    return [tuple(line.split(",")[:2]) for line in lines]


class AtIteration(TrainerCallback):
    """Calls ``action(trainer)`` when an iteration ends at ``frames``."""

    def __init__(self, frames, action):
        self.frames, self.action = frames, action

    def on_iteration_end(self, trainer, logs):
        if trainer.frames == self.frames:
            self.action(trainer)


def test_a_second_run_into_a_folder_is_refused_and_duplicates_nothing(tmp_path):
    """Finding 2: running twice into one folder gave 81 rows, 40 of them duplicated."""
    make(tmp_path).run()
    before = (tmp_path / "scalars.csv").read_text()
    with pytest.raises(FileExistsError) as err:
        make(tmp_path).run()
    message = str(err.value)
    assert "already holds a run of mappo on fake/multiagent (seed 0), status 'complete'" in message
    assert f"Experiment.resume('{tmp_path}')" in message and f"--resume {tmp_path}" in message
    assert (tmp_path / "scalars.csv").read_text() == before
    assert len(rows(tmp_path)) == len(set(rows(tmp_path)))


def test_failed_run_says_so_with_the_error_and_the_traceback(tmp_path):
    def boom(trainer):
        raise RuntimeError("the simulator crashed")

    with pytest.raises(RuntimeError, match="the simulator crashed"):
        make(tmp_path, callbacks=[AtIteration(128, boom)]).run()
    st = status(tmp_path)
    assert st["status"] == "failed" and st["frames"] == 128
    assert st["error"] == "RuntimeError: the simulator crashed"
    assert "in boom" in st["traceback"]
    assert st["traceback"].splitlines()[-1] == "RuntimeError: the simulator crashed"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_at_the_iteration_end_with_a_checkpoint(tmp_path, sig):
    def send(trainer):
        os.kill(os.getpid(), sig)

    # checkpoints every 128 frames; the signal arrives during the iteration that ends at 192
    with pytest.raises(RunInterrupted) as err:
        make(tmp_path, callbacks=[AtIteration(192, send)]).run()
    assert err.value.signum == sig and isinstance(err.value, KeyboardInterrupt)
    assert err.value.exit_code == 128 + sig
    st = status(tmp_path)
    assert st["status"] == "interrupted" and st["signal"] == signal.Signals(sig).name
    assert st["frames"] == 192 and st["checkpoint"].endswith("latest.pt")
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["checkpoint_128.pt", "checkpoint_192.pt", "latest.pt"]
    assert signal.getsignal(sig) is not None  # the handler was restored
    # ... and it continues from there
    summary = Experiment.resume(tmp_path, task=fake_task).run()
    assert summary["frames"] == 256 and status(tmp_path)["status"] == "complete"
    assert len(rows(tmp_path)) == len(set(rows(tmp_path)))
    frames = [f for f, _ in read_scalars(tmp_path / "scalars.csv")["train/walker/loss_objective"]]
    assert frames == [64, 128, 192, 256]


def test_a_second_signal_stops_at_once(tmp_path):
    def twice(trainer):
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(RunInterrupted):
        make(tmp_path, callbacks=[AtIteration(192, twice)]).run()
    st = status(tmp_path)
    assert st["status"] == "interrupted"
    # no checkpoint of its own: the last periodic one stays the latest
    assert not (tmp_path / "checkpoints" / "checkpoint_192.pt").exists()


def test_an_iteration_that_outlasts_the_stop_timeout_is_cut_short(tmp_path):
    """Finding: SIGTERM waited for the current iteration (5 min 50 s on a pixel task), with
    no bound, past the 30 s a scheduler gives before SIGKILL."""

    def term_then_hang(trainer):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)  # an iteration that does not end in time

    start = time.monotonic()
    with pytest.raises(RunInterrupted) as err:
        make(tmp_path, callbacks=[AtIteration(192, term_then_hang)], stop_timeout_s=0.5).run()
    assert time.monotonic() - start < 30
    assert err.value.signum == signal.SIGTERM
    st = status(tmp_path)
    assert st["status"] == "interrupted" and st["signal"] == "SIGTERM"
    # stopped without a final checkpoint: the last periodic one resumes it
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["checkpoint_128.pt", "latest.pt"]
    assert signal.getsignal(signal.SIGTERM) is not None
    summary = Experiment.resume(tmp_path, task=fake_task).run()
    assert summary["frames"] == 256 and status(tmp_path)["status"] == "complete"


def test_the_stop_timeout_does_not_cut_the_final_checkpoint_short():
    with InterruptGuard(timeout_s=0.2) as guard:
        os.kill(os.getpid(), signal.SIGTERM)
        guard.disarm()  # what the run calls before its final checkpoint
        time.sleep(0.6)
    assert guard.signum == signal.SIGTERM and not guard.expired


def test_without_a_signal_the_stop_timeout_never_fires():
    with InterruptGuard(timeout_s=0.1) as guard:
        time.sleep(0.3)
    assert guard.signum is None and not guard.expired


@pytest.mark.parametrize(
    "bad, error", [(0, ValueError), (-1.0, ValueError), ("soon", TypeError), (True, TypeError)]
)
def test_a_bad_stop_timeout_is_refused_by_name(tmp_path, bad, error):
    with pytest.raises(error, match=r"experiment.stop_timeout_s: expected (None|float)"):
        make(tmp_path, stop_timeout_s=bad)
    with pytest.raises(ValueError, match=r"league\.stop_timeout_s: expected None or a number"):
        InterruptGuard(bad, setting="league.stop_timeout_s")


def test_resume_takes_everything_from_the_checkpoint(tmp_path):
    first = Experiment(
        fake_task,
        "ippo",
        model={"actor_cells": [8]},
        seed=7,
        task_name="fake/multiagent",
        algorithm_config={"lr": 1e-3},
        config=config(tmp_path, total_frames=128),
    )
    first.run()
    resumed = Experiment.resume(
        tmp_path / "checkpoints" / "latest.pt", {"total_frames": 256}, task=fake_task
    )
    assert (resumed.seed, resumed.algorithm_name, resumed.folder) == (7, "ippo", tmp_path)
    assert resumed.algorithm.config.lr == 1e-3 and resumed.algorithm.config.actor_cells == (8,)
    assert resumed.run()["frames"] == 256
    written = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert written["experiment"]["total_frames"] == 256  # the change is recorded
    assert written["seed"] == 7 and written["algorithm_config"]["lr"] == 1e-3
    steps = [ev.step_count for ev in load_results([tmp_path / "results.json"]).evaluations]
    assert steps == [0, 128, 256]


def test_resume_refuses_changes_that_contradict_the_checkpoint(tmp_path):
    make(tmp_path, total_frames=128).run()
    with pytest.raises(ValueError) as err:
        Experiment.resume(tmp_path, {"frames_per_batch": 32, "total_frames": 512}, task=fake_task)
    assert "experiment.frames_per_batch: the checkpoint's run has 64, given 32" in str(err.value)
    with pytest.raises(ValueError, match="is not in the task catalogue: pass its env factory"):
        Experiment.resume(tmp_path)
    with pytest.raises(FileNotFoundError, match="holds no checkpoint"):
        Experiment.resume(tmp_path / "checkpoints")


def test_restore_file_checks_every_setting_against_the_checkpoint(tmp_path):
    """``restore_file`` with a config that differs names each difference, touches nothing."""
    make(tmp_path, total_frames=128).run()
    other = Experiment(
        fake_task,
        "mappo",
        seed=3,
        task_name="fake/multiagent",
        algorithm_config={"lr": 0.5},
        config=config(
            tmp_path,
            total_frames=256,
            num_envs=2,
            restore_file=str(tmp_path / "checkpoints" / "latest.pt"),
        ),
    )
    before = status(tmp_path)
    with pytest.raises(ValueError) as err:
        other.run()
    lines = str(err.value).splitlines()
    assert "  algorithm.lr: the checkpoint's run has 5e-05, this run 0.5" in lines
    assert "  seed: the checkpoint's run has 0, this run 3" in lines
    assert "  experiment.num_envs: the checkpoint's run has 4, this run 2" in lines
    assert status(tmp_path) == before


def test_resume_from_an_older_checkpoint_drops_what_came_after(tmp_path):
    make(tmp_path, keep_checkpoints=5).run()
    exp = Experiment.resume(tmp_path / "checkpoints" / "checkpoint_128.pt", task=fake_task)
    exp.run()
    frames = [f for f, _ in read_scalars(tmp_path / "scalars.csv")["eval/episode_reward"]]
    assert frames == [0, 128, 256]
    assert len(rows(tmp_path)) == len(set(rows(tmp_path)))


def test_flat_algorithm_config_next_to_per_group_algorithms_is_refused(tmp_path):
    """Finding 3 (Python): a flat config next to ``{group: name}`` was silently ignored."""
    with pytest.raises(ValueError) as err:
        Experiment(
            fake_task,
            {"walker": "mappo", "picker": "iql"},
            task_name="fake/multiagent",
            algorithm_config={"lr": 1e-3},
        )
    assert str(err.value) == (
        "algorithm_config has key(s) ['lr'] that name no group of the per-group algorithm "
        "{'walker': 'mappo', 'picker': 'iql'}; give each group its own config, e.g. "
        "algorithm_config={'walker': {'lr': 0.001}, 'picker': {'lr': 0.001}}"
    )
    exp = Experiment(
        fake_task,
        {"walker": "mappo", "picker": "iql"},
        task_name="fake/multiagent",
        algorithm_config={"walker": {"lr": 1e-3}, "picker": {"learning_starts": 100}},
    )
    assert exp.algorithm.config["walker"].lr == 1e-3
    assert exp.algorithm.config["picker"].learning_starts == 100
    assert exp.describe()["algorithm"] == {"walker": "mappo", "picker": "iql"}


def test_a_per_group_run_resumes_with_its_groups(tmp_path):
    Experiment(
        fake_task,
        {"walker": "mappo", "picker": "iql"},
        task_name="fake/multiagent",
        algorithm_config={"picker": {"learning_starts": 64}},
        config=config(tmp_path, total_frames=128),
    ).run()
    resumed = Experiment.resume(tmp_path, {"total_frames": 256}, task=fake_task)
    assert resumed.algorithm.choice == {"walker": "mappo", "picker": "iql"}
    assert resumed.algorithm.config["picker"].learning_starts == 64
    assert resumed.run()["frames"] == 256
    assert status(tmp_path)["algorithm"] == "picker-iql_walker-mappo"
    assert len(rows(tmp_path)) == len(set(rows(tmp_path)))


def test_a_signal_before_any_training_leaves_no_checkpoint(tmp_path):
    """Stopped during the evaluation at 0 frames: nothing to continue, so no checkpoint
    (a resume from 0 frames would evaluate at 0 a second time)."""

    class DuringFirstEvaluation(TrainerCallback):
        def on_evaluation(self, trainer, logs):
            if trainer.frames == 0:
                os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(RunInterrupted):
        make(tmp_path, callbacks=[DuringFirstEvaluation()]).run()
    st = status(tmp_path)
    assert (st["status"], st["frames"], st["checkpoint"]) == ("interrupted", 0, None)
    assert not list((tmp_path / "checkpoints").iterdir())


@pytest.mark.parametrize(("code", "expected"), [(0, "stopped"), (None, "stopped"), (3, "failed")])
def test_sys_exit_zero_is_a_stop_not_a_failure(tmp_path, code, expected):
    """Ray Tune ends each trial its scheduler stops with ``sys.exit(0)``: its status said
    "failed" with "SystemExit: 0"; a non-zero exit code is still a failure."""

    def leave(trainer):
        sys.exit(code)

    with pytest.raises(SystemExit):
        make(tmp_path, callbacks=[AtIteration(128, leave)]).run()
    st = status(tmp_path)
    assert (st["status"], st["frames"]) == (expected, 128)
    assert ("error" in st) == (expected == "failed")
    if expected == "failed":
        assert st["error"] == "SystemExit: 3"
