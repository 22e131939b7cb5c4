"""``python -m benchmarks.speed [--quick] [--only NAME,...] [--json PATH]`` (from the repo root)."""

from __future__ import annotations

import os

# one intra-op thread, set before torch is imported: on a shared machine, a second
# OpenMP thread that waits on a busy core makes the figures meaningless
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import sys
import time
import warnings
from pathlib import Path

from benchmarks.speed.harness import BENCHMARKS, run_benchmarks, table, write_json


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.speed",
        description="Run marl's speed benchmarks, each against a baseline measured in the "
        "same run; print one table and write JSON.",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (about 2 minutes)")
    parser.add_argument(
        "--only", help=f"comma-separated subset of: {', '.join(BENCHMARKS)}", default=None
    )
    parser.add_argument("--json", default="speed.json", help="output file (default speed.json)")
    args = parser.parse_args(argv)
    names = list(BENCHMARKS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in BENCHMARKS]
        if unknown:
            parser.error(f"unknown benchmark(s) {unknown}; known: {', '.join(BENCHMARKS)}")
    import torch

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    rows, errors = run_benchmarks(names, args.quick)
    print(table(rows))
    for name, err in errors.items():
        print(f"FAILED {name}: {err}", file=sys.stderr)
    write_json(Path(args.json), rows, errors, args.quick)
    print(f"# {len(rows)} rows in {time.perf_counter() - start:.0f}s -> {args.json}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
