"""Recurrent models against the MLP where memory matters: ``marl/recall``, on CPU.

``marl/recall`` (2 agents, 3 cues, 2 blank steps between the cue and the query; see
``marl/envs/memory.py``) scores 1 for naming one's cue at the query step: memoryless
policies score 1/3 on average. For each network (``mlp``, ``gru``, ``lstm``) and
algorithm (``ippo``, ``qmix``) and seed, it trains for ``--frames`` frames (64 envs,
1,024 frames a batch, the learning test's hyperparameters), then plays 64 evaluation
episodes with the deterministic policy, the random and the no-op policies
(:func:`marl.testing.compare_with_baselines`).

Run: ``python benchmarks/bench_recurrent.py [--frames N] [--seeds 0 1] [--algorithms ippo qmix]
[--networks mlp gru lstm]``. Prints one Markdown row per run: frames, wall and CPU
seconds, frames/s, the trained score and both baselines.
"""

from __future__ import annotations

import argparse
import time

import torch

from marl.algorithms import Algorithm, Trainer
from marl.envs import InitTracker, TransformedEnv, make_task
from marl.testing import compare_with_baselines

CONFIGS = {
    "ippo": dict(
        lr=3e-3,
        entropy_coef=0.01,
        actor_cells=(32,),
        critic_cells=(32,),
        epochs=4,
        minibatch_size=512,
    ),
    "qmix": dict(
        lr=3e-3,
        cells=(32,),
        batch_size=256,
        learning_starts=500,
        utd_ratio=0.05,
        sequence_length=4,
    ),
}


def make_env(num_envs: int, seed: int, network: str):
    env = make_task("marl/recall", num_envs=num_envs, seed=seed)
    return env if network == "mlp" else TransformedEnv(env, InitTracker())


def run(algorithm: str, network: str, seed: int, frames: int) -> dict:
    torch.manual_seed(seed)
    config = dict(CONFIGS[algorithm], network=network)
    if algorithm == "qmix":
        config["eps_annealing_frames"] = frames // 2
    algo = Algorithm(algorithm, config=config)
    trainer = Trainer(
        algo, make_env(64, seed, network), frames_per_batch=1024, total_frames=frames, seed=seed
    )
    start, cpu = time.perf_counter(), time.process_time()
    for _ in trainer.train():
        pass
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    result = compare_with_baselines(
        lambda: make_env(16, seed + 100, network), algo.eval_policy(), episodes=64
    )
    return dict(
        algorithm=algorithm,
        network=network,
        seed=seed,
        frames=frames,
        wall=wall,
        cpu=cpu,
        fps=frames / wall,
        trained=result.trained,
        random=result.random,
        noop=result.noop,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=20_480)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--algorithms", nargs="+", default=["ippo", "qmix"])
    parser.add_argument("--networks", nargs="+", default=["mlp", "gru", "lstm"])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        "| algorithm | network | seed | frames | wall s | CPU s | frames/s | score | random | no-op |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for algorithm in args.algorithms:
        for network in args.networks:
            for seed in args.seeds:
                r = run(algorithm, network, seed, args.frames)
                print(
                    f"| {r['algorithm']} | {r['network']} | {r['seed']} | {r['frames']} | "
                    f"{r['wall']:.1f} | {r['cpu']:.1f} | {r['fps']:.0f} | {r['trained']:.3f} | "
                    f"{r['random']:.3f} | {r['noop']:.3f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
