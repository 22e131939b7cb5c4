"""Every algorithm that takes discrete actions trains and evaluates on ``smax/3m``.

What ``marl-run task=smax/3m algorithm=<name>`` runs, through the Python API of the
experiment runner: two batches, an evaluation at the start and at the end, and the win
rate of every evaluation in ``results.json`` (the env's ``battle_won``, a fraction of
the evaluation's battles).
"""

from __future__ import annotations

import json

import pytest

from marl.algorithms import get_algorithm, list_algorithms
from marl.experiment import Experiment

DISCRETE = [n for n in list_algorithms() if "discrete" in get_algorithm(n).action_spaces]


def test_the_discrete_algorithms_are_the_expected_ones():
    # a new discrete algorithm joins this file's parametrization by itself; this pins
    # that the list is not empty or cut short by a registry change
    assert {"mappo", "ippo", "happo", "mat", "qmix", "vdn", "iql", "pqn_vdn"} <= set(DISCRETE)


@pytest.mark.parametrize("name", DISCRETE)
def test_trains_and_reports_a_win_rate_on_smax_3m(name, tmp_path):
    spec = get_algorithm(name)
    # off-policy learners start their updates within the two batches
    algorithm_config = None if spec.on_policy else {"learning_starts": 100}
    exp = Experiment(
        "smax/3m",
        name,
        seed=0,
        config=dict(
            num_envs=4,
            frames_per_batch=200,
            total_frames=400,
            evaluation_interval=400,
            evaluation_episodes=4,
            render=False,
            progress=False,
            loggers=["csv"],
            save_folder=str(tmp_path),
        ),
        algorithm_config=algorithm_config,
    )
    summary = exp.run()
    assert summary["frames"] == 400
    results = json.loads((tmp_path / "results.json").read_text())
    run = results["smax"]["3m"][name]["seed_0"]
    evaluations = [v for k, v in run.items() if k.startswith("step_")]
    assert [e["step_count"] for e in evaluations] == [0, 400]
    for e in evaluations:
        assert len(e["win_rate"]) == 4  # one per evaluation episode
        assert set(e["win_rate"]) <= {0.0, 1.0}
