"""The native LBFEnv vs the lbforaging wrapper: env-steps/s on Foraging-8x8-2p-2f-coop-v3.

Both sides run marl's step loop (``benchmarks/envs/_timing.py``'s
:func:`step_loop_rate`): random legal actions from the action spec under the action
mask (``rand_action``), then ``step_and_maybe_reset`` (resets of the sub-envs that
ended), nothing kept. The native env (:class:`marl.envs.native.LBFEnv`) steps a
batch of 1, 64 and 1024 sub-envs in tensor operations; the wrapper
(:class:`marl.envs.LBForagingEnv`) steps the package's ``ForagingEnv``, one env and
a ``SerialEnv`` of 64. Rates are env-steps/s summed over the sub-envs, medians of
``--reps`` repetitions run in alternating order.

Usage:
    OMP_NUM_THREADS=1 python benchmarks/envs/bench_native_lbf.py [--reps 5] [--steps 400]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

try:
    from benchmarks.envs._timing import step_loop_rate
except ModuleNotFoundError:  # run as a file: the repo root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.envs._timing import step_loop_rate

ENV_ID = "Foraging-8x8-2p-2f-coop-v3"
NATIVE_COUNTS = (1, 64, 1024)
WRAPPER_COUNTS = (1, 64)


def native(num_envs: int, seed: int, device: str = "cpu") -> Any:
    """The native env, ``num_envs`` sub-envs (unbatched for 1, as the wrapper)."""
    from marl.envs.native import LBFEnv

    return LBFEnv.from_id(ENV_ID, None if num_envs == 1 else num_envs, seed=seed, device=device)


def wrapper(num_envs: int, seed: int) -> Any:
    """The package wrapper, a ``SerialEnv`` of ``num_envs`` past 1."""
    from marl.envs import LBForagingEnv, SerialEnv

    if num_envs == 1:
        return LBForagingEnv(ENV_ID, seed=seed)
    env = SerialEnv(num_envs, LBForagingEnv, {"env_id": ENV_ID})
    env.set_seed(seed)
    return env


def median_rate(make: Callable[[int, int], Any], num_envs: int, steps: int, reps: int) -> float:
    """Median env-steps/s of ``reps`` step loops of ``steps`` steps (after a warm-up)."""
    step_loop_rate(make(num_envs, 0), 10, num_envs)
    return statistics.median(
        step_loop_rate(make(num_envs, rep), steps, num_envs) for rep in range(reps)
    )


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: every native batch size vs one wrapper env."""
    steps, reps = (50, 3) if quick else (400, 5)
    base = median_rate(wrapper, 1, steps, reps)
    rows = []
    for n in NATIVE_COUNTS:
        rate = median_rate(native, n, max(steps // max(n // 64, 1), 20), reps)
        rows.append(
            {
                "name": f"LBFEnv {ENV_ID}, {n} env(s), step loop",
                "value": rate,
                "unit": "env-steps/s",
                "baseline_name": "LBForagingEnv, 1 env",
                "baseline_value": base,
                "ratio": rate / base,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400, help="steps per repetition")
    parser.add_argument("--device", default="cpu", help="device of the native env")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, reps {args.reps}")
    results = {}
    for n in WRAPPER_COUNTS:
        steps = max(args.steps // n, 20) if n > 1 else args.steps
        results[f"wrapper x{n}"] = median_rate(wrapper, n, steps, args.reps)
        print(f"LBForagingEnv {'SerialEnv ' if n > 1 else ''}x{n:<5d} {steps:5d} steps: "
              f"{results[f'wrapper x{n}']:10.0f} env-steps/s")  # fmt: skip
    for n in NATIVE_COUNTS:
        steps = args.steps if n < 1024 else max(args.steps // 4, 20)
        rate = median_rate(lambda k, s: native(k, s, args.device), n, steps, args.reps)
        ratio = rate / results["wrapper x1"]
        print(f"LBFEnv ({args.device}) x{n:<5d}        {steps:5d} steps: {rate:10.0f} "
              f"env-steps/s ({ratio:.1f}x the wrapper's single env)")  # fmt: skip


if __name__ == "__main__":
    main()
