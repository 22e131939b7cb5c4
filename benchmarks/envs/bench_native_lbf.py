"""The native LBFEnv vs lbforaging's own loop: env-steps/s on Foraging-8x8-2p-2f-coop-v3.

Three kinds of sides, each with random legal actions, on each torch thread count of
``--threads`` (``torch.set_num_threads`` and ``OMP_NUM_THREADS``):

- the package's own loop (``bench_epymarl_envs.py``'s :func:`raw_loop`): the raw
  ``ForagingEnv`` with each player's action drawn uniformly among its legal ones,
  ``env.step``, a reset when it ends; one env, and 8 copies stepped one after another;
- marl's wrapper (:class:`marl.envs.LBForagingEnv`), one env and a ``SerialEnv`` of 8,
  in marl's step loop (``benchmarks/envs/_timing.py``'s :func:`step_loop_rate`:
  ``rand_action`` under the action mask, ``step_and_maybe_reset``, nothing kept);
- the native env (:class:`marl.envs.native.LBFEnv`) in the same step loop, a batch of
  1, 64 and 1024 envs stepped in tensor operations.

Rates are env-steps/s summed over the envs, medians of ``--reps`` rounds (each round
runs every side once, in an order rotated round to round); the ratios are medians
divided by the package loop's medians with 1 env and with 8 copies, on the same
thread count. Target (issue 30): the native env at 1024 envs >= 30x both. ``main``
prints a markdown table; ``run`` gives ``python -m benchmarks.speed``'s rows (one
thread). Numbers of the older version (vs the wrapper, not the package loop) are in
the git history.

Usage:
    OMP_NUM_THREADS=1 python benchmarks/envs/bench_native_lbf.py [--reps 5] [--steps 400]
        [--threads 1,2] [--device cpu]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

try:
    from benchmarks.envs._timing import Side, markdown_table, native_vs_package, step_loop_rate
    from benchmarks.envs.bench_epymarl_envs import raw_loop
except ModuleNotFoundError:  # run as a file: the repo root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.envs._timing import Side, markdown_table, native_vs_package, step_loop_rate
    from benchmarks.envs.bench_epymarl_envs import raw_loop

ENV_ID = "Foraging-8x8-2p-2f-coop-v3"
FAMILY = "lbforaging"
NATIVE_COUNTS = (1, 64, 1024)
COPIES = (1, 8)  # the package loop's and the wrapper's env counts
PACKAGE = f"{FAMILY} package loop"
TARGET = 30.0


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


def _copies_steps(steps: int) -> int:
    # 8 copies: twice the env-steps of one env a repetition (the SerialEnv is slow)
    return max(steps // 4, 20)


def sides(steps: int, device: str = "cpu", wrappers: bool = True) -> list[Side]:
    """The package loop (1 env, 8 copies; indexes 0 and 1), the wrapper (1, 8; unless
    ``wrappers`` is false), the native env (1, 64, 1024), each ``steps`` steps a
    repetition (8 copies: ``max(steps // 4, 20)``)."""
    out = [
        Side(
            PACKAGE,
            n,
            lambda k, seed, n=n: raw_loop(FAMILY, n, k, seed, env_id=ENV_ID),
            steps if n == 1 else _copies_steps(steps),
        )
        for n in COPIES
    ]
    if wrappers:
        out += [
            Side(
                "marl LBForagingEnv" if n == 1 else "marl SerialEnv of LBForagingEnv",
                n,
                lambda k, seed, n=n: step_loop_rate(wrapper(n, seed), k, n),
                steps if n == 1 else _copies_steps(steps),
            )
            for n in COPIES
        ]
    out += [
        Side(
            f"native LBFEnv ({device})",
            n,
            lambda k, seed, n=n: step_loop_rate(native(n, seed, device), k, n),
            steps,
        )
        for n in NATIVE_COUNTS
    ]
    return out


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed`` (its thread count): each native batch size
    vs the package's own loop with 1 env, and 1024 envs vs 8 copies."""
    steps, reps = (50, 3) if quick else (400, 5)
    records = native_vs_package(sides(steps, wrappers=False), reps, [torch.get_num_threads()], 0, 1)
    base1, base8 = records[0]["rate"], records[1]["rate"]
    rows = []
    for r in records[2:]:
        rows.append(
            {
                "name": f"LBFEnv {ENV_ID}, {r['envs']} env(s), step loop",
                "value": r["rate"],
                "unit": "env-steps/s",
                "baseline_name": f"{PACKAGE} (raw ForagingEnv), 1 env",
                "baseline_value": base1,
                "ratio": r["vs_1"],
            }
        )
    rows.append(
        {
            **rows[-1],
            "name": rows[-1]["name"] + " (vs 8 copies)",
            "baseline_name": f"{PACKAGE} (raw ForagingEnv), 8 copies",
            "baseline_value": base8,
            "ratio": records[-1]["vs_8"],
        }
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400, help="steps per env a repetition")
    parser.add_argument("--threads", default="1,2", help="torch thread counts, e.g. 1,2")
    parser.add_argument("--device", default="cpu", help="device of the native env")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    print(f"torch {torch.__version__}, {ENV_ID}, reps {args.reps}, steps {args.steps}")
    records = native_vs_package(sides(args.steps, args.device), args.reps, threads, 0, 1)
    print(markdown_table(records))
    for r in records:
        if r["side"].startswith("native") and r["envs"] == 1024:
            ok = min(r["vs_1"], r["vs_8"]) >= TARGET
            print(
                f"threads {r['threads']}: native 1024 envs {r['vs_1']:.1f}x / {r['vs_8']:.1f}x "
                f"the package loop (1 env / 8 copies), target {TARGET:.0f}x: "
                f"{'OK' if ok else 'BELOW TARGET'}"
            )


if __name__ == "__main__":
    main()
