"""PettingZooEnv rollout vs a raw PettingZoo parallel loop: env-steps/s.

Both sides play ``simple_spread_v3`` (3 agents, discrete actions, episodes of
``max_cycles=25`` steps, reset when over) with uniform random actions, in the
same process. The raw loop samples each agent's action space and calls
``env.step``; the wrapper runs ``PettingZooEnv.rollout`` (random actions from
the action spec, TensorDict outputs, resets, stacking over time). Pairs of
repetitions run back to back in alternating order; medians are reported.

Target: >= 80% of raw (issue 18; the figures are in docs/basic/tasks/pettingzoo.md).

Usage:
    python benchmarks/bench_pettingzoo_env.py [--reps 7] [--steps 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from marl.envs import PettingZooEnv

try:
    from benchmarks.envs._timing import paired_rates, rate_row, rollout_rate, verdict
except ModuleNotFoundError:  # run as a file: the repo root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.envs._timing import paired_rates, rate_row, rollout_rate, verdict

TARGET = 0.80


def raw_loop(steps: int, seed: int = 0) -> float:
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(max_cycles=25)
    env.reset(seed=seed)
    for i, agent in enumerate(env.possible_agents):
        env.action_space(agent).seed(seed + i)
    start = time.perf_counter()
    for _ in range(steps):
        actions = {a: env.action_space(a).sample() for a in env.agents}
        env.step(actions)
        if not env.agents:
            env.reset()
    return steps / (time.perf_counter() - start)


def wrapper_rollout(steps: int, seed: int = 0) -> float:
    return rollout_rate(PettingZooEnv("simple_spread_v3", seed=seed, max_cycles=25), steps)


def measure(reps: int, steps: int) -> dict[str, float]:
    """Median env-steps/s of the raw loop and the wrapper, and the median paired ratio."""
    return paired_rates(raw_loop, wrapper_rollout, reps, steps, warmup=50)


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: PettingZooEnv.rollout vs raw PettingZoo."""
    steps = 500 if quick else 2000
    m = measure(3 if quick else 7, steps)
    return [rate_row(f"simple_spread_v3 rollout, {steps} steps", "raw pettingzoo parallel loop", m)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, reps {args.reps}")
    m = measure(args.reps, args.steps)
    r, w, ratio = m["raw"], m["wrapper"], m["ratio"]
    print(
        f"simple_spread_v3, {args.steps} steps: raw pettingzoo {r:7.0f} env-steps/s | "
        f"PettingZooEnv.rollout {w:7.0f} env-steps/s | {verdict(ratio, TARGET)}"
    )


if __name__ == "__main__":
    main()
