"""The native (torch) RwareEnv vs rware's own loop: env-steps/s on rware-tiny-2ag-v2.

Three kinds of sides, each with uniform random actions, on each torch thread count of
``--threads`` (``torch.set_num_threads`` and ``OMP_NUM_THREADS``):

- the package's own loop (``bench_epymarl_envs.py``'s :func:`raw_loop`): the raw
  ``Warehouse`` with actions sampled from its ``Tuple`` action space, ``env.step``, a
  reset when it ends; one env, and 8 copies stepped one after another;
- marl's wrapper (:class:`marl.envs.libs.rware.RwareEnv`), one env and a ``SerialEnv``
  of 8, in marl's step loop (``benchmarks/envs/_timing.py``'s :func:`step_loop_rate`:
  ``rand_action``, ``step_and_maybe_reset``, nothing kept);
- the native env (:class:`marl.envs.native.RwareEnv`) in the same step loop, a batch of
  1, 64 and 1024 envs stepped in tensor operations.

Rates are env-steps/s summed over the envs, medians of ``--reps`` rounds (each round
runs every side once, in an order rotated round to round); the ratios are medians
divided by the package loop's medians with 1 env and with 8 copies, on the same
thread count. Target (issue 30): the native env at 1024 envs >= 30x both. ``main``
prints a markdown table; ``run`` gives ``python -m benchmarks.speed``'s rows (one
thread).

Usage:
    OMP_NUM_THREADS=1 python benchmarks/envs/bench_native_rware.py [--reps 5] [--steps 400]
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

ENV_ID = "rware-tiny-2ag-v2"


def native(num_envs: int, seed: int, device: str = "cpu") -> Any:
    """The native env, ``num_envs`` envs in one batch (unbatched for 1, as the wrapper)."""
    from marl.envs.native import RwareEnv

    return RwareEnv(ENV_ID, num_envs=None if num_envs == 1 else num_envs, seed=seed, device=device)


def wrapper(num_envs: int, seed: int) -> Any:
    """The package wrapper, a ``SerialEnv`` of ``num_envs`` past 1."""
    from marl.envs import SerialEnv
    from marl.envs.libs.rware import RwareEnv

    if num_envs == 1:
        return RwareEnv(ENV_ID, seed=seed)
    env = SerialEnv(num_envs, RwareEnv, {"env_id": ENV_ID})
    env.set_seed(seed)
    return env


BENCH = NativeBench(
    family="rware",
    env_id=ENV_ID,
    raw_name="Warehouse",
    wrapper_name="RwareEnv wrapper",
    native_name="RwareEnv",
    native=native,
    wrapper=wrapper,
)


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed`` (see :meth:`NativeBench.speed_rows`)."""
    return BENCH.speed_rows(quick)


if __name__ == "__main__":
    BENCH.main(__doc__.split("\n")[0])
