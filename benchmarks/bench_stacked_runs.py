"""Many MAPPO runs in one process: one env batch and one stacked update, against the runs
one after another.

Each run is the default ``marl-run`` workload: MAPPO with its defaults on VMAS
``navigation``, 60 envs x 100 steps = 6,000 frames per batch. Per iteration (collect,
process, update):

- ``alone``: each run with its own 60-env VMAS env, collector and updater, in turn (R
  runs in one process today; per run, what one process on its own core costs);
- ``stacked``: one VMAS env of ``R x 60`` sub-envs, collected once with
  :class:`marl.algorithms.runs.RunsPolicy` (each run's policy on its 60 sub-envs), split
  with :func:`marl.algorithms.runs.split_runs`, and one
  :class:`marl.algorithms.updates.StackedOnPolicy` update of every run.

Run: ``python benchmarks/bench_stacked_runs.py [--runs 5] [--cells 64] [--iters 3]
[--threads 1]``. Prints the median seconds per iteration of each side, split into collection
and update, and frames/s per run (seed); rounds alternate the sides.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from marl.algorithms import Algorithm
from marl.algorithms.runs import RunsPolicy, split_runs
from marl.algorithms.updates import StackedOnPolicy
from marl.collectors import Collector
from marl.envs.tasks import make_task

FRAMES = 6000
ENVS = 60


def _algos(runs: int, cells: int, env) -> list[Algorithm]:
    config = {"actor_cells": (cells, cells), "critic_cells": (cells, cells)}
    return [Algorithm("mappo", config).build(env, seed=r) for r in range(runs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cells", type=int, default=64)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    R = args.runs

    envs = [make_task("vmas/navigation", num_envs=ENVS, seed=r) for r in range(R)]
    alone = _algos(R, args.cells, envs[0])
    collectors = [Collector(e, a.policy, frames_per_batch=FRAMES) for e, a in zip(envs, alone)]
    shared_env = make_task("vmas/navigation", num_envs=R * ENVS, seed=0)
    stacked = _algos(R, args.cells, shared_env)
    shared = Collector(
        shared_env, RunsPolicy([a.policy for a in stacked]), frames_per_batch=R * FRAMES
    )
    (label,) = [label for label, _ in stacked[0].group_learners()]
    stack = StackedOnPolicy([a.learners[label].updater for a in stacked])

    times: dict[str, list[tuple[float, float]]] = {"alone": [], "stacked": []}
    for _ in range(args.iters):
        collect = update = 0.0
        for algo, collector in zip(alone, collectors):
            t0 = time.perf_counter()
            batch = collector.rollout()
            t1 = time.perf_counter()
            algo.update(algo.process_batch(batch))
            update += time.perf_counter() - t1
            collect += t1 - t0
        times["alone"].append((collect, update))
        t0 = time.perf_counter()
        batches = split_runs(shared.rollout(), R)
        t1 = time.perf_counter()
        stack.update(stack.process(batches))
        times["stacked"].append((t1 - t0, time.perf_counter() - t1))

    print(
        f"{R} MAPPO runs on vmas/navigation, 2x{args.cells}, {args.threads} thread(s), "
        f"{FRAMES} frames per run and iteration, median of {args.iters} iterations"
    )
    print("| side | collect (s) | update (s) | total (s) | frames/s per run |")
    print("|---|---|---|---|---|")
    for side, rows in times.items():
        c = statistics.median(r[0] for r in rows)
        u = statistics.median(r[1] for r in rows)
        total = statistics.median(r[0] + r[1] for r in rows)
        print(f"| {side} | {c:.2f} | {u:.2f} | {total:.2f} | {FRAMES / total:,.0f} |")


if __name__ == "__main__":
    main()
