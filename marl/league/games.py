"""Evaluation games between two players, one per side, and who won them.

A player is a policy ``td -> td`` that writes actions (it may write every agent's:
only its own side's are kept). :func:`play_games` runs complete games on an env
(a batched one plays several at once) and scores each for the first player with an
``outcome`` function of the two sides' returns; :func:`compare_returns`, the
default, suits zero-sum games (tictactoe's +1/-1): the side with the higher return
wins, equal returns are a draw.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDictBase

from marl.envs.common import EnvBase
from marl.envs.episodes import play_episodes
from marl.league.sides import Side, merge_actions, side_values

__all__ = ["Outcome", "Policy", "RandomPlayer", "compare_returns", "play_games"]

Policy = Callable[[TensorDictBase], TensorDictBase]
Outcome = Callable[[float, float], float]
"""``(first side's return, second side's return) -> the first side's score (1, 0.5, 0)``."""


def compare_returns(first: float, second: float) -> float:
    """The higher return wins; equal returns draw.

    Examples:
        >>> compare_returns(1.0, -1.0), compare_returns(0.0, 0.0), compare_returns(-1.0, 1.0)
        (1.0, 0.5, 0.0)
    """
    return 1.0 if first > second else 0.5 if first == second else 0.0


class RandomPlayer:
    """Uniformly random legal actions (``env.rand_action``, which honours action masks)."""

    def __init__(self, env: EnvBase) -> None:
        self.env = env

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        return self.env.rand_action(td)


@torch.no_grad()
def play_games(
    env: EnvBase,
    first: Policy,
    second: Policy,
    sides: tuple[Side, Side],
    games: int,
    *,
    outcome: Outcome = compare_returns,
    deterministic: bool = True,
    max_steps: int = 100_000,
) -> list[float]:
    """Play ``games`` complete games, ``first`` on ``sides[0]`` and ``second`` on ``sides[1]``.

    A side's return is the sum over the game of the mean reward of its agents.

    Args:
        env: the evaluation env (reset here).
        first: the player of ``sides[0]``.
        second: the player of ``sides[1]``.
        sides: the two sides.
        games: how many games to score, shared over the env's sub-envs before the first
            step (:func:`marl.envs.episodes.play_episodes`): which games count never
            depends on how long they last.
        outcome: scores a game from the two sides' returns.
        deterministic: run under ``InteractionType.DETERMINISTIC`` (no exploration).
        max_steps: safety cap on env steps.

    Returns:
        ``first``'s score in each game.

    Raises:
        ValueError: when ``games`` < 1 or ``outcome`` returns something other than 0, 0.5, 1.
        RuntimeError: when fewer than ``games`` games end within ``max_steps``.
    """
    if isinstance(games, bool) or not isinstance(games, int) or games < 1:
        raise ValueError(f"games must be an integer >= 1, got {games!r}")
    n = max(1, env.batch_size.numel())
    dims = len(env.batch_size)

    def both(td: TensorDictBase) -> TensorDictBase:
        theirs = second(td.clone())
        return merge_actions(first(td), theirs, sides[1])

    def side_returns(td: TensorDictBase) -> torch.Tensor:  # [2, n]
        return torch.stack(
            [
                side_values(td.get(("next", side.group, "reward")), side, dims).reshape(n)
                for side in sides
            ]
        )

    played = play_episodes(
        env, both, games, side_returns, max_steps=max_steps, deterministic=deterministic
    )
    if not played.complete:
        raise RuntimeError(
            f"only {len(played.values)} of {games} games ended within max_steps={max_steps}"
        )
    scores = []
    for returns in played.values:
        score = outcome(float(returns[0]), float(returns[1]))
        if score not in (0.0, 0.5, 1.0):
            raise ValueError(f"outcome must return 1, 0.5 or 0, got {score!r}")
        scores.append(float(score))
    return scores
