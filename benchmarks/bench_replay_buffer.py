"""Speed of the prioritized replay buffer (issue 4 workload), with a numpy baseline.

Workload: capacity 1,000,000; items are TensorDicts with ``obs`` float32[32],
``action`` float32[4], ``reward`` float32[1] and ``td_error`` float32[1]. The
buffer is filled with ``extend`` in chunks of 10,000, then iterations of
``sample(256)`` -> ``update_priority(index, new priorities)`` run.

The same run times a pure-numpy binary sum/min tree (vectorized level by
level) on the same operations, so the figures carry their own reference.
Every figure is the median of many timed calls; each call gets fresh random
inputs, so caches are not artificially warm.

Run:  python benchmarks/bench_replay_buffer.py  [--capacity N] [--iters N]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
from tensordict import TensorDict

from marl.data import MinTree, PrioritizedSampler, ReplayBuffer, SumTree, TensorStorage

BATCH = 256
CHUNK = 10_000
ALPHA, BETA = 0.7, 0.5

# TorchRL 0.14 TensorDictPrioritizedReplayBuffer, same workload, same machine (issue 4).
TORCHRL = {
    "sample + update_priority iteration": "~920 us",
    "sample(256) alone": "~620 us",
    "update_priority(256) alone": "",
    "scan_lower_bound(256), raw tree": "~68 us",
    "sum-tree update(256), raw tree": "~43 us",
    "sum + min update(256), raw trees": "",
    "fill (extend, 10k chunks)": "~1.4M items/s",
    "refill (extend into allocated buffer)": "",
}
TARGETS = {
    "sample + update_priority iteration": "<= 300 us",
    "scan_lower_bound(256), raw tree": "<= 35 us",
    "sum + min update(256), raw trees": "<= 50 us",
    "fill (extend, 10k chunks)": ">= 2M items/s",
}


class NumpyTree:
    """Binary segment tree in pure numpy: leaves at ``[size, 2 size)``, root at 1."""

    def __init__(self, capacity: int, op: str) -> None:
        self.size = 1 << (capacity - 1).bit_length()
        self.op = op
        self.identity = 0.0 if op == "sum" else np.inf
        self.tree = np.full(2 * self.size, self.identity, dtype=np.float32)

    def update(self, idx: np.ndarray, values: np.ndarray) -> None:
        i = idx + self.size
        self.tree[i] = values
        i = np.unique(i >> 1)
        while i[0] >= 1:
            left, right = self.tree[2 * i], self.tree[2 * i + 1]
            self.tree[i] = left + right if self.op == "sum" else np.minimum(left, right)
            if i[0] == 1:
                break
            i = np.unique(i >> 1)

    def total(self) -> float:
        return float(self.tree[1])

    def get(self, idx: np.ndarray) -> np.ndarray:
        return self.tree[idx + self.size]

    def scan_lower_bound(self, mass: np.ndarray) -> np.ndarray:
        mass = mass.copy()
        i = np.ones(len(mass), dtype=np.int64)
        while i[0] < self.size:
            left = self.tree[2 * i]
            right = mass >= left
            mass -= np.where(right, left, 0)
            i = 2 * i + right
        return i - self.size


def median_us(fn: Callable[[int], object], reps: int, warmup: int = 20) -> float:
    for k in range(warmup):
        fn(k)
    times = []
    for k in range(reps):
        t0 = time.perf_counter()
        fn(k)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def make_chunks(count: int, seed: int = 0) -> list[TensorDict]:
    g = torch.Generator().manual_seed(seed)
    return [
        TensorDict(
            {
                "obs": torch.randn(CHUNK, 32, generator=g),
                "action": torch.randn(CHUNK, 4, generator=g),
                "reward": torch.randn(CHUNK, 1, generator=g),
                "td_error": torch.rand(CHUNK, 1, generator=g),
            },
            [CHUNK],
        )
        for _ in range(count)
    ]


def fill(capacity: int, chunks: list[TensorDict]) -> tuple[ReplayBuffer, float]:
    rb = ReplayBuffer(
        TensorStorage(capacity), sampler=PrioritizedSampler(capacity, alpha=ALPHA, beta=BETA)
    )
    t0 = time.perf_counter()
    for k in range(capacity // CHUNK):
        rb.extend(chunks[k % len(chunks)])
    return rb, capacity / (time.perf_counter() - t0)


def touch(rb: ReplayBuffer) -> None:
    """Reads every stored byte, so that timed sections do not pay for page faults.

    On VMs with lazily backed or reclaimed guest memory, the first touch of a
    page after a while costs far more than the work being measured.
    """
    for leaf in rb.storage.storage.values(True, True):
        leaf.sum()


def one_round(
    rb_holder: list, cap: int, iters: int, chunks: list[TensorDict], rng: np.random.Generator
) -> tuple[dict[str, float], dict[str, float]]:
    """Times every operation once (a median over many calls each)."""
    ours: dict[str, float] = {}
    base: dict[str, float] = {}
    rb_holder.clear()  # free the previous round's buffer before allocating a new one
    rb, ours["fill (extend, 10k chunks)"] = fill(cap, chunks)
    rb_holder.append(rb)
    # Refill the same buffer: its memory is already mapped, so this is the
    # steady-state write speed without the OS's first-touch page faults.
    rb.empty()
    touch(rb)
    t0 = time.perf_counter()
    for k in range(cap // CHUNK):
        rb.extend(chunks[k % len(chunks)])
    ours["refill (extend into allocated buffer)"] = cap / (time.perf_counter() - t0)
    touch(rb)

    prios = [torch.rand(BATCH) for _ in range(64)]

    def iteration(k: int) -> None:
        batch = rb.sample(BATCH)
        rb.update_priority(batch["index"], prios[k % 64])

    ours["sample + update_priority iteration"] = median_us(iteration, iters)
    ours["sample(256) alone"] = median_us(lambda k: rb.sample(BATCH), iters)
    idxs = [torch.randint(cap, (BATCH,)) for _ in range(64)]
    ours["update_priority(256) alone"] = median_us(
        lambda k: rb.update_priority(idxs[k % 64], prios[k % 64]), iters
    )

    # Raw trees: ours (C++, 16-ary) vs numpy (binary), identical contents.
    leaves = rng.random(cap).astype(np.float32)
    s, m = SumTree(cap), MinTree(cap)
    ns, nm = NumpyTree(cap, "sum"), NumpyTree(cap, "min")
    for tree in (s, m, ns, nm):
        tree.update(np.arange(cap), leaves)
    masses = [(rng.random(BATCH) * s.total()).astype(np.float32) for _ in range(64)]
    uidx = [rng.integers(0, cap, BATCH) for _ in range(64)]
    uval = [rng.random(BATCH).astype(np.float32) for _ in range(64)]

    def both(k: int, a: object = s, b: object = m) -> None:
        a.update(uidx[k % 64], uval[k % 64])
        b.update(uidx[k % 64], uval[k % 64])

    reps = max(iters, 2000)
    for impl, out, n in ((s, ours, reps), (ns, base, reps // 8)):
        out["scan_lower_bound(256), raw tree"] = median_us(
            lambda k, t=impl: t.scan_lower_bound(masses[k % 64]), n
        )
        out["sum-tree update(256), raw tree"] = median_us(
            lambda k, t=impl: t.update(uidx[k % 64], uval[k % 64]), n
        )
    ours["sum + min update(256), raw trees"] = median_us(both, reps)
    base["sum + min update(256), raw trees"] = median_us(lambda k: both(k, ns, nm), reps // 8)

    # A whole PER iteration on the numpy trees, with the same storage gather.
    storage = rb.storage

    def np_iteration(k: int) -> None:
        mass = np.random.random(BATCH).astype(np.float32) * ns.total()
        index = ns.scan_lower_bound(mass)
        weight = (ns.get(index) / nm.total()) ** -BETA
        batch = storage.get(torch.from_numpy(index))
        batch["index"] = torch.from_numpy(index)
        batch["priority_weight"] = torch.from_numpy(weight)
        value = (prios[k % 64].numpy() + 1e-8) ** ALPHA
        ns.update(index, value)
        nm.update(index, value)

    touch(rb)
    base["sample + update_priority iteration"] = median_us(np_iteration, reps // 8)
    return ours, base


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: marl's buffer and C++ trees vs numpy trees.

    ``quick`` uses a 100k capacity and one round (the full run: 1M, best of 3 rounds).
    """
    cap, iters, n_rounds = (100_000, 300, 1) if quick else (1_000_000, 3000, 3)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    chunks = make_chunks(2 if quick else 10)
    holder: list = []
    rounds = [one_round(holder, cap, iters, chunks, rng) for _ in range(n_rounds)]
    holder.clear()
    rows = []
    for key in TORCHRL:
        fill_like = "fill" in key
        pick = max if fill_like else min
        ours = pick(r[0][key] for r in rounds)
        base = [r[1][key] for r in rounds if key in r[1]]
        rows.append(
            {
                "name": f"{key} (capacity {cap:,})",
                "value": ours,
                "unit": "items/s" if fill_like else "us",
                "baseline_name": "numpy binary tree" if base else None,
                "baseline_value": pick(base) if base else None,
                "higher_is_better": fill_like,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--iters", type=int, default=3000)
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="repeat every measurement this many times and keep the best median: "
        "on a shared VM, other tenants and host memory pressure come and go",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch intra-op threads (0: torch's default). On a shared 2-core machine, "
        "1 avoids OpenMP stalls in large copies when other processes hold a core.",
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cap, iters = args.capacity, args.iters
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    print(
        f"# marl replay buffer benchmark: capacity={cap:,}, batch={BATCH}, iters={iters}, "
        f"rounds={args.rounds}"
    )
    print(
        f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} torch threads, load average {os.getloadavg()[0]:.1f}"
    )
    chunks = make_chunks(10)
    holder: list = []
    rounds = [one_round(holder, cap, iters, chunks, rng) for _ in range(args.rounds)]

    def best(side: int, key: str) -> float | None:
        values = [r[side][key] for r in rounds if key in r[side]]
        if not values:
            return None
        return max(values) if "fill" in key else min(values)

    def fmt(v: float | None, key: str) -> str:
        if v is None:
            return "-"
        return f"{v / 1e6:.2f}M items/s" if "fill" in key else f"{v:.1f} us"

    rows = [
        (k, fmt(best(0, k), k), fmt(best(1, k), k), TORCHRL[k] or "-", TARGETS.get(k, "-"))
        for k in TORCHRL
    ]
    head = ("operation (best median)", "marl (C++ trees)", "numpy tree", "TorchRL 0.14", "target")
    widths = [max(len(r[i]) for r in [*rows, head]) for i in range(5)]
    print(" | ".join(h.ljust(w) for h, w in zip(head, widths)))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths)))
    print("# every round's marl medians:")
    for key in TORCHRL:
        print(f"#   {key}: " + ", ".join(fmt(r[0][key], key) for r in rounds))


if __name__ == "__main__":
    main()
