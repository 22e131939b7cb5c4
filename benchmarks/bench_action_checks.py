"""The cost of ``check_actions`` (actions checked at the env boundary), per env step.

Three envs from the task catalogue, random actions, ``step_and_maybe_reset``:

- ``vmas/navigation`` (3 agents, continuous actions) at 60 and at 1024 envs;
- ``pettingzoo/simple_spread`` (3 agents, discrete actions, one env).

For each, one env is stepped in chunks that alternate between
``env.check_actions = False`` and ``True`` (same env, same run, so load from
other processes hits both alike); the figures are medians over chunks of the
time per step. The check alone (``marl.envs.action_checks.check_actions`` on
one step's actions) is also timed, which other processes disturb much less.

Run: ``python benchmarks/bench_action_checks.py [--reps 11]`` (about a minute on 2
cores; ``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from marl.envs import make_task
from marl.envs.action_checks import check_actions

# name -> (task, make_task kwargs, steps per timed chunk)
CASES = {
    "vmas/navigation, 60 envs": ("vmas/navigation", {"num_envs": 60}, 100),
    "vmas/navigation, 1024 envs": ("vmas/navigation", {"num_envs": 1024}, 20),
    "pettingzoo/simple_spread": ("pettingzoo/simple_spread", {}, 400),
}


def _chunk(env, td, steps: int) -> tuple[float, object]:
    start = time.perf_counter()
    for _ in range(steps):
        td = env.rand_action(td)
        _, td = env.step_and_maybe_reset(td)
    return (time.perf_counter() - start) / steps, td


def measure(task: str, kwargs: dict, steps: int, reps: int) -> dict[str, float]:
    """Median µs per step without and with the check, and of the check alone."""
    env = make_task(task, seed=0, **kwargs)
    td = env.reset()
    _, td = _chunk(env, td, steps)  # warm-up
    off, on = [], []
    for _ in range(reps):
        for flag, out in ((False, off), (True, on)):
            env.check_actions = flag
            per_step, td = _chunk(env, td, steps)
            out.append(per_step * 1e6)
    env.check_actions = False
    sample = env.rand_action(td)
    alone = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(steps):
            check_actions(sample, env.action_spec)
        alone.append((time.perf_counter() - start) / steps * 1e6)
    env.close()
    m_off, m_on = statistics.median(off), statistics.median(on)
    return {"off": m_off, "on": m_on, "alone": statistics.median(alone)}


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: µs per step, check off (marl) vs on."""
    rows = []
    for name, (task, kwargs, steps) in CASES.items():
        m = measure(task, kwargs, max(5, steps // 4) if quick else steps, 3 if quick else 11)
        rows.append(
            {
                "name": f"{name}: step without the check (check alone {m['alone']:.0f} µs)",
                "value": m["off"],
                "unit": "µs/step",
                "baseline_name": "step with check_actions=True",
                "baseline_value": m["on"],
                "higher_is_better": False,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=11)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, reps {args.reps}")
    for name, (task, kwargs, steps) in CASES.items():
        m = measure(task, kwargs, max(5, steps // 4) if args.quick else steps, args.reps)
        extra = m["on"] - m["off"]
        print(
            f"{name:28s} step: {m['off']:8.1f} µs without, {m['on']:8.1f} µs with the check "
            f"(+{extra:6.1f} µs, {extra / m['off']:+6.1%}); check alone {m['alone']:6.1f} µs "
            f"({m['alone'] / m['off']:.1%} of a step)"
        )


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
