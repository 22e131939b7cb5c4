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

import sys
from pathlib import Path
from typing import Any

try:
    from benchmarks.envs._timing import NativeBench
except ModuleNotFoundError:  # run as a file: the repo root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.envs._timing import NativeBench

ENV_ID = "Foraging-8x8-2p-2f-coop-v3"


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


BENCH = NativeBench(
    family="lbforaging",
    env_id=ENV_ID,
    raw_name="ForagingEnv",
    wrapper_name="LBForagingEnv",
    native_name="LBFEnv",
    native=native,
    wrapper=wrapper,
)


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed`` (see :meth:`NativeBench.speed_rows`)."""
    return BENCH.speed_rows(quick)


if __name__ == "__main__":
    BENCH.main(__doc__.split("\n")[0])
