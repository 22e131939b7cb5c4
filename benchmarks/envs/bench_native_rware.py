"""Native (torch) RwareEnv vs the ``rware`` package wrapper: env-steps/s.

Both sides play ``rware-tiny-2ag-v2`` with uniform random actions in marl's step loop
(``rand_action`` + ``step_and_maybe_reset``, nothing kept; ``step_loop_rate`` of
``benchmarks/envs/_timing.py``): the package wrapper
(:class:`marl.envs.libs.rware.RwareEnv`, one env) and the native env
(:class:`marl.envs.native.RwareEnv`) at 1, 64 and 1024 envs in one batch. For each
batch size, repetitions of the two sides alternate (which goes first too), so that a
slow spell of the shared machine hits both alike; medians are printed, and the
ratio of the medians native / wrapper.

Usage:
    OMP_NUM_THREADS=1 python benchmarks/envs/bench_native_rware.py [--reps 5] [--steps 400]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

try:
    from benchmarks.envs._timing import step_loop_rate
except ModuleNotFoundError:  # run as a file: the repo root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.envs._timing import step_loop_rate

ENV_ID = "rware-tiny-2ag-v2"
BATCHES = (1, 64, 1024)


def native_rate(num_envs: int, steps: int, seed: int, device: str = "cpu") -> float:
    """Env-steps/s (summed over envs) of the native env's step loop."""
    from marl.envs.native import RwareEnv

    env = RwareEnv(ENV_ID, num_envs=None if num_envs == 1 else num_envs, seed=seed, device=device)
    return step_loop_rate(env, steps, num_envs)


def wrapper_rate(steps: int, seed: int) -> float:
    """Env-steps/s of the package wrapper (one env) in the same loop."""
    from marl.envs.libs.rware import RwareEnv

    return step_loop_rate(RwareEnv(ENV_ID, seed=seed), steps, 1)


def compare(num_envs: int, steps: int, reps: int, device: str = "cpu") -> dict:
    """Median env-steps/s of both sides; ``steps`` per env for the wrapper and 1 env,
    ``max(steps // 8, 20)`` per env for the larger batches (they count many envs each)."""
    n = steps if num_envs == 1 else max(steps // 8, 20)
    native_rate(num_envs, 10, 0, device)  # warm-up
    wrapper_rate(10, 0)
    nat, wrap = [], []
    for rep in range(reps):
        if rep % 2 == 0:
            nat.append(native_rate(num_envs, n, rep, device))
            wrap.append(wrapper_rate(steps, rep))
        else:
            wrap.append(wrapper_rate(steps, rep))
            nat.append(native_rate(num_envs, n, rep, device))
    return {"native": statistics.median(nat), "wrapper": statistics.median(wrap), "steps": n}


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: each native batch size vs one wrapper env."""
    steps, reps = (50, 3) if quick else (400, 5)
    rows = []
    for n in BATCHES:
        r = compare(n, steps, reps)
        rows.append(
            {
                "name": f"native RwareEnv {ENV_ID}, {n} env(s), step loop",
                "value": r["native"],
                "unit": "env-steps/s",
                "baseline_name": "the rware wrapper, 1 env",
                "baseline_value": r["wrapper"],
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400, help="steps per rep with one env")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, reps {args.reps}")
    for num_envs in BATCHES:
        m = compare(num_envs, args.steps, args.reps, args.device)
        print(
            f"{ENV_ID}, native {num_envs:5d} env(s) x {m['steps']} steps: "
            f"{m['native']:9.0f} env-steps/s | wrapper (1 env) {m['wrapper']:7.0f} env-steps/s"
            f" | native / wrapper {m['native'] / m['wrapper']:6.2f}x"
        )


if __name__ == "__main__":
    main()
