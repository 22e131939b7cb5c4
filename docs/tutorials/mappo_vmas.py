"""MAPPO on VMAS ``navigation``, from raw pieces.

Three agents on a 2D plane each have to reach their own goal without bumping
into each other. Every agent acts from its own observation (decentralized
actors); one critic reads all three observations (a centralized critic). That
is MAPPO. Instead of ``Algorithm("mappo")`` this script wires the pieces
together by hand, so that every step of the algorithm is on the page:

1. the env (``make_task`` adds a ``RewardSum`` that tracks episode returns);
2. the policy: a ``MultiAgentMLP`` -> ``TanhNormal`` over the action bounds;
3. the centralized critic: a ``MultiAgentMLP`` with ``centralized=True``;
4. the ``Collector``, which yields ``[num_envs, T]`` batches;
5. ``GAE`` for advantages, ``PPOLoss`` for the clipped objective;
6. the loop: collect, estimate advantages, a few epochs of minibatch SGD.

Every key of the group lives under ``"agent"``: ``("agent", "observation")``
is ``[num_envs, T, n_agents, 18]``.

Run it with ``python docs/tutorials/mappo_vmas.py``; ``MARL_TUTORIAL_SMALL=1``
shrinks everything to a smoke test.
"""

import os
import time

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from tensordict.nn import ProbabilisticTensorDictModule as ProbModule
from tensordict.nn import ProbabilisticTensorDictSequential as ProbSequential

from marl.collectors import Collector
from marl.envs import make_task
from marl.modules import MultiAgentMLP, TanhNormal
from marl.objectives import GAE, PPOLoss, PPOSettings

SMALL = os.environ.get("MARL_TUTORIAL_SMALL") == "1"
NUM_ENVS = 8 if SMALL else 60  # vectorized sub-envs; VMAS steps them in one torch call
FRAMES_PER_BATCH = 8 * 20 if SMALL else 60 * 100  # 20 (small) or 100 steps per sub-env
ITERATIONS = 2 if SMALL else 40
EPOCHS, MINIBATCH = (2, 64) if SMALL else (4, 1000)
torch.manual_seed(0)

# 1. The env. Its one group is "agent" (VMAS agents are agent_0, agent_1, ...).
env = make_task("vmas/navigation", num_envs=NUM_ENVS, seed=0)
n_agents = len(env.group_map["agent"])
obs_dim = env.observation_spec["agent", "observation"].shape[-1]
action_spec = env.action_spec["agent", "action"]  # Bounded, [num_envs, n_agents, 2]
act_dim = action_spec.shape[-1]
low, high = action_spec.low[0, 0], action_spec.high[0, 0]  # one agent's bounds

# 2. The policy: a shared MLP per agent -> (loc, scale) -> TanhNormal in [low, high].
actor_net = torch.nn.Sequential(
    MultiAgentMLP(
        obs_dim, 2 * act_dim, n_agents, centralized=False, share_params=True, num_cells=64
    ),
    NormalParamExtractor(),  # splits the last dim into loc and a positive scale
)
policy = ProbSequential(
    TensorDictModule(actor_net, [("agent", "observation")], [("agent", "loc"), ("agent", "scale")]),
    ProbModule(
        in_keys={"loc": ("agent", "loc"), "scale": ("agent", "scale")},
        out_keys=[("agent", "action")],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": low, "high": high},
        return_log_prob=True,  # PPO needs log pi_old(a|s)
        log_prob_key=("agent", "action_log_prob"),
    ),
)

# 3. The centralized critic: every agent's value head sees all agents' observations.
critic = TensorDictModule(
    MultiAgentMLP(obs_dim, 1, n_agents, centralized=True, share_params=True, num_cells=64),
    in_keys=[("agent", "observation")],
    out_keys=[("agent", "state_value")],
)

# 4. The collector: runs the policy (sampling actions) and resets finished sub-envs.
collector = Collector(
    env, policy, frames_per_batch=FRAMES_PER_BATCH, total_frames=FRAMES_PER_BATCH * ITERATIONS
)

# 5. Advantages and loss, pointed at the group's keys. The env-level done flags
#    ([*B, 1]) broadcast over the agent dim ([*B, n_agents, 1]) by themselves.
keys = {
    "action": ("agent", "action"),
    "sample_log_prob": ("agent", "action_log_prob"),
    "value": ("agent", "state_value"),
    "advantage": ("agent", "advantage"),
    "value_target": ("agent", "value_target"),
    "reward": ("next", "agent", "reward"),
    "done": ("next", "agent", "done"),
    "terminated": ("next", "agent", "terminated"),
}
gae = GAE(gamma=0.99, lmbda=0.9, value_network=critic)
gae.set_keys(**{k: v for k, v in keys.items() if k in gae.default_keys})
settings = PPOSettings(clip_epsilon=0.2, entropy_coef=0.0, critic_coef=1.0, loss_critic_type="l2")
loss_fn = PPOLoss(policy, critic, settings)
loss_fn.set_keys(**keys)
optimizer = torch.optim.Adam(loss_fn.parameters(), lr=3e-4)

# 6. The training loop.
start = time.time()
for i, batch in enumerate(collector):
    assert batch["agent", "observation"].shape[-2:] == (n_agents, obs_dim)
    with torch.no_grad():
        gae(batch)  # writes ("agent", "advantage") and ("agent", "value_target")
    data = batch.reshape(-1)  # [num_envs * T] transitions, each with n_agents agents
    for _ in range(EPOCHS):
        for idx in torch.randperm(data.numel()).split(MINIBATCH):
            losses = loss_fn(data[idx])
            loss = losses["loss_objective"] + losses["loss_critic"]
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(loss_fn.parameters(), 0.5)
            optimizer.step()
    collector.update_policy_weights_()  # a no-op here (same process), needed for workers

    # RewardSum's episode_reward, read where an episode ended, averaged over agents
    done = batch["next", "done"].squeeze(-1)  # [num_envs, T]
    ended = batch["next", "agent", "episode_reward"][done]  # [n_episodes, n_agents, 1]
    reward = f"{ended.mean():7.3f}" if done.any() else "(no episode ended yet)"
    print(
        f"iteration {i:>2}  frames {(i + 1) * FRAMES_PER_BATCH:>7}  episode reward {reward}"
        f"  ({time.time() - start:.0f} s)"
    )

collector.shutdown()
print("done: MAPPO on vmas/navigation")
