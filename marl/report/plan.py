"""``plan.json``: the runs a benchmark meant to make, so a report can name the missing ones.

Without a plan, a report can only guess which runs are missing: every
algorithm x task x seed seen among the results. A suite that leaves some
pairs out on purpose (its ``exclude:`` list) would then report them all as
missing. ``marl-bench`` writes the suite's runs into ``OUTPUT/plan.json``
before launching them; ``marl-report`` reads it and calls missing exactly the
planned runs that have no results.

The file::

    {"origin": "marl-bench vmas_small (marl 0.1.0)",
     "runs": [{"task": "vmas/navigation", "algorithm": "mappo", "seed": 0}, ...]}
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from marl.atomic import atomic_write_json
from marl.report._format import ResultsFormatError, RunKey

__all__ = ["PLAN_FILENAME", "load_plan", "write_plan"]

PLAN_FILENAME = "plan.json"


def write_plan(
    path: str | os.PathLike,
    runs: Iterable[tuple[str, str, int | str]],
    origin: str,
    merge: bool = True,
) -> Path:
    """Write the planned runs ``(task id, algorithm, seed)`` to ``path``.

    With ``merge``, runs already planned in an existing file at ``path`` are kept
    (a suite run in parts, e.g. ``--algorithms mappo`` then ``--algorithms ippo``,
    plans both).

    Examples:
        >>> import tempfile, pathlib
        >>> p = write_plan(pathlib.Path(tempfile.mkdtemp()) / "plan.json",
        ...                [("vmas/navigation", "mappo", 0)], "example")
        >>> [str(k) for k in load_plan(p)]
        ['vmas/navigation/mappo/seed_0']
    """
    path = Path(path)
    rows = [{"task": task, "algorithm": algo, "seed": seed} for task, algo, seed in runs]
    if merge and path.is_file():
        try:
            old = json.loads(path.read_text()).get("runs", [])
        except (OSError, json.JSONDecodeError, AttributeError):
            old = []  # an unreadable plan is replaced, not merged
        rows = [r for r in old if isinstance(r, dict) and r not in rows] + rows
    atomic_write_json(path, {"origin": origin, "runs": rows})
    return path


def load_plan(path: str | os.PathLike) -> list[RunKey]:
    """The planned runs of a ``plan.json``, as the report's run keys.

    Raises:
        ResultsFormatError: for a file that is not a plan (with what was found).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ResultsFormatError(f"{path}: cannot read a plan: {err}") from None
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list):
        raise ResultsFormatError(f"{path}: expected {{'runs': [...]}}, got {str(data)[:80]!r}")
    keys = []
    for i, row in enumerate(runs):
        ok = isinstance(row, dict) and {"task", "algorithm", "seed"} <= set(row)
        task = row.get("task") if ok else None
        if not ok or not isinstance(task, str) or "/" not in task:
            raise ResultsFormatError(
                f"{path}: run {i} must be {{'task': 'env/task', 'algorithm': ..., 'seed': ...}}, "
                f"got {row!r}"
            )
        env, name = task.split("/", 1)
        seed = row["seed"]
        keys.append(RunKey(env, name, str(row["algorithm"]), f"seed_{seed}"))
    return keys
