"""Heterogeneous teams: PettingZoo ``simple_tag`` with one algorithm per group.

In MPE ``simple_tag`` three slow adversaries chase one fast prey among two
obstacles. The two kinds of agents see different things: an adversary's
observation has 16 features, the prey's 14. They cannot be stacked into one
tensor, so the default group map (``by_prefix``) puts them in two groups:

- ``adversary``: ``adversary_0..2``, ``("adversary", "observation")`` is ``[*B, 3, 16]``;
- ``agent``: ``agent_0``, ``("agent", "observation")`` is ``[*B, 1, 14]``.

Each group gets its own learner, so each group can use its own algorithm: the
adversaries train with MAPPO (on-policy, a centralized critic that, with
``critic_scope="all"``, also reads the prey's observation), the prey with IQL
(off-policy Q-learning from a replay buffer). Both support discrete actions,
which this task uses. The ``Trainer`` logs per-group results such as
``train/adversary/episode_reward`` and ``train/agent/episode_reward``.

Run it with ``python docs/tutorials/heterogeneous_simple_tag.py``;
``MARL_TUTORIAL_SMALL=1`` shrinks everything to a smoke test.
"""

import os

import torch

from marl.algorithms import Algorithm, Trainer, get_algorithm
from marl.envs import make_task

SMALL = os.environ.get("MARL_TUTORIAL_SMALL") == "1"
FRAMES_PER_BATCH = 200 if SMALL else 2000  # env steps (one env, 100-step episodes)
TOTAL_FRAMES = 400 if SMALL else 30_000
torch.set_num_threads(1)

env = make_task("pettingzoo/simple_tag", seed=0)  # parallel API, 100-step episodes
print("group map:", dict(env.group_map))
for group in env.group_map:
    obs = env.observation_spec[group, "observation"]
    act = env.action_spec[group, "action"]
    print(
        f"  {group:>9}: observation {tuple(obs.shape)}, action {type(act).__name__} "
        f"with {act.n} choices"
    )
assert env.observation_spec["adversary", "observation"].shape[-2:] == (3, 16)
assert env.observation_spec["agent", "observation"].shape[-2:] == (1, 14)

# Which algorithms serve discrete actions? Both of ours do.
for name in ("mappo", "iql"):
    print(f"{name}: action spaces {sorted(get_algorithm(name).action_spaces)}")

algorithm = Algorithm(
    {"adversary": "mappo", "agent": "iql"},
    config={
        "adversary": {"lr": 1e-3, "epochs": 8, "minibatch_size": 250, "critic_scope": "all"},
        "agent": {
            "lr": 5e-4,
            "learning_starts": 100 if SMALL else 1000,
            "batch_size": 64 if SMALL else 256,
            "utd_ratio": 0.05,
            "eps_annealing_frames": 10_000,
            "cells": (64, 64),
        },
    },
)
trainer = Trainer(
    algorithm, env, frames_per_batch=FRAMES_PER_BATCH, total_frames=TOTAL_FRAMES, seed=0
)
for name, learner in algorithm.learners.items():
    print(f"learner {name!r}: {learner.algorithm}, trains {learner.loss.tensor_keys.action}")
critic_keys = algorithm.learners["adversary"].loss.critic.in_keys
print("adversary critic reads:", critic_keys)  # both groups' observations

for logs in trainer.train():
    print(
        f"{logs['frames']:>6} frames  "
        f"adversary reward {logs['train/adversary/episode_reward']:7.1f}  "
        f"prey reward {logs['train/agent/episode_reward']:7.1f}  "
        f"prey Q loss {logs.get('train/agent/loss_qvalue', float('nan')):6.2f}"
    )
print("done: mappo (adversary) + iql (agent) on pettingzoo/simple_tag")
