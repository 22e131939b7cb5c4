"""The issue's league test: IQL self-play on tictactoe against a pool of its past selves.

The learner plays the first and the second seat in alternate batches against snapshots
drawn uniformly from its pool (one every 5000 frames); only its own seat's moves train
it (the opponent's rows are masked out of the batch). Afterwards every snapshot and a
random player play each other on both seats and get Elo ratings. The final snapshot
must be rated above the first (the untrained network) and win >= 90% of 100 games
against a random player as the first player.

With learning disabled (``--disable-learning``) the test fails: every snapshot is the
untrained network, so the first and final snapshots tie (the test asks for a gap of
more than 200 points; the win rate alone would not do: the untrained network already
won 90 of the 100 games as first player).
"""

from __future__ import annotations

import time

import pytest
import torch

from marl.algorithms import Algorithm
from marl.envs.tasks import make_task
from marl.league import League, RandomPlayer, play_games

pytestmark = pytest.mark.slow


def test_league_on_tictactoe_final_snapshot_beats_first_and_random(tmp_path):
    pytest.importorskip("pettingzoo")
    torch.set_num_threads(1)
    start, cpu = time.perf_counter(), time.process_time()
    env = make_task("pettingzoo/tictactoe", seed=0)
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
    frames = 20_000
    league = League(
        algo,
        env,
        frames_per_batch=500,
        total_frames=frames,
        snapshot_interval=5000,
        strategy="uniform",
        seed=0,
    )
    history = list(league.train())
    assert history[-1]["frames"] == frames
    assert {h["learner_side"] for h in history} == {"player[0]", "player[1]"}
    eval_env = make_task("pettingzoo/tictactoe", seed=1)
    ratings = league.rate(
        eval_env, games=10, meta={"task": "pettingzoo/tictactoe", "algorithm": "iql"}
    )
    ratings.write(tmp_path, plot=False)
    first, final = ratings.snapshots[0], ratings.snapshots[-1]
    torch.manual_seed(7)
    final_policy = league.snapshot_policy(final.name)
    scores = play_games(eval_env, final_policy, RandomPlayer(eval_env), league.sides, 100)
    wins = sum(s == 1.0 for s in scores)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    table = {p.name: (round(p.rating), p.wins, p.draws, p.losses) for p in ratings.players}
    print(f"\nleague tictactoe iql: ratings (rating, W, D, L) {table}")
    print(
        f"final vs random as first player: {wins}/100 wins; frames={frames} wall_s={wall:.1f} cpu_s={cpu:.1f}"
    )
    assert (tmp_path / "elo.json").exists() and (tmp_path / "elo.csv").exists()
    # measured: first 499, final 1312, random 492 (best: snapshot_15000, 1482); the final
    # snapshot won 100/100 (69 CPU s, one thread). With learning disabled every snapshot
    # is the untrained network: first and final tie (1017), and the untrained network
    # already won 90/100 as first player against random, so the rating gap is the check
    # that fails there, by a wide margin.
    assert final.rating > first.rating + 200, table
    assert final.rating > ratings["random"].rating + 200, table
    assert wins >= 90, (wins, table)
