"""``marl-run`` end to end in subprocesses: defaults, errors, sweeps, launchers, kill + resume."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from marl.experiment import read_scalars

DEBUG = ["experiment=debug"]


def marl_run(*args, check=True, timeout=300):
    env = dict(os.environ, OMP_NUM_THREADS="1", HYDRA_FULL_ERROR="0")
    proc = subprocess.run(
        [sys.executable, "-m", "marl.experiment", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"marl-run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def status(folder):
    return json.loads((folder / "status.json").read_text())


def test_default_task_and_algorithm(tmp_path):
    proc = marl_run(*DEBUG, f"hydra.run.dir={tmp_path}")
    assert status(tmp_path)["status"] == "complete"
    assert (
        status(tmp_path)["algorithm"] == "mappo" and status(tmp_path)["task"] == "vmas/navigation"
    )
    for name in ("config.yaml", "scalars.csv", "results.json", "curves.png", ".hydra/config.yaml"):
        assert (tmp_path / name).exists(), name
    assert "frames 1000/1000" in proc.stdout + proc.stderr + (tmp_path / "marl-run.log").read_text()


def test_algorithm_task_seed_and_hyperparameters(tmp_path):
    marl_run(
        "algorithm=qmix",
        "task=pettingzoo/simple_spread",
        "seed=3",
        "algorithm.lr=0.001",
        "model=small",
        *DEBUG,
        f"hydra.run.dir={tmp_path}",
    )
    st = status(tmp_path)
    assert (st["algorithm"], st["task"], st["seed"], st["frames"]) == (
        "qmix",
        "pettingzoo/simple_spread",
        3,
        1000,
    )
    import yaml

    config = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert config["algorithm_config"]["all"]["lr"] == 0.001
    assert config["algorithm_config"]["all"]["cells"] == [64, 64]


def test_bad_override_gives_hydras_error(tmp_path):
    proc = marl_run("experiment.total_framez=10", f"hydra.run.dir={tmp_path}", check=False)
    assert proc.returncode != 0
    assert "total_framez" in proc.stderr and "not in struct" in proc.stderr


def test_unknown_algorithm_lists_the_available_ones(tmp_path):
    proc = marl_run("algorithm=mapo", f"hydra.run.dir={tmp_path}", check=False)
    assert proc.returncode != 0
    assert "Available options in 'algorithm'" in proc.stderr and "mappo" in proc.stderr


def test_unknown_task_lists_the_available_ones(tmp_path):
    proc = marl_run("task=vmas/navigaton", *DEBUG, f"hydra.run.dir={tmp_path}", check=False)
    assert proc.returncode != 0
    assert "unknown task 'vmas/navigaton'; available tasks" in proc.stderr
    assert "vmas/navigation" in proc.stderr


@pytest.mark.parametrize(
    "launcher",
    ["basic", "joblib", "submitit_local", pytest.param("marl_ray", marks=pytest.mark.ray)],
)
def test_multirun_over_seeds(tmp_path, launcher):
    args = ["-m", "seed=0,1", *DEBUG, "experiment.evaluation=false", f"hydra.sweep.dir={tmp_path}"]
    if launcher == "joblib":
        args += ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    elif launcher == "submitit_local":
        args += ["hydra/launcher=submitit_local"]
    elif launcher == "marl_ray":
        args += ["hydra/launcher=marl_ray", "hydra.launcher.num_cpus=2"]
    marl_run(*args)
    runs = sorted(p for p in tmp_path.iterdir() if p.is_dir() and p.name[0].isdigit())
    assert [p.name for p in runs] == [
        "0_mappo_vmas-navigation_seed0",
        "1_mappo_vmas-navigation_seed1",
    ]
    assert [status(p)["status"] for p in runs] == ["complete", "complete"]
    assert [status(p)["seed"] for p in runs] == [0, 1]


def test_sigkill_then_resume(tmp_path):
    """Kill a run with SIGKILL mid-training, resume it, check frames and logs continue."""
    args = [
        "experiment.num_envs=4",
        "experiment.frames_per_batch=200",
        "experiment.total_frames=4000",
        "experiment.checkpoint_interval=200",
        "experiment.evaluation_interval=1000",
        "experiment.evaluation_episodes=2",
        "experiment.render=false",
        "experiment.progress=false",
        f"hydra.run.dir={tmp_path}",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "marl.experiment", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.time() + 240
    try:
        while time.time() < deadline:
            time.sleep(0.2)
            if proc.poll() is not None:
                pytest.fail("the run ended before it could be killed")
            try:
                if status(tmp_path)["frames"] >= 1200:
                    break
            except (FileNotFoundError, json.JSONDecodeError, KeyError):
                continue
        else:
            pytest.fail("the run made no progress")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    killed = status(tmp_path)
    assert killed["status"] == "running" and 1200 <= killed["frames"] < 4000
    latest = tmp_path / "checkpoints" / "latest.pt"
    marl_run(*args, f"experiment.restore_file={latest}")
    done = status(tmp_path)
    assert done["status"] == "complete" and done["frames"] == 4000
    scalars = read_scalars(tmp_path / "scalars.csv")
    frames = [f for f, _ in scalars["train/agent/loss_objective"]]
    assert frames == list(range(200, 4001, 200))  # no gap, no duplicate, no restart
    from marl.report import load_results

    table = load_results([tmp_path / "results.json"])
    assert [ev.step_count for ev in table.evaluations] == [0, 1000, 2000, 3000, 4000]


def test_help_lists_tasks_algorithms_and_examples():
    out = marl_run("--help").stdout
    assert "marl-run: train an algorithm on a task" in out
    assert "vmas/navigation" in out and "pettingzoo/simple_tag" in out  # the task catalogue
    assert "algorithm: a2c, ddpg, dqn" in out  # hydra's list of the algorithm group
    assert "experiment: base, debug, gpu" in out
