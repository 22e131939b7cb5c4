"""Single-agent RL with the same parts: PPO on CartPole, SAC on Pendulum.

A single-agent env is simply an env without groups: its keys sit at the root
(``"observation"``, ``"action"``, ``("next", "reward")``), and an
``Algorithm`` builds one learner for it, called ``"root"``. Nothing else
changes: the same ``Trainer`` collects, updates, evaluates and logs.

- PPO (on-policy) on ``gymnasium/cartpole``: 8 CartPole-v1 envs in a gymnasium
  vector env, 2048 frames per batch, 10 epochs per batch. The maximum return
  is 500.
- SAC (off-policy) on ``gymnasium/pendulum``: one env, a replay buffer, one
  gradient step per collected frame after 1,000 random frames. Returns go
  from about -1,200 (random) to above -300 (swung up and held).

The ``eval_env`` is a separate env on which the ``Trainer`` runs the
deterministic policy (the mode of the action distribution) every
``eval_interval`` frames.

Run it with ``python docs/tutorials/single_agent.py``; ``MARL_TUTORIAL_SMALL=1``
shrinks everything to a smoke test.
"""

import os

import torch

from marl.algorithms import Algorithm, Trainer
from marl.envs import make_task

SMALL = os.environ.get("MARL_TUTORIAL_SMALL") == "1"
torch.set_num_threads(1)  # small networks: more threads only add overhead


def train(algorithm, task, *, num_envs, frames_per_batch, total_frames, eval_interval, **kw):
    env = make_task(task, num_envs=num_envs, seed=0)
    trainer = Trainer(
        Algorithm(algorithm, config=kw.pop("config", None)),
        env,
        frames_per_batch=frames_per_batch,
        total_frames=total_frames,
        eval_env=make_task(task, num_envs=5, seed=1),  # 5 episodes per evaluation
        eval_interval=eval_interval,
        eval_episodes=5,
        seed=0,
        **kw,
    )
    learner = trainer.algorithm.learners["root"]  # the one learner of a single-agent env
    print(
        f"{algorithm} on {task}: observation {tuple(env.observation_spec['observation'].shape)}"
        f", action spec {type(env.action_spec['action']).__name__}, learner {learner.algorithm}"
    )
    best = -float("inf")
    for logs in trainer.train():  # one dict of logs per collected batch
        if "eval/episode_reward" in logs:
            best = max(best, logs["eval/episode_reward"])
            print(f"  {logs['frames']:>7} frames  eval return {logs['eval/episode_reward']:8.1f}")
    env.close()
    print(f"{algorithm} on {task}: best eval return {best:.1f}")
    return best


# PPO on CartPole: discrete actions, an on-policy learner.
train(
    "ppo",
    "gymnasium/cartpole",
    num_envs=8,
    frames_per_batch=256 if SMALL else 2048,
    total_frames=512 if SMALL else 100_000,
    eval_interval=512 if SMALL else 10_000,
    config={"epochs": 2} if SMALL else None,
)

# SAC on Pendulum: continuous actions, an off-policy learner with a replay buffer.
train(
    "sac",
    "gymnasium/pendulum",
    num_envs=1,
    frames_per_batch=200,
    total_frames=400 if SMALL else 15_000,
    eval_interval=400 if SMALL else 2_000,
    init_random_frames=200 if SMALL else 1_000,  # uniform random actions first
    config={"learning_starts": 200} if SMALL else None,
)
