"""The wrapper-vs-raw timing loop shared by the env benchmarks.

Each env benchmark times marl's wrapper (``rollout``) against the raw package's own
step loop on the same task. Both sides are functions ``(steps, seed) -> env-steps/s``;
:func:`paired_rates` warms both up, then runs pairs of repetitions back to back in
alternating order (so that a slow spell of the shared machine hits both sides alike)
and reports medians.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

# (steps, seed) -> env-steps/s, summed over envs
Rate = Callable[[int, int], float]


def rollout_rate(env: Any, steps: int, num_envs: int = 1) -> float:
    """Env-steps/s (summed over envs) of ``env.rollout(steps, break_when_any_done=False)``.

    The env is reset first, outside the timed part. ``num_envs > 1`` means a batched env
    whose rollout has batch size ``[num_envs, steps]``; anything else raises.
    """
    env.reset()
    start = time.perf_counter()
    td = env.rollout(steps, break_when_any_done=False)
    elapsed = time.perf_counter() - start
    expected = torch.Size([steps] if num_envs == 1 else [num_envs, steps])
    if td.batch_size != expected:
        raise RuntimeError(f"unexpected rollout batch size {td.batch_size}, expected {expected}")
    return steps * num_envs / elapsed


def paired_rates(raw: Rate, wrapper: Rate, reps: int, steps: int, warmup: int = 20) -> dict:
    """Median env-steps/s of the raw loop and the wrapper, and the median paired ratio.

    Args:
        raw: the raw package's loop, ``raw(steps, seed)`` -> env-steps/s.
        wrapper: marl's wrapper, ``wrapper(steps, seed)`` -> env-steps/s.
        reps: pairs of repetitions; repetition ``rep`` uses seed ``rep``, and the raw
            loop goes first in even ones, the wrapper in odd ones.
        steps: steps per repetition.
        warmup: steps of the untimed warm-up run of each side (seed 0).

    Returns:
        ``{"raw": ..., "wrapper": ..., "ratio": ...}``: the two medians and the median of
        the per-pair ratios wrapper / raw.
    """
    raw(warmup, 0)
    wrapper(warmup, 0)
    raws, wrapped, ratios = [], [], []
    for rep in range(reps):
        if rep % 2 == 0:
            r = raw(steps, rep)
            w = wrapper(steps, rep)
        else:
            w = wrapper(steps, rep)
            r = raw(steps, rep)
        raws.append(r)
        wrapped.append(w)
        ratios.append(w / r)
    return {
        "raw": statistics.median(raws),
        "wrapper": statistics.median(wrapped),
        "ratio": statistics.median(ratios),
    }


def rate_row(name: str, baseline_name: str, m: dict) -> dict:
    """The ``python -m benchmarks.speed`` row of a :func:`paired_rates` result."""
    return {
        "name": name,
        "value": m["wrapper"],
        "unit": "env-steps/s",
        "baseline_name": baseline_name,
        "baseline_value": m["raw"],
        "ratio": m["ratio"],
    }


def verdict(ratio: float, target: float) -> str:
    """``median paired ratio  85.0% (target 80%) OK`` (or ``BELOW TARGET``)."""
    word = "OK" if ratio >= target else "BELOW TARGET"
    return f"median paired ratio {ratio:6.1%} (target {target:.0%}) {word}"
