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
