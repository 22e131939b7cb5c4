"""Learning tests of the MARL algorithms: each must beat doing nothing AND acting at random.

Every algorithm trains on VMAS ``navigation`` (3 agents, 100-step episodes; the
value-based ones on its discrete variant) for a fixed frame budget, on two seeds
(MADDPG on five, asserted on their median).
Then its deterministic policy, the uniformly random policy and the no-op policy
(agents stand still, which scores exactly 0.0 there) each play the same 20
evaluation episodes (:func:`marl.testing.compare_with_baselines`). The trained
policy must beat the better of the two baselines by a margin: the measured
values are in the comments, the margin is set well below the lowest of them, and
the three figures are in the assertion message.

The competitive (simple_tag) and turn-based (tictactoe) tests check each trained
policy against fixed opponents and against the same network before training; their
docstrings say how.

Every test fails when learning is disabled (``pytest --disable-learning``, which
turns every optimizer's ``step`` into a no-op). Checked for the first 20 by running
this file that way: all 20 failed. On navigation the untrained deterministic
policies' margins over the better baseline were -5.8 to +0.016 (required: 0.25 to
0.4); in simple_tag the adversaries tagged 2.75 times per episode, exactly as before
training; in tictactoe the record stayed the untrained network's. Each case added
since (happo, pqn, pqn_vdn, mat) was checked the same way when it was added; its
comment or its docs page gives the disabled-learning margins.

Each test prints one summary line (run pytest with ``-s``), with its wall and CPU
time: the first 20 took about 580 CPU seconds on one thread, and each later
navigation case takes 60 to 120 CPU seconds a seed.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import pytest
import torch
from tensordict.nn import InteractionType, set_interaction_type

vmas = pytest.importorskip("vmas")

from marl.algorithms import Algorithm, Trainer, evaluate_episodes  # noqa: E402
from marl.envs import RewardSum, TransformedEnv, VmasEnv  # noqa: E402
from marl.envs.tasks import make_task  # noqa: E402
from marl.testing import BaselineComparison, compare_with_baselines  # noqa: E402

pytestmark = pytest.mark.slow

NAV = "vmas/navigation"
SEEDS = (0, 1)


@dataclass(frozen=True)
class Case:
    """How one algorithm is trained in its learning test, and the margin it must clear."""

    config: dict
    frames: int
    margin: float
    frames_per_batch: int = 3000
    env_kwargs: dict = field(default_factory=dict)
    seeds: tuple[int, ...] = SEEDS


# On-policy: 60 envs x 100 steps per batch, 4 epochs of 1000-step minibatches.
ON_POLICY = {"lr": 1e-3, "epochs": 4, "minibatch_size": 1000}
# Off-policy: 60 envs x 50 steps per batch, 20 updates of 256 transitions per 1000 frames.
OFF_POLICY = {"batch_size": 256, "utd_ratio": 0.02, "learning_starts": 3000}
ACTOR_CRITIC = {
    **OFF_POLICY,
    "actor_lr": 1e-3,
    "critic_lr": 1e-3,
    "actor_cells": (64, 64),
    "critic_cells": (64, 64),
}
# MADDPG's centralized critic (54 observation + 6 action inputs) learns more slowly than
# IDDPG's; without faster targets and clipped gradients seed 1 stayed at 0.03 (60k frames).
STABLE_ACTOR_CRITIC = {**ACTOR_CRITIC, "tau": 0.01, "max_grad_norm": 1.0}
# SAC: navigation's rewards are ~0.01 per step, so the default temperature (1.0) keeps the
# policy at maximum entropy for the whole budget; start it at 0.01 instead.
SOFT_ACTOR_CRITIC = {**ACTOR_CRITIC, "alpha_init": 0.01}
Q_LEARNING = {**OFF_POLICY, "lr": 5e-4, "eps_annealing_frames": 45_000, "cells": (64, 64)}
DISCRETE = {"continuous_actions": False}
# PQN: on-policy batches like PPO's (60 envs x 100 steps), no replay and no target network.
# PQN-VDN's team targets (mean reward, summed values) need more passes: at 4 epochs and
# lr 1e-3 it ended at 0.178 and 0.201, at lr 3e-3 at 0.619 and 0.222.
PQN = {"lr": 3e-3, "epochs": 4, "minibatch_size": 1000, "eps_annealing_frames": 45_000}
PQN_VDN = {**PQN, "lr": 1e-3, "epochs": 8}

# Measured (seed 0, seed 1): the trained policy's mean return over the 20 evaluation
# episodes; on the same episodes the no-op scored 0.000 and random -0.13 to -0.70.
# CPU seconds per test (one thread): 19 to 34, 460 for the 18.
CASES = {
    "mappo": Case(ON_POLICY, 90_000, 0.4, frames_per_batch=6000),  # 0.912, 1.008
    "ippo": Case(ON_POLICY, 90_000, 0.4, frames_per_batch=6000),  # 0.860, 1.030
    # HAPPO: MAPPO's settings, each of the 3 agents in turn (4 epochs each), then the critic;
    # 31-32 CPU s per seed (MAPPO: 20); with --disable-learning: -0.180, -2.556 (both fail)
    "happo": Case(ON_POLICY, 90_000, 0.4, frames_per_batch=6000),  # 0.613, 0.749 (a71b3d5)
    # MAT: MAPPO's settings; the transformer's default size (1 block, 64 wide, 1 head);
    # 58-62 CPU s per seed (collection decodes the 3 agents in turn); with
    # --disable-learning: -4.971, -2.002 (both fail)
    "mat": Case(ON_POLICY, 90_000, 0.3, frames_per_batch=6000),  # 0.852, 0.640
    # MADDPG does not learn on every seed at this budget: its test below trains five
    # consecutive seeds and asserts on their median (MADDPG_SEEDS).
    "maddpg": Case(STABLE_ACTOR_CRITIC, 90_000, 0.15, seeds=(0, 1, 2, 3, 4)),
    "iddpg": Case(ACTOR_CRITIC, 60_000, 0.3),  # 0.673, 0.753
    "masac": Case(SOFT_ACTOR_CRITIC, 60_000, 0.25),  # 0.667, 0.427
    "isac": Case(SOFT_ACTOR_CRITIC, 60_000, 0.3),  # 0.864, 0.998
    "qmix": Case(Q_LEARNING, 90_000, 0.25, env_kwargs=DISCRETE),  # 0.658, 0.425
    "vdn": Case(Q_LEARNING, 90_000, 0.25, env_kwargs=DISCRETE),  # 0.574, 0.653
    "iql": Case(Q_LEARNING, 90_000, 0.25, env_kwargs=DISCRETE),  # 0.915, 0.467
    "pqn": Case(
        {**PQN, "cells": (64, 64)}, 90_000, 0.4, frames_per_batch=6000, env_kwargs=DISCRETE
    ),  # 0.910, 0.942
    "pqn_vdn": Case(
        {**PQN_VDN, "cells": (64, 64)}, 90_000, 0.25, frames_per_batch=6000, env_kwargs=DISCRETE
    ),  # 0.688, 0.622
}


def _train_and_compare(name: str, case: Case, seed: int) -> BaselineComparison:
    """Train ``name`` on navigation, then compare it with both baselines on 20 episodes."""
    torch.set_num_threads(1)
    start, cpu = time.perf_counter(), time.process_time()
    env = make_task(NAV, num_envs=60, seed=seed, **case.env_kwargs)
    algo = Algorithm(name, config=case.config)
    trainer = Trainer(
        algo, env, frames_per_batch=case.frames_per_batch, total_frames=case.frames, seed=seed
    )
    history = list(trainer.train())
    assert history[-1]["frames"] == case.frames
    comparison = compare_with_baselines(
        lambda: make_task(NAV, num_envs=20, seed=seed + 1000, **case.env_kwargs),
        algo.eval_policy(),
        episodes=20,
    )
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(
        f"\n{name} seed={seed}: {comparison} frames={case.frames} wall_s={wall:.1f} cpu_s={cpu:.1f}"
    )
    return comparison


@pytest.mark.parametrize(
    ("name", "seed"),
    [(name, seed) for name, case in CASES.items() if name != "maddpg" for seed in case.seeds],
)
def test_marl_algorithm_beats_random_and_noop_on_navigation(name, seed):
    case = CASES[name]
    comparison = _train_and_compare(name, case, seed)
    assert comparison.episodes >= 20
    assert comparison.margin > case.margin, f"{name} seed {seed}: {comparison}"


def test_maddpg_beats_random_and_noop_on_the_median_of_consecutive_seeds():
    """MADDPG over seeds 0-4, asserted on the median margin, not on chosen seeds.

    At this budget MADDPG does not learn on every seed: seeds 0-4 ended at 0.354,
    0.695, 0.325, 0.777 and -4.431 (median 0.354; commit 2619eaf gives the same
    figures on the same machine). A failing seed's deterministic policy drives the
    agents away, where the centralized critic extrapolates. That is the algorithm's,
    not this implementation's (measured when issue 32 was filed, on another machine):
    an independent TorchRL 0.14 MADDPG on the same workload cleared the old per-seed
    margin (0.25) on 6 of 10 seeds where marl cleared it on 5 of 10 (medians 0.283 and
    0.280), and the two agreed on the losses and gradients to 1e-7 on the same weights
    and batch (the DDPG loss itself is checked against TorchRL's by
    ``benchmarks/crosscheck/check_det.py``). The median must clear 0.15; with learning
    disabled (``--disable-learning``) the margins were -0.580 to +0.012, median -0.051.
    """
    case = CASES["maddpg"]
    results = [_train_and_compare("maddpg", case, seed) for seed in case.seeds]
    margins = sorted(r.margin for r in results)
    median = margins[len(margins) // 2]
    assert median > case.margin, f"maddpg seeds {case.seeds}: margins {margins}"


# ----------------------------------------------------------------------------- simple_tag
def _simple_tag(num_envs: int, seed: int, shaped: bool) -> TransformedEnv:
    """VMAS's port of MPE simple_tag: 3 adversaries chase 1 faster prey, 5 discrete moves.

    Unshaped, each adversary's reward is +10 per adversary-prey contact in the step
    (shared by the adversaries) and the prey's is -10 per contact, so an episode's
    adversary return is 10 x its number of contacts. ``shaped`` adds the scenario's
    distance terms (adversaries: -0.1 x distance to the prey; prey: +0.1 x distance to
    each adversary), which make chasing and fleeing learnable in a CI budget.
    """
    shaping = {"shape_adversary_rew": shaped, "shape_agent_rew": shaped}
    env = VmasEnv(
        "simple_tag", num_envs, continuous_actions=False, max_steps=100, seed=seed, **shaping
    )
    return TransformedEnv(env, [RewardSum()])


def _contacts(adversary, prey, seed: int, episodes: int = 40) -> float:
    """Mean adversary-prey contacts per episode; each side is "trained" (a policy) or random."""
    env = _simple_tag(episodes, seed, shaped=False)
    torch.manual_seed(seed)  # the random side's actions

    def policy(td):
        chosen = {}
        for group, side in (("adversary", adversary), ("agent", prey)):
            if side is not None:
                chosen[group] = side(td.clone())[group, "action"]
        td = env.rand_action(td)
        for group, action in chosen.items():
            td[group, "action"] = action
        return td

    returns = evaluate_episodes(env, policy, episodes).group_returns["adversary"]
    return sum(returns) / len(returns) / 10


def test_simple_tag_each_side_beats_its_baseline_against_a_fixed_opponent():
    """Competitive: MAPPO adversaries and a MAPPO prey train against each other.

    Then each side plays against a FIXED opponent, on 40 unshaped episodes where the
    number of contacts (tags) is counted from the adversaries' return:

    - adversaries vs a random prey: the trained adversaries must tag at least twice as
      often as random adversaries and as the same network before training (an untrained
      deterministic team already tags more than a random one);
    - prey vs the trained adversaries (frozen, deterministic): the trained prey, playing
      its stochastic policy, must be tagged at most 3/4 as often as a random prey and as
      the same network before training (also sampled).
      Evasion is learned as a mixed strategy: the prey's argmax action is not its policy
      (seed 0: the deterministic prey was tagged 27.05 times per episode, its sampled
      policy 4.575, a random prey 9.5; seed 1: 3.9, 1.6 and 4.1).

    VMAS's simple_tag rather than PettingZoo's: the PettingZoo env steps one game at a
    time (~300 frames/s on this machine), and chasing from its sparse +10-per-contact
    reward was not learned within 40k frames; the vectorized port with the scenario's
    distance shaping learns both sides within 120k frames.
    """
    torch.set_num_threads(1)
    start, cpu = time.perf_counter(), time.process_time()
    env = _simple_tag(60, seed=0, shaped=True)
    side = {"lr": 1e-3, "epochs": 4, "minibatch_size": 1000, "critic_scope": "all"}
    algo = Algorithm("mappo", config=side).build(env, seed=0)
    untrained = _contacts(algo.eval_policy(), None, seed=1000)
    untrained_policy = copy.deepcopy(algo.policy)
    frames = 120_000
    list(Trainer(algo, env, frames_per_batch=6000, total_frames=frames, seed=0).train())
    trained = algo.eval_policy()

    def sampled(policy):  # the prey's (mixed) strategy
        def act(td):
            with set_interaction_type(InteractionType.RANDOM):
                return policy(td)

        return act

    tags = {
        "random adversaries, random prey": _contacts(None, None, seed=1000),
        "untrained adversaries, random prey": untrained,
        "trained adversaries, random prey": _contacts(trained, None, seed=1000),
        "trained adversaries, untrained prey": _contacts(
            trained, sampled(untrained_policy), seed=1000
        ),
        "trained adversaries, trained prey": _contacts(trained, sampled(algo.policy), seed=1000),
    }
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"\nsimple_tag mappo vs mappo, tags per episode: {tags}")
    print(f"frames={frames} wall_s={wall:.1f} cpu_s={cpu:.1f}")
    # measured (seed 0): random 0.8, untrained 2.75, trained adversaries 9.5; against them
    # the untrained prey 8.175, the trained prey 4.575 (26 CPU seconds).
    # --disable-learning: adversaries 2.75, untrained and "trained" prey 1.525: both fail.
    baseline = max(tags["random adversaries, random prey"], untrained)
    assert tags["trained adversaries, random prey"] >= 2 * baseline, tags
    prey_baseline = min(
        tags["trained adversaries, random prey"], tags["trained adversaries, untrained prey"]
    )
    assert tags["trained adversaries, trained prey"] <= 0.75 * prey_baseline, tags


# ----------------------------------------------------------------------------- tictactoe
_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


def _one_ply(observation: torch.Tensor, legal: torch.Tensor, gen: torch.Generator) -> int:
    """A fixed opponent stronger than random: win if it can, else block, else random.

    ``observation`` is the mover's ``[3, 3, 2]`` view (its marks, then the other's);
    squares are numbered as the actions, row by row.
    """
    board = observation.reshape(9, 2).bool()
    moves = legal.nonzero().flatten().tolist()
    for marks in (board[:, 0], board[:, 1]):  # complete our line first, then block theirs
        for move in moves:
            for line in _LINES:
                if move in line and all(marks[i] for i in line if i != move):
                    return move
    return moves[int(torch.randint(len(moves), (1,), generator=gen))]


def _play(env, policy, games: int, *, first: bool, opponent: str, seed: int) -> dict[str, int]:
    """``games`` games of ``policy`` (moving first or second) against a fixed opponent."""
    gen = torch.Generator().manual_seed(seed)
    ours = 0 if first else 1
    score = {"win": 0, "draw": 0, "loss": 0, "illegal": 0}
    for _ in range(games):
        td = env.reset()
        while True:
            td = policy(td)
            legal = td["player", "action_mask"]
            mover = int(td["player", "mask"].nonzero()[0, 0])
            if mover != ours:
                action = td["player", "action"].clone()
                if opponent == "random":
                    choices = legal[mover].nonzero().flatten()
                    action[mover] = choices[torch.randint(len(choices), (1,), generator=gen)]
                else:
                    action[mover] = _one_ply(td["player", "observation"][mover], legal[mover], gen)
                td["player", "action"] = action
            elif not legal[mover, td["player", "action"][mover]]:
                score["illegal"] += 1
            td = env.step(td)
            if td["next", "done"].item():
                reward = td["next", "player", "reward"][ours].item()
                score["win" if reward > 0 else "loss" if reward < 0 else "draw"] += 1
                break
            td = td["next"]
    return score


def _tictactoe_scores(policy, games: int = 100) -> dict[str, dict[str, int]]:
    """Our policy as first and second player against random and one-ply opponents."""
    env = make_task("pettingzoo/tictactoe", seed=1)
    return {
        f"{opponent}/{'first' if first else 'second'}": _play(
            env, policy, games, first=first, opponent=opponent, seed=7
        )
        for opponent in ("random", "one_ply")
        for first in (True, False)
    }


def test_iql_learns_tictactoe_turn_based_with_masks():
    """Self-play IQL on the turn-based (AEC) env, with legal-action masks.

    An untrained Q-network acting greedily over the legal moves already beats a
    random player most of the time as the first player, so the test asks for
    more than that: a high win rate against random as first AND as second player,
    and, against a fixed one-ply opponent (wins when it can, blocks, else plays at
    random), at most half the losses of the same network before training, on the
    same games.

    It trains on a batch of 8 envs, as ``marl-run`` does (8 envs for an off-policy
    algorithm on a PettingZoo task): with one unbatched env this test passed while the
    batch's turns were never relinked and ``marl-run`` made IQL worse than untrained.
    """
    pytest.importorskip("pettingzoo")
    torch.set_num_threads(1)
    start, cpu = time.perf_counter(), time.process_time()
    env = make_task("pettingzoo/tictactoe", seed=0, num_envs=8)
    algo = Algorithm(
        "iql",
        config={
            "lr": 1e-3,
            "gamma": 0.9,
            "learning_starts": 500,
            "batch_size": 128,
            "utd_ratio": 0.25,
            "eps_annealing_frames": 10_000,
            "eps_end": 0.05,
            "cells": (64, 64),
        },
    )
    algo.build(env, seed=0)
    untrained = _tictactoe_scores(algo.eval_policy())
    frames = 30_000
    list(Trainer(algo, env, frames_per_batch=500, total_frames=frames, seed=0).train())
    trained = _tictactoe_scores(algo.eval_policy())
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"\niql tictactoe: untrained {untrained}\ntrained {trained}")
    print(f"frames={frames} wall_s={wall:.1f} cpu_s={cpu:.1f}")
    # measured (100 games each, wins/draws/losses): untrained vs random 84/9/7 first and
    # 47/12/41 second, vs one-ply 26/35/39 and 0/11/89; trained (8 envs, 30k frames) vs
    # random 92/6/2 and 86/11/3, vs one-ply 18/53/29 and 19/50/31 (17 CPU seconds).
    # Seeds 1-3 (not run here): random wins 96/89, 98/84 and 99/82, one-ply losses 21,
    # 43 and 30 (untrained 160, 156, 182); with 20k frames seed 1 won only 88 as first
    # player. Before batched envs relinked their turns, this training (8 envs) ended
    # worse than untrained (random 39/7/54 and 3/11/86); with learning disabled the test
    # fails on random/first (84).
    assert all(s["illegal"] == 0 for s in trained.values()), trained
    assert trained["random/first"]["win"] >= 90, trained
    assert trained["random/second"]["win"] >= 70, trained
    losses = {
        name: sum(scores[k]["loss"] for k in ("one_ply/first", "one_ply/second"))
        for name, scores in (("trained", trained), ("untrained", untrained))
    }
    assert losses["trained"] <= losses["untrained"] / 2, (losses, trained, untrained)
