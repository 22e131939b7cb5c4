"""Synthetic benchmark folders for the report tests: one ``results.json`` per run, with known structure."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from marl.report.results import RunResults

ALGOS = {"mappo": 1.0, "ippo": 0.6}
TASKS = {"navigation": 10.0, "balance": 50.0}


def make_suite(
    root: Path,
    algos: dict[str, float] = ALGOS,
    tasks: dict[str, float] = TASKS,
    seeds: int = 3,
    evaluations: int = 4,
    frames: int = 1000,
    env: str = "vmas",
    stop_early: tuple[str, str, int] | None = None,
    skip: tuple[str, str, int] | None = None,
) -> list[Path]:
    """Write runs under ``root/<task>/<algo>/seed_<k>/results.json``.

    The return of an algorithm rises linearly to ``quality * scale`` of its task,
    plus seed noise. ``stop_early`` = (task, algo, seed) writes only half the
    evaluations; ``skip`` leaves that run out.
    """
    rng = np.random.default_rng(0)
    paths = []
    for task, scale in tasks.items():
        for algo, quality in algos.items():
            for seed in range(seeds):
                if skip == (task, algo, seed):
                    continue
                run = RunResults(env, task, algo, seed)
                n = evaluations // 2 if stop_early == (task, algo, seed) else evaluations
                for i in range(n):
                    progress = i / max(evaluations - 1, 1)
                    mean = quality * scale * progress + rng.normal(0, 0.05 * scale)
                    returns = mean + rng.normal(0, 0.01 * scale, size=5)
                    run.add_evaluation(
                        i * frames,
                        returns,
                        group_returns={"agents": returns},
                        elapsed_time=float(i),
                    )
                paths.append(run.write(_mkdir(root / task / algo / f"seed_{seed}")))
    return paths


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
