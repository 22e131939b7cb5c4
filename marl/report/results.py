"""The ``results.json`` format (marl-eval's) and its typed writer and reader.

One run (one algorithm on one task with one seed) writes one file::

    {
      "<env>": {                       # e.g. "vmas"
        "<task>": {                    # e.g. "navigation"
          "<algorithm>": {             # e.g. "mappo"
            "seed_<k>": {              # the run key; "seed_0", "seed_1", ...
              "step_<i>": {            # i = 0, 1, 2, ... (the evaluation index)
                "step_count": <int>,   # env frames collected when evaluated
                "return": [<float>, ...],          # one per evaluation episode
                "<group>/return": [<float>, ...],  # optional, per agent group
                "elapsed_time": <float>            # optional, seconds since start
              },
              ...,
              "absolute_metrics": {            # optional
                "step_count": <int>,           # optional, the best evaluation's frames
                "return": [<float>, ...],      # 10x the evaluation episodes
                ...
              }
            }
          }
        }
      }
    }

This is the layout of InstaDeep's marl-eval (and BenchMARL's JSON logger), so
the files also feed those tools. ``"return"`` is the team return, the mean of
the groups' returns, per episode; for a zero-sum game whose task file declares
``evaluation: versus_random`` (tictactoe: that mean is always 0) it is the trained
policy's side's return against a random player, from each seat equally often, with
``win_rate``, ``draw_rate`` and ``loss_rate`` next to it. Other keys holding lists of
numbers are kept as extra metrics (``--metric`` in ``marl-report`` picks one). ``absolute_metrics``
holds marl-eval's absolute metric: the policy of the run's best evaluation (best mean
``"return"``), re-evaluated at the end of the run over 10 times the evaluation
episodes, with that evaluation's frames as ``step_count`` (marl-eval, which leaves
``step_count`` out of the metrics, ignores it); it is optional. Non-finite numbers
are rejected.

Several files (one per run, or merged ones) load into one :class:`ResultsTable`
keyed by ``(env, task, algorithm, seed, step)``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
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
    Evaluation,
    ResultsFormatError,
    RunKey,
    finite_numbers,
)
from marl.report._reader import ResultsTable, find_results_files, load_results

__all__ = [
    "ABSOLUTE_KEY",
    "RESULTS_FILENAME",
    "RETURN_KEY",
    "Evaluation",
    "ResultsFormatError",
    "ResultsTable",
    "RunKey",
    "RunResults",
    "atomic_write_json",
    "find_results_files",
    "load_results",
]


class RunResults:
    """Builds and writes the ``results.json`` of one run.

    Args:
        env: env name, e.g. ``"vmas"``.
        task: task name, e.g. ``"navigation"``.
        algorithm: algorithm name, e.g. ``"mappo"``.
        seed: the run's seed; an int becomes the key ``"seed_<seed>"``.

    Examples:
        >>> run = RunResults("vmas", "navigation", "mappo", seed=0)
        >>> run.add_evaluation(0, [-1.0, -0.5], group_returns={"agents": [-1.0, -0.5]})
        >>> run.add_evaluation(6000, [2.0, 3.0])
        >>> d = run.to_dict()["vmas"]["navigation"]["mappo"]["seed_0"]
        >>> d["step_1"]
        {'step_count': 6000, 'return': [2.0, 3.0]}
        >>> sorted(d["step_0"])
        ['agents/return', 'return', 'step_count']
    """

    def __init__(self, env: str, task: str, algorithm: str, seed: int | str) -> None:
        for name, value in (("env", env), ("task", task), ("algorithm", algorithm)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, str)) or seed == "":
            raise ValueError(f"seed must be an int or a non-empty run key, got {seed!r}")
        self.key = RunKey(env, task, algorithm, f"seed_{seed}" if isinstance(seed, int) else seed)
        self._steps: list[dict[str, Any]] = []
        self._absolute: dict[str, list[float]] = {}

    def add_evaluation(
        self,
        step_count: int,
        returns: Sequence[float] | Any,
        group_returns: Mapping[str, Sequence[float] | Any] | None = None,
        elapsed_time: float | None = None,
        **metrics: Sequence[float] | Any,
    ) -> None:
        """Append one evaluation (written as ``"step_<i>"`` with the next ``i``).

        Args:
            step_count: env frames collected so far; never decreasing.
            returns: per-episode team returns (a list, numpy array or CPU tensor).
            group_returns: group name -> per-episode returns of that group,
                written as ``"<group>/return"``.
            elapsed_time: seconds since the run started.
            **metrics: extra per-episode metrics, e.g. ``win_rate=[1.0, 0.0]``.

        Raises:
            ResultsFormatError: on a decreasing step count, an empty list or a
                non-finite value.
        """
        where = f"{self.key}/step_{len(self._steps)}"
        if isinstance(step_count, bool) or not isinstance(step_count, (int, np.integer)):
            raise ResultsFormatError(f"{where}: step_count must be an int, got {step_count!r}")
        if step_count < 0 or (self._steps and step_count < self._steps[-1][STEP_COUNT_KEY]):
            last = self._steps[-1][STEP_COUNT_KEY] if self._steps else 0
            raise ResultsFormatError(
                f"{where}: step_count {step_count} must be >= 0 and >= the previous one ({last})"
            )
        entry: dict[str, Any] = {STEP_COUNT_KEY: int(step_count)}
        entry[RETURN_KEY] = finite_numbers(returns, f"{where}/{RETURN_KEY}")
        for group, values in (group_returns or {}).items():
            entry[f"{group}/{RETURN_KEY}"] = finite_numbers(values, f"{where}/{group}/{RETURN_KEY}")
        for name, values in metrics.items():
            entry[name] = finite_numbers(values, f"{where}/{name}")
        if elapsed_time is not None:
            entry[ELAPSED_KEY] = float(elapsed_time)
        self._steps.append(entry)

    def set_absolute_metrics(
        self,
        returns: Sequence[float] | Any,
        group_returns: Mapping[str, Sequence[float] | Any] | None = None,
        step_count: int | None = None,
        **metrics: Sequence[float] | Any,
    ) -> None:
        """Set marl-eval's absolute metric (written as ``"absolute_metrics"``).

        It is the policy of the run's best evaluation (the best mean team return),
        evaluated again when the run ends over 10 times the evaluation episodes:
        :class:`~marl.experiment.Experiment` sets it at the end of every run that
        evaluates (see :mod:`marl.experiment.best_policy`).

        Args:
            returns: per-episode team returns of that re-evaluation.
            group_returns: group name -> per-episode returns of that group.
            step_count: the frames of the evaluation the policy comes from, written as
                ``"step_count"`` (readers leave it out of the metrics).
            **metrics: extra per-episode metrics, e.g. ``win_rate=[1.0, 0.0]``.

        Raises:
            ResultsFormatError: on an empty list, a non-finite value or a bad step count.

        Examples:
            >>> run = RunResults("vmas", "navigation", "mappo", seed=0)
            >>> run.set_absolute_metrics([1.0, 3.0], step_count=6000)
            >>> run.to_dict()["vmas"]["navigation"]["mappo"]["seed_0"]["absolute_metrics"]
            {'step_count': 6000, 'return': [1.0, 3.0]}
        """
        where = f"{self.key}/{ABSOLUTE_KEY}"
        absolute: dict[str, Any] = {}
        if step_count is not None:
            if (
                isinstance(step_count, bool)
                or not isinstance(step_count, (int, np.integer))
                or step_count < 0
            ):
                raise ResultsFormatError(
                    f"{where}/{STEP_COUNT_KEY}: expected an int >= 0, got {step_count!r}"
                )
            absolute[STEP_COUNT_KEY] = int(step_count)
        absolute[RETURN_KEY] = finite_numbers(returns, f"{where}/{RETURN_KEY}")
        for group, values in (group_returns or {}).items():
            absolute[f"{group}/{RETURN_KEY}"] = finite_numbers(values, f"{where}/{group}/return")
        for name, values in metrics.items():
            absolute[name] = finite_numbers(values, f"{where}/{name}")
        self._absolute = absolute

    def truncate(self, max_step_count: int, keep_absolute: bool = False) -> None:
        """Drop the evaluations after ``max_step_count`` frames (a resumed run redoes them),
        and the absolute metric unless ``keep_absolute`` (a finished run with nothing to
        train again keeps the figure it published).

        Examples:
            >>> run = RunResults("vmas", "navigation", "mappo", seed=0)
            >>> run.add_evaluation(100, [1.0]); run.add_evaluation(200, [2.0])
            >>> run.set_absolute_metrics([1.5], step_count=200)
            >>> run.truncate(150); run.num_evaluations, run.has_absolute_metrics
            (1, False)
        """
        self._steps = [s for s in self._steps if s[STEP_COUNT_KEY] <= max_step_count]
        if not keep_absolute:
            self._absolute = {}

    @property
    def has_absolute_metrics(self) -> bool:
        """Whether the absolute metric is set."""
        return bool(self._absolute)

    @property
    def num_evaluations(self) -> int:
        """How many evaluations were added."""
        return len(self._steps)

    @property
    def last_evaluation(self) -> tuple[int, list[float]] | None:
        """The last evaluation's ``(step_count, returns)`` (``None`` without one).

        Examples:
            >>> run = RunResults("vmas", "navigation", "mappo", 0)
            >>> run.add_evaluation(100, [1.0, 2.0])
            >>> run.last_evaluation
            (100, [1.0, 2.0])
        """
        if not self._steps:
            return None
        return self._steps[-1][STEP_COUNT_KEY], list(self._steps[-1][RETURN_KEY])

    @property
    def last_elapsed_time(self) -> float | None:
        """The last evaluation's ``elapsed_time`` (``None`` without one).

        Examples:
            >>> run = RunResults("vmas", "navigation", "mappo", 0)
            >>> run.add_evaluation(100, [1.0], elapsed_time=12.5)
            >>> run.last_elapsed_time
            12.5
        """
        return self._steps[-1].get(ELAPSED_KEY) if self._steps else None

    def to_dict(self) -> dict[str, Any]:
        """The nested marl-eval dict of this run."""
        run: dict[str, Any] = {f"step_{i}": dict(s) for i, s in enumerate(self._steps)}
        if self._absolute:
            run[ABSOLUTE_KEY] = dict(self._absolute)
        k = self.key
        return {k.env: {k.task: {k.algorithm: {k.seed: run}}}}

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the file atomically (temp file + rename), so a killed run never leaves half a file.

        Args:
            path: the file, or a folder to write ``results.json`` into.

        Returns:
            The path written.
        """
        path = Path(path)
        if path.is_dir():
            path = path / RESULTS_FILENAME
        atomic_write_json(path, self.to_dict())
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RunResults:
        """Read back a one-run file, e.g. to continue it after a resume.

        Raises:
            ResultsFormatError: if the file is malformed or holds more than one run.
        """
        table = load_results([path])
        if len(table.runs) != 1:
            raise ResultsFormatError(f"{path}: expected one run, found {len(table.runs)}")
        key = table.runs[0]
        run = cls(key.env, key.task, key.algorithm, key.seed)
        for ev in table.evaluations:
            metrics = {k: v.tolist() for k, v in ev.metrics.items()}
            run._steps.append({STEP_COUNT_KEY: ev.step_count, **metrics})
            if ev.elapsed_time is not None:
                run._steps[-1][ELAPSED_KEY] = ev.elapsed_time
        absolute = {k: v.tolist() for k, v in table.absolute.get(key, {}).items()}
        if absolute:  # the reader leaves the absolute metric's step_count out: keep it
            node = json.loads(Path(path).read_text())[key.env][key.task][key.algorithm]
            count = node[key.seed][ABSOLUTE_KEY].get(STEP_COUNT_KEY)
            if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                absolute = {STEP_COUNT_KEY: count, **absolute}
        run._absolute = absolute
        return run
