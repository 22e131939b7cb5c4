"""Elo curves of self-play leagues: IQL on tictactoe, MAPPO on VMAS simple_tag.

    python -m benchmarks.league_elo tictactoe --out league_runs/tictactoe
    python -m benchmarks.league_elo simple_tag --out league_runs/simple_tag

Each trains a :class:`marl.league.League` (one thread), rates every snapshot and a
random player, prints the table and writes ``elo.json``, ``elo.csv`` and ``elo.png``
into ``--out`` (``marl-report league_runs`` then ranks them).

- tictactoe: the settings of ``tests/league/test_league_tictactoe.py`` (20,000
  frames, a snapshot every 5,000, uniform opponents); a game is won by the player
  with the higher return (+1 against -1).
- simple_tag: VMAS's port, 60 envs, 100-step episodes, discrete moves, the scenario's
  distance shaping in training (as in ``test_learning_marl.py``'s simple_tag test),
  120,000 frames, a snapshot every 24,000. Evaluation games are unshaped, and the
  adversaries win a game when they tag the prey at least 3 times (30 reward points);
  random adversaries tag 0.8 times per episode on average.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from marl.algorithms import Algorithm
from marl.envs.tasks import make_task
from marl.league import League

IQL = {
    "lr": 1e-3,
    "gamma": 0.9,
    "learning_starts": 500,
    "batch_size": 128,
    "utd_ratio": 0.25,
    "eps_annealing_frames": 10_000,
    "eps_end": 0.05,
    "cells": (64, 64),
}
MAPPO = {"lr": 1e-3, "epochs": 4, "minibatch_size": 1000, "critic_scope": "all"}
TAG = {"continuous_actions": False, "max_steps": 100}


def _tags(adversary_return: float, prey_return: float) -> float:
    """The adversaries (first side) win with 3 tags or more (unshaped: 10 points a tag)."""
    return 1.0 if adversary_return >= 30 else 0.0


def _league(task: str, frames: int | None) -> tuple[League, object, int, dict]:
    if task == "tictactoe":
        frames = frames or 20_000
        env = make_task("pettingzoo/tictactoe", seed=0)
        league = League(Algorithm("iql", config=IQL), env, frames_per_batch=500,
                        total_frames=frames, snapshot_interval=frames // 4, seed=0)  # fmt: skip
        eval_env = make_task("pettingzoo/tictactoe", seed=1)
        return league, eval_env, 10, {"task": "pettingzoo/tictactoe", "algorithm": "iql"}
    frames = frames or 120_000
    shaped = {"shape_adversary_rew": True, "shape_agent_rew": True}
    env = make_task("vmas/simple_tag", num_envs=60, seed=0, **TAG, **shaped)
    league = League(Algorithm("mappo", config=MAPPO), env, frames_per_batch=6000,
                    total_frames=frames, snapshot_interval=frames // 5, outcome=_tags,
                    seed=0)  # fmt: skip
    unshaped = {"shape_adversary_rew": False, "shape_agent_rew": False}
    eval_env = make_task("vmas/simple_tag", num_envs=20, seed=1000, **TAG, **unshaped)
    return league, eval_env, 20, {"task": "vmas/simple_tag", "algorithm": "mappo"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", choices=["tictactoe", "simple_tag"])
    parser.add_argument("--frames", type=int, default=None, help="training frames")
    parser.add_argument("--out", default=None, help="folder for elo.json/csv/png")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    start, cpu = time.perf_counter(), time.process_time()
    league, eval_env, games, meta = _league(args.task, args.frames)
    for _ in league.train():
        pass
    trained = time.perf_counter() - start
    ratings = league.rate(eval_env, games=games, meta=meta)
    print(f"{meta['task']} {meta['algorithm']}: {league.frames} frames, {games} games per pairing")
    for p in ratings.players:
        print(f"  {p.name:<18} {p.rating:7.1f}  W/D/L {p.wins}/{p.draws}/{p.losses}")
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"train_wall_s={trained:.1f} wall_s={wall:.1f} cpu_s={cpu:.1f}")
    if args.out:
        paths = ratings.write(args.out)
        print("wrote " + ", ".join(str(p) for p in paths))


if __name__ == "__main__":
    main()
