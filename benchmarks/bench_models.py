"""MAPPO with the ``mlp``, ``deepsets`` and ``gnn`` bodies on one VMAS task: score and speed.

Each body trains MAPPO (the settings of its learning test: 60 envs x 100 steps per
batch, 4 epochs of 1000-step minibatches, lr 1e-3) on the same task, agent count and
frame budget, for each seed; then its deterministic policy, the random policy and the
no-op policy play the same 20 evaluation episodes (``marl.testing.compare_with_baselines``).
The table gives per body: frames, wall and CPU seconds of training, frames per second
(training frames / training wall time), the trained score and both baselines (means over
the seeds, each seed's in the JSON).

Run: ``python benchmarks/bench_models.py`` (VMAS navigation with 6 agents, 90,000 frames,
seeds 0 and 1: about 10 minutes on one thread); ``--agents``, ``--frames``, ``--seeds``,
``--task``; ``--quick`` for a smoke run. Timings depend on the machine's load: the
command prints ``uptime``'s load with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from marl.algorithms import Algorithm, Trainer
from marl.envs.tasks import make_task
from marl.testing import compare_with_baselines

NETWORKS = ("mlp", "deepsets", "gnn")
MAPPO = {"lr": 1e-3, "epochs": 4, "minibatch_size": 1000, "use_state": False}


def run(task: str, agents: int, network: str, frames: int, seed: int) -> dict[str, float]:
    """Train one body on one seed; its scores and timings."""
    torch.set_num_threads(1)
    kwargs = {"n_agents": agents}
    env = make_task(task, num_envs=60, seed=seed, **kwargs)
    algo = Algorithm("mappo", {**MAPPO, "network": network})
    start, cpu = time.perf_counter(), time.process_time()
    trainer = Trainer(algo, env, frames_per_batch=6000, total_frames=frames, seed=seed)
    list(trainer.train())
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    comparison = compare_with_baselines(
        lambda: make_task(task, num_envs=20, seed=seed + 1000, **kwargs),
        algo.eval_policy(),
        episodes=20,
    )
    return {
        "seed": seed,
        "frames": frames,
        "wall_s": wall,
        "cpu_s": cpu,
        "frames_per_s": frames / wall,
        "trained": comparison.trained,
        "random": comparison.random,
        "noop": comparison.noop,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="vmas/navigation")
    parser.add_argument("--agents", type=int, default=6)
    parser.add_argument("--frames", type=int, default=90_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--networks", nargs="+", default=list(NETWORKS))
    parser.add_argument("--json", default=None, help="also write every run to this file")
    parser.add_argument("--quick", action="store_true", help="6,000 frames, one seed")
    args = parser.parse_args()
    if args.quick:
        args.frames, args.seeds = 6_000, [0]
    runs = {
        n: [run(args.task, args.agents, n, args.frames, s) for s in args.seeds]
        for n in args.networks
    }
    print(f"\n{args.task}, {args.agents} agents, MAPPO, seeds {args.seeds}; load {os.getloadavg()}")
    print("| body | frames | wall s | CPU s | frames/s | score | random | no-op |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, rs in runs.items():
        mean = {k: statistics.mean(r[k] for r in rs) for k in rs[0] if k != "seed"}
        scores = ", ".join(f"{r['trained']:.3f}" for r in rs)
        print(
            f"| {name} | {mean['frames']:,.0f} | {mean['wall_s']:.0f} | {mean['cpu_s']:.0f} | "
            f"{mean['frames_per_s']:,.0f} | {mean['trained']:.3f} ({scores}) | "
            f"{mean['random']:.3f} | {mean['noop']:.3f} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"task": args.task, "agents": args.agents, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
