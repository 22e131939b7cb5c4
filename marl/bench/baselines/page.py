"""The docs page of the random and no-op baselines of every catalogue task.

``python -m marl.bench.baselines --out docs/results/baselines.md`` evaluates both
policies on every task of :func:`marl.envs.list_tasks` whose package is
installed, with the settings of a run with ``experiment.evaluation_episodes=20``
and ``seed=0`` (the evaluation env: seed 1, 20 envs for VMAS, 8 otherwise), and
writes a markdown page with the command, the versions and one row per task.
Tasks that fail to build or step are listed with their error.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from marl.bench.baselines import EvalSettings, Scores, evaluate_baselines
from marl.report.tables import table

__all__ = ["TaskBaselines", "catalogue_baselines", "main", "render_page"]

_PACKAGES = ("torch", "tensordict", "vmas", "pettingzoo", "mpe2", "gymnasium", "mujoco", "numpy")
_HEADER = ["task", "random", "no-op", "episodes", "envs", "per group (random / no-op)", "time (s)"]
_FAMILY_PACKAGE = {"vmas": "vmas", "pettingzoo": "pettingzoo", "gymnasium": "gymnasium"}


@dataclass
class TaskBaselines:
    """The baselines of one task (or why there are none).

    Attributes:
        settings: the evaluation settings used.
        scores: policy -> metric -> episode values (empty on error).
        wall_s: seconds both evaluations took.
        error: the exception, when the task could not be evaluated.
        skipped: why the task was not tried (its package is not installed).
    """

    settings: EvalSettings
    scores: Scores = field(default_factory=dict)
    wall_s: float = 0.0
    error: str = ""
    skipped: str = ""


def _installed(name: str) -> bool:
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def catalogue_baselines(
    tasks: Sequence[str] | None = None, episodes: int = 20, seed: int = 0, log=None
) -> list[TaskBaselines]:
    """Evaluate the random and the no-op policy on catalogue tasks.

    Args:
        tasks: task names (default: every catalogue task).
        episodes: evaluation episodes (the runs' ``evaluation_episodes``).
        seed: the run seed the settings copy (the evaluation env gets ``seed + 1``).
        log: called with a progress line per task (e.g. ``print``).

    Returns:
        One :class:`TaskBaselines` per task, in order.
    """
    import torch

    from marl.envs import list_tasks

    torch.set_num_threads(1)  # small envs: more threads only add contention
    out = []
    for task in tasks or list_tasks():
        settings = EvalSettings.make(task, seed, episodes)
        package = _FAMILY_PACKAGE.get(task.split("/")[0])
        if package and not _installed(package):
            out.append(TaskBaselines(settings, skipped=f"{package} is not installed"))
            continue
        start = time.perf_counter()
        try:
            result = TaskBaselines(settings, evaluate_baselines(settings))
        except Exception as err:  # listed on the page, not hidden
            result = TaskBaselines(settings, error=f"{type(err).__name__}: {err}")
        result.wall_s = time.perf_counter() - start
        if log:
            log(f"{task}: {result.error or 'ok'} ({result.wall_s:.1f}s)")
        out.append(result)
    return out


def _stats(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    return mean, (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5


def _cell(values: list[float]) -> str:
    mean, std = _stats(values)
    return f"{mean:.4g} ± {std:.3g}"


def _groups(scores: Scores) -> str:
    metrics = sorted(m for m in scores.get("random", {}) if m != "return")
    if len(metrics) < 2:  # one group: its return is the team return
        return ""
    parts = []
    for m in metrics:
        r, n = _stats(scores["random"][m])[0], _stats(scores["noop"][m])[0]
        parts.append(f"{m.removesuffix('/return')}: {r:.3g} / {n:.3g}")
    return "; ".join(parts)


def _versions() -> str:
    found = []
    for name in _PACKAGES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def _commit() -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "marl"],
                               capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "(not a git checkout)"
    return f"`{sha}`" + (" with uncommitted changes under marl/" if dirty else "")


def render_page(results: Sequence[TaskBaselines], command: str) -> str:
    """The markdown page of :func:`catalogue_baselines` results."""
    from marl import __version__

    first = results[0].settings if results else EvalSettings.make("vmas/navigation", 0, 20)
    rows, failed, skipped, constant = [], [], [], []
    for r in results:
        s = r.settings
        if r.skipped:
            skipped.append(f"- `{s.task}`: {r.skipped}")
            continue
        if r.error:
            failed.append(f"- `{s.task}`: `{r.error}`")
            continue
        n = len(r.scores["random"]["return"])
        if all(v == 0 for p in ("random", "noop") for v in r.scores[p]["return"]):
            constant.append(f"`{s.task}`")
        rows.append([s.task, _cell(r.scores["random"]["return"]), _cell(r.scores["noop"]["return"]),
                     n, s.num_envs, _groups(r.scores), f"{r.wall_s:.1f}"])  # fmt: skip
    lines = [
        "# Baseline scores per task",
        "",
        "What a uniformly random policy and the no-op policy score on every catalogue task: "
        "the two figures a trained policy has to beat. Learning tests and benchmark reports "
        "compare against them (`marl.testing.compare_with_baselines`, and the `random` and "
        "`no-op` columns of `marl-report`).",
        "",
        "- **random**: uniformly random actions (legal ones where the task has action masks).",
        "- **no-op**: the most passive action: zero for continuous actions, index 0 (VMAS and "
        "MPE's no-op) for discrete ones, or the first legal index under an action mask.",
        "",
        f"Each policy runs on its own evaluation env built as a run with "
        f"`experiment.evaluation_episodes={first.episodes}` and `seed={first.seed}` builds "
        f"it: seed {first.eval_seed}, one env per episode for VMAS and 8 envs otherwise, every "
        "env running its fixed share of exactly the episodes asked (20 over 8 envs: 3 on four "
        "envs, 2 on the others). "
        "Returns are summed over an episode and averaged over a group's agents, then over "
        "groups (the `return` of `results.json`); on the zero-sum games whose task file "
        "declares `evaluation: versus_random`, each policy plays against a random player "
        "from each seat equally often and its return is its own side's, as in their runs. "
        "Mean ± standard deviation over the episodes. "
        "The last columns give per group `random / no-op` where a task has several groups, "
        "and the seconds both evaluations took.",
        "",
        table(_HEADER, rows),
        "",
    ]
    if constant:
        lines += [
            f"{', '.join(constant)}: every episode returns exactly 0 for both policies: "
            "neither earned any reward in these episodes, or the task is a zero-sum game "
            "(whose mean over the agents is 0 whatever the policy) that does not declare "
            "`evaluation: versus_random`.",
            "",
        ]
    if failed:
        lines += ["Tasks that failed to build or step:", "", *failed, ""]
    if skipped:
        lines += ["Tasks not tried:", "", *skipped, ""]
    lines += [
        "Made by:",
        "",
        "```bash",
        command,
        "```",
        "",
        f"marl {__version__} at commit {_commit()}; Python {platform.python_version()}, "
        f"{_versions()}; {platform.machine()} CPU, one torch thread.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m marl.bench.baselines``: write the baselines page; returns the exit status."""
    p = argparse.ArgumentParser(
        prog="python -m marl.bench.baselines",
        description="Evaluate the random and no-op policy on every catalogue task and write "
        "a markdown page (the docs' docs/results/baselines.md).",
    )
    p.add_argument("--out", required=True, help="the markdown file to write")
    p.add_argument("--episodes", type=int, default=20, help="episodes per policy (default 20)")
    p.add_argument("--seed", type=int, default=0, help="run seed to copy (default 0)")
    p.add_argument("--tasks", help="only these tasks (comma-separated)")
    p.add_argument("--quiet", action="store_true", help="no line per task")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(argv)
    if args.episodes < 1:
        p.error(f"--episodes: expected >= 1, got {args.episodes}")
    tasks = [t.strip() for t in args.tasks.split(",")] if args.tasks else None
    if tasks:
        from marl.envs import list_tasks

        unknown = [t for t in tasks if t not in list_tasks()]
        if unknown:
            p.error(f"--tasks: unknown {unknown}; available: {', '.join(list_tasks())}")
    results = catalogue_baselines(tasks, args.episodes, args.seed, None if args.quiet else print)
    command = shlex.join(["python", "-m", "marl.bench.baselines", *argv])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_page(results, command), encoding="utf-8")
    failed = sum(bool(r.error) for r in results)
    print(f"wrote {out}: {len(results) - failed} tasks, {failed} failed")
    return 0
