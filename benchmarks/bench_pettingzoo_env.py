"""PettingZooEnv rollout vs a raw PettingZoo parallel loop: env-steps/s.

Both sides play ``simple_spread_v3`` (3 agents, discrete actions, episodes of
``max_cycles=25`` steps, reset when over) with uniform random actions, in the
same process, on the same number of envs (1, and 8 stepped one after the other).
The raw loop samples each agent's action space and calls ``env.step`` on each
env; the wrapper runs ``rollout`` on a ``PettingZooEnv`` (a ``SerialEnv`` of 8 for
8, which stacks the copies' numpy arrays into one TensorDict a step): random
actions from the action spec, TensorDict outputs, resets, stacking over time.
Pairs of repetitions run back to back in alternating order; medians are reported.

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

from marl.envs import PettingZooEnv, SerialEnv

try:
    from benchmarks.envs._timing import paired_rates, rate_row, rollout_rate, verdict
except ModuleNotFoundError:  # run as a file: the repo root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.envs._timing import paired_rates, rate_row, rollout_rate, verdict

TARGET = 0.80


def raw_loop(steps: int, seed: int = 0, num_envs: int = 1) -> float:
    """Env-steps/s (summed over envs) of PettingZoo's own parallel loop."""
    from mpe2 import simple_spread_v3

    envs = [simple_spread_v3.parallel_env(max_cycles=25) for _ in range(num_envs)]
    for k, env in enumerate(envs):
        env.reset(seed=seed + k)
        for i, agent in enumerate(env.possible_agents):
            env.action_space(agent).seed(seed + 100 * k + i)
    start = time.perf_counter()
    for _ in range(steps):
        for env in envs:
            actions = {a: env.action_space(a).sample() for a in env.agents}
            env.step(actions)
            if not env.agents:
                env.reset()
    return steps * num_envs / (time.perf_counter() - start)


def wrapper_rollout(steps: int, seed: int = 0, num_envs: int = 1) -> float:
    """Env-steps/s (summed over envs) of the wrapper's ``rollout``."""
    if num_envs == 1:
        env = PettingZooEnv("simple_spread_v3", seed=seed, max_cycles=25)
    else:
        env = SerialEnv(num_envs, PettingZooEnv, dict(task="simple_spread_v3", max_cycles=25))
        env.set_seed(seed)
    return rollout_rate(env, steps, num_envs)


def measure(reps: int, steps: int, num_envs: int = 1) -> dict[str, float]:
    """Median env-steps/s of the raw loop and the wrapper, and the median paired ratio."""
    return paired_rates(
        lambda n, seed: raw_loop(n, seed, num_envs),
        lambda n, seed: wrapper_rollout(n, seed, num_envs),
        reps,
        steps,
        warmup=50,
    )


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: PettingZooEnv.rollout vs raw PettingZoo."""
    total = 500 if quick else 2000
    rows = []
    for num_envs in (1, 8):
        steps = total // num_envs
        m = measure(3 if quick else 7, steps, num_envs)
        name = f"simple_spread_v3 rollout, {num_envs} env(s) x {steps} steps"
        rows.append(rate_row(name, "raw pettingzoo parallel loop", m))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--steps", type=int, default=2000, help="steps per env with 1 env")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, reps {args.reps}")
    for num_envs in (1, 8):
        steps = max(args.steps // num_envs, 1)
        m = measure(args.reps, steps, num_envs)
        r, w, ratio = m["raw"], m["wrapper"], m["ratio"]
        print(
            f"simple_spread_v3, {num_envs} env(s) x {steps} steps: raw pettingzoo {r:7.0f} "
            f"env-steps/s | wrapper rollout {w:7.0f} env-steps/s | {verdict(ratio, TARGET)}"
        )


if __name__ == "__main__":
    main()
