"""Many runs' MAPPO updates: one vmapped update of R stacked runs against R updates.

Each run is MAPPO with its default settings on VMAS ``navigation`` (3 agents, 60 envs x
100 steps = 6,000 frames per batch, 10 epochs of 400-frame minibatches), its own seed and
its own batch. Both sides start from the same parameters and train on the same batches:

- ``alone``: each run's own ``OnPolicyUpdater.update`` in turn (what R runs in one process
  cost today, and, per run, what R separate processes cost on one core each);
- ``stacked``: :class:`marl.algorithms.updates.stacked.StackedOnPolicy`, one
  ``vmap(grad(loss))`` per minibatch over every run.

Run: ``python benchmarks/bench_stacked_update.py [--runs 1,5,10] [--cells 64] [--threads 1]
[--reps 3]``. Prints the median seconds per batch update (all runs together) of each
side, the time per run and the ratio, rounds alternating the sides.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from marl.algorithms import Algorithm
from marl.algorithms.updates.stacked import StackedOnPolicy
from marl.collectors import Collector
from marl.envs.tasks import make_task


def _setup(runs: int, cells: int):
    env = make_task("vmas/navigation", num_envs=60, seed=0)
    config = {"actor_cells": (cells, cells), "critic_cells": (cells, cells)}
    algos = [Algorithm("mappo", config).build(env, seed=r) for r in range(runs)]
    batches = []
    for algo in algos:
        batch = Collector(env, algo.policy, frames_per_batch=6000).rollout()
        batches.append(algo.process_batch(batch))
    (label,) = [label for label, _ in algos[0].group_learners()]
    updaters = [dict(a.group_learners())[label].updater for a in algos]
    return updaters, batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="1,5,10")
    parser.add_argument("--cells", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"MAPPO on vmas/navigation, 2x{args.cells} networks, {args.threads} thread(s)")
    print("| runs | alone (s) | stacked (s) | per run alone | per run stacked | stacked/alone |")
    print("|---|---|---|---|---|---|")
    for runs in [int(r) for r in args.runs.split(",")]:
        updaters, batches = _setup(runs, args.cells)
        stack = StackedOnPolicy(updaters)
        stacked = torch.stack(batches)
        alone_s, stacked_s = [], []
        for _ in range(args.reps):
            start = time.perf_counter()
            for updater, batch in zip(updaters, batches):
                updater.update(batch)
            alone_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            stack.update(stacked)
            stacked_s.append(time.perf_counter() - start)
        a, s = statistics.median(alone_s), statistics.median(stacked_s)
        print(f"| {runs} | {a:.2f} | {s:.2f} | {a / runs:.3f} | {s / runs:.3f} | {s / a:.2f}x |")


if __name__ == "__main__":
    main()
