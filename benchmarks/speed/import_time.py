"""Import time of ``marl`` as a whole process, against ``import torch, tensordict``.

Each sample is a fresh ``python -c "import marl"`` (interpreter start included);
the baseline ``python -c "import torch, tensordict"`` is timed alternately in the
same run. ``import marl`` is lazy (torch loads on first use), so the full run
adds ``import marl.algorithms`` (every layer) against the same baseline: that
ratio shows what marl adds on top of its two core dependencies.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time


def _time(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def run(quick: bool = False) -> list[dict]:
    reps = 3 if quick else 9
    _time("import marl")  # warm the file cache for both
    ours, base = [], []
    for _ in range(reps):
        ours.append(_time("import marl"))
        base.append(_time("import torch, tensordict"))
    rows = [
        {
            "name": f"python -c 'import marl' (median of {reps})",
            "value": statistics.median(ours),
            "unit": "s",
            "baseline_name": "import torch, tensordict",
            "baseline_value": statistics.median(base),
            "higher_is_better": False,
        }
    ]
    if not quick:
        full = [_time("import marl.algorithms") for _ in range(reps)]
        rows.append({**rows[0], "name": f"python -c 'import marl.algorithms' (median of {reps})",
                     "value": statistics.median(full)})  # fmt: skip
    return rows


if __name__ == "__main__":
    print(run())
