"""Does a change leave learning unchanged? MAPPO's return curves here and at another commit.

A speed change must not change what is learned. This trains MAPPO on VMAS
``navigation`` with issue 17's workload (3 agents, 60 envs x 100 steps per batch,
10 epochs of 400-step minibatches, 2x256 actor and critic (``--cells``), one torch
thread) for ``--seeds`` seeds in this checkout and in another one (a git worktree
with its own venv), one child process per run, alternating the two checkouts. Each run records its
training return per batch and, every ``--eval-every`` batches, the deterministic
policy's mean return on 20 evaluation episodes (a separate env, seed + 1000).

The two sides are compared per seed: the mean training return over the whole run
(the area under the curve) and the mean of the last quarter, and the last
evaluation. Seeds are the unit of noise: the difference of the two sides' means is
reported next to its standard error (Welch), and called *within noise* when it is
under two standard errors. It writes the curves to ``--json`` and, with the
``report`` extra (matplotlib), a plot of both sides' mean curves with their
per-seed min-max band to ``--plot``.

Usage (from the repository root; the other checkout must have its own ``.venv``)::

    python benchmarks/bench_learning_vs_commit.py --base ../base-2ae8056 --seeds 3 --frames 180000

With ``--async`` instead of ``--base``, the two sides are this checkout's inline
collection and its async collection (``experiment.collector=async``: one worker
process collects the next batch during the update), for its frames/s and for the
learning it buys them with; ``--cells 64`` is ``marl-run``'s default network::

    python benchmarks/bench_learning_vs_commit.py --async --cells 64 --seeds 3 --frames 180000

The child imports only ``Algorithm``, ``Trainer``, ``evaluate_episodes`` and
``make_task``, whose signatures are the same at 2ae8056 and today, so the script runs
against older checkouts unchanged.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORKLOAD = {"epochs": 10, "minibatch_size": 400}
NUM_ENVS, STEPS, EVAL_EPISODES = 60, 100, 20


def child(
    seed: int, frames: int, eval_every: int, collector: str = "inline", cells: int = 256
) -> dict:
    """Train one seed; return its per-batch training returns and periodic evaluations.

    ``collector="async"`` collects in one worker process that gathers the next batch
    while the learner updates (``experiment.collector=async``); its frames/s are the
    point of comparing it with ``"inline"``.
    """
    import torch

    torch.set_num_threads(1)
    from marl.algorithms import Algorithm, Trainer
    from marl.algorithms.trainer import evaluate_episodes
    from marl.envs import make_task

    env = make_task("vmas/navigation", num_envs=NUM_ENVS, seed=seed)
    eval_env = make_task("vmas/navigation", num_envs=EVAL_EPISODES, seed=seed + 1000)
    torch.manual_seed(seed)
    layers = (cells, cells)
    algo = Algorithm("mappo", config={**WORKLOAD, "actor_cells": layers, "critic_cells": layers})
    algo.build(env, seed=seed)
    workers = None
    if collector == "async":
        from marl.collectors import MultiAsyncCollector

        workers = MultiAsyncCollector(
            lambda: make_task("vmas/navigation", num_envs=NUM_ENVS, seed=seed),
            algo.policy,
            num_workers=1,
            frames_per_batch=NUM_ENVS * STEPS,
            seed=seed,
        )
    trainer = Trainer(
        algo,
        env,
        frames_per_batch=NUM_ENVS * STEPS,
        total_frames=frames,
        seed=seed,
        **({"collector": workers} if workers is not None else {}),
    )
    train, evals, eval_s = [], [], 0.0
    start = time.perf_counter()
    for logs in _iterate(trainer):
        train.append([logs["frames"], logs.get("train/episode_reward")])
        if logs["iteration"] % eval_every == 0:
            eval_start = time.perf_counter()
            result = evaluate_episodes(eval_env, algo.policy, episodes=EVAL_EPISODES)
            evals.append([logs["frames"], statistics.fmean(result.returns)])
            eval_s += time.perf_counter() - eval_start
    wall = time.perf_counter() - start
    if workers is not None:
        workers.shutdown()
    # frames/s of training alone: the evaluations are the same work on every side
    return {"train": train, "eval": evals, "wall_s": wall, "fps": frames / (wall - eval_s)}


def _iterate(trainer):
    """Yield each iteration's logs as it finishes, at every commit.

    Older commits return the whole history from ``train()`` at the end, so the
    evaluations would all see the final policy; there, iterations are run one at a
    time through ``total_frames``.
    """
    if hasattr(trainer, "_iterations"):  # train() is an iterator
        yield from trainer.train()
        return
    total, step = trainer.total_frames, trainer.collector.frames_per_batch
    for frames in range(step, total + 1, step):
        trainer.total_frames = frames
        history = trainer.train()
        yield history[-1]


# ---------------------------------------------------------------------------- parent
def _python(root: Path) -> str:
    venv = root / ".venv" / "bin" / "python"
    if not venv.exists():
        raise SystemExit(f"{root} has no .venv/bin/python (give the checkout its own venv)")
    return str(venv)


def _run(root: Path, collector: str, seed: int, args: argparse.Namespace) -> dict:
    cmd = [_python(root), str(Path(__file__).resolve()), "--child", str(seed)]
    cmd += ["--collector", collector, "--cells", str(args.cells)]
    cmd += ["--frames", str(args.frames), "--eval-every", str(args.eval_every)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ""}
    out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"seed {seed} in {root} failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(result.pop("marl")).resolve() != root.resolve():
        raise SystemExit(f"the child for {root} imported another checkout's marl")
    return result


def _welch(a: list[float], b: list[float]) -> tuple[float, float]:
    """Difference of means and its standard error (Welch); needs two seeds a side."""
    diff = statistics.fmean(a) - statistics.fmean(b)
    se = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
    return diff, se


def summarize(runs: dict[str, list[dict]]) -> dict[str, dict]:
    """Per-seed statistics of each side, and the first-minus-second difference of each."""

    def stats(run: dict) -> dict[str, float]:
        rewards = [r for _, r in run["train"] if r is not None]
        quarter = rewards[-max(1, len(rewards) // 4) :]
        return {
            "train_mean": statistics.fmean(rewards),
            "train_last_quarter": statistics.fmean(quarter),
            "final_eval": run["eval"][-1][1] if run["eval"] else float("nan"),
            "fps": run["fps"],
        }

    per_side = {side: [stats(r) for r in rs] for side, rs in runs.items()}
    out: dict[str, dict] = {}
    (a, b), stats_of = list(per_side), per_side
    for key in ("train_mean", "train_last_quarter", "final_eval", "fps"):
        new = [s[key] for s in stats_of[a]]
        base = [s[key] for s in stats_of[b]]
        row = {a: new, b: base}
        if len(new) > 1 and len(base) > 1:
            diff, se = _welch(new, base)
            row.update(diff=diff, se=se, within_noise=abs(diff) < 2 * se)
        out[key] = row
    return out


def plot(runs: dict[str, list[dict]], path: Path, cells: int) -> None:
    """Mean training-return curve of each side, with its per-seed min-max band."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:  # the report extra
        raise ImportError("the plot needs matplotlib: pip install 'marl[report]'") from err
    fig, ax = plt.subplots(figsize=(7, 4))
    for side, color in zip(runs, ("tab:blue", "tab:orange")):
        curves = [[r for _, r in run["train"]] for run in runs[side]]
        frames = [f for f, _ in runs[side][0]["train"]]
        n = min(len(c) for c in curves)
        cols = [[c[i] for c in curves] for i in range(n)]
        ax.plot(frames[:n], [statistics.fmean(c) for c in cols], color=color, label=side)
        lo, hi = [min(c) for c in cols], [max(c) for c in cols]
        ax.fill_between(frames[:n], lo, hi, color=color, alpha=0.2)
    ax.set_xlabel("frames")
    ax.set_ylabel("training return (mean over agents)")
    seeds = len(next(iter(runs.values())))
    ax.set_title(f"MAPPO on navigation ({cells}x{cells}), {seeds} seeds per side")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="the other checkout (a worktree with .venv)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--frames", type=int, default=240_000)
    parser.add_argument("--eval-every", type=int, default=10, help="batches between evals")
    parser.add_argument("--json", type=Path, default=Path("learning_vs_commit.json"))
    parser.add_argument("--plot", type=Path, default=Path("learning_vs_commit.png"))
    parser.add_argument(
        "--async",
        dest="compare_async",
        action="store_true",
        help="compare this checkout's inline collection with async collection instead",
    )
    parser.add_argument(
        "--cells", type=int, default=256, help="hidden units of both layers (marl-run's: 64)"
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--collector", default="inline", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        import marl

        out = child(args.child, args.frames, args.eval_every, args.collector, args.cells)
        out["marl"] = str(Path(marl.__file__).resolve().parents[1])
        print(json.dumps(out))
        return
    if (args.base is not None) == args.compare_async:
        parser.error("give exactly one of --base (another checkout) and --async")
    if args.seeds < 2:
        parser.error("--seeds must be >= 2: seeds are the unit of noise")
    here = Path(__file__).resolve().parents[1]
    if args.compare_async:
        sides = {"async": (here, "async"), "inline": (here, "inline")}
    else:
        sides = {"new": (here, "inline"), "base": (args.base.resolve(), "inline")}
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for seed in range(args.seeds):
        order = list(sides) if seed % 2 == 0 else list(sides)[::-1]
        for side in order:
            load = Path("/proc/loadavg").read_text().split()[:3]
            result = _run(*sides[side], seed, args)
            runs[side].append(result)
            last = result["eval"][-1][1] if result["eval"] else None
            print(
                f"seed {seed} {side}: final eval {last} wall {result['wall_s']:.0f}s "
                f"{result['fps']:.0f} frames/s, load {' '.join(load)}",
                flush=True,
            )
    summary = summarize(runs)
    args.json.write_text(
        json.dumps(
            {"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs, "summary": summary},
            indent=1,
            default=str,
        )
    )
    for key, row in summary.items():
        print(key, json.dumps(row))
    plot(runs, args.plot, args.cells)
    print(f"-> {args.json}, {args.plot}")


if __name__ == "__main__":
    sys.exit(main())
