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
from tensordict.nn import InteractionType, set_interaction_type

from marl.envs.common import EnvBase
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
        games: how many games to score (the first ``games`` that end).
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
    returns = torch.zeros(2, n)
    scores: list[float] = []
    mode = InteractionType.DETERMINISTIC if deterministic else InteractionType.RANDOM
    td = env.reset()
    with set_interaction_type(mode):
        for _ in range(max_steps):
            theirs = second(td.clone())
            td = merge_actions(first(td), theirs, sides[1])
            td, root = env.step_and_maybe_reset(td)
            for i, side in enumerate(sides):
                reward = td.get(("next", side.group, "reward"))
                returns[i] += side_values(reward, side, dims).reshape(n).cpu()
            done = td.get(("next", "done")).reshape(n).cpu()
            for j in done.nonzero().flatten().tolist():
                score = outcome(float(returns[0, j]), float(returns[1, j]))
                if score not in (0.0, 0.5, 1.0):
                    raise ValueError(f"outcome must return 1, 0.5 or 0, got {score!r}")
                scores.append(float(score))
            returns[:, done] = 0.0
            if len(scores) >= games:
                return scores[:games]
            td = root
    raise RuntimeError(f"only {len(scores)} of {games} games ended within max_steps={max_steps}")
