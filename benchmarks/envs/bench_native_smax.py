"""SmaxEnv step rate (env-steps/s), and JaxMARL's own SMAX on the CPU for comparison.

marl's side is its step loop (``benchmarks/envs/_timing.py``'s ``step_loop_rate``):
``rand_action`` (random legal actions under the action mask), then
``step_and_maybe_reset`` (the heuristic enemy, 8 world substeps, observations, resets
of the ended battles), nothing kept. ``--jax`` also times JaxMARL 0.2.0's
``HeuristicEnemySMAX`` in the jax venv (``benchmarks/crosscheck/setup_jax_venv.sh``):
``vmap(step)`` over the same number of envs (auto-reset included), random legal
actions drawn inside, the steps in one jitted ``lax.scan`` (how JaxMARL's training loops
run), timed on a second call after the one that compiles it.
Both sides run on the CPU with one thread per process by default (``--threads``: torch's
threads and ``OMP_NUM_THREADS``; JaxMARL's process gets XLA's single-threaded Eigen at
one thread), on 3m and 3s5z at 1, 64, 1024 and 4096 envs; the steps a measurement
shrink with the batch (``_steps_for``: about 20,000-40,000 env-steps each past one
env). ``main`` prints a markdown table with the ratio SmaxEnv / JaxMARL per row; target
(issue 30): >= 0.5x at 1024 envs. XLA fuses the whole scanned rollout; SmaxEnv pays
torch's per-operation cost (a few hundred small operations a step), which dominates
with few envs. (The numbers measured with the older version are in the git history.)

Usage:
    OMP_NUM_THREADS=1 python benchmarks/envs/bench_native_smax.py [--steps 300] [--jax]
        [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SCENARIOS = ("3m", "3s5z")
NUM_ENVS = (1, 64, 1024, 4096)
TARGET = 0.5  # SmaxEnv / JaxMARL at 1024 envs
JAX_PYTHON = Path(
    os.environ.get("MARL_JAX_VENV", Path.home() / ".cache/marl-crosscheck/jax-venv")
) / ("bin/python")


def native_rate(scenario: str, num_envs: int, steps: int, device: str = "cpu") -> float:
    """Env-steps/s (summed over envs) of SmaxEnv's step loop."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.envs._timing import step_loop_rate
    from marl.envs.native.smax import SmaxEnv

    env = SmaxEnv(scenario, num_envs=None if num_envs == 1 else num_envs, device=device, seed=0)
    step_loop_rate(env, max(steps // 10, 2), num_envs)  # warm-up
    return step_loop_rate(env, steps, num_envs)


def jax_rate(scenario: str, num_envs: int, steps: int) -> float:
    """Env-steps/s of JaxMARL's HeuristicEnemySMAX, jit(scan(vmap(step))); jax venv only."""
    import jax
    import jax.numpy as jnp
    from jaxmarl.environments.smax import HeuristicEnemySMAX, map_name_to_scenario

    env = HeuristicEnemySMAX(scenario=map_name_to_scenario(scenario))

    def one(key, state):
        k_act, k_step = jax.random.split(key)
        masks = env.get_avail_actions(state)
        keys = jax.random.split(k_act, len(env.agents))
        actions = {
            a: jax.random.categorical(k, jnp.log(masks[a].astype(jnp.float32)))
            for k, a in zip(keys, env.agents, strict=True)
        }
        _, state, _, _, _ = env.step(k_step, state, actions)
        return state

    vstep = jax.vmap(one)

    @jax.jit
    def run(key, state):
        # the steps in one lax.scan, as JaxMARL's training loops run them: no per-step
        # Python dispatch
        def body(carry, _):
            key, state = carry
            key, sub = jax.random.split(key)
            return (key, vstep(jax.random.split(sub, num_envs), state)), None

        (_, state), _ = jax.lax.scan(body, (key, state), None, length=steps)
        return state

    keys = jax.random.split(jax.random.PRNGKey(0), num_envs)
    _, state = jax.jit(jax.vmap(env.reset))(keys)
    jax.block_until_ready(run(jax.random.PRNGKey(1), state))  # compile
    start = time.perf_counter()
    jax.block_until_ready(run(jax.random.PRNGKey(2), state))
    return steps * num_envs / (time.perf_counter() - start)


def _steps_for(num_envs: int, steps: int) -> int:
    """Steps of one measurement: ``steps`` with one env; past it about ``steps * 64``
    env-steps (``steps`` steps at 64 envs, ``steps // 16`` at 1024, ``steps // 64`` at
    4096), at least 10 steps."""
    return max(10, steps if num_envs == 1 else steps * 4 // max(num_envs // 16, 1))


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: SmaxEnv's step rate on 3m (no baseline:
    JaxMARL runs only in its own venv, ``main --jax``)."""
    steps = 50 if quick else 300
    return [
        {
            "name": f"SmaxEnv 3m, {n} env(s), step loop",
            "value": native_rate("3m", n, _steps_for(n, steps)),
            "unit": "env-steps/s",
        }
        for n in (1, 64, 1024)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="steps with one env")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--jax", action="store_true", help="also time JaxMARL (jax venv)")
    parser.add_argument("--jax-worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.jax_worker:  # runs in the jax venv: no torch, no marl
        scenario, n, steps = args.jax_worker
        print(json.dumps(jax_rate(scenario, int(n), int(steps))))
        return
    import torch

    torch.set_num_threads(args.threads)
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS=str(args.threads),
        XLA_FLAGS="--xla_cpu_multi_thread_eigen=false" if args.threads == 1 else "",
    )
    print(f"torch {torch.__version__}, threads {args.threads}, steps {args.steps} with 1 env")
    print("| scenario | envs | steps | SmaxEnv env-steps/s | JaxMARL env-steps/s "
          "| SmaxEnv / JaxMARL |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    verdicts = []
    for scenario in SCENARIOS:
        for n in NUM_ENVS:
            steps = _steps_for(n, args.steps)
            ours = native_rate(scenario, n, steps)
            theirs, ratio = "-", "-"
            if args.jax:
                out = subprocess.run(
                    [str(JAX_PYTHON), __file__, "--jax-worker", scenario, str(n), str(steps)],
                    capture_output=True,
                    text=True,
                    env=env,
                    check=True,
                )
                jax_value = float(out.stdout.strip().splitlines()[-1])
                theirs, ratio = f"{jax_value:,.0f}", f"{ours / jax_value:.2f}x"
                if n == 1024:
                    ok = ours / jax_value >= TARGET
                    verdicts.append(
                        f"{scenario}, 1024 envs: SmaxEnv / JaxMARL {ours / jax_value:.2f}x, "
                        f"target {TARGET}x: {'OK' if ok else 'BELOW TARGET'}"
                    )
            print(f"| {scenario} | {n} | {steps} | {ours:,.0f} | {theirs} | {ratio} |", flush=True)
    for line in verdicts:
        print(line)


if __name__ == "__main__":
    main()
