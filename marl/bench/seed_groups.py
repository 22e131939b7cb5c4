"""``marl-bench --vectorize-seeds``: a suite's seeds of one run trained together in one job.

The runs of a suite that differ only in their seed (same algorithm, task and overrides)
and whose seeds are consecutive become ONE job, ``marl-run experiment.runs=R seed=S``
(:mod:`marl.experiment.runs`), with its folder of runs ``OUTPUT/<algorithm>/<task>/``: it
writes ``runs.json`` there and the seeds' ordinary folders ``seed_S/ ... seed_S+R-1/``, the
very folders that the runs would have as separate jobs, so that ``marl-report`` and
everything downstream read them unchanged.

What :func:`group_plan` does with each algorithm x task (its "bucket" of seeds):

- seeds that are complete are skipped, as without the flag;
- a folder whose ``runs.json`` lists unfinished runs is resumed as a group
  (``marl-run --resume <folder> experiment.<key>=<value> ...``, with the suite's
  ``experiment`` overrides: a longer ``total_frames`` is applied, and a setting that
  contradicts the checkpoints is refused, naming it) when every run it lists has
  a checkpoint frame in common with the others; otherwise (a run stopped before its
  first checkpoint) its seeds run as separate jobs, and a message says so;
- the remaining seeds without a checkpoint are split into consecutive groups
  (:func:`consecutive`); the longest group becomes one job, a group of one is an ordinary
  job. A folder holds one ``runs.json``, so one group per folder runs at a time: the
  other groups of that folder run as separate jobs (a message says so);
- seeds with a checkpoint of their own (trained as single runs) resume as single runs;
- a bucket whose overrides set something the runs mode refuses
  (:func:`vectorize_refusal`) runs its seeds as separate jobs, with a message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from marl.bench.launchers import Job
from marl.bench.suite import dir_override, override_key

__all__ = ["consecutive", "group_plan", "vectorize_refusal"]

_RECURRENT = ("gru", "lstm")
_NOT_ON_RESUME = ("experiment.runs", "experiment.restore_file", "experiment.save_folder")


def consecutive(seeds: Sequence[int]) -> list[list[int]]:
    """Split seeds into runs of consecutive integers (sorted, each run ascending).

    Examples:
        >>> consecutive([0, 1, 2, 5, 6, 9])
        [[0, 1, 2], [5, 6], [9]]
        >>> consecutive([3, 1, 2])
        [[1, 2, 3]]
        >>> consecutive([])
        []
    """
    groups: list[list[int]] = []
    for seed in sorted(seeds):
        if groups and seed == groups[-1][-1] + 1:
            groups[-1].append(seed)
        else:
            groups.append([seed])
    return groups


def vectorize_refusal(overrides: Sequence[str]) -> str | None:
    """Why runs with these hydra overrides cannot train together (``experiment.runs``
    refuses them), or ``None`` when they can.

    Examples:
        >>> vectorize_refusal(["algorithm=mappo", "experiment.num_envs=10"]) is None
        True
        >>> vectorize_refusal(["experiment.collector=sync"])
        "experiment.collector=sync (experiment.runs needs the 'inline' collector)"
    """
    for override in overrides:
        key = override_key(override)
        value = override.split("=", 1)[1].strip().strip("'\"") if "=" in override else ""
        if key == "experiment.collector" and value != "inline":
            return f"{override} (experiment.runs needs the 'inline' collector)"
        if key in ("model", "model.network") and value in _RECURRENT:
            return f"{override} (experiment.runs does not train recurrent networks yet)"
        if key in ("experiment.runs", "experiment.restore_file"):
            return f"{override} (set by the suite; --vectorize-seeds sets it itself)"
    return None


def _bucket(planned: Any) -> tuple[str, str, tuple[str, ...]]:
    run = planned.run
    return (run.algorithm, run.task, tuple(o for o in run.overrides if override_key(o) != "seed"))


def _listed_runs(folder: Path) -> list[str] | None:
    """The run folders that ``folder``'s ``runs.json`` lists (``None``: no readable file)."""
    from marl.experiment.lifecycle import RUNS_FILE
    from marl.experiment.runs import read_runs_file

    if not (folder / RUNS_FILE).is_file():
        return None
    try:
        return [str(name) for name in read_runs_file(folder)["folders"]]
    except (OSError, ValueError) as err:
        raise ValueError(f"{folder / RUNS_FILE} is unreadable: {err}") from None


def group_plan(
    plan: Sequence[Any],
    prefix: Sequence[str],
    message: Callable[[str], None],
    log_name: str = "run.log",
) -> list[Any]:
    """The plan with the seeds of each run that can train together sharing one job.

    Args:
        plan: :func:`~marl.bench.runner.plan_runs`'s plan (its
            :class:`~marl.bench.runner.PlannedRun` s, one job per run).
        prefix: the runner's command prefix (``python -m marl.experiment``).
        message: called with a line for each fallback to separate jobs.
        log_name: the name of a job's log file in its folder.

    Returns:
        The same runs in the same order; those of a group share one :class:`Job` (its
        folder is the group's folder, its log ``<group folder>/run.log``) and have
        ``group`` set to that folder.

    Raises:
        ValueError: when a folder's ``runs.json`` is unreadable.

    Examples:
        >>> import tempfile
        >>> from marl.bench import load_suite, plan_runs
        >>> plan = plan_runs(load_suite("ci_tiny"), tempfile.mkdtemp())
        >>> grouped = group_plan(plan, ["marl-run"], print)
        >>> grouped[0].job is grouped[1].job, grouped[0].job.command[1:4]
        (True, ('algorithm=mappo', 'task=vmas/navigation', 'seed=0'))
        >>> grouped[0].job.command[-2:-1]
        ('experiment.runs=2',)
    """
    out = list(plan)
    buckets: dict[tuple, list[int]] = {}
    for i, planned in enumerate(plan):
        buckets.setdefault(_bucket(planned), []).append(i)
    for indices in buckets.values():
        todo = [i for i in indices if plan[i].job is not None]
        if not todo:
            continue
        first = plan[todo[0]].run
        folder = plan[todo[0]].folder.parent
        where = f"{first.algorithm} {first.task}"
        listed = _listed_runs(folder)
        fresh = [i for i in todo if plan[i].action in ("run", "restart")]
        if listed is None and len(fresh) < 2:
            continue  # nothing to train together
        reason = vectorize_refusal(first.overrides)
        if reason is not None:
            message(f"{where}: seeds run as separate jobs: {reason}")
            continue
        busy = False  # the folder's runs.json belongs to a group of this call
        if listed is not None:
            unfinished = [i for i in todo if plan[i].folder.name in listed]
            if unfinished:
                busy = True
                _resume_group(out, unfinished, folder, listed, prefix, message, log_name)
                fresh = [i for i in fresh if i not in unfinished]
        chunks = consecutive([plan[i].run.seed for i in fresh])
        by_seed = {plan[i].run.seed: i for i in fresh}
        longest = max(chunks, key=len, default=[])
        for chunk in chunks:
            if len(chunk) < 2:
                continue
            if busy or chunk is not longest:
                message(
                    f"{where}: seeds {_span(chunk)} run as separate jobs: {folder} holds one "
                    "group (runs.json) at a time and another group trains there now"
                )
                continue
            _new_group(out, [by_seed[s] for s in chunk], folder, prefix, log_name)
    return out


def _span(seeds: Sequence[int]) -> str:
    return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])


def _new_group(
    out: list[Any], indices: list[int], folder: Path, prefix: Sequence[str], log_name: str
) -> None:
    """One ``experiment.runs=R seed=S`` job for the runs ``indices`` (consecutive seeds)."""
    first = out[indices[0]].run
    seeds = [out[i].run.seed for i in indices]
    command = (
        *prefix,
        *first.overrides,  # with seed=<the group's first seed>
        f"experiment.runs={len(indices)}",
        dir_override("hydra.run.dir", folder),
    )
    name = f"{first.algorithm} {first.task} seeds={_span(seeds)}"
    job = Job(name, folder, command, folder / log_name, "run")
    for i in indices:
        out[i] = dataclasses.replace(out[i], job=job, group=folder)


def _resume_group(
    out: list[Any],
    indices: list[int],
    folder: Path,
    listed: list[str],
    prefix: Sequence[str],
    message: Callable[[str], None],
    log_name: str,
) -> None:
    """``marl-run --resume <folder>`` for the unfinished runs ``indices`` of the folder of
    runs ``folder``, when its runs share a checkpoint frame; else leave them separate."""
    from marl.experiment.runs import common_checkpoint_frames

    first = out[indices[0]].run
    where = f"{first.algorithm} {first.task}"
    try:
        frames = common_checkpoint_frames([folder / name for name in listed])
        if not frames:
            raise ValueError("its runs have no checkpoint frame in common")
    except (FileNotFoundError, ValueError) as err:
        message(f"{where}: the runs of {folder} cannot resume as a group ({err}); their seeds "
                "run as separate jobs")  # fmt: skip
        return
    # as a single run's resume takes the suite's overrides: the experiment settings, which
    # the runs' resume applies or refuses (naming them) when they contradict a checkpoint;
    # it takes no others (task, algorithm and model come from the checkpoints)
    settings = [
        f"{override_key(o)}={o.split('=', 1)[1]}"
        for o in first.overrides
        if not o.startswith("~")
        and override_key(o).startswith("experiment.")
        and override_key(o).count(".") == 1
        and override_key(o) not in _NOT_ON_RESUME
    ]
    command = (*prefix, "--resume", str(folder), *settings)
    seeds = [out[i].run.seed for i in indices]
    job = Job(f"{where} seeds={_span(seeds)}", folder, command, folder / log_name, "resume")
    for i in indices:
        out[i] = dataclasses.replace(out[i], action="resume", job=job, group=folder)
