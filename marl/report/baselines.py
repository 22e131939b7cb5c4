"""``baselines.json``: the random and the no-op policy's scores next to a suite's runs.

``marl-bench`` evaluates both baselines on every task of a suite, with the
evaluation settings of the suite's runs (same task options, episodes, envs and
evaluation seed), and writes them with :func:`write_baselines`; ``marl-report``
reads them with :func:`load_baselines` and shows them in the per-task table and
as horizontal lines in the curves. This module only reads and writes the file:
the evaluation itself needs torch and lives in :mod:`marl.bench.baselines`.

The file::

    {"origin": "marl-bench ci_tiny (marl 0.1.0)",
     "entries": [
       {"task": "vmas/navigation", "task_overrides": {}, "algorithms": ["ippo", "mappo"],
        "episodes": 10, "num_envs": 10, "device": "cpu",
        "seeds": [0, 1], "eval_seeds": [1, 2], "evaluation": "plain", "max_steps": null,
        "scores": {"random": {"return": [[...episodes of seed 0], [...of seed 1]],
                              "agent/return": [[...], [...]]},
                   "noop": {...}},
        "wall_s": 1.2},
       {"task": "vmas/wheel", ..., "error": "ImportError: ..."}]}

An entry holds the runs of the listed algorithms on the task (runs whose
evaluation settings differ, e.g. ``qmix`` with discrete actions, get their own
entry). ``evaluation`` is how the runs, and so the baselines, were evaluated: ``"plain"``
(the policy on every agent) or the task file's ``evaluation`` (``"versus_random"``: the
policy's own return against a random player); ``max_steps`` the runs'
``experiment.evaluation_max_steps``. An entry without ``evaluation`` was written before
the file recorded it: ``marl-bench`` computes it again rather than reuse it.
``scores[policy][metric]`` has one list of episode values per seed, named like the
metrics of ``results.json``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marl.atomic import atomic_write_json
from marl.report._format import ResultsFormatError

__all__ = [
    "BASELINES_FILENAME",
    "POLICIES",
    "BaselineEntry",
    "load_baselines",
    "write_baselines",
]

BASELINES_FILENAME = "baselines.json"
POLICIES = {"random": "random", "noop": "no-op"}
"""The baseline policies, and their names in reports."""


@dataclass(frozen=True)
class BaselineEntry:
    """The baselines of one task under one set of evaluation settings.

    Attributes:
        task: ``"env/task"``.
        algorithms: the algorithms whose runs use these settings.
        task_overrides: the task's env options of those runs.
        episodes: evaluation episodes per seed (as the runs' ``evaluation_episodes``).
        num_envs: envs of the evaluation env.
        seeds: the runs' seeds.
        eval_seeds: the evaluation env's seed for each (``seed + 1``, as the runs).
        scores: ``{policy: {metric: [episode values per seed]}}``.
        device: the evaluation env's device.
        wall_s: seconds the evaluation took.
        error: why the baselines could not be computed (``scores`` is then empty).
        evaluation: ``"plain"`` or the task file's ``evaluation`` the baselines were
            evaluated with (``None``: not recorded, a file from before it was).
        max_steps: the evaluation episodes' cut (``None``: none).

    Examples:
        >>> entry = BaselineEntry("vmas/navigation", ("mappo",), {}, 2, 2, (0, 1), (1, 2),
        ...     {"random": {"return": [[-1.0, -0.5], [-0.5, 0.0]]},
        ...      "noop": {"return": [[0.0, 0.0], [0.0, 0.0]]}})
        >>> entry.mean("random"), entry.mean("noop"), entry.mean("random", "agent/return")
        (-0.5, 0.0, None)
    """

    task: str
    algorithms: tuple[str, ...]
    task_overrides: Mapping[str, Any]
    episodes: int
    num_envs: int
    seeds: tuple[int, ...]
    eval_seeds: tuple[int, ...]
    scores: Mapping[str, Mapping[str, Sequence[Sequence[float]]]] = field(default_factory=dict)
    device: str = "cpu"
    wall_s: float | None = None
    error: str = ""
    evaluation: str | None = None
    max_steps: int | None = None

    def values(self, policy: str, metric: str = "return") -> list[list[float]] | None:
        """Episode values per seed, or ``None`` when the metric was not measured."""
        per_seed = self.scores.get(policy, {}).get(metric)
        return None if per_seed is None else [list(v) for v in per_seed]

    def mean(self, policy: str, metric: str = "return") -> float | None:
        """Mean over seeds of each seed's mean episode value: the statistic the report
        shows for an algorithm, so the two compare like for like."""
        per_seed = self.values(policy, metric)
        if not per_seed:
            return None
        return sum(sum(v) / len(v) for v in per_seed) / len(per_seed)

    def std(self, policy: str, metric: str = "return") -> float | None:
        """Standard deviation over every episode of every seed (``ddof=0``)."""
        per_seed = self.values(policy, metric)
        if not per_seed:
            return None
        flat = [x for v in per_seed for x in v]
        mu = sum(flat) / len(flat)
        return math.sqrt(sum((x - mu) ** 2 for x in flat) / len(flat))

    def to_dict(self) -> dict[str, Any]:
        """The entry as written in ``baselines.json``."""
        out: dict[str, Any] = {
            "task": self.task,
            "task_overrides": dict(self.task_overrides),
            "algorithms": list(self.algorithms),
            "episodes": self.episodes,
            "num_envs": self.num_envs,
            "device": self.device,
            "seeds": list(self.seeds),
            "eval_seeds": list(self.eval_seeds),
            "evaluation": self.evaluation,
            "max_steps": self.max_steps,
        }
        if self.error:
            out["error"] = self.error
        else:
            out["scores"] = {
                p: {m: [list(v) for v in per_seed] for m, per_seed in metrics.items()}
                for p, metrics in self.scores.items()
            }
        if self.wall_s is not None:
            out["wall_s"] = round(self.wall_s, 3)
        return out


def write_baselines(
    path: str | os.PathLike[str], entries: Sequence[BaselineEntry], origin: str = ""
) -> Path:
    """Write ``baselines.json`` atomically; returns the path."""
    path = Path(path)
    atomic_write_json(path, {"origin": origin, "entries": [e.to_dict() for e in entries]})
    return path


def _fail(where: str, expected: str, got: Any) -> ResultsFormatError:
    return ResultsFormatError(f"{where}: expected {expected}, got {got!r:.80}")


def _int(node: Mapping[str, Any], key: str, where: str) -> int:
    value = node.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _fail(f"{where}/{key}", "an int >= 0", value)
    return value


def _ints(node: Mapping[str, Any], key: str, where: str) -> tuple[int, ...]:
    value = node.get(key)
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise _fail(f"{where}/{key}", "a list of ints", value)
    return tuple(value)


def _scores(node: Any, where: str, n_seeds: int) -> dict[str, dict[str, list[list[float]]]]:
    if not isinstance(node, Mapping):
        raise _fail(where, "a mapping {policy: {metric: [[values per seed]]}}", node)
    out: dict[str, dict[str, list[list[float]]]] = {}
    for policy, metrics in node.items():
        if not isinstance(metrics, Mapping):
            raise _fail(f"{where}/{policy}", "a mapping {metric: [[values per seed]]}", metrics)
        out[policy] = {}
        for metric, per_seed in metrics.items():
            w = f"{where}/{policy}/{metric}"
            if not isinstance(per_seed, list) or len(per_seed) != n_seeds:
                raise _fail(w, f"a list of {n_seeds} lists (one per seed)", per_seed)
            for values in per_seed:
                ok = isinstance(values, list) and values
                if not ok or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                    for v in values
                ):
                    raise _fail(w, "non-empty lists of finite numbers", values)
            out[policy][metric] = [[float(v) for v in values] for values in per_seed]
    return out


def _entry(node: Any, where: str) -> BaselineEntry:
    if not isinstance(node, Mapping):
        raise _fail(where, "a mapping", node)
    task = node.get("task")
    if not isinstance(task, str) or "/" not in task:
        raise _fail(f"{where}/task", "'env/task'", task)
    algorithms = node.get("algorithms")
    if not isinstance(algorithms, list) or not all(isinstance(a, str) for a in algorithms):
        raise _fail(f"{where}/algorithms", "a list of names", algorithms)
    overrides = node.get("task_overrides", {})
    if not isinstance(overrides, Mapping):
        raise _fail(f"{where}/task_overrides", "a mapping", overrides)
    seeds = _ints(node, "seeds", where)
    eval_seeds = _ints(node, "eval_seeds", where)
    if len(eval_seeds) != len(seeds):
        raise _fail(f"{where}/eval_seeds", f"{len(seeds)} seeds, as many as seeds", eval_seeds)
    error = node.get("error", "")
    if not isinstance(error, str):
        raise _fail(f"{where}/error", "a string", error)
    scores = {} if error else _scores(node.get("scores"), f"{where}/scores", len(seeds))
    evaluation = node.get("evaluation")
    if evaluation is not None and not isinstance(evaluation, str):
        raise _fail(
            f"{where}/evaluation", "a string (how the baselines were evaluated)", evaluation
        )
    max_steps = node.get("max_steps")
    if max_steps is not None and (
        not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1
    ):
        raise _fail(f"{where}/max_steps", "null or an int >= 1", max_steps)
    wall = node.get("wall_s")
    if wall is not None and (isinstance(wall, bool) or not isinstance(wall, (int, float))):
        raise _fail(f"{where}/wall_s", "a number", wall)
    return BaselineEntry(
        task=task,
        algorithms=tuple(algorithms),
        task_overrides=dict(overrides),
        episodes=_int(node, "episodes", where),
        num_envs=_int(node, "num_envs", where),
        seeds=seeds,
        eval_seeds=eval_seeds,
        scores=scores,
        device=str(node.get("device", "cpu")),
        wall_s=None if wall is None else float(wall),
        error=error,
        evaluation=evaluation,
        max_steps=max_steps,
    )


def load_baselines(path: str | os.PathLike[str]) -> list[BaselineEntry]:
    """Read ``baselines.json``.

    Raises:
        FileNotFoundError: when the file does not exist.
        ResultsFormatError: naming the file and the key path of a malformed entry.

    Examples:
        >>> import tempfile
        >>> entry = BaselineEntry("vmas/navigation", ("mappo",), {}, 1, 1, (0,), (1,),
        ...                       {"random": {"return": [[-0.5]]}, "noop": {"return": [[0.0]]}})
        >>> path = write_baselines(tempfile.mkdtemp() + "/baselines.json", [entry])
        >>> load_baselines(path) == [entry]
        True
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ResultsFormatError(f"{path}: invalid JSON: {err}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("entries"), list):
        raise _fail(str(path), 'a mapping {"origin": ..., "entries": [...]}', data)
    return [_entry(e, f"{path}: entries/{i}") for i, e in enumerate(data["entries"])]
