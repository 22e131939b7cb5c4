"""The learner's speed against another commit of marl, timed in the same run (ABAB...).

Each case runs in a fresh child process, alternately with this checkout's Python and
with the other checkout's (``--base``: a git worktree with its own venv, e.g. commit
2ae8056, see ``--help``), so that both see the same machine load. The children use
only the public API both commits share (``Algorithm``, ``Collector``, ``Trainer``,
``make_task``). Cases (VMAS navigation, 3 agents, one torch thread):

- ``update256``: the MAPPO minibatch update with 2x256 actor and critic: one
  ``algorithm.update`` over a 6000-frame batch (1 epoch of 15 minibatches of 400 env
  steps x 3 agents), per minibatch; ``process_batch`` (GAE) is timed apart.
- ``update64``: the same with the default MAPPO networks (64x64, as ``marl-run``), and,
  in this checkout only, ``bare64``: the same math hand-written on pre-gathered tensors
  (the floor for the minibatch update).
- ``e2e256``: ``Trainer`` on MAPPO 2x256, 60 envs x 100 steps per batch, 10 epochs x
  minibatches of 400, 60k frames: frames/s (collection and updates).
- ``e2e64``: the same with the default MAPPO config (``marl-run``'s workload, without
  its evaluation, logging and checkpoints).
- ``masac`` / ``qmix``: one gradient step (sample, loss, backward, Adam, target update)
  at batch 256 with the suites' networks (2x256 relu; QMIX on discrete navigation).
- ``per``: one prioritized replay iteration, ``sample(512)`` then ``update_priority``,
  on a full ``ReplayBuffer(TensorStorage(2**21))`` with a ``PrioritizedSampler``
  (items as in ``bench_replay_buffer.py``: obs float32[32], action float32[4], reward,
  td_error); fresh random priorities each time, so the sampled rows are cache misses.
- ``collect64`` / ``collect1024``: ``Collector`` on VMAS navigation (3 agents, 100 steps
  per batch) with a 2x256 Tanh MLP policy at 64 / 1024 envs, interleaved inside the
  child with the hand-written raw-``vmas`` loop of ``benchmarks/bench_collector.py``:
  frames/s, the Collector/hand ratio and the Collector's CPU overhead per step.
- ``ippo_spread``: ``Trainer`` on IPPO, VMAS ``simple_spread`` (3 agents, discrete
  actions) with JaxMARL's ``ippo_ff_mpe`` update: 64-64 tanh, 4 epochs x 4 minibatches,
  128 steps per rollout, 512 envs, 2 torch threads; env-steps/s over the batches after
  the first (from the trainer's collect and update times) and over the whole run
  (``--frames`` rounded up to whole batches, at least 2).
- ``ippo_spread_async``: the same with ``experiment.collector=async``'s collector (one
  worker process collects the next batch during the update; one thread per process).

With ``--compile``, each round also runs this checkout with compiled updates
(``Algorithm.build(env, compile=True)``), the side ``compiled``: its figures are
compared with this checkout's eager ones (``new``) and with the other commit's, and
each compiled child reports its warm-up (``warmup_s``: the first, untimed repeat,
where the compilation happens; for the e2e cases, the first batch's update) and what
torch compiled (graphs, graph breaks, compiled optimizer steps).

Run (from the repository root; ``git worktree add /work/base-2ae8056 2ae8056`` and a
venv for it first)::

    python benchmarks/bench_learner_vs_commit.py --base /work/base-2ae8056 --rounds 3
    python benchmarks/bench_learner_vs_commit.py --base /work/base-2ae8056 --cases update256,masac
    python benchmarks/bench_learner_vs_commit.py --base /work/base-2ae8056 --compile --cases qmix

Prints, per case, every round's figures and a summary: medians over the rounds, the
speedup of the medians and the median of the per-round speedups (base time / new
time, frames/s new / base: > 1 means this checkout is faster), in wall-clock and in
process CPU time (less sensitive to other processes on a shared machine), with the
load average after each child. ``update64``'s ``marl_over_bare_*`` is the median of
the per-repeat ratio of marl's minibatch update to the hand-written one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = (
    "update256", "update64", "e2e256", "e2e64", "masac", "qmix", "per", "collect64",
    "collect1024", "ippo_spread", "ippo_spread_async",
)  # fmt: skip
NUM_ENVS, STEPS = 60, 100


# ---------------------------------------------------------------------------- children
def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = _clock()
    return wall - start[0], cpu - start[1]


def _build(algo, env, compile: bool):
    """``algo.build(env, seed=0)``, compiled when asked (only this checkout can)."""
    return algo.build(env, seed=0, compile=True) if compile else algo.build(env, seed=0)


def _compile_report(algo, compile: bool) -> dict:
    if not compile:
        return {}
    from marl.algorithms import compile_report

    report = compile_report(algo)
    return {
        "compiled_steps": sum(report["steps"].values()),
        "eager_steps": sum(report["eager_steps"].values()),
        "graphs": report["graphs"],
        "graph_breaks": report["graph_breaks"],
    }


def _mappo(cells: int | None, compile: bool = False, **config):
    import torch

    from marl.algorithms import Algorithm
    from marl.collectors import Collector
    from marl.envs import make_task

    if cells is not None:
        config.update(actor_cells=(cells, cells), critic_cells=(cells, cells))
    env = make_task("vmas/navigation", num_envs=NUM_ENVS, seed=0)
    torch.manual_seed(0)
    algo = _build(Algorithm("mappo", config=config), env, compile)
    batch = Collector(env, algo.policy, frames_per_batch=NUM_ENVS * STEPS).rollout()
    return algo, batch


def child_update(
    cells: int | None, repeats: int, bare: bool = False, compile: bool = False
) -> dict:
    """Per-minibatch time of ``algorithm.update`` (1 epoch, 15 minibatches of 400).

    With ``bare``, each repeat also runs the hand-written loop (:func:`bare_update`) on
    the same shapes, alternating which goes first, and the medians of both and of
    their per-repeat ratio are returned (the pair shares the machine's load).
    """
    algo, batch = _mappo(cells, compile, epochs=1, minibatch_size=400)
    minibatches = batch.numel() // 400
    bare_step = bare_update(algo, batch, cells or 64) if bare else None
    rows: dict[str, list[float]] = {}

    def marl() -> None:
        td = batch.clone()
        start = _clock()
        td = algo.process_batch(td)
        process = _since(start)
        start = _clock()
        algo.update(td)
        update = _since(start)
        if not i:
            rows["warmup_s"] = [update[0]]
        if i:
            rows.setdefault("process_ms", []).append(process[0] * 1e3)
            rows.setdefault("process_cpu_ms", []).append(process[1] * 1e3)
            rows.setdefault("minibatch_ms", []).append(update[0] * 1e3 / minibatches)
            rows.setdefault("minibatch_cpu_ms", []).append(update[1] * 1e3 / minibatches)

    def hand_written() -> None:
        wall, cpu = bare_step()
        if i:
            rows.setdefault("bare_minibatch_ms", []).append(wall)
            rows.setdefault("bare_minibatch_cpu_ms", []).append(cpu)

    for i in range(repeats + 1):  # the first is a warm-up
        for run in (marl, hand_written) if i % 2 else (hand_written, marl):
            if run is marl or bare_step is not None:
                run()
    out = {k: statistics.median(v) for k, v in rows.items()}
    if bare_step is not None:
        for unit in ("ms", "cpu_ms"):
            pairs = zip(rows[f"minibatch_{unit}"], rows[f"bare_minibatch_{unit}"])
            out[f"marl_over_bare_{unit}"] = statistics.median(m / b for m, b in pairs)
    return {**out, **_compile_report(algo, compile)}


def bare_update(algo, batch, cells: int):
    """The MAPPO minibatch update hand-written in torch, on pre-gathered tensors.

    The same math as ``PPOLoss`` with the default MAPPO settings: the tanh MLP actor,
    the ``NormalParamExtractor`` (biased softplus) and ``TanhNormal`` log-probability,
    the standardized advantage, the clipped objective, the entropy estimate (a
    diagnostic), the critic (one MLP on the flattened group observation, expanded to
    the agents) and its l2 loss, clip fraction, KL and explained variance; backward,
    per-role gradient clipping and a fused Adam step.

    Returns:
        A function running one epoch of it, returning ``(wall ms, cpu ms)`` per minibatch.
    """
    import math

    import torch
    import torch.nn.functional as F
    from torch import nn

    batch = algo.process_batch(batch.clone()).reshape(-1)
    perm = torch.randperm(batch.numel())
    obs = batch["agent", "observation"][perm]
    action = batch["agent", "action"][perm]
    old_log_prob = batch["agent", "action_log_prob"][perm]
    advantage = batch["agent", "advantage"][perm]
    target = batch["agent", "value_target"][perm]
    n_agents, obs_dim, act_dim = obs.shape[1], obs.shape[2], action.shape[-1]

    def mlp(inp: int, out: int) -> nn.Module:
        return nn.Sequential(
            nn.Linear(inp, cells),
            nn.Tanh(),
            nn.Linear(cells, cells),
            nn.Tanh(),
            nn.Linear(cells, out),
        )

    torch.manual_seed(0)
    actor, critic = mlp(obs_dim, 2 * act_dim), mlp(n_agents * obs_dim, 1)
    opt = torch.optim.Adam(
        [{"params": actor.parameters(), "lr": 5e-5}, {"params": critic.parameters(), "lr": 5e-5}],
        fused=True,
    )
    scale_bias = math.log(math.expm1(1.0 - 0.01))  # biased_softplus_1.0, min 0.01
    log2 = math.log(2)

    def tanh_normal_log_prob(loc, scale, x):
        normal = -((x - loc) ** 2) / (2 * scale**2) - scale.log() - 0.5 * math.log(2 * math.pi)
        return (normal - 2 * (log2 - x - F.softplus(-2 * x))).sum(-1)  # bounds [-1, 1]

    def step(mb: slice) -> None:
        o, a, lp0 = obs[mb], action[mb], old_log_prob[mb]
        adv, tgt = advantage[mb], target[mb]
        loc, raw = actor(o).chunk(2, -1)
        scale = (F.softplus(raw + scale_bias) + 0.01).clamp_min(1e-4)
        x = torch.atanh(a.clamp(-1 + 1e-6, 1 - 1e-6))
        log_prob = tanh_normal_log_prob(loc, scale, x).unsqueeze(-1)
        adv = (adv - adv.mean()) / adv.std().clamp_min(1e-6)
        log_ratio = log_prob - lp0.unsqueeze(-1)
        ratio = log_ratio.exp()
        surrogate = torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
        loss = -surrogate.mean()
        with torch.no_grad():  # the entropy estimate is a logged diagnostic
            xs = loc + scale * torch.randn_like(loc)
            entropy = -tanh_normal_log_prob(loc, scale, xs).mean()
            clip_fraction = ((ratio - 1).abs() > 0.2).float().mean()
            kl = ((ratio - 1) - log_ratio).mean()
        value = critic(o.reshape(o.shape[0], -1)).unsqueeze(-2).expand(-1, n_agents, 1)
        loss = loss + (value - tgt).pow(2).mean()
        with torch.no_grad():
            explained = 1 - (tgt - value).var() / tgt.var().clamp_min(1e-8)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        for group in opt.param_groups:
            nn.utils.clip_grad_norm_(group["params"], 0.5, foreach=True)
        opt.step()
        torch.stack([loss.detach(), entropy, clip_fraction, kl, explained]).tolist()

    minibatches = [slice(i, i + 400) for i in range(0, obs.shape[0] - 399, 400)]

    def epoch() -> tuple[float, float]:
        start = _clock()
        for mb in minibatches:
            step(mb)
        wall, cpu = _since(start)
        return wall * 1e3 / len(minibatches), cpu * 1e3 / len(minibatches)

    return epoch


def child_e2e(cells: int | None, frames: int, compile: bool = False) -> dict:
    """Frames/s of ``Trainer`` on MAPPO (60 envs x 100 steps per batch, 10 epochs x 400)."""
    import torch

    from marl.algorithms import Algorithm, Trainer
    from marl.envs import make_task

    config: dict = {"epochs": 10, "minibatch_size": 400}
    if cells is not None:
        config.update(actor_cells=(cells, cells), critic_cells=(cells, cells))
    env = make_task("vmas/navigation", num_envs=NUM_ENVS, seed=0)
    torch.manual_seed(0)
    algo = _build(Algorithm("mappo", config=config), env, compile)
    trainer = Trainer(algo, env, frames_per_batch=NUM_ENVS * STEPS, total_frames=frames, seed=0)
    start = _clock()
    history = list(trainer.train())
    wall, cpu = _since(start)
    return {
        "fps": frames / wall,
        "fps_cpu": frames / cpu,
        "collect_s": sum(h["time/collect"] for h in history),
        "update_s": sum(h["time/update"] for h in history),
        "final_reward": history[-1].get("train/episode_reward"),
        "warmup_s": history[0]["time/update"],
        **_compile_report(algo, compile),
    }


def child_ippo_spread(frames: int, compile: bool = False, collect_async: bool = False) -> dict:
    """Env-steps/s of IPPO on simple_spread with JaxMARL's settings, first batch excluded.

    With ``collect_async``, one worker process collects the next batch while the
    learner updates (``experiment.collector=async``), each process on one thread.
    """
    import torch

    from marl.algorithms import Algorithm, Trainer
    from marl.envs import make_task

    torch.set_num_threads(1 if collect_async else 2)
    envs, steps = 512, 128
    per_batch = envs * steps
    batches = max(2, -(-frames // per_batch))
    config = {
        "lr": 2.5e-4,
        "lmbda": 0.95,
        "entropy_coef": 0.01,
        "critic_coef": 0.5,
        "max_grad_norm": 0.5,
        "epochs": 4,
        "minibatch_size": per_batch // 4,
        "actor_cells": (64, 64),
        "critic_cells": (64, 64),
        "activation": "tanh",
    }
    env = make_task("vmas/simple_spread", num_envs=envs, seed=0, continuous_actions=False)
    torch.manual_seed(0)
    algo = _build(Algorithm("ippo", config=config), env, compile)
    collector = None
    if collect_async:
        from marl.collectors import MultiAsyncCollector

        collector = MultiAsyncCollector(
            lambda: make_task(
                "vmas/simple_spread", num_envs=envs, seed=0, continuous_actions=False
            ),
            algo.policy,
            num_workers=1,
            frames_per_batch=per_batch,
            seed=0,
        )
    trainer = Trainer(
        algo,
        env,
        frames_per_batch=per_batch,
        total_frames=batches * per_batch,
        **({"collector": collector} if collector is not None else {}),
    )
    start = _clock()
    history = list(trainer.train())  # (2ae8056's train() returns a list at the end)
    wall, cpu = _since(start)
    if collector is not None:
        collector.shutdown()
    rest = history[1:]
    collect = sum(h["time/collect"] for h in rest)
    update = sum(h["time/update"] for h in rest)
    return {
        # the batches after the first, from the trainer's own collect and update times
        "fps": len(rest) * per_batch / (collect + update),
        "collect_fps": len(rest) * per_batch / collect,
        "update_fps": len(rest) * per_batch / update,
        # the whole run, the first batch (and any compilation) included
        "fps_total": batches * per_batch / wall,
        "fps_total_cpu": batches * per_batch / cpu,
        "warmup_s": history[0]["time/collect"] + history[0]["time/update"],
        **_compile_report(algo, compile),
    }


def child_off_policy(name: str, repeats: int, compile: bool = False) -> dict:
    """Per-step time of ``algorithm.update``: 60 gradient steps per 600-frame batch."""
    import torch

    from marl.algorithms import Algorithm
    from marl.collectors import Collector
    from marl.envs import make_task

    kwargs = {"continuous_actions": False} if name == "qmix" else {}
    env = make_task("vmas/navigation", num_envs=NUM_ENVS, seed=0, **kwargs)
    config = {"batch_size": 256, "learning_starts": 0, "utd_ratio": 0.1, "buffer_size": 100_000}
    torch.manual_seed(0)
    algo = _build(Algorithm(name, config=config), env, compile)
    collector = Collector(env, algo.policy, frames_per_batch=NUM_ENVS * 10)
    batch = algo.process_batch(collector.rollout())
    steps = int(0.1 * batch.numel())
    samples = []
    for i in range(repeats + 1):
        start = _clock()
        algo.update(batch)
        wall, cpu = _since(start)
        if i:
            samples.append((wall * 1e3 / steps, cpu * 1e3 / steps))
        else:
            warmup = wall
    return {
        "step_ms": statistics.median(s[0] for s in samples),
        "step_cpu_ms": statistics.median(s[1] for s in samples),
        "warmup_s": warmup,
        **_compile_report(algo, compile),
    }


def child_per(repeats: int, capacity: int = 2**21, batch: int = 512) -> dict:
    """Per-iteration time of ``sample(batch)`` + ``update_priority`` on a full buffer."""
    import torch
    from tensordict import TensorDict

    from marl.data import PrioritizedSampler, ReplayBuffer, TensorStorage

    sampler = PrioritizedSampler(capacity, alpha=0.7, beta=0.5)
    rb = ReplayBuffer(TensorStorage(capacity), sampler=sampler)
    g = torch.Generator().manual_seed(0)
    chunk = 1 << 16
    data = TensorDict(
        {
            "obs": torch.randn(chunk, 32, generator=g),
            "action": torch.randn(chunk, 4, generator=g),
            "reward": torch.randn(chunk, 1, generator=g),
            "td_error": torch.rand(chunk, 1, generator=g),
        },
        [chunk],
    )
    for _ in range(capacity // chunk):
        rb.extend(data)
    rb.update_priority(torch.arange(capacity), torch.rand(capacity, generator=g))
    for leaf in rb.storage.storage.values(True, True):
        leaf.sum()  # fault every page in before timing
    priorities = [torch.rand(batch, generator=g) for _ in range(64)]
    iters = 500
    samples = []
    for i in range(repeats + 1):
        start = _clock()
        for k in range(iters):
            index = rb.sample(batch)["index"]
            rb.update_priority(index, priorities[k % 64])
        wall, cpu = _since(start)
        if i:
            samples.append((wall * 1e6 / iters, cpu * 1e6 / iters))
    return {
        "iter_us": statistics.median(s[0] for s in samples),
        "iter_cpu_us": statistics.median(s[1] for s in samples),
    }


def child_collect(num_envs: int, repeats: int) -> dict:
    """``bench_collector.bench_vmas``: the Collector against the hand loop, interleaved."""
    import warnings

    from bench_collector import bench_vmas  # this file's directory, whichever marl runs

    warnings.simplefilter("ignore")
    r = bench_vmas(num_envs, repeats)
    return {
        "fps": r["collector_fps"],
        "hand_fps": r["hand_fps"],
        "fps_cpu": r["collector_fps_cpu"],
        "ratio": r["ratio"],
        "ratio_cpu": r["ratio_cpu"],
        "overhead_cpu_us": r["overhead_cpu_us"],
    }


def child(case: str, repeats: int, frames: int, bare: bool, compile: bool = False) -> dict:
    import torch

    torch.set_num_threads(1)
    if case.startswith("collect"):
        return child_collect(int(case.removeprefix("collect")), repeats)
    if case in ("update256", "update64"):
        return child_update(256 if case == "update256" else None, repeats, bare, compile)
    if case in ("e2e256", "e2e64"):
        return child_e2e(256 if case == "e2e256" else None, frames, compile)
    if case in ("ippo_spread", "ippo_spread_async"):
        return child_ippo_spread(frames, compile, collect_async=case == "ippo_spread_async")
    if case == "per":
        return child_per(repeats)
    return child_off_policy(case, repeats, compile)


def run(quick: bool = False) -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: the MAPPO minibatch update against the
    same math hand-written on pre-gathered tensors (no other commit here)."""
    import torch

    torch.set_num_threads(1)
    repeats = 2 if quick else 5
    rows = []
    for cells in (64, 256):
        out = child_update(cells, repeats, bare=True)
        marl, bare = out["minibatch_ms"], out["bare_minibatch_ms"]
        rows.append(
            {
                "name": f"MAPPO minibatch update, navigation shapes ({cells}x{cells})",
                "value": marl,
                "unit": "ms",
                "baseline_name": "same math hand-written on pre-gathered tensors",
                "baseline_value": bare,
                "higher_is_better": False,
            }
        )
    return rows


# ---------------------------------------------------------------------------- parent
def _python(root: Path, here: Path) -> str:
    """The checkout's own venv; this Python for this checkout."""
    venv = root / ".venv" / "bin" / "python"
    if venv.exists():
        return str(venv)
    if root == here:
        return sys.executable
    raise SystemExit(
        f"{root} has no .venv/bin/python: give the other checkout a venv with its marl "
        "installed (pip install -e .), or the comparison would run this checkout twice"
    )


def _run(
    root: Path, here: Path, case: str, args: argparse.Namespace, bare: bool, compile: bool
) -> dict:
    cmd = [_python(root, here), str(Path(__file__).resolve()), "--child", case]
    cmd += ["--repeats", str(args.repeats), "--frames", str(args.frames)]
    if bare:
        cmd.append("--bare")
    if compile:
        cmd.append("--compile")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ""}
    with tempfile.TemporaryDirectory() as cache:
        # a cold inductor cache: the warm-up a first run pays (later runs reuse the cache)
        env["TORCHINDUCTOR_CACHE_DIR"] = cache
        out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"{case} in {root} failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    marl_root = Path(result.pop("marl")).resolve()
    if marl_root != root.resolve():
        raise SystemExit(f"the child for {root} imported marl from {marl_root}, not from {root}")
    return result


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split(" ")[:3])


def _summarize(
    key: str, new_rows: list[dict], base_rows: list[dict], names: tuple[str, str] = ("new", "base")
) -> dict[str, float]:
    """Medians over the rounds; for speeds, the speedup of the medians and the median
    of the per-round speedups (each round's pair ran back to back)."""
    new = [x[key] for x in new_rows if x.get(key) is not None]
    base = [x[key] for x in base_rows if x.get(key) is not None]
    out = {names[0]: statistics.median(new)} if new else {}
    if not new or not base:
        return out
    out[names[1]] = statistics.median(base)
    if key.endswith(("_ms", "_us")) or key.startswith("fps"):

        def speedup(n: float, b: float) -> float:
            return n / b if key.startswith("fps") else b / n

        out["speedup"] = speedup(out[names[0]], out[names[1]])
        pairs = [(n[key], b[key]) for n, b in zip(new_rows, base_rows) if key in n and key in b]
        out["paired_speedup"] = statistics.median(speedup(n, b) for n, b in pairs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="the other checkout (a worktree with .venv)")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--rounds", type=int, default=3, help="A/B pairs per case")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats inside a child")
    parser.add_argument("--frames", type=int, default=60_000, help="frames of the e2e cases")
    parser.add_argument(
        "--compile", action="store_true", help="also time this checkout with compiled updates"
    )
    parser.add_argument("--no-base", action="store_true", help="skip the other checkout")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import marl

        out = child(args.child, args.repeats, args.frames, args.bare, args.compile)
        out["marl"] = str(Path(marl.__file__).resolve().parents[1])  # which checkout ran
        print(json.dumps(out))
        return
    if args.base is None and not args.no_base:
        parser.error("--base is required (the checkout to compare with), or --no-base")
    if args.no_base and not args.compile:
        parser.error("--no-base compares eager with compiled: add --compile")
    here = Path(__file__).resolve().parents[1]
    sides = [("new", here, False)]
    if args.compile:
        sides.append(("compiled", here, True))
    if not args.no_base:
        sides.append(("base", args.base.resolve(), False))
    print(f"load before: {_load()}", flush=True)
    for case in args.cases.split(","):
        rows: dict[str, list[dict]] = {side: [] for side, _, _ in sides}
        for r in range(args.rounds):
            # ABAB, BABA... (ABC, CBA...): no side always runs first
            for side, root, compile in sides if r % 2 == 0 else sides[::-1]:
                result = _run(root, here, case, args, bare=side == "new", compile=compile)
                rows[side].append(result)
                print(f"{case} round {r} {side}: {json.dumps(result)} load {_load()}", flush=True)
        pairs = [(a, b) for a, b in (("new", "base"), ("compiled", "base"), ("compiled", "new"))]
        for a, b in pairs:
            if a in rows and b in rows:
                keys = rows[a][0]
                summary = {k: _summarize(k, rows[a], rows[b], (a, b)) for k in keys}
                print(f"SUMMARY {case} {a} vs {b}: {json.dumps(summary)}", flush=True)
    print(f"load after: {_load()}", flush=True)


if __name__ == "__main__":
    main()
