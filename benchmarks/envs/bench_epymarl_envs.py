"""LBForagingEnv and RwareEnv rollouts vs the raw packages' own loops: env-steps/s.

For each family, both sides play the same task with uniform random actions, in
the same process, on the same number of envs (1, and 8 stepped one after the
other): the raw loop draws each player's action (uniformly among LBF's legal
actions, the package's ``_valid_actions``, as the wrapper does under its action
mask; from the ``Tuple`` action space for RWARE), calls ``env.step`` on each env
and resets the ones that ended; the wrapper side runs
``rollout(break_when_any_done=False)`` on the wrapper (a ``SerialEnv`` of 8
wrappers for 8), which adds random actions from the action spec (legal ones
under LBF's action mask), TensorDict outputs, resets and stacking over time.
The raw envs are built like the wrappers build them (the registered class and
arguments, without ``gymnasium.make``'s checker wrappers). Pairs of repetitions
run back to back in alternating order; medians are reported.

The marl side runs two ways (``benchmarks/envs/_timing.py``): its step loop
(``rand_action`` + ``step_and_maybe_reset``, nothing kept, as the raw loop), and
``rollout``, which also keeps every step and stacks them over time.

Target: >= 80% of raw for the step loop (issue 18, single-process families).

Usage:
    python benchmarks/envs/bench_epymarl_envs.py [--reps 5] [--steps 2000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

try:
    from benchmarks.envs._timing import Case, print_table, rows
except ModuleNotFoundError:  # run as a file: the repo root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.envs._timing import Case, print_table, rows

TARGET = 0.80
# family -> (registered id, wrapper class name, wrapper arguments)
TASKS = {
    "lbforaging": ("Foraging-8x8-2p-2f-v3", "LBForagingEnv", {}),
    "rware": ("rware-tiny-4ag-v2", "RwareEnv", {}),
}


def _raw_env(family: str, env_id: str) -> object:
    import importlib

    import gymnasium
    from gymnasium.envs.registration import load_env_creator

    importlib.import_module(family)  # the package registers its ids on import
    spec = gymnasium.spec(env_id)
    return load_env_creator(spec.entry_point)(**spec.kwargs)


def raw_loop(
    family: str, num_envs: int, steps: int, seed: int = 0, env_id: str | None = None
) -> float:
    """Env-steps/s (summed over envs) of the package's own loop.

    ``env_id``: a registered id of ``family``'s package (``TASKS[family]``'s by default).
    """
    env_id = env_id or TASKS[family][0]
    envs = [_raw_env(family, env_id) for _ in range(num_envs)]
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
        env.action_space.seed(seed + i)
    rng = random.Random(seed)
    legal = family == "lbforaging"
    start = time.perf_counter()
    for _ in range(steps):
        for env in envs:
            if legal:
                # uniform over each player's legal actions, as the wrapper's rand_action
                # under the action mask (uniform over all six would play more NONEs:
                # LBF turns an illegal action into NONE, and episodes would run longer)
                valid = env._valid_actions
                actions = [rng.choice(valid[p]) for p in env.players]
            else:
                actions = env.action_space.sample()
            _, _, done, truncated, _ = env.step(actions)
            if done or truncated:
                env.reset()
    return steps * num_envs / (time.perf_counter() - start)


def _wrapper(family: str, num_envs: int, seed: int) -> object:
    import marl.envs as envs

    env_id, cls_name, kwargs = TASKS[family]
    cls: Callable = getattr(envs, cls_name)
    if num_envs == 1:
        return cls(env_id, seed=seed, **kwargs)
    env = envs.SerialEnv(num_envs, cls, dict(env_id=env_id, **kwargs))
    env.set_seed(seed)
    return env


def cases(families: list[str] | None = None) -> list[Case]:
    """The comparisons, one per family (both by default)."""
    out = []
    for family in families or list(TASKS):
        env_id, cls_name, _ = TASKS[family]
        out.append(
            Case(
                label=f"{cls_name} {env_id}",
                baseline=f"raw {family} loop",
                raw=lambda n, steps, seed, f=family: raw_loop(f, n, steps, seed),
                make_env=lambda n, seed, f=family: _wrapper(f, n, seed),
            )
        )
    return out


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: the wrappers vs the raw packages."""
    return rows(cases(), 300 if quick else 2000, 3 if quick else 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000, help="steps per env with 1 env")
    parser.add_argument("--family", choices=sorted(TASKS), action="append")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print_table(cases(args.family), args.steps, args.reps, TARGET)


if __name__ == "__main__":
    main()
