"""One run on one process against the same run data-parallel over ``--nproc`` gloo ranks.

Issue 31's CPU figure for data-parallel learning: ``marl-run``'s default workload (MAPPO
on VMAS ``navigation``, 60 envs x 100 steps a batch, one torch thread per process) for
``--frames`` frames, run as

- ``one``: ``marl-run`` (one process);
- ``ranks``: ``marl-run --nproc N`` (torchrun, gloo: each rank collects its share of
  every batch and the ranks average their gradients before every optimizer step).

Both evaluate at the start and the end only; the sides alternate over ``--rounds``. It
prints each side's wall time (start-up, rendezvous and evaluations included), frames/s
over it, the final evaluation return (read from the run folder's ``scalars.csv``) and
the machine's 1-minute load before and after.

Usage (from the repository root)::

    python benchmarks/bench_data_parallel.py --frames 60000 --rounds 2
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _command(folder: Path, frames: int, nproc: int) -> list[str]:
    launch = ["--nproc", str(nproc)] if nproc > 1 else []
    return [
        sys.executable,
        "-m",
        "marl.experiment",
        *launch,
        f"experiment.total_frames={frames}",
        f"experiment.evaluation_interval={frames}",
        "experiment.checkpoint_interval=0",
        "experiment.render=false",
        "experiment.progress=false",
        f"hydra.run.dir={folder}",
    ]


def _final_return(folder: Path) -> float:
    with open(folder / "scalars.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["key"] == "eval/episode_reward"]
    return float(max(rows, key=lambda r: int(r["frames"]))["value"])


def run(folder: Path, frames: int, nproc: int) -> tuple[float, float]:
    """Wall seconds and final evaluation return of one run."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    done = subprocess.run(_command(folder, frames, nproc), env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"marl-run --nproc {nproc} failed:\n{done.stderr[-3000:]}")
    return wall, _final_return(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=60_000)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.frames < 6000 or args.nproc < 2 or args.rounds < 1:
        parser.error("expected --frames >= 6000, --nproc >= 2 and --rounds >= 1")
    walls: dict[str, list[float]] = {"one": [], "ranks": []}
    for r in range(args.rounds):
        for side in ("one", "ranks") if r % 2 == 0 else ("ranks", "one"):
            root = Path(tempfile.mkdtemp(prefix="bench_dp_"))
            before = os.getloadavg()[0]
            wall, final = run(root / "run", args.frames, args.nproc if side == "ranks" else 1)
            after = os.getloadavg()[0]
            shutil.rmtree(root, ignore_errors=True)
            walls[side].append(wall)
            name = f"{args.nproc} ranks" if side == "ranks" else "1 process"
            print(
                f"round {r + 1} {name:9s}: {wall:6.1f} s, {args.frames / wall:6.0f} frames/s, "
                f"final return {final:+.3f} (load {before:.1f} -> {after:.1f})",
                flush=True,
            )
    one, ranks = statistics.median(walls["one"]), statistics.median(walls["ranks"])
    print(
        f"\n{args.frames} frames: median wall 1 process {one:.1f} s, {args.nproc} ranks "
        f"{ranks:.1f} s; the ranks' speed: {one / ranks:.2f}x"
    )


if __name__ == "__main__":
    main()
