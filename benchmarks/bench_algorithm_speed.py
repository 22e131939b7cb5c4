"""Training speed of algorithms side by side: frames/s on one task, interleaved rounds.

``python -m benchmarks.bench_algorithm_speed --algorithms mappo,pqn,pqn_vdn`` (from the
repo root). Each algorithm trains on VMAS ``navigation`` with the configuration of its
learning test (``CASES`` in ``tests/algorithms/test_learning_marl.py``: one owner for
those settings, so the speeds go with the scores quoted there), for ``--frames``
frames after one warm-up batch; the algorithms take turns in each of ``--rounds``
rounds, so a busy spell of a shared machine slows them alike. Printed: each
algorithm's median frames/s (collection and updates, no evaluation) and its ratio
to the first algorithm named.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cases() -> dict:
    path = ROOT / "tests" / "algorithms" / "test_learning_marl.py"
    spec = importlib.util.spec_from_file_location("_learning_cases", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module.CASES


def frames_per_second(name: str, case, frames: int, seed: int) -> float:
    """Frames/s of ``name`` training on navigation (after one untimed batch)."""
    from marl.algorithms import Algorithm, Trainer
    from marl.envs import make_task

    batch = case.frames_per_batch
    env = make_task("vmas/navigation", num_envs=60, seed=seed, **case.env_kwargs)
    algo = Algorithm(name, config=case.config)
    trainer = Trainer(algo, env, frames_per_batch=batch, total_frames=frames + batch, seed=seed)
    runs = iter(trainer.train())
    next(runs)  # warm-up batch (and an off-policy algorithm's learning_starts)
    start = time.perf_counter()
    for _ in runs:
        pass
    elapsed = time.perf_counter() - start
    env.close()
    return frames / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithms", default="mappo,pqn,pqn_vdn")
    parser.add_argument("--frames", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    cases = _cases()
    names = [n.strip() for n in args.algorithms.split(",") if n.strip()]
    unknown = [n for n in names if n not in cases]
    if unknown:
        parser.error(f"no learning-test case for {unknown}; known: {', '.join(cases)}")
    fps: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in names:
            fps[name].append(frames_per_second(name, cases[name], args.frames, seed=r))
            print(f"round {r}: {name} {fps[name][-1]:.0f} frames/s", file=sys.stderr, flush=True)
    first = statistics.median(fps[names[0]])
    print(f"load average before the last round: {os.getloadavg()[0]:.2f}")
    print(f"| algorithm | frames/s (median of {args.rounds}) | vs {names[0]} |")
    print("|---|---|---|")
    for name in names:
        med = statistics.median(fps[name])
        print(f"| `{name}` | {med:.0f} | {med / first:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
