"""VmasEnv rollout vs a raw vmas loop: env-steps/s, same process, same work.

Both sides run ``navigation`` (3 agents, continuous) with uniform random
actions for the same number of steps; the raw loop calls ``vmas``'s
``env.step`` directly (and ``reset_at`` for sub-envs that end), the wrapper
runs ``VmasEnv.rollout`` (random actions from the action spec, TensorDict
outputs, partial resets, stacking over time). Both envs are built once; timed
chunks alternate between the two, and the median of the paired ratios is
reported (the machine may be shared).

Targets: >= 90% of raw at 4096 envs, >= 75% at 64 envs.

Usage:
    python benchmarks/bench_vmas_env.py [--reps 15] [--sizes 4096 64]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from marl.envs import VmasEnv, step_mdp

try:
    from benchmarks.envs._timing import paired_rates, rate_row
except ModuleNotFoundError:  # run as a file: the repo root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.envs._timing import paired_rates, rate_row

TARGETS = {4096: 0.90, 64: 0.75}


def _steps_for(num_envs: int) -> int:
    # steps per timed chunk: about a second at 4096 envs, a fraction at 64
    return max(8, min(200, 32_768 // num_envs))


class RawLoop:
    """A raw vmas loop: random actions, ``env.step``, ``reset_at`` for ended sub-envs."""

    def __init__(self, num_envs: int, seed: int = 0) -> None:
        import vmas

        self.num_envs = num_envs
        self.env = vmas.make_env(
            "navigation", num_envs=num_envs, device="cpu", n_agents=3, seed=seed,
            terminated_truncated=True,
        )  # fmt: skip
        self.env.reset()
        self.n_agents = len(self.env.agents)
        self.gen = torch.Generator().manual_seed(seed)

    def run(self, steps: int) -> float:
        n, env = self.num_envs, self.env
        start = time.perf_counter()
        for _ in range(steps):
            actions = [torch.rand(n, 2, generator=self.gen) * 2 - 1 for _ in range(self.n_agents)]
            _, _, term, trunc, _ = env.step(actions)
            done = term | trunc
            if bool(done.any()):
                for i in done.nonzero().flatten().tolist():
                    env.reset_at(i)
        return n * steps / (time.perf_counter() - start)


class WrapperRollout:
    """``VmasEnv.rollout`` chunks, each continuing from where the last one stopped."""

    def __init__(self, num_envs: int, seed: int = 0) -> None:
        self.num_envs = num_envs
        self.env = VmasEnv("navigation", num_envs=num_envs, n_agents=3, seed=seed)
        self.td = self.env.reset()

    def run(self, steps: int) -> float:
        start = time.perf_counter()
        data = self.env.rollout(
            steps, break_when_any_done=False, auto_reset=False, tensordict=self.td
        )
        elapsed = time.perf_counter() - start
        if data.batch_size != torch.Size([self.num_envs, steps]):
            raise RuntimeError(f"unexpected rollout batch size {data.batch_size}")
        # the next chunk starts from the last step's successor (reset where it ended)
        root = step_mdp(data[:, -1], self.env.reward_keys)
        done = root.get("done")
        if bool(done.any()):
            root = self.env.reset(root.set("_reset", done.clone()))
        self.td = root
        return self.num_envs * steps / elapsed


def measure(n: int, reps: int) -> dict[str, float]:
    """Median env-steps/s of the raw loop and the wrapper, and the median paired ratio."""
    steps = _steps_for(n)
    raw, wrapper = RawLoop(n), WrapperRollout(n)
    # both envs live across the timed chunks: the seed of each repetition goes unused
    m = paired_rates(
        lambda k, seed: raw.run(k), lambda k, seed: wrapper.run(k), reps, steps, warmup=2
    )
    return {"steps": steps, **m}


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: VmasEnv.rollout vs raw vmas."""
    rows = []
    for n in (1024, 64) if quick else (4096, 64):
        m = measure(n, 3 if quick else 15)
        rows.append(rate_row(f"navigation rollout, {n} envs", "raw vmas loop", m))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=15, help="timed pairs per size")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 64])
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, pairs {args.reps}")
    for n in args.sizes:
        m = measure(n, args.reps)
        r, w, ratio, steps = m["raw"], m["wrapper"], m["ratio"], m["steps"]
        target = TARGETS.get(n)
        verdict = "" if target is None else (" OK" if ratio >= target else " BELOW TARGET")
        print(
            f"navigation, {n:5d} envs, {args.reps} pairs of {steps} steps: raw vmas {r:8.0f} "
            f"env-steps/s | VmasEnv.rollout {w:8.0f} env-steps/s | median paired ratio "
            f"{ratio:6.1%}" + (f" (target {target:.0%}){verdict}" if target else "")
        )


if __name__ == "__main__":
    main()
