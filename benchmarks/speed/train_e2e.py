"""End-to-end training speed: MAPPO on VMAS navigation through ``marl.algorithms.Trainer``.

Fixed configuration: 60 envs x 100 steps = 6000 frames per batch, the default
``MAPPOConfig`` (10 epochs of 256-sample minibatches), no evaluation; one
warm-up iteration, then 3 timed iterations. Frames/s counts collection plus
updates. The baseline is collection alone with the same env and policy (a
``Collector`` rollout of the same size), so the ratio is the share of time left
to collection: 1 - ratio is the cost of the updates.
"""

from __future__ import annotations

import statistics
import time

NUM_ENVS, STEPS, ITERATIONS = 60, 100, 3


def run(quick: bool = False) -> list[dict]:
    import torch

    from marl.algorithms import Algorithm, Trainer
    from marl.collectors import Collector
    from marl.envs import make_task

    frames = NUM_ENVS * STEPS
    env = make_task("vmas/navigation", num_envs=NUM_ENVS, seed=0)
    torch.manual_seed(0)
    algo = Algorithm("mappo").build(env, seed=0)
    trainer = Trainer(algo, env, frames_per_batch=frames, total_frames=(ITERATIONS + 1) * frames)
    logs = list(trainer.train())[1:]  # drop the warm-up iteration
    train_fps = sum(log["frames"] - prev["frames"] for prev, log in zip(
        trainer.history[:-1], trainer.history[1:])) / sum(log["time/total"] for log in logs)  # fmt: skip
    update_share = statistics.mean(log["time/update"] / log["time/total"] for log in logs)

    collect_env = make_task("vmas/navigation", num_envs=NUM_ENVS, seed=1)
    collector = Collector(collect_env, algo.policy, frames_per_batch=frames)
    collector.rollout()  # warm-up
    times = []
    for _ in range(ITERATIONS):
        start = time.perf_counter()
        collector.rollout()
        times.append(time.perf_counter() - start)
    collector.shutdown()
    collect_fps = frames * ITERATIONS / sum(times)
    return [
        {
            "name": f"mappo navigation training ({NUM_ENVS}x{STEPS}/batch, {ITERATIONS} it)",
            "value": train_fps,
            "unit": "frames/s",
            "baseline_name": "collection only, same policy",
            "baseline_value": collect_fps,
        },
        {
            "name": "share of an iteration spent in updates",
            "value": update_share,
            "unit": "fraction",
            "baseline_name": None,
            "baseline_value": None,
        },
    ]


if __name__ == "__main__":
    print(run())
