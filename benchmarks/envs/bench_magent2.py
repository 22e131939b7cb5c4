"""MAgent2 through marl (``magent2_env``) vs MAgent2's own parallel loop: env-steps/s.

Both sides play the same task with uniform random actions, in the same process,
on the same number of envs (1, and 8 stepped one after the other). The raw loop
draws every live agent's action at once with numpy (cheaper than sampling each
agent's gymnasium space, so the ratio is conservative), builds the action dict,
calls ``env.step`` and resets an env when its last agent has left. The wrapper
side runs ``rollout(break_when_any_done=False)`` on ``magent2_env`` (a
``SerialEnv`` of 8 for 8 envs): random actions from the action spec, one
TensorDict per step with every team stacked ``[n_agents, H, W, C]`` and masks
for dead agents, resets and stacking over time. Pairs of repetitions run back
to back in alternating order; medians are reported.

Target: >= 80% of raw (issue 18, single-process families).

Usage:
    python benchmarks/envs/bench_magent2.py [--reps 5] [--steps 1000]
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

import numpy as np
import torch

try:
    from benchmarks.envs._timing import paired_rates, rate_row, rollout_rate, verdict
except ModuleNotFoundError:  # run as a file: the repo root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.envs._timing import paired_rates, rate_row, rollout_rate, verdict

TARGET = 0.80
# label -> (magent2 task, its arguments)
TASKS = {
    "battle": ("battle_v4", {"map_size": 45, "max_cycles": 1000}),  # 162 agents
    "battle_small": ("battle_v4", {"map_size": 20, "max_cycles": 200}),  # 24 agents
}


def raw_loop(label: str, num_envs: int, steps: int, seed: int = 0) -> float:
    """Env-steps/s (summed over envs) of MAgent2's own parallel API."""
    task, kwargs = TASKS[label]
    module = importlib.import_module(f"magent2.environments.{task}")
    envs = [module.parallel_env(**kwargs) for _ in range(num_envs)]
    n_actions = {}
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
        n_actions.update({a: env.action_space(a).n for a in env.possible_agents})
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    for _ in range(steps):
        for env in envs:
            agents = env.agents
            highs = np.fromiter((n_actions[a] for a in agents), dtype=np.int64, count=len(agents))
            actions = rng.integers(0, highs)
            env.step(dict(zip(agents, actions.tolist())))
            if not env.agents:
                env.reset()
    return steps * num_envs / (time.perf_counter() - start)


def _wrapper(label: str, num_envs: int, seed: int) -> object:
    from marl.envs import SerialEnv, magent2_env

    task, kwargs = TASKS[label]
    if num_envs == 1:
        return magent2_env(task, seed=seed, **kwargs)
    env = SerialEnv(num_envs, magent2_env, dict(task=task, **kwargs))
    env.set_seed(seed)
    return env


def wrapper_rollout(label: str, num_envs: int, steps: int, seed: int = 0) -> float:
    """Env-steps/s (summed over envs) of the wrapper's ``rollout``."""
    return rollout_rate(_wrapper(label, num_envs, seed), steps, num_envs)


def measure(label: str, num_envs: int, reps: int, steps: int) -> dict[str, float]:
    """Median env-steps/s of the raw loop and the wrapper, and the median paired ratio."""
    return paired_rates(
        lambda n, seed: raw_loop(label, num_envs, n, seed),
        lambda n, seed: wrapper_rollout(label, num_envs, n, seed),
        reps,
        steps,
    )


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: marl's MAgent2 envs vs the raw loop."""
    steps = 200 if quick else 1000
    rows = []
    for label, (task, kwargs) in TASKS.items():
        for num_envs in (1, 8):
            n = steps if num_envs == 1 else steps // 8
            m = measure(label, num_envs, 3 if quick else 5, n)
            name = (
                f"magent2_env {task} map {kwargs['map_size']} rollout, "
                f"{num_envs} env(s) x {n} steps"
            )
            rows.append(rate_row(name, "raw magent2 parallel loop", m))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000, help="steps per env with 1 env")
    parser.add_argument("--task", choices=sorted(TASKS), action="append")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, reps {args.reps}")
    for label in args.task or list(TASKS):
        for num_envs in (1, 8):
            steps = args.steps if num_envs == 1 else max(args.steps // 8, 1)
            m = measure(label, num_envs, args.reps, steps)
            print(
                f"{label} ({TASKS[label][0]}, map {TASKS[label][1]['map_size']}), "
                f"{num_envs} env(s) x {steps} steps: raw {m['raw']:7.0f} env-steps/s | "
                f"magent2_env.rollout {m['wrapper']:7.0f} env-steps/s | "
                f"{verdict(m['ratio'], TARGET)}"
            )


if __name__ == "__main__":
    main()
