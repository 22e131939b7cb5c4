"""Turn-based games with action masks: IQL plays tic-tac-toe against random play.

PettingZoo's ``tictactoe_v3`` is an AEC (turn-based) game: one player moves
per step. ``marl`` wraps it with the same layout as every other env. Both
players form one group, ``"player"`` (2 agents), and two per-agent entries
make turns and rules explicit:

- ``("player", "action_mask")``, ``[2, 9]`` bool: the legal moves (empty cells);
- ``("player", "mask")``, ``[2]`` bool: whose turn it is.

The policy writes an action for both players; the env plays the acting
player's one. The IQL policy's Q-values are masked with ``action_mask`` (and
so are the random actions of ``env.rand_action``), so illegal moves are never
chosen. During training the off-policy learner links each player's move to its
next move, summing the rewards in between (the opponent's reply included).

After training, the greedy policy plays against a uniformly random legal
player, alternating who starts, and we count wins, draws, losses and illegal
moves (always zero).

Run it with ``python docs/tutorials/tictactoe_masks.py``;
``MARL_TUTORIAL_SMALL=1`` shrinks everything to a smoke test.
"""

import os

import torch

from marl.algorithms import Algorithm, Trainer
from marl.envs import make_task

SMALL = os.environ.get("MARL_TUTORIAL_SMALL") == "1"
TOTAL_FRAMES = 200 if SMALL else 20_000  # one frame = one move
GAMES = 10 if SMALL else 200
torch.set_num_threads(1)

env = make_task("pettingzoo/tictactoe", seed=0)  # AEC API, legal-action masks
print("group map:", dict(env.group_map))
td = env.reset()
print(
    "action_mask:", td["player", "action_mask"].shape, "turn mask:", td["player", "mask"].tolist()
)

# Random play respects the masks too: four random legal moves (no game ends in four).
for _ in range(4):
    td = env.rand_action(td)
    mover = int(td["player", "mask"].nonzero()[0, 0])
    assert td["player", "action_mask"][mover, td["player", "action"][mover]]
    td = env.step(td)["next"]
mover = td["player", "mask"]
print(
    "after 4 random moves, legal cells for the player to move:",
    int(td["player", "action_mask"][mover].sum()),
)

algorithm = Algorithm(
    "iql",
    config={
        "lr": 1e-3,
        "gamma": 0.9,
        "learning_starts": 100 if SMALL else 500,
        "batch_size": 32 if SMALL else 128,
        "utd_ratio": 0.25,
        "eps_annealing_frames": 10_000,
        "eps_end": 0.05,
        "cells": (64, 64),
    },
)
trainer = Trainer(
    algorithm, env, frames_per_batch=100 if SMALL else 500, total_frames=TOTAL_FRAMES, seed=0
)
for logs in trainer.train():
    if logs["iteration"] % 10 == 0 or SMALL:
        print(
            f"{logs['frames']:>6} moves  Q loss {logs.get('train/player/loss_qvalue', float('nan')):.3f}"
        )


def play_vs_random(env, policy, games, seed=0):
    """``policy`` against a uniformly random legal player, alternating sides."""
    gen = torch.Generator().manual_seed(seed)
    score = {"win": 0, "draw": 0, "loss": 0, "illegal": 0}
    for game in range(games):
        ours = game % 2  # player 0 moves first
        td = env.reset()
        while True:
            td = policy(td)  # greedy, masked actions for both players
            legal = td["player", "action_mask"]
            mover = int(td["player", "mask"].nonzero()[0, 0])
            action = td["player", "action"].clone()
            if mover != ours:  # the opponent: a random legal cell
                choices = legal[mover].nonzero().flatten()
                action[mover] = choices[torch.randint(len(choices), (1,), generator=gen)]
                td["player", "action"] = action
            elif not legal[mover, action[mover]]:
                score["illegal"] += 1
            td = env.step(td)
            if td["next", "done"].item():
                r = td["next", "player", "reward"][ours].item()
                score["win" if r > 0 else "loss" if r < 0 else "draw"] += 1
                break
            td = td["next"]
    return score


score = play_vs_random(make_task("pettingzoo/tictactoe", seed=1), algorithm.eval_policy(), GAMES)
print(f"trained IQL vs random over {GAMES} games: {score}")
assert score["illegal"] == 0, "the masked policy never plays an occupied cell"
