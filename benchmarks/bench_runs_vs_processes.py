"""Seeds trained together in one process against separate processes, two at a time.

Issue 31's CPU figure: ``--seeds`` seeds of ``marl-run``'s default workload (MAPPO on
VMAS ``navigation``, 60 envs x 100 steps a batch, one torch thread per process), run

- ``together``: one ``marl-run experiment.runs=SEEDS`` process (one env batch of
  ``SEEDS x 60`` sub-envs, one stacked update per iteration);
- ``processes``: one ``marl-run`` process per seed, ``--parallel`` (2: one per core of
  this machine) at a time, each starting the next seed as it ends.

Both sides train the same seeds for the same frames with the same settings (only the
evaluation is cut to its start and end, as in ``bench_runs_learning.py``, so that
neither side's time is dominated by evaluations); the sides alternate over ``--rounds``.
The figure is seed-frames per second: all seeds' frames over the side's wall time, so
its ratio is how much faster the seeds are done. ``--model large`` runs 2x256 networks.
The machine's load (1-minute average) is printed before and after each side.

Usage (from the repository root)::

    python benchmarks/bench_runs_vs_processes.py --seeds 5 --frames 60000
    python benchmarks/bench_runs_vs_processes.py --seeds 5 --frames 60000 --model large
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def _marl_run(folder: Path, frames: int, model: str, overrides: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "marl.experiment",
        f"model={model}",
        f"experiment.total_frames={frames}",
        f"experiment.evaluation_interval={frames}",
        "experiment.checkpoint_interval=0",
        "experiment.render=false",
        "experiment.progress=false",
        f"experiment.save_folder={folder}",
        *overrides,
    ]


def _run(cmd: list[str]) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def together(root: Path, seeds: int, frames: int, model: str) -> float:
    """Wall seconds of one ``experiment.runs=seeds`` process."""
    start = time.perf_counter()
    _run(_marl_run(root / "together", frames, model, [f"experiment.runs={seeds}", "seed=0"]))
    return time.perf_counter() - start


def processes(root: Path, seeds: int, frames: int, model: str, parallel: int) -> float:
    """Wall seconds of one process per seed, ``parallel`` at a time."""
    cmds = [_marl_run(root / f"seed_{s}", frames, model, [f"seed={s}"]) for s in range(seeds)]
    start = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(_run, cmds))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--frames", type=int, default=60_000, help="frames per seed")
    parser.add_argument("--model", default="mlp", help="mlp (64x64, the default) or large")
    parser.add_argument("--parallel", type=int, default=2, help="processes at a time")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    if args.seeds < 2 or args.frames < 6000 or args.parallel < 1 or args.rounds < 1:
        parser.error("expected --seeds >= 2, --frames >= 6000, --parallel >= 1, --rounds >= 1")

    total = args.seeds * args.frames
    times: dict[str, list[float]] = {"together": [], "processes": []}
    for r in range(args.rounds):
        sides = ["together", "processes"] if r % 2 == 0 else ["processes", "together"]
        for side in sides:
            root = Path(tempfile.mkdtemp(prefix="bench_rvp_"))
            before = os.getloadavg()[0]
            if side == "together":
                wall = together(root, args.seeds, args.frames, args.model)
            else:
                wall = processes(root, args.seeds, args.frames, args.model, args.parallel)
            after = os.getloadavg()[0]
            shutil.rmtree(root, ignore_errors=True)
            times[side].append(wall)
            print(
                f"round {r + 1} {side:9s}: {wall:7.1f} s, {total / wall:7.0f} seed-frames/s "
                f"(load {before:.1f} -> {after:.1f})",
                flush=True,
            )
    med = {side: statistics.median(t) for side, t in times.items()}
    print(
        f"\n{args.seeds} seeds x {args.frames} frames, model={args.model}: median wall "
        f"together {med['together']:.1f} s, {args.parallel} processes at a time "
        f"{med['processes']:.1f} s; together / processes speed: "
        f"{med['processes'] / med['together']:.2f}x"
    )


if __name__ == "__main__":
    main()
