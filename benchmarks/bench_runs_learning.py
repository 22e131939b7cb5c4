"""Do runs trained together (``experiment.runs``) learn as runs trained apart? And how fast?

Trains MAPPO on VMAS ``navigation`` (``marl-run``'s default workload: 60 envs x 100
steps a batch, 64x64 networks, one torch thread) for ``--seeds`` seeds twice, with the
same seeds and frames: once as separate runs, one after another in this process
(:class:`~marl.experiment.Experiment`), once together
(:class:`~marl.experiment.runs.ExperimentRuns`: one env batch of ``seeds x 60``
sub-envs, one stacked update). Each run evaluates its deterministic policy on 32
episodes at the start and the end.

Per seed it reports the last evaluation's return and the mean training return over
the run (the area under the curve). Seeds are the unit of noise: the difference of
the two sides' means is reported with its standard error (Welch, as
``bench_learning_vs_commit.py`` does), and called *within noise* under two standard
errors. It also reports each side's frames/s per seed (a seed's frames over the
wall time that trained it: its own run's, or the runs' together), and the untrained
policy's return (the evaluation at 0 frames) for scale.

Usage (from the repository root)::

    OMP_NUM_THREADS=1 python benchmarks/bench_runs_learning.py --seeds 3 --frames 60000
    # the learning tests' MAPPO settings, which learn navigation within 90k frames
    OMP_NUM_THREADS=1 python benchmarks/bench_runs_learning.py --seeds 3 --frames 90000 \
        --algorithm-config '{"lr": 1e-3, "epochs": 4, "minibatch_size": 1000}'
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import tempfile
import time
from pathlib import Path


def config(folder: Path, frames: int, runs: int = 1) -> dict:
    return {
        "total_frames": frames,
        "evaluation_interval": frames,  # at 0 and at the end
        "checkpoint_interval": 0,
        "render": False,
        "progress": False,
        "log_interval_s": None,
        "save_folder": str(folder),
        "runs": runs,
    }


def per_run(exp) -> dict:
    history = exp.trainer.history
    train = [h["train/episode_reward"] for h in history if "train/episode_reward" in h]
    evals = [h["eval/episode_reward"] for h in history if "eval/episode_reward" in h]
    return {
        "seed": exp.seed,
        "final_eval": evals[-1],
        "mean_train": statistics.fmean(train),
        "eval_0": _scalar(exp.folder, 0, "eval/episode_reward"),
    }


def _scalar(folder: Path, frames: int, key: str) -> float:
    """A row of a run's ``scalars.csv``."""
    with open(folder / "scalars.csv") as f:
        for row in csv.DictReader(f):
            if int(row["frames"]) == frames and row["key"] == key:
                return float(row["value"])
    raise KeyError((frames, key))


def welch(a: list[float], b: list[float]) -> tuple[float, float]:
    """Difference of means and its standard error (Welch); seeds are the samples."""
    diff = statistics.fmean(a) - statistics.fmean(b)
    se = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
    return diff, se


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--frames", type=int, default=60_000)
    parser.add_argument("--task", default="vmas/navigation")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument(
        "--algorithm-config",
        type=json.loads,
        default=None,
        help="MAPPO overrides as JSON, e.g. the learning tests' "
        '\'{"lr": 1e-3, "epochs": 4, "minibatch_size": 1000}\'',
    )
    args = parser.parse_args()

    from marl.experiment import Experiment
    from marl.experiment.runs import ExperimentRuns

    root = Path(tempfile.mkdtemp(prefix="bench_runs_"))
    seeds = list(range(args.seeds))
    separate, separate_s = [], []
    for seed in seeds:
        exp = Experiment(
            args.task,
            "mappo",
            seed=seed,
            config=config(root / f"alone_{seed}", args.frames),
            algorithm_config=args.algorithm_config,
        )
        start = time.perf_counter()
        exp.run()
        separate_s.append(time.perf_counter() - start)
        separate.append(per_run(exp))
        print(f"separate seed {seed}: {separate[-1]} in {separate_s[-1]:.1f} s", flush=True)
    runs = ExperimentRuns.create(
        args.task,
        "mappo",
        seed=0,
        config=config(root / "together", args.frames, args.seeds),
        algorithm_config=args.algorithm_config,
    )
    start = time.perf_counter()
    runs.run()
    together_s = time.perf_counter() - start
    together = [per_run(exp) for exp in runs.experiments]
    print(f"together: {together} in {together_s:.1f} s (stacked update: {runs.hub.stacked})")

    out = {
        "seeds": seeds,
        "frames": args.frames,
        "separate": separate,
        "together": together,
        "fps_per_seed_separate": [args.frames / s for s in separate_s],
        "fps_per_seed_together": args.frames / together_s,
    }
    print(
        f"\n{'seed':>4} {'alone final':>12} {'together final':>15} {'alone mean':>11} "
        f"{'together mean':>14}"
    )
    for a, t in zip(separate, together):
        print(
            f"{a['seed']:>4} {a['final_eval']:>12.3f} {t['final_eval']:>15.3f} "
            f"{a['mean_train']:>11.3f} {t['mean_train']:>14.3f}"
        )
    for metric in ("final_eval", "mean_train"):
        diff, se = welch([t[metric] for t in together], [a[metric] for a in separate])
        verdict = "within noise" if abs(diff) < 2 * se else "NOT within noise"
        out[f"{metric}_difference"] = {"together_minus_separate": diff, "se": se}
        print(f"{metric}: together - separate = {diff:+.3f} +- {se:.3f} (SE): {verdict}")
    untrained = statistics.fmean(r["eval_0"] for r in separate + together)
    print(f"untrained policy's return (evaluation at 0 frames, mean): {untrained:.3f}")
    # per seed, when all seeds must be trained: each seed's frames over the wall time that
    # trained them all (separate runs one after another, or together)
    alone = args.frames / sum(separate_s)
    both = args.frames / together_s
    out["fps_per_seed_all_separate"], out["fps_per_seed_all_together"] = alone, both
    print(
        f"frames/s per seed (all {args.seeds} seeds trained): separate {alone:.0f}, together "
        f"{both:.0f} ({both / alone:.2f}x); one separate run alone: "
        f"{statistics.fmean(out['fps_per_seed_separate']):.0f}"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
