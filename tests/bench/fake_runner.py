"""A stand-in for ``python -m marl.experiment``: writes what the real runner writes.

Takes the same ``key=value`` overrides. Test-only controls (passed as overrides):
``+fake.fail=ALGO:SEED`` exits 1 for that run; ``+fake.stop_at=N`` stops at N frames
with a checkpoint and ``status: running`` (an interrupted run). Every call appends
its arguments to ``calls.txt`` in the run folder.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from marl.report import RunResults


def _status(folder: Path, status: str, frames: int, total: int) -> None:
    tmp = folder / "status.json.tmp"
    tmp.write_text(json.dumps({"status": status, "frames": frames, "total_frames": total}))
    os.replace(tmp, folder / "status.json")


def main(argv: list[str]) -> int:
    args = dict(a.lstrip("+").split("=", 1) for a in argv)
    folder = Path(args["hydra.run.dir"].strip("'"))
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "calls.txt", "a") as f:
        f.write(" ".join(argv) + "\n")
    algo, seed = args["algorithm"], int(args["seed"])
    env, task = args["task"].split("/")
    total = int(args["experiment.total_frames"])
    start = 0
    if "experiment.restore_file" in args:
        start = int(Path(args["experiment.restore_file"]).read_text())
    _status(folder, "running", start, total)
    if args.get("fake.fail") == f"{algo}:{seed}":
        print("Traceback (most recent call last):\nRuntimeError: fake failure", file=sys.stderr)
        return 1
    stop = min(int(args.get("fake.stop_at", total)), total)
    (folder / "checkpoints").mkdir(exist_ok=True)
    (folder / "checkpoints" / "latest.pt").write_text(str(stop))
    if stop < total:
        print(f"stopped at {stop} frames")
        return 0
    run = RunResults(env, task, algo, seed=seed)
    base = seed + (2.0 if algo == "mappo" else 0.0)
    run.add_evaluation(0, [base - 1, base - 0.5], elapsed_time=0.1)
    run.add_evaluation(total, [base + 1, base + 1.5], elapsed_time=0.2)
    run.write(folder)
    _status(folder, "complete", total, total)
    print(f"done {algo} {task} seed {seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
