"""``experiment=debug`` runs every algorithm's update, not only its collection.

The debug preset is the smoke test users run first (``marl-run experiment=debug``).
When it stopped at 800 frames, below the off-policy ``learning_starts`` of 1000, the
seven off-policy algorithms finished "successfully" without a single optimizer step.
Each run here composes the preset through hydra, exactly as ``marl-run`` does, and
checks that ``scalars.csv`` holds at least one loss value.
"""

from __future__ import annotations

import pytest

from marl.algorithms import list_algorithms
from marl.experiment import read_scalars

pytest.importorskip("hydra")

# algorithm -> (task, extra overrides); MARL on VMAS navigation (its discrete variant for
# the value-based ones), single-agent on Gymnasium classic control
DISCRETE_NAVIGATION = ("vmas/navigation", ["+task_overrides.continuous_actions=false"])
NAVIGATION = ("vmas/navigation", [])
CARTPOLE = ("gymnasium/cartpole", [])
PENDULUM = ("gymnasium/pendulum", [])
TASKS = {
    "mappo": NAVIGATION,
    "happo": NAVIGATION,
    "mat": NAVIGATION,
    "ippo": NAVIGATION,
    "maddpg": NAVIGATION,
    "iddpg": NAVIGATION,
    "masac": NAVIGATION,
    "isac": NAVIGATION,
    "qmix": DISCRETE_NAVIGATION,
    "vdn": DISCRETE_NAVIGATION,
    "iql": DISCRETE_NAVIGATION,
    "pqn": DISCRETE_NAVIGATION,
    "pqn_vdn": DISCRETE_NAVIGATION,
    "ppo": CARTPOLE,
    "a2c": CARTPOLE,
    "dqn": CARTPOLE,
    "sac": PENDULUM,
    "td3": PENDULUM,
    "ddpg": PENDULUM,
}


def test_every_registered_algorithm_is_covered():
    # a new algorithm must join the smoke runs below
    assert sorted(TASKS) == list_algorithms()


@pytest.mark.parametrize("algorithm", sorted(TASKS))
def test_debug_preset_runs_an_update(algorithm, tmp_path):
    from marl.experiment.cli import compose_config, run_config

    task, extra = TASKS[algorithm]
    cfg = compose_config(
        [
            "experiment=debug",
            f"algorithm={algorithm}",
            f"task={task}",
            "experiment.progress=false",
            *extra,
        ]
    )
    summary = run_config(cfg, folder=tmp_path)
    assert summary["frames"] >= cfg.experiment.total_frames
    scalars = read_scalars(tmp_path / "scalars.csv")
    # "train/loss_qvalue" (single-agent) or "train/<group>/loss_qvalue" (groups)
    losses = {
        key: values
        for key, values in scalars.items()
        if key.startswith("train/") and key.rsplit("/", 1)[-1].startswith("loss_")
    }
    assert losses, (
        f"{algorithm} on {task} under experiment=debug ({cfg.experiment.total_frames} frames) "
        f"logged no loss: it never ran an update. Logged keys: {sorted(scalars)}"
    )


def test_debug_runs_one_epoch_of_each_on_policy_update():
    # a smoke run: one pass over each batch checks every part; MAPPO's 10 passes over
    # pistonball's 20 pixel views were 60 of its debug run's 105 s
    from marl.experiment.cli import compose_config

    cfg = compose_config(["experiment=debug"])
    assert cfg.experiment.max_epochs == 1


@pytest.mark.parametrize("algorithm,default", [("mappo", 10), ("happo", 10), ("pqn", 4)])
def test_max_epochs_caps_the_on_policy_epochs(algorithm, default):
    from marl.experiment import Experiment
    from marl.testing import MultiAgentFakeEnv

    def task(num_envs, seed, device):
        return MultiAgentFakeEnv(num_envs=num_envs, seed=seed)

    def epochs(config, algorithm_config=None):
        exp = Experiment(
            task,
            algorithm,
            task_name="fake/multiagent",
            config=config,
            algorithm_config=algorithm_config,
        )
        return exp.algorithm.config.epochs

    assert epochs({}) == default  # no cap: the algorithm's own
    assert epochs({"max_epochs": 1}) == 1
    assert epochs({"max_epochs": 2}, {"epochs": 3}) == 2  # a cap over the user's value too
    assert epochs({"max_epochs": 50}) == default  # a cap, never a raise
    per_group = Experiment(
        task, {"agents": algorithm}, task_name="fake/multiagent", config={"max_epochs": 1}
    )
    assert per_group.algorithm.config["agents"].epochs == 1


def test_max_epochs_leaves_off_policy_algorithms_alone_and_is_checked():
    from marl.experiment import Experiment, ExperimentConfig
    from marl.testing import MultiAgentFakeEnv

    exp = Experiment(
        lambda num_envs, seed, device: MultiAgentFakeEnv(num_envs=num_envs, seed=seed),
        "masac",
        task_name="fake/multiagent",
        config={"max_epochs": 1},
    )
    assert not hasattr(exp.algorithm.config, "epochs")
    with pytest.raises(ValueError, match=r"experiment\.max_epochs: expected None or >= 1, got 0"):
        ExperimentConfig(max_epochs=0).validate()
