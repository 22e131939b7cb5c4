"""``python -m benchmarks.speed`` on a cheap subset: the JSON has the expected fields."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_speed_harness_writes_json(tmp_path):
    out = tmp_path / "speed.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.speed", "--quick", "--only", "gae", "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "benchmark" in proc.stdout and "plain torch loop" in proc.stdout
    data = json.loads(out.read_text())
    assert data["meta"]["quick"] is True and data["errors"] == {}
    rows = data["results"]
    assert [r["benchmark"] for r in rows] == ["gae", "gae"]
    for row in rows:
        assert set(row) >= {"name", "value", "unit", "baseline_name", "baseline_value", "ratio"}
        assert row["value"] > 0 and row["baseline_value"] > 0 and row["ratio"] > 0
        assert row["unit"] == "ms"


def test_unknown_benchmark_is_an_error():
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.speed", "--only", "nope"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "unknown benchmark(s) ['nope']" in proc.stderr
