"""marl's own cost per env-step: the wrapper around an env whose step costs nothing.

A PettingZoo parallel env that does no work (3 agents, ``Box(18)`` observations,
``Discrete(5)`` actions, 25-step episodes: ``simple_spread``'s shapes; each step
hands back arrays made at construction) is stepped by its raw loop (actions drawn
with numpy, ``env.step``, resets) and through ``PettingZooEnv`` (the step loop of
``benchmarks/envs/_timing.py``: ``rand_action`` + ``step_and_maybe_reset``), with 1
env and with a ``SerialEnv`` of 8. The difference of the two per-step times is what
marl adds to any env's step: an env whose own step takes ``T`` us can keep at most
``T / (T + floor)`` of its raw rate through marl (0.8 needs ``T >= 4 x floor``).

Usage:
    python benchmarks/envs/bench_floor.py [--reps 7] [--steps 4000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

try:
    from benchmarks.envs._timing import step_loop_rate
except ModuleNotFoundError:  # run as a file: the repo root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.envs._timing import step_loop_rate

N_AGENTS, OBS, ACTIONS, EPISODE = 3, 18, 5, 25


def null_env() -> object:
    """A PettingZoo ``ParallelEnv`` whose reset and step do no work."""
    from gymnasium.spaces import Box, Discrete
    from pettingzoo.utils.env import ParallelEnv

    class NullEnv(ParallelEnv):
        metadata = {"name": "null_v0"}

        def __init__(self) -> None:
            self.possible_agents = [f"agent_{i}" for i in range(N_AGENTS)]
            self.agents = list(self.possible_agents)
            self._obs_space = Box(-1.0, 1.0, (OBS,), np.float32)
            self._act_space = Discrete(ACTIONS)
            self._obs = {a: np.zeros(OBS, np.float32) for a in self.possible_agents}
            self._zero = dict.fromkeys(self.possible_agents, 0.0)
            self._false = dict.fromkeys(self.possible_agents, False)
            self._true = dict.fromkeys(self.possible_agents, True)
            self._info = {a: {} for a in self.possible_agents}
            self._t = 0

        def observation_space(self, agent: str) -> object:
            return self._obs_space

        def action_space(self, agent: str) -> object:
            return self._act_space

        def reset(self, seed: int | None = None, options: dict | None = None) -> tuple:
            self.agents = list(self.possible_agents)
            self._t = 0
            return self._obs, self._info

        def step(self, actions: dict) -> tuple:
            self._t += 1
            trunc = self._true if self._t >= EPISODE else self._false
            if self._t >= EPISODE:
                self.agents = []
            return self._obs, self._zero, self._false, trunc, self._info

    return NullEnv()


def raw_rate(num_envs: int, steps: int, seed: int) -> float:
    """Env-steps/s of the null env's own loop (numpy actions, step, reset)."""
    envs = [null_env() for _ in range(num_envs)]
    for env in envs:
        env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    for _ in range(steps):
        for env in envs:
            actions = dict(zip(env.agents, rng.integers(0, ACTIONS, len(env.agents)).tolist()))
            env.step(actions)
            if not env.agents:
                env.reset()
    return steps * num_envs / (time.perf_counter() - start)


def marl_rate(num_envs: int, steps: int, seed: int) -> float:
    """Env-steps/s of ``PettingZooEnv``'s step loop over the null env."""
    from marl.envs import PettingZooEnv, SerialEnv

    if num_envs == 1:
        env = PettingZooEnv(env=null_env(), seed=seed)
    else:
        env = SerialEnv(num_envs, lambda: PettingZooEnv(env=null_env()), {})
        env.set_seed(seed)
    return step_loop_rate(env, steps, num_envs)


def measure(num_envs: int, reps: int, steps: int) -> dict[str, float]:
    """Median us per env-step of the raw loop and of marl's, and their difference."""
    raw_rate(num_envs, max(steps // 10, 1), 0)
    marl_rate(num_envs, max(steps // 10, 1), 0)
    raws, marls, floors = [], [], []
    for rep in range(reps):
        r = 1e6 / raw_rate(num_envs, steps, rep)
        m = 1e6 / marl_rate(num_envs, steps, rep)
        raws.append(r)
        marls.append(m)
        floors.append(m - r)
    return {
        "raw_us": statistics.median(raws),
        "marl_us": statistics.median(marls),
        "floor_us": statistics.median(floors),
    }


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: marl's own cost per env-step."""
    out = []
    for num_envs in (1, 8):
        steps = (1000 if quick else 4000) // num_envs
        m = measure(num_envs, 3 if quick else 7, steps)
        out.append(
            {
                "name": f"PettingZooEnv step loop over a null env, {num_envs} env(s)",
                "value": m["floor_us"],
                "unit": "us per env-step added by marl",
                "higher_is_better": False,
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--steps", type=int, default=4000, help="steps with 1 env")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, reps {args.reps}")
    for num_envs in (1, 8):
        m = measure(num_envs, args.reps, max(args.steps // num_envs, 1))
        print(
            f"{num_envs} env(s): null env's own loop {m['raw_us']:6.1f} us/env-step | "
            f"through PettingZooEnv {m['marl_us']:6.1f} | marl adds {m['floor_us']:6.1f} us "
            f"(0.8 of raw needs an env step of >= {4 * m['floor_us']:.0f} us)"
        )


if __name__ == "__main__":
    main()
