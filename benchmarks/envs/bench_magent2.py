"""MAgent2 through marl (``magent2_env``) vs MAgent2's own parallel loop: env-steps/s.

Both sides play the same task with uniform random actions, in the same process,
on the same number of envs (1, and 8 stepped one after the other). The raw loop
draws every live agent's action at once with numpy (cheaper than sampling each
agent's gymnasium space, so the ratio is conservative), builds the action dict,
calls ``env.step`` and resets an env when its last agent has left. The marl side
is ``magent2_env`` (a ``SerialEnv`` of 8 for 8 envs), two ways (see
``benchmarks/envs/_timing.py``): its step loop (random actions from the action spec,
one TensorDict per step with every team stacked ``[n_agents, H, W, C]`` and masks
for dead agents, resets), and ``rollout``, which also keeps every step and stacks
them over time. Pairs of repetitions run back to back in alternating order;
medians are reported.

Target: >= 80% of raw for the step loop (issue 18, single-process families).

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
    from benchmarks.envs._timing import Case, print_table, rows
except ModuleNotFoundError:  # run as a file: the repo root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.envs._timing import Case, print_table, rows

TARGET = 0.80
# label -> (magent2 task, its arguments)
TASKS = {
    "battle": ("battle_v4", {"map_size": 45, "max_cycles": 1000}),  # 162 agents
    "battle_small": ("battle_v4", {"map_size": 20, "max_cycles": 200}),  # 24 agents
    "gather": ("gather_v5", {"max_cycles": 500}),  # 495 agents, map 200 (fixed)
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


def _make(engine_arrays: bool, **kwargs: object) -> object:
    from marl.envs import magent2_env

    env = magent2_env(**kwargs)
    env.engine_arrays = engine_arrays
    return env


def _wrapper(label: str, num_envs: int, seed: int, engine_arrays: bool = True) -> object:
    from marl.envs import SerialEnv

    task, kwargs = TASKS[label]
    if num_envs == 1:
        return _make(engine_arrays, task=task, seed=seed, **kwargs)
    env = SerialEnv(num_envs, _make, dict(engine_arrays=engine_arrays, task=task, **kwargs))
    env.set_seed(seed)
    return env


def cases(labels: list[str] | None = None, engine_arrays: bool = True) -> list[Case]:
    """The comparisons, one per task label (all of :data:`TASKS` by default).

    ``engine_arrays=False`` times the wrapper stepping through MAgent2's PettingZoo
    dicts (``MAgent2Env.engine_arrays``), as it did before the engine path.
    """
    out = []
    path = "" if engine_arrays else " (PettingZoo path)"
    for label in labels or list(TASKS):
        task, kwargs = TASKS[label]
        out.append(
            Case(
                # gather's map is fixed at 200
                label=f"magent2_env {task} map {kwargs.get('map_size', 200)}{path}",
                baseline="raw magent2 parallel loop",
                raw=lambda n, steps, seed, label=label: raw_loop(label, n, steps, seed),
                make_env=lambda n, seed, label=label: _wrapper(label, n, seed, engine_arrays),
            )
        )
    return out


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: marl's MAgent2 envs vs the raw loop."""
    return rows(cases(), 200 if quick else 1000, 3 if quick else 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000, help="steps per env with 1 env")
    parser.add_argument("--task", choices=sorted(TASKS), action="append")
    parser.add_argument(
        "--pettingzoo-path",
        action="store_true",
        help="also time the wrapper stepping through MAgent2's PettingZoo dicts",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    table = cases(args.task)
    if args.pettingzoo_path:
        table += cases(args.task, engine_arrays=False)
    print_table(table, args.steps, args.reps, TARGET)


if __name__ == "__main__":
    main()
