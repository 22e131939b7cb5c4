"""PettingZooEnv rollout vs a raw PettingZoo parallel loop: env-steps/s.

Both sides play ``simple_spread_v3`` (3 agents, discrete actions, episodes of
``max_cycles=25`` steps, reset when over) with uniform random actions, in the
same process. The raw loop samples each agent's action space and calls
``env.step``; the wrapper runs ``PettingZooEnv.rollout`` (random actions from
the action spec, TensorDict outputs, resets, stacking over time). Pairs of
repetitions run back to back in alternating order; medians are reported.

Target: >= 60% of raw.

Usage:
    python benchmarks/bench_pettingzoo_env.py [--reps 7] [--steps 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from marl.envs import PettingZooEnv

TARGET = 0.60


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
    env = PettingZooEnv("simple_spread_v3", seed=seed, max_cycles=25)
    env.reset()
    start = time.perf_counter()
    td = env.rollout(steps, break_when_any_done=False)
    elapsed = time.perf_counter() - start
    if td.batch_size != torch.Size([steps]):
        raise RuntimeError(f"unexpected rollout batch size {td.batch_size}")
    return steps / elapsed


def measure(reps: int, steps: int) -> dict[str, float]:
    """Median env-steps/s of the raw loop and the wrapper, and the median paired ratio."""
    raw_loop(50)  # warm-up
    wrapper_rollout(50)
    raw, wrapped, ratios = [], [], []
    for rep in range(reps):
        if rep % 2 == 0:
            r = raw_loop(steps, seed=rep)
            w = wrapper_rollout(steps, seed=rep)
        else:
            w = wrapper_rollout(steps, seed=rep)
            r = raw_loop(steps, seed=rep)
        raw.append(r)
        wrapped.append(w)
        ratios.append(w / r)
    return {
        "raw": statistics.median(raw),
        "wrapper": statistics.median(wrapped),
        "ratio": statistics.median(ratios),
    }


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: PettingZooEnv.rollout vs raw PettingZoo."""
    steps = 500 if quick else 2000
    m = measure(3 if quick else 7, steps)
    return [
        {
            "name": f"simple_spread_v3 rollout, {steps} steps",
            "value": m["wrapper"],
            "unit": "env-steps/s",
            "baseline_name": "raw pettingzoo parallel loop",
            "baseline_value": m["raw"],
            "ratio": m["ratio"],
        }
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, reps {args.reps}")
    m = measure(args.reps, args.steps)
    r, w, ratio = m["raw"], m["wrapper"], m["ratio"]
    verdict = "OK" if ratio >= TARGET else "BELOW TARGET"
    print(
        f"simple_spread_v3, {args.steps} steps: raw pettingzoo {r:7.0f} env-steps/s | "
        f"PettingZooEnv.rollout {w:7.0f} env-steps/s | median paired ratio {ratio:6.1%} "
        f"(target {TARGET:.0%}) {verdict}"
    )


if __name__ == "__main__":
    main()
