"""Wrap a numpy game that steps one env at a time: a host env, checked and trained.

Most env packages (PettingZoo, LBF, RWARE, Overcooked, your lab's simulator) step
one env on the host and hand back numpy arrays. ``LineFood`` below stands for such a
package: it knows nothing of marl. ``LineFoodEnv`` wraps it in four steps:

1. declare the specs (unbatched: the group's entries have a leading ``[n_agents]``
   dim), with an ``action_mask`` beside the observation where the game has illegal
   actions;
2. write ``reset_arrays()`` and ``step_arrays(inputs)``: the game's outputs as nested
   numpy arrays in the TensorDict's layout (a dict per group, the env-level
   ``done``/``terminated``/``truncated`` at the root), fresh at every step;
3. ``arrays_to_tensordict`` (``marl.envs.arrays_to_td`` does it), and ``_reset`` /
   ``_step`` through the same arrays;
4. ``_set_seed``.

Steps 2 and 3 make it a ``marl.envs.HostArrayEnv``: ``SerialEnv(k, LineFoodEnv)``
then stacks the copies' arrays and builds one TensorDict a step instead of ``k``.
``check_env_specs`` checks the data against the specs; ``check_serial_arrays`` checks
that the arrays path gives what the TensorDict path gives (a rollout with resets, a
partial reset and the steps after it). Then MAPPO trains on 8 copies, with the
action masks, and beats the random policy.

Run it with ``python docs/tutorials/custom_host_env.py``; ``MARL_TUTORIAL_SMALL=1``
shrinks it to a smoke test.
"""

import os

import numpy as np
import torch

from marl import GroupMap
from marl.algorithms import Algorithm, Trainer, evaluate
from marl.envs import (
    EnvBase,
    RewardSum,
    SerialEnv,
    TransformedEnv,
    arrays_to_td,
    check_env_specs,
    check_serial_arrays,
    env_flag_arrays,
    make_done_spec,
)
from marl.specs import Categorical, Composite, Unbounded

SMALL = os.environ.get("MARL_TUTORIAL_SMALL") == "1"
torch.set_num_threads(1)


class LineFood:
    """The "package": agents on cells ``0..size-1`` of a line, one food item.

    Actions: 0 left, 1 stay, 2 right (left at cell 0 and right at the last cell are
    illegal). An agent on the food's cell eats it: the team scores 1 and the food
    reappears elsewhere. An episode lasts ``horizon`` steps.
    """

    def __init__(self, n_agents: int, size: int, horizon: int) -> None:
        self.n_agents, self.size, self.horizon = n_agents, size, horizon
        self.rng = np.random.default_rng()

    def seed(self, seed: int | None) -> None:
        self.rng = np.random.default_rng(seed)

    def reset(self) -> list[np.ndarray]:
        self.t = 0
        self.pos = self.rng.integers(0, self.size, self.n_agents)
        self.food = int(self.rng.integers(0, self.size))
        return self.observe()

    def observe(self) -> list[np.ndarray]:  # per agent: own cell, food cell (float64)
        return [np.array([p, self.food], dtype=np.float64) / (self.size - 1) for p in self.pos]

    def legal(self) -> list[list[bool]]:
        return [[p > 0, True, p < self.size - 1] for p in self.pos]

    def step(self, actions: list[int]) -> tuple[list[np.ndarray], float, bool]:
        self.t += 1
        self.pos = np.clip(self.pos + np.asarray(actions) - 1, 0, self.size - 1)
        reward = 0.0
        if (self.pos == self.food).any():
            reward = 1.0
            self.food = int(self.rng.integers(0, self.size))
        return self.observe(), reward, self.t >= self.horizon


class LineFoodEnv(EnvBase):
    """``LineFood`` as a marl env: one group ``"agent"``, unbatched, a host env."""

    def __init__(self, n_agents: int = 2, size: int = 9, horizon: int = 30, seed=None) -> None:
        names = [f"agent_{i}" for i in range(n_agents)]  # by_prefix: one group, "agent"
        super().__init__(batch_size=(), group_map=GroupMap.by_prefix(names))
        self.game = LineFood(n_agents, size, horizon)
        n = n_agents

        def group(**specs):  # the group's entries share its [n_agents] batch dim
            return Composite({"agent": Composite(specs, shape=(n,))}, shape=())

        self.observation_spec = group(
            observation=Unbounded((n, 2)),  # float32: the game's float64, converted
            action_mask=Unbounded((n, 3), dtype=torch.bool),
        )
        self.action_spec = group(action=Categorical(3, (n,)))
        self.reward_spec = group(reward=Unbounded((n, 1)))
        self.done_spec = make_done_spec(())
        self._group_sizes = {"agent": torch.Size([n])}
        self._seed = seed

    # -- the HostArrayEnv contract: numpy arrays in the TensorDict's layout
    def _arrays(self, obs, reward, done: bool) -> dict:
        group = {
            "observation": np.array(obs, np.float32),  # stacks the agents, casts once
            "action_mask": np.array(self.game.legal(), bool),
        }
        if reward is not None:  # a team reward, given to every agent
            group["reward"] = np.full((self.game.n_agents, 1), reward, np.float32)
        # episodes end at the horizon: done and truncated, not terminated
        return {"agent": group, **env_flag_arrays(done, truncated=done)}

    def reset_arrays(self) -> dict:
        seed, self._seed = self._seed, None
        if seed is not None:
            self.game.seed(seed)
        return self._arrays(self.game.reset(), None, False)

    def step_arrays(self, inputs) -> dict:  # inputs[key]: this copy's action tensor
        obs, reward, done = self.game.step(inputs["agent", "action"].tolist())
        return self._arrays(obs, reward, done)

    def arrays_to_tensordict(self, arrays, batch_size):  # batch_size: dims in front
        return arrays_to_td(arrays, batch_size, self._group_sizes, self.device)

    # -- EnvBase's hooks go through the same arrays
    def _reset(self, td):
        return self.arrays_to_tensordict(self.reset_arrays(), torch.Size([]))

    def _step(self, td):
        return self.arrays_to_tensordict(self.step_arrays(td), torch.Size([]))

    def _set_seed(self, seed):
        self._seed = seed  # used at the next reset, as PettingZoo does


check_env_specs(LineFoodEnv(seed=0))  # raises with the offending key
check_serial_arrays(LineFoodEnv, {"n_agents": 2})  # the arrays path equals the TensorDict path
env = SerialEnv(8, LineFoodEnv)
print("checked:", env, "arrays path:", env.use_arrays)


def make_env(seed: int):
    env = TransformedEnv(SerialEnv(8, LineFoodEnv), RewardSum())
    env.set_seed(seed)
    return env


eval_env = make_env(seed=100)
episodes = 8 if SMALL else 48
before = evaluate(eval_env, eval_env.rand_action, episodes=episodes)["eval/episode_reward"]
algorithm = Algorithm("mappo", config={"lr": 3e-3, "epochs": 4, "minibatch_size": 240})
trainer = Trainer(
    algorithm,
    make_env(seed=0),
    frames_per_batch=8 * 30 * 4,
    total_frames=8 * 30 * 4 * (2 if SMALL else 40),
    seed=0,
)
for logs in trainer.train():
    if logs["iteration"] % 10 == 0 or SMALL:
        print(
            f"{logs['frames']:>6} frames  train episode reward {logs['train/episode_reward']:6.2f}"
        )
after = evaluate(eval_env, algorithm.eval_policy(), episodes=episodes)["eval/episode_reward"]
print(f"eval episode reward: random policy {before:.2f}, trained MAPPO {after:.2f}")
