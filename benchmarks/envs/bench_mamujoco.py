"""MaMuJoCoEnv rollouts vs the raw ``gymnasium-robotics`` parallel-env loop: env-steps/s.

Both sides play the same task with uniform random actions, in the same process,
on the same number of envs (1, and 8 stepped one after the other): the raw loop
samples each agent's ``Box`` action space, calls ``parallel_env.step`` with the
action dict and resets an env whose agents ended; the wrapper side runs
``rollout(break_when_any_done=False)`` on :class:`~marl.envs.MaMuJoCoEnv` (a
``SerialEnv`` of 8 for 8), which adds random actions from the action spec,
the float32 conversion, the root ``"state"``, TensorDict outputs, resets and
stacking over time. Pairs of repetitions run back to back in alternating
order; medians are reported.

The marl side runs two ways (``benchmarks/envs/_timing.py``): its step loop
(``rand_action`` + ``step_and_maybe_reset``, nothing kept, as the raw loop), and
``rollout``, which also keeps every step and stacks them over time.

Target: >= 80% of raw for the step loop (issue 18, single-process families).

Usage:
    python benchmarks/envs/bench_mamujoco.py [--reps 5] [--steps 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

try:
    from benchmarks.envs._timing import Case, print_table, rows
except ModuleNotFoundError:  # run as a file: the repo root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.envs._timing import Case, print_table, rows

TARGET = 0.80
# name -> (scenario, partition)
TASKS = {
    "halfcheetah_2x3": ("HalfCheetah", "2x3"),
    "humanoid_9_8": ("Humanoid", "9|8"),
}


def raw_loop(task: str, num_envs: int, steps: int, seed: int = 0) -> float:
    """Env-steps/s (summed over envs) of the package's own parallel-env loop."""
    from gymnasium_robotics import mamujoco_v1

    scenario, conf = TASKS[task]
    envs = [mamujoco_v1.parallel_env(scenario, conf) for _ in range(num_envs)]
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
        for j, a in enumerate(env.possible_agents):
            env.action_space(a).seed(seed + i * 100 + j)
    start = time.perf_counter()
    for _ in range(steps):
        for env in envs:
            actions = {a: env.action_space(a).sample() for a in env.agents}
            _, _, term, trunc, _ = env.step(actions)
            if any(term.values()) or any(trunc.values()):
                env.reset()
    return steps * num_envs / (time.perf_counter() - start)


def _wrapper(task: str, num_envs: int, seed: int) -> object:
    from marl.envs import MaMuJoCoEnv, SerialEnv

    scenario, conf = TASKS[task]
    if num_envs == 1:
        return MaMuJoCoEnv(scenario, conf, seed=seed)
    env = SerialEnv(num_envs, MaMuJoCoEnv, dict(scenario=scenario, agent_conf=conf))
    env.set_seed(seed)
    return env


def cases(tasks: list[str] | None = None) -> list[Case]:
    """The comparisons, one per task (all of :data:`TASKS` by default)."""
    return [
        Case(
            label=f"MaMuJoCoEnv {task}",
            baseline="raw mamujoco_v1.parallel_env loop",
            raw=lambda n, steps, seed, t=task: raw_loop(t, n, steps, seed),
            make_env=lambda n, seed, t=task: _wrapper(t, n, seed),
        )
        for task in tasks or list(TASKS)
    ]


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: the wrapper vs the raw package."""
    return rows(cases(), 300 if quick else 2000, 3 if quick else 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000, help="steps per env with 1 env")
    parser.add_argument("--task", choices=sorted(TASKS), action="append")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print_table(cases(args.task), args.steps, args.reps, TARGET)


if __name__ == "__main__":
    main()
