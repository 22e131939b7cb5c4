"""A custom vectorized multi-agent env in pure torch, checked and trained.

``GoalEnv`` runs ``num_envs`` copies of a small task in one batch of tensors:
``n_agents`` agents on the square ``[-1, 1]^2`` must each reach a goal shared by
the team. To write an env you subclass ``marl.envs.EnvBase`` and:

1. declare the specs in ``__init__``: the observation, action, reward and done
   specs, with the group's entries under its name (here ``"agent"``) and a
   leading ``[num_envs, n_agents]`` shape;
2. implement ``_reset(td)``: reset every sub-env, or only those flagged by
   ``td["_reset"]`` (``[num_envs, 1]`` bool) when the collector resets
   finished episodes;
3. implement ``_step(td)``: read ``("agent", "action")``, return the next
   observation, the reward and the done flags (``EnvBase`` nests them under
   ``"next"``);
4. implement ``_set_seed(seed)``.

``check_env_specs`` then rolls the env out and checks every key, shape, dtype
and device against the specs. The ``RewardSum`` transform adds
``("agent", "episode_reward")`` for the ``Trainer``'s logs, and MAPPO learns
the task.

Run it with ``python docs/tutorials/custom_env.py``; ``MARL_TUTORIAL_SMALL=1``
shrinks everything to a smoke test.
"""

import os

import torch
from tensordict import TensorDict

from marl import GroupMap
from marl.algorithms import Algorithm, Trainer, evaluate
from marl.envs import EnvBase, RewardSum, TransformedEnv, check_env_specs, make_done_spec
from marl.specs import Bounded, Composite, Unbounded

SMALL = os.environ.get("MARL_TUTORIAL_SMALL") == "1"
torch.set_num_threads(1)


class GoalEnv(EnvBase):
    """``n_agents`` point agents move towards a shared goal; reward: minus the distance."""

    def __init__(self, num_envs=32, n_agents=3, max_steps=25, device="cpu", seed=None):
        agents = [f"agent_{i}" for i in range(n_agents)]  # by_prefix: one group, "agent"
        super().__init__(
            batch_size=torch.Size([num_envs]), device=device, group_map=GroupMap.by_prefix(agents)
        )
        self.n_agents, self.max_steps = n_agents, max_steps
        b, n, d = (num_envs,), n_agents, self.device

        def group(**specs):  # the group's entries share the [num_envs, n_agents] batch
            return Composite({"agent": Composite(specs, shape=(*b, n))}, shape=b)

        self.observation_spec = group(observation=Unbounded((*b, n, 4), device=d))  # pos, goal-pos
        self.observation_spec["state"] = Unbounded((*b, 2 * n + 2), device=d)  # positions, goal
        self.action_spec = group(action=Bounded(-1.0, 1.0, (*b, n, 2), device=d))
        self.reward_spec = group(reward=Unbounded((*b, n, 1), device=d))
        self.done_spec = make_done_spec(b, d)  # env-level done / terminated / truncated [*b, 1]
        self.pos = torch.zeros(*b, n, 2, device=d)
        self.goal = torch.zeros(*b, 2, device=d)
        self.t = torch.zeros(*b, dtype=torch.long, device=d)
        self.gen = torch.Generator(device=d)
        self.set_seed(seed)

    def _observe(self):
        rel = self.goal[:, None] - self.pos
        state = torch.cat([self.pos.flatten(1), self.goal], -1)
        return TensorDict(
            {"agent": {"observation": torch.cat([self.pos, rel], -1)}, "state": state},
            batch_size=self.batch_size,
        )

    def _reset(self, td):
        mask = None if td is None else td.get("_reset", None)
        where = torch.ones(self.batch_size, dtype=torch.bool, device=self.device)
        if mask is not None:
            where = mask.reshape(self.batch_size)
        uniform = lambda *shape: torch.rand(*shape, generator=self.gen, device=self.device) * 2 - 1  # noqa: E731
        self.pos = torch.where(where[:, None, None], uniform(*self.pos.shape), self.pos)
        self.goal = torch.where(where[:, None], uniform(*self.goal.shape), self.goal)
        self.t = torch.where(where, 0, self.t)
        out = self._observe()
        for key in ("done", "terminated", "truncated"):
            out[key] = torch.zeros(*self.batch_size, 1, dtype=torch.bool, device=self.device)
        return out

    def _step(self, td):
        action = td["agent", "action"].clamp(-1, 1)
        self.pos = (self.pos + 0.1 * action).clamp(-1, 1)
        self.t = self.t + 1
        distance = (self.goal[:, None] - self.pos).norm(dim=-1, keepdim=True)  # [B, n, 1]
        truncated = (self.t >= self.max_steps)[:, None]  # [B, 1]: the episode is over
        out = self._observe()
        out["agent", "reward"] = -distance
        out["done"], out["truncated"] = truncated, truncated.clone()
        out["terminated"] = torch.zeros_like(truncated)
        return out

    def _set_seed(self, seed):
        self.gen.manual_seed(seed if seed is not None else torch.seed())


def make_env(num_envs, seed):
    return TransformedEnv(GoalEnv(num_envs=num_envs, seed=seed), RewardSum())


env = make_env(num_envs=64, seed=0)
check_env_specs(env)  # raises with the offending key if data and specs disagree
td = env.rollout(5)
print(
    "checked: ('agent', 'observation')",
    tuple(td["agent", "observation"].shape),
    "('next', 'agent', 'reward')",
    tuple(td["next", "agent", "reward"].shape),
)
assert td["agent", "observation"].shape == (64, 5, 3, 4)

eval_env = make_env(num_envs=32, seed=1)
before = evaluate(eval_env, eval_env.rand_action, episodes=32)["eval/episode_reward"]
algorithm = Algorithm("mappo", config={"lr": 3e-4, "epochs": 4, "minibatch_size": 800})
trainer = Trainer(
    algorithm,
    env,
    frames_per_batch=64 * 25 * (1 if SMALL else 4),
    total_frames=64 * 25 * (2 if SMALL else 80),
    seed=0,
)
for logs in trainer.train():
    if logs["iteration"] % 10 == 0 or SMALL:
        print(
            f"{logs['frames']:>7} frames  train episode reward {logs['train/episode_reward']:7.2f}"
        )
after = evaluate(eval_env, algorithm.eval_policy(), episodes=32)["eval/episode_reward"]
print(f"eval episode reward: random policy {before:.2f}, trained MAPPO {after:.2f}")
