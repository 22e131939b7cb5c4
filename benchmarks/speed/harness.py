"""Run the registered benchmarks, fill in the ratios, print the table, write the JSON."""

from __future__ import annotations

import importlib
import json
import math
import platform
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# name -> module exposing run(quick) -> list[dict]
BENCHMARKS = {
    "import_time": "benchmarks.speed.import_time",
    "gae": "benchmarks.bench_gae",
    "multiagent_mlp": "benchmarks.bench_multiagent_mlp",
    "update_step": "benchmarks.bench_update_step",
    "learner": "benchmarks.bench_learner_vs_commit",
    "replay_buffer": "benchmarks.bench_replay_buffer",
    "vmas_env": "benchmarks.bench_vmas_env",
    "pettingzoo_env": "benchmarks.bench_pettingzoo_env",
    "epymarl_envs": "benchmarks.envs.bench_epymarl_envs",
    "mamujoco_env": "benchmarks.envs.bench_mamujoco",
    "magent2": "benchmarks.envs.bench_magent2",
    "overcooked_env": "benchmarks.envs.bench_overcooked",
    "env_floor": "benchmarks.envs.bench_floor",
    "native_lbf": "benchmarks.envs.bench_native_lbf",
    "native_rware": "benchmarks.envs.bench_native_rware",
    "native_smax": "benchmarks.envs.bench_native_smax",
    "collector": "benchmarks.bench_collector",
    "action_checks": "benchmarks.bench_action_checks",
    "train_e2e": "benchmarks.speed.train_e2e",
}
FIELDS = ("benchmark", "name", "value", "unit", "baseline_name", "baseline_value", "ratio")


def ratio(row: dict[str, Any]) -> float | None:
    """marl's speed relative to the baseline (> 1: marl is faster)."""
    value, base = row.get("value"), row.get("baseline_value")
    if not value or not base or not all(map(math.isfinite, (value, base))):
        return None
    return value / base if row.get("higher_is_better", True) else base / value


def run_benchmarks(names: Sequence[str], quick: bool) -> tuple[list[dict], dict[str, str]]:
    """Run each benchmark; returns the rows and ``{name: error}`` for those that raised."""
    rows: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    for name in names:
        start = time.perf_counter()
        try:
            module = importlib.import_module(BENCHMARKS[name])
            out = module.run(quick=quick)
        except Exception as err:  # one broken benchmark must not hide the others
            errors[name] = f"{type(err).__name__}: {err}"
            traceback.print_exc()
            continue
        for row in out:
            row = {"benchmark": name, **row}
            if row.get("ratio") is None:
                row["ratio"] = ratio(row)
            row["seconds"] = None
            rows.append(row)
        if out:
            rows[-1]["seconds"] = time.perf_counter() - start
    return rows, errors


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value == 0 or 0.01 <= abs(value) < 1e5:
            return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
        return f"{value:.3g}"
    return str(value)


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The plain-text table: benchmark, metric, marl, baseline, baseline value, ratio."""
    head = ("benchmark", "metric", "marl", "unit", "baseline", "baseline value", "ratio")
    body = [
        (
            r["benchmark"],
            r["name"],
            _fmt(r["value"]),
            r["unit"],
            r.get("baseline_name") or "-",
            _fmt(r.get("baseline_value")),
            "-" if r.get("ratio") is None else f"{r['ratio']:.2f}x",
        )
        for r in rows
    ]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip() for x in [head, *body]]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def write_json(path: Path, rows: list[dict], errors: dict[str, str], quick: bool) -> None:
    import torch

    meta = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "quick": quick,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "processor": platform.processor(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, "results": rows, "errors": errors}, indent=2))
