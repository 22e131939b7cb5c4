"""Update-step speed: one PPO minibatch update and one SAC update, on CPU.

- PPO: 400 transitions, actor and critic 2x256 MLPs (4-dim obs, 2 discrete actions),
  loss forward + backward + per-role clipping + Adam step, as the on-policy learner
  runs it (``GradientStep``; advantages precomputed, as ``process_batch`` does).
- SAC: a 256-transition replay sample, actor and twin Q 2x256 (3-dim obs, 1-dim action),
  sample + loss + backward + Adam + soft target update.

The MAPPO update on VMAS shapes, against a hand-written loop and against another
commit, is ``benchmarks/bench_learner_vs_commit.py``.

Run: ``python benchmarks/bench_update_step.py [--threads N] [--repeats N]``.
Prints the median milliseconds per update, and the PPO step hand-written in plain
torch (same sizes, same run) as the floor. Target: a few ms for PPO.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from marl.algorithms import Algorithm
from marl.algorithms.updates import GradientStep
from marl.collectors import Collector
from marl.testing import SingleAgentFakeEnv


def _time(fn, repeats: int, warmup: int = 20) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def bench_ppo(repeats: int) -> float:
    env = SingleAgentFakeEnv(num_envs=8, discrete=True, seed=0)
    config = {"actor_cells": (256, 256), "critic_cells": (256, 256)}
    algo = Algorithm("ppo", config=config).build(env, seed=0)
    learner = algo.learners["root"]
    batch = Collector(env, algo.policy, frames_per_batch=400).rollout()
    batch = algo.process_batch(batch)
    minibatch = batch.select(*learner.loss.in_keys, strict=False).reshape(-1)
    return _time(lambda: GradientStep(learner.loss, learner.optimizer, 0.5)(minibatch), repeats)


def bench_ppo_plain_torch(repeats: int) -> float:
    """The same PPO step written by hand in plain torch: the floor for this machine."""
    from torch import nn

    def mlp(out: int) -> nn.Module:
        return nn.Sequential(
            nn.Linear(4, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, out)
        )

    torch.manual_seed(0)
    actor, critic = mlp(2), mlp(1)
    opt = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=3e-4, fused=True)
    obs, action = torch.randn(400, 4), torch.randint(0, 2, (400,))
    adv, old_log_prob, target = torch.randn(400), torch.randn(400), torch.randn(400, 1)

    def step() -> None:
        dist = torch.distributions.Categorical(logits=actor(obs))
        ratio = (dist.log_prob(action) - old_log_prob).exp()
        surrogate = torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
        loss = -surrogate.mean() + 0.5 * (critic(obs) - target).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(actor.parameters(), 0.5)
        nn.utils.clip_grad_norm_(critic.parameters(), 0.5)
        opt.step()

    return _time(step, repeats)


def bench_sac(repeats: int) -> float:
    env = SingleAgentFakeEnv(num_envs=8, seed=0)
    algo = Algorithm("sac", config={"batch_size": 256}).build(env, seed=0)
    learner = algo.learners["root"]
    batch = Collector(env, algo.policy, frames_per_batch=2048).rollout()
    learner.buffer.extend(batch.select(*learner.loss.in_keys, strict=False).reshape(-1))
    gradient_step = GradientStep(learner.loss, learner.optimizer, None)

    def step() -> None:
        gradient_step(learner.buffer.sample())
        learner.target_updater.step()

    return _time(step, repeats)


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: PPO vs hand-written torch; SAC alone."""
    repeats = 30 if quick else 200
    ppo, plain, sac = bench_ppo(repeats), bench_ppo_plain_torch(repeats), bench_sac(repeats)
    return [
        {
            "name": "PPO minibatch update (400 samples, 2x256)",
            "value": ppo,
            "unit": "ms",
            "baseline_name": "same step in plain torch",
            "baseline_value": plain,
            "higher_is_better": False,
        },
        {
            "name": "SAC update (256 samples, 2x256, twin Q)",
            "value": sac,
            "unit": "ms",
            "baseline_name": None,
            "baseline_value": None,
            "higher_is_better": False,
        },
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ppo = bench_ppo(args.repeats)
    plain = bench_ppo_plain_torch(args.repeats)
    sac = bench_sac(args.repeats)
    print(f"torch {torch.__version__}, {args.threads} thread(s)")
    print(f"PPO minibatch update (400 samples, 2x256 actor+critic): {ppo:.2f} ms (median)")
    print(f"  same step in hand-written plain torch:                {plain:.2f} ms (median)")
    print(f"SAC update (256 samples, 2x256 actor + twin Q):          {sac:.2f} ms (median)")


if __name__ == "__main__":
    main()
