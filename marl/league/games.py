"""Evaluation games between two players, one per side, and who won them.

A player is a policy ``td -> td`` that writes actions (it may write every agent's:
only its own side's are kept). :func:`play_sides` runs complete games on an env
(a batched one plays several at once) and gives each side's return;
:func:`play_games` scores each game for the first player with an
``outcome`` function of the two sides' returns; :func:`compare_returns`, the
default, suits zero-sum games (tictactoe's +1/-1): the side with the higher return
wins, equal returns are a draw.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDictBase

from marl.envs.common import EnvBase
from marl.envs.episodes import Episodes, play_episodes
from marl.league.sides import Side, merge_actions, side_values

__all__ = [
    "Outcome",
    "Policy",
    "RandomPlayer",
    "compare_returns",
    "play_games",
    "play_sides",
    "score_game",
]

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
def play_sides(
    env: EnvBase,
    first: Policy,
    second: Policy,
    sides: tuple[Side, Side],
    games: int,
    *,
    deterministic: bool = True,
    max_steps: int = 100_000,
) -> Episodes:
    """Play ``games`` complete games, ``first`` on ``sides[0]`` and ``second`` on ``sides[1]``.

    The loop is :func:`marl.envs.episodes.play_episodes`: which games count is fixed
    before the first step, never by how long they last. A side's return is the sum
    over the game of the mean reward of its agents.

    Args:
        env: the evaluation env (reset here).
        first: the player of ``sides[0]``.
        second: the player of ``sides[1]``.
        sides: the two sides.
        games: how many games to play, ``>= 1``.
        deterministic: run under ``InteractionType.DETERMINISTIC`` (no exploration).
        max_steps: safety cap on env steps.

    Returns:
        The games in the order they ended: ``values[i]`` is ``[first side's return,
        second side's return]`` of game ``i``, ``lengths[i]`` its env steps.

    Raises:
        ValueError: when ``games`` is not an integer >= 1.
        RuntimeError: when fewer than ``games`` games end within ``max_steps``.

    Examples:
        >>> from marl.algorithms import group_infos
        >>> from marl.envs.tasks import make_task
        >>> from marl.league import resolve_sides
        >>> env = make_task("pettingzoo/tictactoe", num_envs=2, seed=0)
        >>> sides = resolve_sides(None, group_infos(env), env.group_map)
        >>> played = play_sides(env, RandomPlayer(env), RandomPlayer(env), sides, 4)
        >>> len(played.values), played.values[0].shape
        (4, torch.Size([2]))
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
    return played


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

    The games are :func:`play_sides`'s; each is scored for ``first`` by ``outcome``.

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
    played = play_sides(
        env, first, second, sides, games, deterministic=deterministic, max_steps=max_steps
    )
    return [score_game(outcome, returns) for returns in played.values]


def score_game(outcome: Outcome, returns: torch.Tensor) -> float:
    """``outcome`` of a game's ``[first side's return, second side's return]``, checked.

    Raises:
        ValueError: when ``outcome`` returns something other than 0, 0.5 or 1.

    Examples:
        >>> score_game(compare_returns, torch.tensor([-1.0, 1.0]))
        0.0
    """
    score = outcome(float(returns[0]), float(returns[1]))
    if score not in (0.0, 0.5, 1.0):
        raise ValueError(f"outcome must return 1, 0.5 or 0, got {score!r}")
    return float(score)
