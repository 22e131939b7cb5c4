"""Evaluation runs exactly the requested episodes, each sub-env its fixed share."""

import json

import pytest
import torch

from marl.algorithms import evaluate_episodes
from marl.experiment import Experiment
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv


def staircase_env(num_envs):
    """Sub-env ``i`` always ends its episodes after ``i + 1`` steps."""
    env = SingleAgentFakeEnv(num_envs=num_envs, p_terminate=0.0, seed=0)
    env.max_steps = torch.arange(1, num_envs + 1)  # per-env truncation horizon
    return env


@pytest.mark.parametrize(
    "num_envs,episodes,lengths",
    [
        (4, 10, [1, 1, 1, 2, 2, 2, 3, 3, 4, 4]),  # shares 3, 3, 2, 2
        (4, 4, [1, 2, 3, 4]),
        (4, 2, [1, 2]),  # fewer episodes than envs: the first envs' first episodes
        (8, 10, [1, 1, 2, 2, 3, 4, 5, 6, 7, 8]),  # 8 envs x ceil(10/8) was 16 episodes
    ],
)
def test_exactly_the_requested_episodes_in_fixed_shares(num_envs, episodes, lengths):
    """Which episodes count never depends on their length: keeping the first ``episodes``
    to end would take 10 of length 1 or 2 here, and the former ``ceil`` shares ran 12 or 16."""
    env = staircase_env(num_envs)
    result = evaluate_episodes(env, env.rand_action, episodes=episodes)
    assert sorted(result.lengths) == lengths
    assert len(result.returns) == episodes


def test_bad_episode_count():
    with pytest.raises(ValueError, match="episodes must be an integer >= 1, got 0"):
        env = staircase_env(2)
        evaluate_episodes(env, env.rand_action, episodes=0)


def test_experiment_writes_exactly_evaluation_episodes_per_evaluation(tmp_path):
    Experiment(
        lambda num_envs, seed, device: MultiAgentFakeEnv(num_envs=num_envs, seed=seed),
        "mappo",
        task_name="fake/multiagent",
        config=dict(
            num_envs=4,
            frames_per_batch=64,
            total_frames=64,
            evaluation_episodes=10,  # over the 4 evaluation envs of a factory task
            render=False,
            progress=False,
            save_folder=str(tmp_path),
        ),
    ).run()
    run = json.loads((tmp_path / "results.json").read_text())["fake"]["multiagent"]["mappo"]
    steps = [v for k, v in run["seed_0"].items() if k.startswith("step_")]
    assert [len(s["return"]) for s in steps] == [10, 10]
    assert [len(s["walker/return"]) for s in steps] == [10, 10]
