"""Many runs' off-policy updates: one vmapped update of R stacked runs against R updates.

Each run is an off-policy algorithm with its default networks (2x256) and rates on VMAS
``navigation`` (3 agents; ``iql`` plays it with discrete actions), its own seed and its
own batches (60 envs x 10 steps = 600 frames a batch). A batch update is ``--steps``
gradient steps of ``batch_size`` 256 sampled transitions (``utd_ratio`` set to give that
many; the defaults' ratio of 1 would be 600 steps). Both sides start from the same
parameters, fill their buffers with the same batches and sample with the same seeds:

- ``alone``: each run's own ``OffPolicyUpdater.update`` in turn (what R runs in one
  process cost today, and, per run, what R separate processes cost on one core each);
- ``stacked``: :class:`marl.algorithms.updates.StackedOffPolicy`, per step one sample of
  each run's buffer and one ``vmap`` of the loss over every run, one backward, one
  :class:`~marl.algorithms.updates.StackedAdam` step and the runs' target updates.

Run: ``python benchmarks/bench_stacked_off_policy.py [--algorithms iql,masac] [--runs 5]
[--steps 20] [--threads 1] [--reps 5] [--cells 64]``. Prints, per algorithm, the median seconds per
batch update (all runs together) of each side, the time per run and the ratio; the
rounds alternate the sides.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch

from marl.algorithms import Algorithm, get_algorithm
from marl.algorithms.updates import StackedOffPolicy
from marl.collectors import Collector
from marl.envs.tasks import make_task

FRAMES = 600


def _env(algorithm: str):
    discrete = algorithm in ("iql", "qmix", "vdn")
    return make_task("vmas/navigation", num_envs=60, seed=0, continuous_actions=not discrete)


def _runs(algorithm: str, runs: int, steps: int, cells: int | None):
    env = _env(algorithm)
    config = {"utd_ratio": steps / FRAMES, "learning_starts": 0}
    if cells is not None:  # every hidden width the config has (cells, actor_cells...)
        fields = dataclasses.fields(get_algorithm(algorithm).make_config(None))
        config.update({f.name: (cells, cells) for f in fields if f.name.endswith("cells")})
    algos = [Algorithm(algorithm, config).build(env, seed=r) for r in range(runs)]
    (label,) = [label for label, _ in algos[0].group_learners()]
    updaters = [dict(a.group_learners())[label].updater for a in algos]
    for r, u in enumerate(updaters):
        u.buffer.sampler.generator = torch.Generator().manual_seed(r)
    return env, algos, updaters


def _batches(env, algos, reps: int):
    """Each run's batches for the warm-up and the rounds, collected once."""
    out = []
    for algo in algos:
        collector = Collector(env, algo.policy, frames_per_batch=FRAMES)
        out.append([algo.process_batch(collector.rollout()) for _ in range(reps + 1)])
    return out


def bench(
    algorithm: str,
    runs: int,
    steps: int,
    reps: int,
    cells: int | None,
    noise: str = "independent",
) -> tuple[float, float]:
    env, algos, alone = _runs(algorithm, runs, steps, cells)
    batches = _batches(env, algos, reps)
    _, _, twins = _runs(algorithm, runs, steps, cells)  # the same seeds: the same start
    gens = [torch.Generator().manual_seed(r) for r in range(runs)]
    stack = StackedOffPolicy(twins, gens, noise=noise)
    alone_s, stacked_s = [], []
    for rep in range(reps + 1):  # round 0 warms both sides up (and fills the buffers)
        start = time.perf_counter()
        for updater, own in zip(alone, batches):
            updater.update(own[rep])
        alone_t = time.perf_counter() - start
        start = time.perf_counter()
        stack.update(torch.stack([own[rep] for own in batches]))
        stacked_t = time.perf_counter() - start
        if rep:
            alone_s.append(alone_t)
            stacked_s.append(stacked_t)
    return statistics.median(alone_s), statistics.median(stacked_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithms", default="iql,masac")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--cells", type=int, default=None, help="hidden width (default: 256)")
    parser.add_argument(
        "--noise", default="independent", help="the stack's noise mode: independent or shared"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"vmas/navigation, {args.runs} runs, {args.steps} steps of 256 per update, "
        f"2x{args.cells or 256} networks, {args.threads} thread(s), noise={args.noise}"
    )
    print(
        "| algorithm | alone (s) | stacked (s) | per run alone | per run stacked | stacked/alone |"
    )
    print("|---|---|---|---|---|---|")
    for algorithm in args.algorithms.split(","):
        a, s = bench(algorithm, args.runs, args.steps, args.reps, args.cells, args.noise)
        n = args.runs
        print(f"| {algorithm} | {a:.3f} | {s:.3f} | {a / n:.4f} | {s / n:.4f} | {s / a:.2f}x |")


if __name__ == "__main__":
    main()
