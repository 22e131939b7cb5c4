"""Reference scores, and whether a set of runs reproduced them.

A reference says: *algorithm* on *task*, evaluated at *frames*, scored *value*
(with *source* saying where that number comes from). It is reproduced when
marl's result lies within the tolerance of it:

- **marl's result** is the mean over seeds of each run's score at ``frames``;
  a run's score there is its mean episode ``metric`` (``"return"`` unless the
  reference names another) at its first evaluation with ``step_count >= frames``
  (runs stop a batch past their total frames: 100352 for 100000). Runs that
  never reached ``frames`` do not count.
- **the tolerance** is absolute (``tolerance``) or relative to the value
  (``tolerance_rel``: ``tolerance_rel * |value|``); a reference gives exactly one.
- **the verdict** is ``reproduced`` when ``|mean - value| <= tolerance``,
  ``below`` or ``above`` otherwise (both are misses: a result far above its
  reference also means the runs differ from the ones that made it), and
  ``missing`` when no run reached ``frames``. The Student-t interval of the
  mean over seeds is shown next to the verdict, and whether it overlaps
  ``[value - tolerance, value + tolerance]``, but it does not change the verdict:
  with 2 or 3 seeds the interval is so wide that an overlap would pass almost
  anything. Choose the tolerance to cover the seed-to-seed spread of the mean.

The file formats: a suite's ``references:`` list, ``references.json`` (written
by ``marl-bench`` into its output folder) or any JSON/YAML file holding the list
or ``{"references": [...]}``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from marl.atomic import atomic_write_json
from marl.report._bootstrap import Interval
from marl.report._format import RETURN_KEY
from marl.report._reader import ResultsTable
from marl.report.intervals import mean_confidence_interval

__all__ = [
    "REFERENCES_FILENAME",
    "Reference",
    "ReferenceCheck",
    "ReferenceFormatError",
    "check_keys",
    "check_references",
    "load_references",
    "parse_references",
    "write_references",
]

REFERENCES_FILENAME = "references.json"
"""The references of a suite, as ``marl-bench`` copies them into its output folder."""

_REQUIRED = ("task", "algorithm", "frames", "value", "source")
_OPTIONAL = ("tolerance", "tolerance_rel", "metric")


class ReferenceFormatError(ValueError):
    """A malformed reference; the message names the entry and the field."""


@dataclass(frozen=True)
class Reference:
    """A published (or previously measured) score that a set of runs should reproduce.

    Attributes:
        task: ``"env/task"``, e.g. ``"vmas/navigation"``.
        algorithm: e.g. ``"mappo"``.
        frames: the frame count the value was measured at.
        value: the mean over seeds of the runs' score at ``frames``.
        source: where the number comes from (a commit and suite, or a paper).
        tolerance: absolute tolerance (exactly one of ``tolerance``, ``tolerance_rel``).
        tolerance_rel: tolerance as a fraction of ``|value|``.
        metric: the per-episode metric (default ``"return"``).

    Examples:
        >>> ref = Reference("vmas/navigation", "mappo", 300000, 2.0, "a paper", tolerance_rel=0.25)
        >>> ref.band, ref.tolerance_text
        (0.5, '± 0.5 (25%)')
    """

    task: str
    algorithm: str
    frames: int
    value: float
    source: str
    tolerance: float | None = None
    tolerance_rel: float | None = None
    metric: str = RETURN_KEY

    @property
    def band(self) -> float:
        """The absolute tolerance: ``tolerance``, or ``tolerance_rel * |value|``."""
        if self.tolerance is not None:
            return self.tolerance
        return float(self.tolerance_rel or 0.0) * abs(self.value)

    @property
    def tolerance_text(self) -> str:
        """``"± 0.5"``, or ``"± 0.5 (25%)"`` for a relative tolerance."""
        text = f"± {self.band:.4g}"
        if self.tolerance is None:
            text += f" ({100 * float(self.tolerance_rel or 0.0):g}%)"
        return text

    @property
    def key(self) -> tuple[str, str, int, str]:
        """``(task, algorithm, frames, metric)``: at most one reference per key."""
        return (self.task, self.algorithm, self.frames, self.metric)

    def __str__(self) -> str:
        return f"{self.task} {self.algorithm} at {self.frames} frames"

    def to_dict(self) -> dict[str, Any]:
        """The reference as written in a file (unset optional fields left out)."""
        out: dict[str, Any] = {
            "task": self.task,
            "algorithm": self.algorithm,
            "frames": self.frames,
            "value": self.value,
        }
        if self.tolerance is not None:
            out["tolerance"] = self.tolerance
        if self.tolerance_rel is not None:
            out["tolerance_rel"] = self.tolerance_rel
        if self.metric != RETURN_KEY:
            out["metric"] = self.metric
        out["source"] = self.source
        return out


def _number(value: Any, where: str, minimum: float | None = None, strict: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and minimum is not None:
        ok = value > minimum if strict else value >= minimum
    if not ok:
        bound = "" if minimum is None else f" {'>' if strict else '>='} {minimum:g}"
        raise ReferenceFormatError(f"{where}: expected a finite number{bound}, got {value!r:.80}")
    return float(value)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ReferenceFormatError(f"{where}: expected a non-empty string, got {value!r:.80}")
    return value.strip()


def check_keys(
    data: Mapping[str, Any],
    required: Sequence[str],
    optional: Sequence[str],
    where: str,
    error: type[Exception],
    noun: str = "field(s)",
    missing_noun: str = "field(s)",
) -> None:
    """Refuse a mapping with a key outside ``required`` and ``optional``, or without one of
    ``required``: the references here and the suites of ``marl-bench`` read alike.

    Args:
        data: the mapping read from a file.
        required: the keys it must have.
        optional: the keys it may have besides.
        where: what ``data`` is, to open the message.
        error: the exception class to raise.
        noun: what the keys are called in the message on unknown keys.
        missing_noun: what they are called in the message on missing keys.

    Raises:
        Exception: ``error``, naming the unknown or the missing keys.
    """
    unknown = sorted(set(data) - set(required) - set(optional))
    if unknown:
        raise error(
            f"{where}: unknown {noun} {unknown}; expected {list(required)} and optionally "
            f"{list(optional)}"
        )
    missing = [k for k in required if k not in data]
    if missing:
        raise error(f"{where}: missing {missing_noun} {missing}")


def _parse_one(item: Any, where: str) -> Reference:
    if not isinstance(item, Mapping):
        raise ReferenceFormatError(
            f"{where}: expected a mapping with {list(_REQUIRED)} and one of "
            f"tolerance / tolerance_rel, got {item!r:.80}"
        )
    if isinstance(item.get("task"), str) and isinstance(item.get("algorithm"), str):
        where = f"{where} ({item['task']} {item['algorithm']})"
    check_keys(item, _REQUIRED, _OPTIONAL, where, ReferenceFormatError)
    task = _text(item["task"], f"{where}: task")
    if "/" not in task:
        raise ReferenceFormatError(f"{where}: task: expected 'env/task', got {task!r}")
    frames = item["frames"]
    if isinstance(frames, float) and frames.is_integer():
        frames = int(frames)
    if not isinstance(frames, int) or isinstance(frames, bool) or frames < 0:
        raise ReferenceFormatError(f"{where}: frames: expected an int >= 0, got {frames!r:.80}")
    given = [k for k in ("tolerance", "tolerance_rel") if item.get(k) is not None]
    if len(given) != 1:
        raise ReferenceFormatError(
            f"{where}: expected exactly one of tolerance (absolute) and tolerance_rel "
            f"(a fraction of |value|), got {given or 'neither'}"
        )
    tolerance = tolerance_rel = None
    if given == ["tolerance"]:
        tolerance = _number(item["tolerance"], f"{where}: tolerance", 0.0)
    else:
        tolerance_rel = _number(item["tolerance_rel"], f"{where}: tolerance_rel", 0.0, True)
    return Reference(
        task=task,
        algorithm=_text(item["algorithm"], f"{where}: algorithm"),
        frames=frames,
        value=_number(item["value"], f"{where}: value"),
        source=_text(item["source"], f"{where}: source"),
        tolerance=tolerance,
        tolerance_rel=tolerance_rel,
        metric=_text(item.get("metric", RETURN_KEY), f"{where}: metric"),
    )


def parse_references(data: Any, where: str = "references") -> list[Reference]:
    """Validate a list of reference mappings.

    Args:
        data: the parsed list (from YAML or JSON).
        where: names the list in error messages (e.g. the file).

    Raises:
        ReferenceFormatError: naming the entry (index, task and algorithm) and the field.

    Examples:
        >>> refs = parse_references([{"task": "vmas/navigation", "algorithm": "mappo",
        ...     "frames": 300000, "value": 2.1, "tolerance": 0.4, "source": "marl abc1234"}])
        >>> refs[0].band
        0.4
        >>> parse_references([{"task": "vmas/navigation", "algorithm": "mappo",
        ...     "frames": 300000, "value": "high", "tolerance": 0.4, "source": "me"}])
        Traceback (most recent call last):
        ...
        marl.report.references.ReferenceFormatError: references[0] (vmas/navigation mappo): value: expected a finite number, got 'high'
    """
    if not isinstance(data, list):
        raise ReferenceFormatError(f"{where}: expected a list of references, got {data!r:.80}")
    refs = [_parse_one(item, f"{where}[{i}]") for i, item in enumerate(data)]
    seen: dict[tuple[str, str, int, str], int] = {}
    for i, ref in enumerate(refs):
        if ref.key in seen:
            raise ReferenceFormatError(
                f"{where}[{i}] ({ref.task} {ref.algorithm}): duplicate of entry {seen[ref.key]} "
                f"(same task, algorithm, frames {ref.frames} and metric {ref.metric!r})"
            )
        seen[ref.key] = i
    return refs


def load_references(path: str | os.PathLike[str]) -> list[Reference]:
    """Read references from a JSON or YAML file.

    The file holds the list itself or a mapping with a ``references`` key, so a
    suite file (``benchmarks/suites/*.yaml``) and ``references.json`` both work.

    Raises:
        FileNotFoundError: when the file does not exist.
        ReferenceFormatError: when it cannot be parsed or a reference is malformed.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ReferenceFormatError(f"{path}: invalid JSON: {err}") from None
    else:
        import yaml  # a core dependency; imported here to keep `import marl.report` light

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ReferenceFormatError(f"{path}: invalid YAML: {err}") from None
    if isinstance(data, Mapping):
        if "references" not in data:
            raise ReferenceFormatError(
                f"{path}: expected a list of references or a mapping with a 'references' key, "
                f"got keys {sorted(data)}"
            )
        data = data["references"]
    return parse_references(data, str(path))


def write_references(
    path: str | os.PathLike[str], references: Sequence[Reference], origin: str = ""
) -> Path:
    """Write ``{"origin": ..., "references": [...]}`` atomically; returns the path.

    Examples:
        >>> import tempfile
        >>> ref = Reference("vmas/navigation", "mappo", 100, 1.0, "me", tolerance=0.5)
        >>> path = write_references(tempfile.mkdtemp() + "/references.json", [ref], "suite x")
        >>> load_references(path) == [ref]
        True
    """
    path = Path(path)
    atomic_write_json(path, {"origin": origin, "references": [r.to_dict() for r in references]})
    return path


@dataclass(frozen=True)
class ReferenceCheck:
    """marl's result next to one reference, with the verdict.

    Attributes:
        reference: the reference.
        verdict: ``"reproduced"``, ``"below"``, ``"above"`` or ``"missing"``.
        result: mean over seeds with its Student-t interval (``None`` when missing).
        seeds: the run ids that counted.
        evaluated_at: the ``step_count`` of the evaluation used, per counted run.
        reason: why the result is missing (empty otherwise).
    """

    reference: Reference
    verdict: str
    result: Interval | None
    seeds: tuple[str, ...] = ()
    evaluated_at: tuple[int, ...] = ()
    reason: str = ""

    @property
    def passed(self) -> bool:
        """Whether the result reproduced the reference."""
        return self.verdict == "reproduced"

    @property
    def ci_overlaps(self) -> bool | None:
        """Whether the CI meets ``[value - band, value + band]`` (``None``: no CI)."""
        if self.result is None or math.isnan(self.result.low):
            return None
        ref = self.reference
        return self.result.low <= ref.value + ref.band and self.result.high >= ref.value - ref.band

    def describe(self) -> str:
        """One line for ``marl-report --check``."""
        ref = self.reference
        target = f"reference {ref.value:.4g} {ref.tolerance_text} ({ref.source})"
        if self.result is None:
            return f"{ref}: missing: {self.reason}; {target}"
        return (
            f"{ref}: {self.verdict}: marl {self.result.format('.4g')} over "
            f"{len(self.seeds)} seed(s); {target}"
        )


def _check_one(table: ResultsTable, ref: Reference, confidence: float) -> ReferenceCheck:
    runs = [r for r in table.runs if r.task_id == ref.task and r.algorithm == ref.algorithm]
    scores, seeds, at, furthest, no_metric = [], [], [], [], []
    for run in runs:
        evals = table.run_evaluations(run)
        if evals:
            furthest.append(evals[-1].step_count)
        ev = next((e for e in evals if e.step_count >= ref.frames), None)
        if ev is None:
            continue
        if ref.metric not in ev.metrics:
            no_metric.append(run.seed)
            continue
        scores.append(float(np.mean(ev.metrics[ref.metric])))
        seeds.append(run.seed)
        at.append(ev.step_count)
    if not scores:
        if not runs:
            reason = "no runs"
        elif no_metric:
            reason = f"no {ref.metric!r} in the evaluation of {', '.join(no_metric)}"
        else:
            reason = f"{len(runs)} run(s), none reached {ref.frames} frames"
            reason += f" (furthest: {max(furthest)})" if furthest else " (no evaluation yet)"
        return ReferenceCheck(ref, "missing", None, reason=reason)
    ci = mean_confidence_interval(scores, confidence)
    diff = ci.point - ref.value
    # a hair of slack so that a value written with the tolerance's own rounding passes
    if abs(diff) <= ref.band + 1e-9 * max(1.0, abs(ref.value)):
        verdict = "reproduced"
    else:
        verdict = "below" if diff < 0 else "above"
    return ReferenceCheck(ref, verdict, ci, tuple(seeds), tuple(at))


def check_references(
    table: ResultsTable, references: Sequence[Reference], confidence: float = 0.95
) -> list[ReferenceCheck]:
    """Compare the runs of ``table`` with each reference (see the module docstring).

    Args:
        table: the loaded runs.
        references: the references.
        confidence: level of the Student-t interval shown next to the verdict.

    Returns:
        One :class:`ReferenceCheck` per reference, in the references' order.

    Examples:
        >>> import tempfile
        >>> from marl.report.results import RunResults, load_results
        >>> paths = []
        >>> for seed, final in enumerate([1.8, 2.2]):
        ...     run = RunResults("vmas", "navigation", "mappo", seed)
        ...     run.add_evaluation(0, [0.0])
        ...     run.add_evaluation(100, [final])
        ...     paths.append(run.write(tempfile.mkdtemp()))
        >>> table = load_results(paths)
        >>> refs = parse_references([
        ...     {"task": "vmas/navigation", "algorithm": "mappo", "frames": 100, "value": 2.1,
        ...      "tolerance": 0.2, "source": "x"},
        ...     {"task": "vmas/navigation", "algorithm": "mappo", "frames": 50, "value": 3.0,
        ...      "tolerance": 0.2, "source": "x"},
        ...     {"task": "vmas/navigation", "algorithm": "ippo", "frames": 100, "value": 1.0,
        ...      "tolerance_rel": 0.1, "source": "x"}])
        >>> [c.verdict for c in check_references(table, refs)]
        ['reproduced', 'below', 'missing']
    """
    return [_check_one(table, ref, confidence) for ref in references]
