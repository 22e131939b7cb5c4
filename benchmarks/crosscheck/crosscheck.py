"""Cross-check marl's losses and value estimators against TorchRL 0.14 on the same batch.

Run it with ``bash benchmarks/crosscheck/run.sh`` (which creates the TorchRL venv on first use
and puts the repository on ``PYTHONPATH``). It prints every place where marl deliberately
differs from TorchRL, then one row per compared quantity (loss term, diagnostic, or the
gradient of a loss term over every parameter), and exits 1 when a row fails:

- ``ok``: agrees within 1e-5 (absolute, relative to TorchRL's magnitude when above 1);
- ``diff:<key>``: differs, explained by the listed difference ``<key>``;
- ``FAIL``: differs without an explanation;
- ``STALE:<key>``: expected to differ but agrees, so the explanation is out of date.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _harness import TOL, Report, install_tensordict_shim  # noqa: E402

CHECKS = ("pg", "sac", "det", "q", "estimators")


def _fmt(x: float) -> str:
    if math.isnan(x):
        return "-"
    return f"{x:.1e}" if x else "0"


def print_report(report: Report, out=sys.stdout) -> None:
    print("Deliberate differences (marl vs TorchRL 0.14):", file=out)
    for d in report.differences.values():
        print(f"  [{d.key}] {d.loss}: {d.what}: marl {d.marl}; TorchRL {d.torchrl}.", file=out)
        print(f"      why: {d.reason}.", file=out)
        print(f"      aligned run: {d.aligned_by}.", file=out)
    print(file=out)
    w_loss = max(len(r.loss) for r in report.rows)
    w_case = max(len(r.case) for r in report.rows)
    w_term = max(len(r.term) for r in report.rows)
    head = f"{'loss':<{w_loss}}  {'case':<{w_case}}  {'term':<{w_term}}  {'max abs':>8}  {'max rel':>8}  status"
    print(head, file=out)
    print("-" * len(head), file=out)
    for r in report.rows:
        line = (
            f"{r.loss:<{w_loss}}  {r.case:<{w_case}}  {r.term:<{w_term}}  "
            f"{_fmt(r.max_abs):>8}  {_fmt(r.max_rel):>8}  {r.status}"
        )
        if r.note and (r.status != "ok" or r.term.startswith("grad")):
            line += f"  ({r.note})"
        print(line, file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument("--only", choices=CHECKS, action="append", help="run some checks only")
    parser.add_argument("--verbose", action="store_true", help="one row per parameter gradient")
    args = parser.parse_args(argv)

    torch_threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    import torch

    torch.set_num_threads(torch_threads)
    torch.set_default_dtype(getattr(torch, args.dtype))
    install_tensordict_shim()
    warnings.filterwarnings("ignore")  # TorchRL's MC-entropy and deprecation notices

    import importlib

    import torchrl

    report = Report()
    start = time.perf_counter()
    for name in args.only or CHECKS:
        importlib.import_module(f"check_{name}").run(report, verbose=args.verbose)
    elapsed = time.perf_counter() - start
    print_report(report)
    failed = report.failed
    explained = sum(r.status.startswith("diff") for r in report.rows)
    print(
        f"\n{len(report.rows)} rows: {len(report.rows) - explained - len(failed)} agree within "
        f"{TOL:g}, {explained} explained differences, {len(failed)} failures "
        f"(torch {torch.__version__}, torchrl {torchrl.__version__}, {args.dtype}, "
        f"{elapsed:.1f} s)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
