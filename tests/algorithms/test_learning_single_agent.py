"""Learning tests: real training on Gymnasium classic control, fixed seeds, asserted thresholds.

Each run evaluates the deterministic policy on a separate env every ``eval_interval``
frames and stops as soon as the threshold is reached ("reaches X within N frames"),
which keeps CI time down. Each prints one summary line (run pytest with ``-s``).
"""

from __future__ import annotations

import time

import pytest
import torch

gymnasium = pytest.importorskip("gymnasium")

from marl.algorithms import Algorithm, Trainer, TrainerCallback  # noqa: E402
from marl.envs.tasks import make_task  # noqa: E402

pytestmark = pytest.mark.slow


class _StopAt(TrainerCallback):
    """Record evaluations; stop the run once the eval return reaches ``threshold``."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.evals: list[tuple[int, float]] = []

    def on_evaluation(self, trainer: Trainer, logs: dict) -> None:
        self.evals.append((trainer.frames, logs["eval/episode_reward"]))
        if logs["eval/episode_reward"] >= self.threshold:
            trainer.stop()


def _learn(
    algorithm: str,
    task: str,
    *,
    threshold: float,
    total_frames: int,
    num_envs: int,
    frames_per_batch: int,
    eval_interval: int,
    config: dict | None = None,
    init_random_frames: int = 0,
    eval_episodes: int = 5,
    seed: int = 0,
) -> tuple[float, int | None]:
    torch.set_num_threads(1)  # small nets: extra intra-op threads only stall on 2 busy cores
    start = time.perf_counter()
    env = make_task(task, num_envs=num_envs, seed=seed)
    eval_env = make_task(task, num_envs=eval_episodes, seed=seed + 1000)
    stop = _StopAt(threshold)
    trainer = Trainer(
        Algorithm(algorithm, config=config),
        env,
        frames_per_batch=frames_per_batch,
        total_frames=total_frames,
        init_random_frames=init_random_frames,
        eval_env=eval_env,
        eval_interval=eval_interval,
        eval_episodes=eval_episodes,
        callbacks=[stop],
        seed=seed,
    )
    list(trainer.train())
    env.close()
    eval_env.close()
    best = max(r for _, r in stop.evals)
    reached = next((f for f, r in stop.evals if r >= threshold), None)
    print(
        f"\n[learning] {algorithm} on {task}: best eval return {best:.1f} "
        f"(threshold {threshold:.1f}), reached at {reached} frames, "
        f"wall {time.perf_counter() - start:.1f}s, evals {[(f, round(r, 1)) for f, r in stop.evals]}"
    )
    return best, reached


def _random_return(task: str, episodes: int = 20, seed: int = 0) -> float:
    from marl.algorithms import evaluate

    env = make_task(task, num_envs=episodes, seed=seed)
    try:
        return evaluate(env, env.rand_action, episodes=episodes)["eval/episode_reward"]
    finally:
        env.close()


def test_ppo_cartpole():
    best, reached = _learn(
        "ppo",
        "gymnasium/cartpole",
        threshold=450,
        total_frames=150_000,
        num_envs=8,
        frames_per_batch=2048,
        eval_interval=10_000,
    )
    assert reached is not None and reached <= 150_000, f"best {best:.1f}"


def test_a2c_cartpole():
    random_return = _random_return("gymnasium/cartpole")
    target = 3 * random_return
    best, reached = _learn(
        "a2c",
        "gymnasium/cartpole",
        threshold=target,
        total_frames=100_000,
        num_envs=16,
        frames_per_batch=256,
        eval_interval=10_000,
    )
    assert reached is not None and reached <= 100_000, (
        f"best {best:.1f}, random {random_return:.1f}"
    )


def test_dqn_cartpole():
    best, reached = _learn(
        "dqn",
        "gymnasium/cartpole",
        threshold=200,
        total_frames=60_000,
        num_envs=4,
        frames_per_batch=256,
        eval_interval=5_000,
        init_random_frames=1_000,
    )
    assert reached is not None and reached <= 60_000, f"best {best:.1f}"


def test_sac_pendulum():
    best, reached = _learn(
        "sac",
        "gymnasium/pendulum",
        threshold=-300,
        total_frames=15_000,
        num_envs=1,
        frames_per_batch=200,
        eval_interval=2_000,
        init_random_frames=1_000,
    )
    assert reached is not None and reached <= 15_000, f"best {best:.1f}"


@pytest.mark.parametrize("algorithm", ["td3", "ddpg"])
def test_deterministic_pg_pendulum(algorithm):
    best, reached = _learn(
        algorithm,
        "gymnasium/pendulum",
        threshold=-400,
        total_frames=20_000,
        num_envs=1,
        frames_per_batch=200,
        eval_interval=2_000,
        init_random_frames=1_000,
    )
    assert reached is not None and reached <= 20_000, f"best {best:.1f}"
