"""MAPPO on VMAS ``navigation`` written with TorchRL 0.14, on the settings of TorchRL's recipe.

This is the TorchRL side of ``bench_mappo_recipe.py``: an independent implementation of
the multi-agent PPO recipe (``sota-implementations/multiagent/mappo_ippo.py`` in
pytorch/rl) built only from TorchRL's own parts: ``VmasEnv`` with ``RewardSum``,
``Collector`` (0.14's name for the single-process ``SyncDataCollector``), a shared-parameter ``MultiAgentMLP`` actor under a
``ProbabilisticActor`` with ``TanhNormal``, a centralised ``MultiAgentMLP`` critic (MAPPO),
``ClipPPOLoss`` with ``GAE``, and a replay buffer that hands out minibatches with
``SamplerWithoutReplacement``. It imports nothing from marl and runs in the TorchRL venv
(``setup_venv.sh``); marl's venv never imports TorchRL.

The recipe's settings, as issue 32 measured them: 2x256 tanh MLPs, 60 envs x 100 steps =
6,000 frames a batch, 10 epochs of minibatches of 400, lr 3e-4, clip 0.2, gamma 0.99,
lambda 0.9, entropy 1e-4, gradient norm clipped at 1.0, no advantage standardization
(as the recipe), smooth-L1 critic loss (ClipPPOLoss's default), VMAS ``max_steps`` 100.
No evaluation rollouts and no logging backend, so the time is collection and update only.

Usage (one torch thread, as the comparison runs it)::

    OMP_NUM_THREADS=1 ~/.cache/marl-crosscheck/venv/bin/python \\
        benchmarks/crosscheck/mappo_recipe_torchrl.py --frames 300000 --json out.json

It prints the wall time, the time spent collecting and updating, and the training return
of each batch (the mean, over agents and over the episodes that ended in the batch, of the
episode's summed reward), and writes them to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import time

WALL_START = time.perf_counter()

import torch  # noqa: E402
from tensordict.nn import NormalParamExtractor, TensorDictModule  # noqa: E402
from torch import nn  # noqa: E402
from torchrl.collectors import Collector  # noqa: E402
from torchrl.data import TensorDictReplayBuffer  # noqa: E402
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement  # noqa: E402
from torchrl.data.replay_buffers.storages import LazyTensorStorage  # noqa: E402
from torchrl.envs import RewardSum, TransformedEnv  # noqa: E402
from torchrl.envs.libs.vmas import VmasEnv  # noqa: E402
from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator  # noqa: E402
from torchrl.modules.models.multiagent import MultiAgentMLP  # noqa: E402
from torchrl.objectives import ClipPPOLoss, ValueEstimators  # noqa: E402

# The task as marl's catalogue defines it (tasks/vmas/navigation.yaml), so both sides train
# on the same rewards: VMAS's own default is a shared reward (shared_rew=True), marl's task
# gives each agent its own.
NAVIGATION = {
    "n_agents": 3,
    "collisions": True,
    "agents_with_same_goal": 1,
    "observe_all_goals": False,
    "shared_rew": False,
    "split_goals": False,
    "lidar_range": 0.35,
    "agent_radius": 0.1,
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--frames", type=int, default=300_000, help="total env steps (frames)")
    p.add_argument("--frames-per-batch", type=int, default=6_000)
    p.add_argument("--max-steps", type=int, default=100, help="VMAS episode length")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--minibatch", type=int, default=400)
    p.add_argument("--cells", type=int, default=256, help="width of the 2 hidden layers")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--lmbda", type=float, default=0.9)
    p.add_argument("--entropy", type=float, default=1e-4)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--json", default=None, help="write the timings and the curve here")
    args = p.parse_args(argv)
    if args.frames_per_batch % args.max_steps:
        p.error(
            f"--frames-per-batch must be a multiple of --max-steps ({args.max_steps}), "
            f"got {args.frames_per_batch}"
        )
    if args.frames_per_batch % args.minibatch:
        p.error(
            f"--frames-per-batch must be a multiple of --minibatch ({args.minibatch}), "
            f"got {args.frames_per_batch}"
        )
    return args


def expand_done(td):
    """Give every agent the env's done and terminated flags, as the recipe's DoneTransform.

    VMAS reports done flags per env ``[envs, time, 1]``; GAE on the agents' rewards
    ``[envs, time, agents, 1]`` needs them per agent.
    """
    reward = td.get(("next", "agents", "reward"))
    for key in ("done", "terminated"):
        td.set(("next", "agents", key), td.get(("next", key)).unsqueeze(-1).expand(reward.shape))
    return td


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    num_envs = args.frames_per_batch // args.max_steps

    env = VmasEnv(
        scenario="navigation",
        num_envs=num_envs,
        continuous_actions=True,
        max_steps=args.max_steps,
        device="cpu",
        seed=args.seed,
        **NAVIGATION,
    )
    env = TransformedEnv(
        env, RewardSum(in_keys=[env.reward_key], out_keys=[("agents", "episode_reward")])
    )
    obs_dim = env.observation_spec["agents", "observation"].shape[-1]
    action_spec = env.full_action_spec_unbatched[env.action_key]

    actor_net = nn.Sequential(
        MultiAgentMLP(
            n_agent_inputs=obs_dim,
            n_agent_outputs=2 * action_spec.shape[-1],
            n_agents=env.n_agents,
            centralised=False,
            share_params=True,
            depth=2,
            num_cells=args.cells,
            activation_class=nn.Tanh,
        ),
        NormalParamExtractor(),
    )
    policy = ProbabilisticActor(
        module=TensorDictModule(
            actor_net,
            in_keys=[("agents", "observation")],
            out_keys=[("agents", "loc"), ("agents", "scale")],
        ),
        spec=env.full_action_spec_unbatched,
        in_keys=[("agents", "loc"), ("agents", "scale")],
        out_keys=[env.action_key],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": action_spec.space.low, "high": action_spec.space.high},
        return_log_prob=True,
    )
    # MAPPO: one critic over every agent's observation, its parameters shared.
    critic = ValueOperator(
        module=MultiAgentMLP(
            n_agent_inputs=obs_dim,
            n_agent_outputs=1,
            n_agents=env.n_agents,
            centralised=True,
            share_params=True,
            depth=2,
            num_cells=args.cells,
            activation_class=nn.Tanh,
        ),
        in_keys=[("agents", "observation")],
    )

    collector = Collector(
        env,
        policy,
        device="cpu",
        storing_device="cpu",
        frames_per_batch=args.frames_per_batch,
        total_frames=args.frames,
        postproc=expand_done,
    )
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(args.frames_per_batch, device="cpu"),
        sampler=SamplerWithoutReplacement(),
        batch_size=args.minibatch,
    )
    loss_module = ClipPPOLoss(
        actor_network=policy,
        critic_network=critic,
        clip_epsilon=args.clip,
        entropy_coeff=args.entropy,
        critic_coeff=1.0,
        loss_critic_type="smooth_l1",
        normalize_advantage=False,
    )
    loss_module.set_keys(
        reward=env.reward_key,
        action=env.action_key,
        done=("agents", "done"),
        terminated=("agents", "terminated"),
    )
    loss_module.make_value_estimator(ValueEstimators.GAE, gamma=args.gamma, lmbda=args.lmbda)
    optim = torch.optim.Adam(loss_module.parameters(), args.lr)

    t_collect = t_update = 0.0
    curve: list[tuple[int, float]] = []
    frames = 0
    loop_start = time.perf_counter()
    mark = loop_start
    for batch in collector:
        now = time.perf_counter()
        t_collect += now - mark
        with torch.no_grad():
            loss_module.value_estimator(
                batch,
                params=loss_module.critic_network_params,
                target_params=loss_module.target_critic_network_params,
            )
        frames += batch.numel()
        buffer.extend(batch.reshape(-1))
        for _ in range(args.epochs):
            for _ in range(args.frames_per_batch // args.minibatch):
                loss = loss_module(buffer.sample())
                total = loss["loss_objective"] + loss["loss_critic"] + loss["loss_entropy"]
                total.backward()
                torch.nn.utils.clip_grad_norm_(loss_module.parameters(), args.max_grad_norm)
                optim.step()
                optim.zero_grad()
        collector.update_policy_weights_()
        mark = time.perf_counter()
        t_update += mark - now
        done = batch.get(("next", "done")).squeeze(-1)
        returns = batch.get(("next", "agents", "episode_reward"))[done]
        ret = returns.mean().item() if returns.numel() else float("nan")
        curve.append((frames, ret))
        print(
            f"frames {frames:>7} | return {ret:8.3f} | collect {t_collect:7.1f}s "
            f"| update {t_update:7.1f}s",
            flush=True,
        )
    collector.shutdown()
    loop = time.perf_counter() - loop_start
    wall = time.perf_counter() - WALL_START
    result = {
        "side": "torchrl",
        "torch": torch.__version__,
        "frames": frames,
        "wall_s": wall,
        "loop_s": loop,
        "collect_s": t_collect,
        "update_s": t_update,
        "frames_per_s": frames / loop,
        "curve": curve,
    }
    print(
        f"wall {wall:.1f}s (loop {loop:.1f}s: collect {t_collect:.1f}s, update {t_update:.1f}s), "
        f"{frames / loop:,.0f} frames/s"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
