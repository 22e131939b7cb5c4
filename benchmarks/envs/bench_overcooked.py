"""OvercookedEnv rollouts vs a raw loop over overcooked-ai's MDP: env-steps/s.

The package's own env loop (``overcooked_ai_py.mdp.overcooked_env``) does not
import on numpy 2, so the raw side is what it would run: with uniform random
joint actions, ``OvercookedGridworld.get_state_transition`` and the two players'
``lossless_state_encoding`` each step, back to the standard start state at the
horizon. The wrapper side runs ``OvercookedEnv.rollout(break_when_any_done=False)``
(a ``SerialEnv`` of 8 for 8 envs): random actions from the action spec, float32
tensors, TensorDict outputs, resets and stacking over time. Pairs of repetitions
run back to back in alternating order; medians are reported.

The marl side runs two ways (``benchmarks/envs/_timing.py``): its step loop
(``rand_action`` + ``step_and_maybe_reset``, nothing kept, as the raw loop), and
``rollout``, which also keeps every step and stacks them over time.

Target: >= 80% of raw for the step loop (issue 18, single-process families).

Usage:
    python benchmarks/envs/bench_overcooked.py [--reps 5] [--steps 2000] [--layout cramped_room]
"""

from __future__ import annotations

import argparse
import random
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
HORIZON = 400


def raw_loop(layout: str, num_envs: int, steps: int, seed: int = 0) -> float:
    """Env-steps/s (summed over envs) of a loop over the package's MDP."""
    from overcooked_ai_py.mdp.actions import Action
    from overcooked_ai_py.mdp.overcooked_mdp import OvercookedGridworld

    rng = random.Random(seed)
    actions = Action.ALL_ACTIONS
    mdps = [OvercookedGridworld.from_layout_name(layout) for _ in range(num_envs)]
    states = [mdp.get_standard_start_state() for mdp in mdps]
    start = time.perf_counter()
    for _ in range(steps):
        for i, mdp in enumerate(mdps):
            joint = (rng.choice(actions), rng.choice(actions))
            states[i], _ = mdp.get_state_transition(states[i], joint)
            mdp.lossless_state_encoding(states[i], horizon=HORIZON)
            if states[i].timestep >= HORIZON:
                states[i] = mdp.get_standard_start_state()
                mdp.lossless_state_encoding(states[i], horizon=HORIZON)
    return steps * num_envs / (time.perf_counter() - start)


def _wrapper(layout: str, num_envs: int, seed: int) -> object:
    from marl.envs import OvercookedEnv, SerialEnv

    torch.manual_seed(seed)
    if num_envs == 1:
        return OvercookedEnv(layout, horizon=HORIZON)
    return SerialEnv(num_envs, OvercookedEnv, dict(layout=layout, horizon=HORIZON))


def cases(layout: str = "cramped_room") -> list[Case]:
    """The comparison on ``layout``."""
    return [
        Case(
            label=f"OvercookedEnv {layout}",
            baseline="raw overcooked-ai MDP loop",
            raw=lambda n, steps, seed: raw_loop(layout, n, steps, seed),
            make_env=lambda n, seed: _wrapper(layout, n, seed),
        )
    ]


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: OvercookedEnv vs the raw MDP loop."""
    return rows(cases(), 300 if quick else 2000, 3 if quick else 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000, help="steps per env with 1 env")
    parser.add_argument("--layout", default="cramped_room")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print_table(cases(args.layout), args.steps, args.reps, TARGET)


if __name__ == "__main__":
    main()
