"""Keys, row types and validation shared by the results writer and reader."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

RESULTS_FILENAME = "results.json"
RETURN_KEY = "return"
ABSOLUTE_KEY = "absolute_metrics"
STEP_COUNT_KEY = "step_count"
ELAPSED_KEY = "elapsed_time"
STEP_RE = re.compile(r"^step_(\d+)$")


class ResultsFormatError(ValueError):
    """A results file does not follow the ``results.json`` format.

    The message names the file and the offending key path.
    """


@dataclass(frozen=True, order=True)
class RunKey:
    """Identifies one run: ``env/task/algorithm/seed``.

    ``seed`` is the run key exactly as written in the file (``"seed_0"``).
    """

    env: str
    task: str
    algorithm: str
    seed: str

    @property
    def task_id(self) -> str:
        """``"env/task"``, the name of the task across envs."""
        return f"{self.env}/{self.task}"

    def __str__(self) -> str:
        return f"{self.env}/{self.task}/{self.algorithm}/{self.seed}"


@dataclass(frozen=True)
class Evaluation:
    """One evaluation of one run: a row of the table.

    Attributes:
        run: which run.
        step: the evaluation index ``i`` of ``"step_<i>"``.
        step_count: env frames collected when the evaluation ran.
        metrics: metric name -> per-episode values (``"return"`` always there).
        elapsed_time: seconds since the run started, when written.
    """

    run: RunKey
    step: int
    step_count: int
    metrics: Mapping[str, np.ndarray]
    elapsed_time: float | None = None


def finite_numbers(values: Any, where: str) -> list[float]:
    """Validate a non-empty list of finite numbers; ``where`` names it in errors."""
    if hasattr(values, "tolist") and not isinstance(values, (str, bytes)):
        values = values.tolist()  # numpy arrays and CPU torch tensors, without importing torch
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        values = [values]
    if not isinstance(values, (list, tuple)) or not values:
        raise ResultsFormatError(f"{where}: expected a non-empty list of numbers, got {values!r}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise ResultsFormatError(f"{where}: expected numbers, got {v!r}")
        if not math.isfinite(v):
            raise ResultsFormatError(f"{where}: non-finite value {v!r}")
        out.append(float(v))
    return out
