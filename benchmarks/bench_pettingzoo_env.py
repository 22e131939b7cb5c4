"""PettingZooEnv rollout vs a raw PettingZoo parallel loop: env-steps/s.

Both sides play ``simple_spread_v3`` (3 agents, discrete actions, episodes of
``max_cycles=25`` steps, reset when over) with uniform random actions, in the
same process, on the same number of envs (1, and 8 stepped one after the other).
The raw loop samples each agent's action space and calls ``env.step`` on each
env; the wrapper runs ``rollout`` on a ``PettingZooEnv`` (a ``SerialEnv`` of 8 for
8, which stacks the copies' numpy arrays into one TensorDict a step): random
actions from the action spec, TensorDict outputs, resets, stacking over time.
Pairs of repetitions run back to back in alternating order; medians are reported.

The marl side runs two ways (``benchmarks/envs/_timing.py``): its step loop
(``rand_action`` + ``step_and_maybe_reset``, nothing kept, as the raw loop), and
``rollout``, which also keeps every step and stacks them over time.

Target: >= 80% of raw for the step loop (issue 18; the figures are in docs/basic/tasks/pettingzoo.md).

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
    from benchmarks.envs._timing import Case, print_table, rows
except ModuleNotFoundError:  # run as a file: the repo root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.envs._timing import Case, print_table, rows

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


def _wrapper(num_envs: int, seed: int) -> object:
    if num_envs == 1:
        return PettingZooEnv("simple_spread_v3", seed=seed, max_cycles=25)
    env = SerialEnv(num_envs, PettingZooEnv, dict(task="simple_spread_v3", max_cycles=25))
    env.set_seed(seed)
    return env


def cases() -> list[Case]:
    """The comparison on ``simple_spread_v3``."""
    return [
        Case(
            label="PettingZooEnv simple_spread_v3",
            baseline="raw pettingzoo parallel loop",
            raw=lambda n, steps, seed: raw_loop(steps, seed, n),
            make_env=_wrapper,
            warmup=50,
        )
    ]


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: PettingZooEnv vs raw PettingZoo."""
    return rows(cases(), 500 if quick else 2000, 3 if quick else 7)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--steps", type=int, default=2000, help="steps per env with 1 env")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print_table(cases(), args.steps, args.reps, TARGET)


if __name__ == "__main__":
    main()
