"""Reading and merging ``results.json`` files into one :class:`ResultsTable`."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from marl.atomic import atomic_write_json
from marl.report._format import (
    ABSOLUTE_KEY,
    ELAPSED_KEY,
    RESULTS_FILENAME,
    RETURN_KEY,
    STEP_COUNT_KEY,
    STEP_RE,
    Evaluation,
    ResultsFormatError,
    RunKey,
    finite_numbers,
)


@dataclass
class ResultsTable:
    """Every evaluation of every loaded run, keyed by ``(env, task, algorithm, seed, step)``.

    Attributes:
        evaluations: the rows, sorted by run then step.
        absolute: run -> ``absolute_metrics`` (metric -> values), where written.
        sources: run -> the file it came from.
        skipped: ``(file, why)`` of each file left out: malformed files that
            :func:`load_results` skipped (``errors="skip"``) and the links that
            :func:`find_results_files` did not follow, when they were passed on.
    """

    evaluations: list[Evaluation] = field(default_factory=list)
    absolute: dict[RunKey, dict[str, np.ndarray]] = field(default_factory=dict)
    sources: dict[RunKey, Path] = field(default_factory=dict)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    _index: dict[RunKey, list[Evaluation]] = field(default_factory=dict, repr=False, compare=False)
    _index_size: int = field(default=-1, repr=False, compare=False)

    @property
    def runs(self) -> list[RunKey]:
        """All runs, sorted, including runs with no evaluation yet."""
        return sorted(self.sources)

    @property
    def task_ids(self) -> list[str]:
        """All ``"env/task"`` names, sorted."""
        return sorted({r.task_id for r in self.sources})

    @property
    def algorithms(self) -> list[str]:
        """All algorithm names, sorted."""
        return sorted({r.algorithm for r in self.sources})

    def run_evaluations(self, run: RunKey) -> list[Evaluation]:
        """The evaluations of one run, by step."""
        # An index, rebuilt when rows were added: a report asks for every run,
        # and a scan per run would be quadratic in the number of runs.
        if self._index_size != len(self.evaluations):
            index: dict[RunKey, list[Evaluation]] = {}
            for e in sorted(self.evaluations, key=lambda e: (e.run, e.step)):
                index.setdefault(e.run, []).append(e)
            self._index, self._index_size = index, len(self.evaluations)
        return list(self._index.get(run, []))

    def to_dict(self) -> dict[str, Any]:
        """The merged nested marl-eval dict of every run."""
        out: dict[str, Any] = {}
        for run in self.runs:
            node = out.setdefault(run.env, {}).setdefault(run.task, {})
            node = node.setdefault(run.algorithm, {}).setdefault(run.seed, {})
            for ev in self.run_evaluations(run):
                entry: dict[str, Any] = {STEP_COUNT_KEY: ev.step_count}
                entry.update({k: v.tolist() for k, v in ev.metrics.items()})
                if ev.elapsed_time is not None:
                    entry[ELAPSED_KEY] = ev.elapsed_time
                node[f"step_{ev.step}"] = entry
            if run in self.absolute:
                node[ABSOLUTE_KEY] = {k: v.tolist() for k, v in self.absolute[run].items()}
        return out

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write all runs as one merged marl-eval file (atomically)."""
        path = Path(path)
        atomic_write_json(path, self.to_dict())
        return path


class _DuplicateRunError(ResultsFormatError):
    """A run already loaded from another file: never skipped, the user picks the copy."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.load silently keeps the last of two equal keys; a duplicated
    # "step_3" would then hide an evaluation, so refuse it.
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ResultsFormatError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _mapping(node: Any, where: str, what: str) -> Mapping[str, Any]:
    if not isinstance(node, Mapping):
        raise ResultsFormatError(f"{where}: expected an object of {what}, got {node!r:.80}")
    return node


def _parse_metrics(node: Any, where: str) -> dict[str, np.ndarray]:
    metrics = {}
    for name, values in _mapping(node, where, "metrics").items():
        if name in (STEP_COUNT_KEY, ELAPSED_KEY):
            continue
        metrics[name] = np.asarray(finite_numbers(values, f"{where}/{name}"), dtype=np.float64)
    if RETURN_KEY not in metrics:
        raise ResultsFormatError(f"{where}: missing {RETURN_KEY!r}")
    return metrics


def _parse_run(
    key: RunKey, node: Any, where: str
) -> tuple[list[Evaluation], dict[str, np.ndarray] | None]:
    evaluations = []
    absolute = None
    for name, entry in _mapping(node, where, "step_<i> entries").items():
        at = f"{where}/{name}"
        if name == ABSOLUTE_KEY:
            absolute = _parse_metrics(entry, at)
            continue
        m = STEP_RE.match(name)
        if m is None:
            raise ResultsFormatError(f"{at}: expected 'step_<int>' or {ABSOLUTE_KEY!r}")
        entry = _mapping(entry, at, "metrics")
        count = entry.get(STEP_COUNT_KEY)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ResultsFormatError(f"{at}/{STEP_COUNT_KEY}: expected an int >= 0, got {count!r}")
        elapsed = entry.get(ELAPSED_KEY)
        if elapsed is not None and (
            isinstance(elapsed, bool) or not isinstance(elapsed, (int, float))
        ):
            raise ResultsFormatError(f"{at}/{ELAPSED_KEY}: expected a number, got {elapsed!r}")
        evaluations.append(
            Evaluation(
                key,
                int(m.group(1)),
                count,
                _parse_metrics(entry, at),
                None if elapsed is None else float(elapsed),
            )
        )
    evaluations.sort(key=lambda e: e.step)
    for prev, ev in itertools.pairwise(evaluations):
        if ev.step_count < prev.step_count:
            raise ResultsFormatError(
                f"{where}/step_{ev.step}: step_count {ev.step_count} is below "
                f"step_{prev.step}'s {prev.step_count}"
            )
    return evaluations, absolute


def _parse_file(path: Path, table: ResultsTable) -> None:
    try:
        data = json.loads(path.read_text(), object_pairs_hook=_no_duplicates)
    except ResultsFormatError as e:
        raise ResultsFormatError(f"{path}: {e}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResultsFormatError(f"{path}: cannot read JSON: {e}") from None
    # The whole file is parsed before any of it enters the table: a file that
    # fails half-way leaves the table as it was (so it can be skipped).
    parsed = []
    for env, tasks in _mapping(data, str(path), "envs").items():
        for task, algos in _mapping(tasks, f"{path}: {env}", "tasks").items():
            for algo, runs in _mapping(algos, f"{path}: {env}/{task}", "algorithms").items():
                where = f"{path}: {env}/{task}/{algo}"
                for seed, node in _mapping(runs, where, "runs (seed_<k>)").items():
                    key = RunKey(env, task, algo, seed)
                    if key in table.sources:
                        raise _DuplicateRunError(
                            f"{path}: run {key} is also in {table.sources[key]}; "
                            "each run must appear in one file only"
                        )
                    parsed.append((key, *_parse_run(key, node, f"{where}/{seed}")))
    for key, evaluations, absolute in parsed:
        table.sources[key] = path
        table.evaluations.extend(evaluations)
        if absolute is not None:
            table.absolute[key] = absolute


def find_results_files(
    folders: Iterable[str | os.PathLike[str]],
    filename: str = RESULTS_FILENAME,
    skipped: list[tuple[Path, str]] | None = None,
) -> list[Path]:
    """Every ``filename`` under the folders (recursively), sorted; a file path is kept as is.

    The search stays inside each folder: it does not descend into symlinked
    folders (their files are either outside the folder, or found on their real
    path already), and it leaves out a symlinked file that resolves outside the
    folder. Each such link is appended to ``skipped`` as ``(link, why)`` when a
    list is given.

    Raises:
        FileNotFoundError: if a folder does not exist.
    """
    found: set[Path] = set()
    for folder in folders:
        folder = Path(folder)
        if folder.is_file():
            found.add(folder.resolve())
        elif folder.is_dir():
            root = folder.resolve()
            for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
                here = Path(dirpath)
                for name in sorted(dirnames):
                    if (here / name).is_symlink() and skipped is not None:
                        target = os.path.realpath(here / name)
                        skipped.append(
                            (here / name, f"a symlinked folder (to {target}): not searched")
                        )
                if filename not in filenames:
                    continue
                path = here / filename
                real = path.resolve()
                if not real.is_file():
                    continue
                if path.is_symlink() and not real.is_relative_to(root):
                    if skipped is not None:
                        skipped.append((path, f"a link to {real}, outside {folder}: not read"))
                    continue
                found.add(real)
        else:
            raise FileNotFoundError(f"no such file or folder: {folder}")
    return sorted(found)


def load_results(paths: Iterable[str | os.PathLike[str]], errors: str = "raise") -> ResultsTable:
    """Load and merge results files into one table.

    Args:
        paths: ``results.json`` files (one run each, or merged ones).
        errors: ``"raise"`` (default): a malformed file raises; ``"skip"``: a
            malformed or unreadable file is left out whole and recorded in
            :attr:`ResultsTable.skipped` with the error. A run present in two
            files raises either way: which copy to keep is the user's choice.

    Returns:
        The merged :class:`ResultsTable`.

    Raises:
        ResultsFormatError: on malformed input (unless skipped) or a run present
            in two files; the message names the file and the key.

    Examples:
        >>> import tempfile, pathlib
        >>> from marl.report.results import RunResults
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> run = RunResults("vmas", "navigation", "mappo", seed=1)
        >>> run.add_evaluation(1000, [1.0, 2.0])
        >>> table = load_results([run.write(d)])
        >>> [str(r) for r in table.runs]
        ['vmas/navigation/mappo/seed_1']
        >>> table.evaluations[0].metrics["return"].mean()
        np.float64(1.5)
        >>> _ = (d / "bad.json").write_text("{not json")
        >>> table = load_results([d / "results.json", d / "bad.json"], errors="skip")
        >>> len(table.runs), table.skipped[0][1][:25]
        (1, 'cannot read JSON: Expecti')
    """
    if errors not in ("raise", "skip"):
        raise ValueError(f"errors must be 'raise' or 'skip', got {errors!r}")
    table = ResultsTable()
    for path in paths:
        try:
            _parse_file(Path(path), table)
        except ResultsFormatError as e:
            if errors == "raise" or isinstance(e, _DuplicateRunError):
                raise
            message = str(e).removeprefix(f"{path}: ").removeprefix(f"{path}")
            table.skipped.append((Path(path), message))
    table.evaluations.sort(key=lambda e: (e.run, e.step))
    return table
