"""MultiAgentMLP speed: one vectorized call vs a Python loop over per-agent MLPs.

8 agents, unshared parameters, a batch of 4096, forward + backward, in the same run.
The baseline is the natural loop: ``torch.stack([mlp_i(x[:, i]) for i ...], -2)``
over 8 separate ``MLP`` modules of the same architecture.

Run: ``python benchmarks/bench_multiagent_mlp.py [--device cpu|cuda] [--repeats N]``.
Prints the median milliseconds per forward+backward and the speed-up. Target: >= 3x.

Both versions do the same matmul FLOPs; vectorization removes per-agent dispatch and
kernel-launch overhead. That overhead dominates on GPU and for small batches; on a
CPU at batch 4096 the work is compute bound, so expect parity there rather than 3x
(MultiAgentMLP cuts large CPU batches into cache-sized row chunks: without them the
all-agent activations fall out of cache and it ran at 0.6x of the loop). A batch-64
row shows the overhead-bound regime on CPU. Run with ``OMP_NUM_THREADS=1`` on a
shared machine: a stalled second intra-op thread makes the figures meaningless.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from marl.modules import MLP, MultiAgentMLP

N_AGENTS, BATCH, N_IN, N_OUT = 8, 4096, 32, 8


def timeit_pair(fn_a, fn_b, repeats: int, device: str) -> tuple[float, float]:
    """Median ms of two functions, timed alternately so both see the same machine load."""
    for _ in range(3):
        fn_a(), fn_b()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for fn, out in ((fn_a, times[0]), (fn_b, times[1])):
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            if device == "cuda":
                torch.cuda.synchronize()
            out.append(time.perf_counter() - t0)
    return statistics.median(times[0]) * 1e3, statistics.median(times[1]) * 1e3


def measure(num_cells: int, device: str, repeats: int, batch: int = BATCH) -> tuple[float, float]:
    """Median ms of one forward+backward: (MultiAgentMLP, loop of MLPs), timed in pairs."""
    torch.manual_seed(0)
    vectorized = MultiAgentMLP(
        N_IN,
        N_OUT,
        N_AGENTS,
        centralized=False,
        share_params=False,
        num_cells=num_cells,
        device=device,
    )
    loop = nn.ModuleList(
        MLP(N_IN, N_OUT, num_cells=num_cells, device=device) for _ in range(N_AGENTS)
    )
    x = torch.randn(batch, N_AGENTS, N_IN, device=device)

    def fwd_bwd_vectorized():
        vectorized(x).square().mean().backward()

    def fwd_bwd_loop():
        out = torch.stack([mlp(x[:, i]) for i, mlp in enumerate(loop)], dim=-2)
        out.square().mean().backward()

    return timeit_pair(fwd_bwd_vectorized, fwd_bwd_loop, repeats, device)


def report(num_cells: int, device: str, repeats: int, batch: int = BATCH) -> None:
    ms_vec, ms_loop = measure(num_cells, device, repeats, batch)
    print(
        f"{device:>4} batch {batch:5d} 2x{num_cells:<4d}: MultiAgentMLP {ms_vec:8.3f} ms | "
        f"loop of {N_AGENTS} MLPs {ms_loop:8.3f} ms | speed-up {ms_loop / ms_vec:5.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    for num_cells in (64, 256):
        report(num_cells, args.device, args.repeats)
    # small batches (e.g. acting in few envs) are overhead-bound: vectorization pays most
    report(64, args.device, args.repeats * 4, batch=64)


def run(quick: bool = False, device: str | None = None) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: MultiAgentMLP vs a loop of MLPs."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    repeats = 5 if quick else 30
    cases = [(64, BATCH, repeats), (256, BATCH, repeats), (64, 64, repeats * 4)]
    if quick:
        cases = [cases[0], cases[2]]
    rows = []
    for num_cells, batch, reps in cases:
        ms_vec, ms_loop = measure(num_cells, device, reps, batch)
        rows.append(
            {
                "name": f"{N_AGENTS} agents, batch {batch}, 2x{num_cells}, fwd+bwd ({device})",
                "value": ms_vec,
                "unit": "ms",
                "baseline_name": f"loop of {N_AGENTS} MLPs",
                "baseline_value": ms_loop,
                "higher_is_better": False,
            }
        )
    return rows


if __name__ == "__main__":
    main()
