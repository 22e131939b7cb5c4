"""Benchmark suites: YAML files naming algorithms x tasks x seeds, expanded into runs.

A suite file holds:

- ``description`` (required): one or two lines;
- ``algorithms`` (required): names from :func:`marl.algorithms.list_algorithms`;
- ``tasks`` (required): names from :func:`marl.envs.list_tasks`;
- ``seeds`` (required): a count ``N`` (seeds ``0 .. N-1``) or a list of ints;
- ``frames`` (required): total frames of every run (``experiment.total_frames``);
- ``overrides`` (optional): hydra override strings applied to every run;
- ``task_overrides`` / ``algorithm_overrides`` (optional): ``{name: [overrides]}``
  applied to the runs of one task / one algorithm (they win over ``overrides``;
  algorithm ones win over task ones);
- ``exclude`` (optional): ``[{algorithm: NAME, task: NAME}, ...]`` combinations
  left out of the cross product (e.g. a discrete-action algorithm on a
  continuous task);
- ``slurm`` (optional): ``submitit`` executor parameters for ``--launcher submitit``;
- ``references`` (optional): reference scores the runs should reproduce,
  ``[{task, algorithm, frames, value, tolerance | tolerance_rel, source}, ...]``
  (optionally ``metric``; see :mod:`marl.report.references` for what ``value``
  is compared with). Each names a task and an algorithm of the suite, not
  excluded, and ``frames`` within what those runs train for. ``marl-bench``
  copies them into its output folder (``references.json``), where
  ``marl-report --check`` finds them.

The suites shipped with marl live in ``benchmarks/suites/`` of the repository and
are installed as ``marl/bench/suites``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from marl._resources import data_folder
from marl.report.references import (
    Reference,
    ReferenceFormatError,
    check_keys,
    parse_references,
)

__all__ = [
    "Run",
    "Suite",
    "SuiteError",
    "dir_override",
    "list_suites",
    "load_suite",
    "merge_overrides",
]

_SAFE = re.compile(r"^[\w./:+@-]+$")  # paths hydra takes unquoted
_REQUIRED = ("description", "algorithms", "tasks", "seeds", "frames")
_OPTIONAL = (
    "overrides",
    "task_overrides",
    "algorithm_overrides",
    "exclude",
    "slurm",
    "references",
)


class SuiteError(ValueError):
    """A malformed suite file; the message names the file and the offending key."""


def _suites_root() -> Path:
    """The folder of the shipped suites: packaged, else the source checkout's."""
    return data_folder("marl.bench", "suites", "benchmarks/suites", "the benchmark suites")


def list_suites() -> list[str]:
    """Names of the shipped suites, sorted.

    Examples:
        >>> "ci_tiny" in list_suites()
        True
    """
    return sorted(p.stem for p in _suites_root().glob("*.yaml"))


def override_key(override: str) -> str:
    """The config key an override sets: ``"+a.b=1"`` -> ``"a.b"``."""
    return override.split("=", 1)[0].lstrip("+~")


def merge_overrides(*groups: Sequence[str]) -> list[str]:
    """Concatenate hydra overrides; a later value of the same key replaces an earlier one.

    Examples:
        >>> merge_overrides(["a=1", "b=2"], ["+c=3", "a=4"])
        ['a=4', 'b=2', '+c=3']
    """
    merged: dict[str, str] = {}
    for group in groups:
        for override in group:
            merged[override_key(override)] = override
    return list(merged.values())


def dir_override(key: str, path: Path) -> str:
    """The hydra override ``key=<path>``, quoted when the path needs it.

    Examples:
        >>> dir_override("hydra.run.dir", Path("/runs/a b"))
        "hydra.run.dir='/runs/a b'"
    """
    text = path.as_posix()
    if not _SAFE.match(text):
        text = "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return f"{key}={text}"


@dataclasses.dataclass(frozen=True)
class Run:
    """One run of a suite: an algorithm on a task with a seed.

    Attributes:
        algorithm: e.g. ``"mappo"``.
        task: e.g. ``"vmas/navigation"``.
        seed: the seed.
        overrides: every hydra override of the run except ``hydra.run.dir``.
    """

    algorithm: str
    task: str
    seed: int
    overrides: tuple[str, ...]

    @property
    def relpath(self) -> Path:
        """``<algorithm>/<task with / replaced by _>/seed_<seed>``.

        Examples:
            >>> Run("mappo", "vmas/navigation", 1, ()).relpath.as_posix()
            'mappo/vmas_navigation/seed_1'
        """
        return Path(self.algorithm) / self.task.replace("/", "_") / f"seed_{self.seed}"

    @property
    def name(self) -> str:
        """``algorithm task seed=k``, for messages."""
        return f"{self.algorithm} {self.task} seed={self.seed}"

    @property
    def total_frames(self) -> int:
        """The ``experiment.total_frames`` of the run."""
        for override in reversed(self.overrides):
            if override_key(override) == "experiment.total_frames":
                return int(float(override.split("=", 1)[1]))
        raise ValueError(f"run {self.name} has no experiment.total_frames override")


@dataclasses.dataclass(frozen=True)
class Suite:
    """A parsed, validated suite (see the module docstring for the file format).

    Examples:
        >>> suite = load_suite("ci_tiny")
        >>> suite.algorithms, suite.tasks, suite.seeds
        (['mappo', 'ippo'], ['vmas/navigation'], [0, 1])
        >>> [run.relpath.as_posix() for run in suite.runs()][:2]
        ['mappo/vmas_navigation/seed_0', 'mappo/vmas_navigation/seed_1']
    """

    name: str
    description: str
    algorithms: list[str]
    tasks: list[str]
    seeds: list[int]
    frames: int
    overrides: list[str] = dataclasses.field(default_factory=list)
    task_overrides: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    algorithm_overrides: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    exclude: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    slurm: dict[str, Any] = dataclasses.field(default_factory=dict)
    references: list[Reference] = dataclasses.field(default_factory=list)
    path: Path | None = None

    def runs(self, extra_overrides: Sequence[str] = ()) -> list[Run]:
        """Every algorithm x task x seed (less ``exclude``), in that nesting order.

        Args:
            extra_overrides: applied last to every run (e.g. from the command line).
        """
        out = []
        for algorithm in self.algorithms:
            for task in self.tasks:
                if (algorithm, task) in self.exclude:
                    continue
                for seed in self.seeds:
                    base = [
                        f"algorithm={algorithm}",
                        f"task={task}",
                        f"seed={seed}",
                        f"experiment.total_frames={self.frames}",
                    ]
                    overrides = merge_overrides(
                        base,
                        self.overrides,
                        self.task_overrides.get(task, []),
                        self.algorithm_overrides.get(algorithm, []),
                        extra_overrides,
                    )
                    out.append(Run(algorithm, task, seed, tuple(overrides)))
        return out


def _strings(value: Any, where: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, list):
        raise SuiteError(f"{where}: expected a list of strings, got {value!r:.80}")
    for item in value:
        if not isinstance(item, str) or not item:
            raise SuiteError(f"{where}: expected non-empty strings, got {item!r:.80}")
    return value


def _overrides(value: Any, where: str) -> list[str]:
    items = _strings(value, where)
    for item in items:
        if "=" not in item and not item.startswith("~"):
            raise SuiteError(f"{where}: expected hydra overrides 'key=value', got {item!r}")
    return items


def _named_overrides(value: Any, where: str, known: list[str], what: str) -> dict[str, list]:
    if not isinstance(value, Mapping):
        raise SuiteError(f"{where}: expected a mapping {{{what}: [overrides]}}, got {value!r:.80}")
    for name in value:
        if name not in known:
            raise SuiteError(f"{where}: {name!r} is not one of the suite's {what}s {known}")
    return {name: _overrides(v, f"{where}.{name}") for name, v in value.items()}


def _seeds(value: Any, where: str) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return list(range(value))
    if isinstance(value, list) and value and all(isinstance(s, int) for s in value):
        if len(set(value)) != len(value):
            raise SuiteError(f"{where}: seeds must be distinct, got {value}")
        return value
    raise SuiteError(f"{where}: expected a count >= 1 or a non-empty list of ints, got {value!r}")


def _exclude(value: Any, where: str, algorithms: list[str], tasks: list[str]) -> list:
    if not isinstance(value, list):
        raise SuiteError(f"{where}: expected a list of {{algorithm: NAME, task: NAME}}")
    out = []
    for item in value:
        if not isinstance(item, Mapping) or set(item) != {"algorithm", "task"}:
            raise SuiteError(f"{where}: expected {{algorithm: NAME, task: NAME}}, got {item!r:.80}")
        if item["algorithm"] not in algorithms or item["task"] not in tasks:
            raise SuiteError(
                f"{where}: {item['algorithm']!r} x {item['task']!r} is not a combination of the "
                f"suite's algorithms {algorithms} and tasks {tasks}"
            )
        out.append((item["algorithm"], item["task"]))
    return out


def _check_names(names: list[str], available: list[str], where: str, what: str) -> None:
    for name in names:
        if name not in available:
            raise SuiteError(f"{where}: unknown {what} {name!r}; available: {', '.join(available)}")
    if len(set(names)) != len(names):
        raise SuiteError(f"{where}: duplicate {what}s in {names}")


def _references(value: Any, where: str, suite: Suite) -> list[Reference]:
    try:
        refs = parse_references(value, where)
    except ReferenceFormatError as err:
        raise SuiteError(str(err)) from None
    frames: dict[tuple[str, str], int] = {}
    for run in suite.runs():
        key = (run.task, run.algorithm)
        frames[key] = min(frames.get(key, run.total_frames), run.total_frames)
    for i, ref in enumerate(refs):
        entry = f"{where}[{i}] ({ref.task} {ref.algorithm})"
        if ref.task not in suite.tasks:
            raise SuiteError(f"{entry}: task {ref.task!r} is not one of the suite's {suite.tasks}")
        if ref.algorithm not in suite.algorithms:
            raise SuiteError(
                f"{entry}: algorithm {ref.algorithm!r} is not one of the suite's {suite.algorithms}"
            )
        if (ref.task, ref.algorithm) not in frames:
            raise SuiteError(f"{entry}: this combination is excluded from the suite")
        if ref.frames > frames[(ref.task, ref.algorithm)]:
            raise SuiteError(
                f"{entry}: frames {ref.frames} is beyond the "
                f"{frames[(ref.task, ref.algorithm)]} frames these runs train for"
            )
    return refs


def suite_from_dict(data: Any, name: str, path: Path | None = None) -> Suite:
    """Validate a parsed suite mapping and build the :class:`Suite`.

    Raises:
        SuiteError: on a missing or unknown key, a wrong type, or an unknown
            algorithm or task (the message lists the available names).

    Examples:
        >>> suite_from_dict({"description": "x", "algorithms": ["ppo"]}, "mine")
        Traceback (most recent call last):
        ...
        marl.bench.suite.SuiteError: suite mine: missing required key(s) ['tasks', 'seeds', 'frames']
    """
    from marl.algorithms import list_algorithms
    from marl.envs import list_tasks

    where = f"suite {name}"
    if not isinstance(data, Mapping):
        raise SuiteError(f"{where}: expected a mapping of {list(_REQUIRED)}, got {data!r:.80}")
    check_keys(data, _REQUIRED, _OPTIONAL, where, SuiteError, "key(s)", "required key(s)")
    if not isinstance(data["description"], str):
        raise SuiteError(f"{where}: description: expected a string, got {data['description']!r}")
    algorithms = _strings(data["algorithms"], f"{where}: algorithms")
    tasks = _strings(data["tasks"], f"{where}: tasks")
    if not algorithms or not tasks:
        raise SuiteError(f"{where}: algorithms and tasks must not be empty")
    _check_names(algorithms, list_algorithms(), f"{where}: algorithms", "algorithm")
    _check_names(tasks, list_tasks(), f"{where}: tasks", "task")
    frames = data["frames"]
    if isinstance(frames, float) and frames.is_integer():
        frames = int(frames)
    if not isinstance(frames, int) or isinstance(frames, bool) or frames < 1:
        raise SuiteError(f"{where}: frames: expected an int >= 1, got {frames!r}")
    slurm = data.get("slurm") or {}
    if not isinstance(slurm, Mapping):
        raise SuiteError(f"{where}: slurm: expected a mapping of submitit parameters")
    suite = Suite(
        name=name,
        description=data["description"].strip(),
        algorithms=algorithms,
        tasks=tasks,
        seeds=_seeds(data["seeds"], f"{where}: seeds"),
        frames=frames,
        overrides=_overrides(data.get("overrides") or [], f"{where}: overrides"),
        task_overrides=_named_overrides(
            data.get("task_overrides") or {}, f"{where}: task_overrides", tasks, "task"
        ),
        algorithm_overrides=_named_overrides(
            data.get("algorithm_overrides") or {},
            f"{where}: algorithm_overrides",
            algorithms,
            "algorithm",
        ),
        exclude=_exclude(data.get("exclude") or [], f"{where}: exclude", algorithms, tasks),
        slurm=dict(slurm),
        path=path,
    )
    refs = _references(data.get("references") or [], f"{where}: references", suite)
    return dataclasses.replace(suite, references=refs)


def load_suite(name_or_path: str | Path) -> Suite:
    """Load a shipped suite by name, or a suite file by path.

    Args:
        name_or_path: a name from :func:`list_suites` (``"vmas_small"``) or a path
            to a YAML file.

    Raises:
        FileNotFoundError: for neither a shipped suite nor an existing file.
        SuiteError: for a malformed file.

    Examples:
        >>> suite = load_suite("vmas_small")
        >>> len(suite.runs())  # (6 algorithms x 3 tasks + 5 on navigation only) x 3 seeds
        69
        >>> load_suite("nope")
        Traceback (most recent call last):
        ...
        FileNotFoundError: no suite 'nope': not a file, and not a shipped suite (ci_tiny, pettingzoo_mpe, single_agent, smax_small, vmas_paper, vmas_small)
    """
    import yaml

    path = Path(name_or_path)
    if not path.is_file():
        shipped = _suites_root() / f"{name_or_path}.yaml"
        if not shipped.is_file():
            raise FileNotFoundError(
                f"no suite {str(name_or_path)!r}: not a file, and not a shipped suite "
                f"({', '.join(list_suites())})"
            )
        path = shipped
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise SuiteError(f"suite {path}: invalid YAML: {err}") from None
    return suite_from_dict(data, path.stem if path.parent == _suites_root() else str(path), path)
