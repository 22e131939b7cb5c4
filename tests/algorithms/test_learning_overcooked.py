"""Learning test on Overcooked-AI: MAPPO with shaped reward on ``overcooked/cramped_room``.

MAPPO trains with ``reward_shaping=1.0`` (as the published PPO/MAPPO setups do at
the start of training) for a fixed frame budget, 10 envs x 400 steps (one episode
each) per batch; then its policy (sampled, as PPO agents play Overcooked: the argmax
of a partly trained policy leaves the two cooks blocking each other, see below), the
uniformly random policy and the no-op policy (NORTH for both cooks, action 0: they stay stuck against the
counter and never score) each play the same 10 evaluation episodes of the shaped
task (:func:`marl.testing.compare_with_baselines`). A return is one player's:
the team's soups (20 each) plus its own shaped rewards (3 an onion in the pot, 3
a dish, 5 a plated soup).

With learning disabled (``pytest --disable-learning``, or ``lr=0``) the untrained
policy scores about what the random policy does: it fails.
"""

from __future__ import annotations

import time

import pytest
import torch
from tensordict.nn import InteractionType, set_interaction_type

pytest.importorskip("overcooked_ai_py")

from marl.algorithms import Algorithm, Trainer
from marl.envs.tasks import make_task
from marl.testing import compare_with_baselines

pytestmark = pytest.mark.slow

TASK = "overcooked/cramped_room"
MAPPO = {"lr": 1e-3, "epochs": 4, "minibatch_size": 1000}
FRAMES = 160_000  # 40 batches of 4000
# Measured at 160k frames (trained / random / no-op, shaped returns, 38 s wall, one
# thread): seed 0 58.85 / 4.3 / 0.0, seed 2 75.9 / 7.35 / 0.0; the same policies' argmax
# scored 6.0 and 0.0 (the cooks stand in each other's way). --disable-learning: 3.4 /
# 4.3 / 0.0, margin -0.9: it fails.
# The game's score (soups only) stays 0 for all three at this budget: the policy has
# learned the shaped steps (onions into the pot, dishes), not yet to serve a soup.
MARGIN = 20.0


def test_mappo_beats_random_and_noop_on_cramped_room():
    torch.set_num_threads(1)
    seed = 0
    start, cpu = time.perf_counter(), time.process_time()
    env = make_task(TASK, num_envs=10, seed=seed, reward_shaping=1.0)
    algo = Algorithm("mappo", config=MAPPO)
    trainer = Trainer(algo, env, frames_per_batch=4000, total_frames=FRAMES, seed=seed)
    history = list(trainer.train())
    assert history[-1]["frames"] == FRAMES

    def sampled(td):
        with set_interaction_type(InteractionType.RANDOM):
            return algo.policy(td)

    comparison = compare_with_baselines(
        lambda: make_task(TASK, num_envs=5, seed=seed + 1000, reward_shaping=1.0),
        sampled,
        episodes=10,
    )
    score = compare_with_baselines(  # the game's score (soups only), for the report
        lambda: make_task(TASK, num_envs=5, seed=seed + 1000), sampled, episodes=10
    )
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"\nmappo {TASK}: shaped {comparison}; score {score}; frames={FRAMES} "
          f"wall_s={wall:.1f} cpu_s={cpu:.1f}")  # fmt: skip
    assert comparison.episodes >= 10
    assert comparison.noop == 0.0
    assert comparison.margin > MARGIN, str(comparison)
