"""Elo ratings: the update of one game, and ratings fitted to a whole table of results.

A game's score is the first player's: 1 for a win, 0.5 for a draw, 0 for a loss.
:func:`elo_update` is the standard update after one game (K factor). Sequential
updates depend on the order of the games, so a league's table is rated with
:func:`fit_elo` instead: the ratings at which every player's expected score over
all its games equals its actual score (the maximum-likelihood ratings of the Elo
model, draws counted as half a win), found by iterating over all results until
they stop moving. The order of the games does not matter. A player that won (or
lost) every game has no finite such rating, so each player also counts one
virtual draw against a reference rated ``base`` (1000): ratings stay finite, and
a player with no real games stays at ``base``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["GameResult", "elo_update", "expected_score", "fit_elo", "player_records"]


@dataclass(frozen=True)
class GameResult:
    """One game: ``first`` against ``second``, and ``first``'s score (1, 0.5 or 0).

    "first" only orders the pair; which side (seat) each player had is up to the
    league, which plays every pair on both sides.
    """

    first: str
    second: str
    score: float

    def __post_init__(self) -> None:
        if self.score not in (0.0, 0.5, 1.0):
            raise ValueError(
                f"a game's score is 1 (win), 0.5 (draw) or 0 (loss), got {self.score!r}"
            )
        if self.first == self.second:
            raise ValueError(f"a player cannot play itself: {self.first!r}")


def expected_score(rating: float, opponent: float) -> float:
    """The Elo model's expected score of a player rated ``rating`` against ``opponent``.

    Examples:
        >>> expected_score(1000, 1000)
        0.5
        >>> round(expected_score(1400, 1000), 4)  # 400 points: 10 to 1 odds
        0.9091
    """
    return 1.0 / (1.0 + 10.0 ** ((opponent - rating) / 400.0))


def elo_update(
    rating: float, opponent: float, score: float, k: float = 32.0
) -> tuple[float, float]:
    """Both ratings after one game in which the first player scored ``score``.

    Args:
        rating: the first player's rating.
        opponent: the second player's rating.
        score: the first player's score: 1 (win), 0.5 (draw) or 0 (loss).
        k: the K factor: the most a rating moves in one game.

    Returns:
        ``(new rating, new opponent rating)``; the two changes cancel out.

    Raises:
        ValueError: for a score other than 0, 0.5 or 1, or a K factor <= 0.

    Examples:
        >>> elo_update(1000, 1000, 1.0)  # an even game won: +K/2
        (1016.0, 984.0)
        >>> elo_update(1000, 1000, 0.5)
        (1000.0, 1000.0)
    """
    if score not in (0.0, 0.5, 1.0):
        raise ValueError(f"score must be 1 (win), 0.5 (draw) or 0 (loss), got {score!r}")
    if not k > 0:
        raise ValueError(f"the K factor must be > 0, got {k!r}")
    delta = k * (score - expected_score(rating, opponent))
    return rating + delta, opponent - delta


def player_records(results: Iterable[GameResult]) -> dict[str, dict[str, int]]:
    """Wins, draws, losses and games of every player in ``results``."""
    records: dict[str, dict[str, int]] = {}
    for game in results:
        for player, score in ((game.first, game.score), (game.second, 1.0 - game.score)):
            rec = records.setdefault(player, {"games": 0, "wins": 0, "draws": 0, "losses": 0})
            rec["games"] += 1
            rec["wins" if score == 1.0 else "draws" if score == 0.5 else "losses"] += 1
    return records


def fit_elo(
    results: Sequence[GameResult],
    players: Iterable[str] = (),
    *,
    base: float = 1000.0,
    tol: float = 1e-6,
    max_iterations: int = 10_000,
) -> dict[str, float]:
    """Ratings that fit every result at once, whatever the order of the games.

    Iterates the minorization-maximization update of the Bradley-Terry model
    (Hunter, 2004), which is the Elo model on a ``10 ** (rating / 400)`` scale: a
    player's strength becomes its (half-)wins over the sum, over its games, of
    ``1 / (its strength + the opponent's)``. Every player also has one virtual draw
    against a reference rated ``base`` (see the module docstring).

    Args:
        results: the games.
        players: players to rate besides those in ``results`` (they get ``base``).
        base: the reference rating.
        tol: stop when no log-strength moves more than this in an iteration.
        max_iterations: the most iterations.

    Returns:
        ``{player: rating}``, in order of first appearance (``players`` first).

    Examples:
        >>> games = [GameResult("a", "b", 1.0)] * 3 + [GameResult("a", "b", 0.0)]
        >>> ratings = fit_elo(games)
        >>> ratings["a"] > 1000 > ratings["b"]
        True
        >>> round(ratings["a"] - ratings["b"])  # fewer than log10(3)*400 = 191: the prior
        165
    """
    names: dict[str, None] = dict.fromkeys(players)
    for game in results:
        names.setdefault(game.first)
        names.setdefault(game.second)
    index = {name: i for i, name in enumerate(names)}
    n = len(index)
    won = [0.5] * n  # the virtual draw
    pairs: dict[tuple[int, int], int] = {}
    for game in results:
        i, j = index[game.first], index[game.second]
        won[i] += game.score
        won[j] += 1.0 - game.score
        key = (min(i, j), max(i, j))
        pairs[key] = pairs.get(key, 0) + 1
    opponents: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for (i, j), count in pairs.items():
        opponents[i].append((j, count))
        opponents[j].append((i, count))
    strength = [1.0] * n
    for _ in range(max_iterations):
        new = []
        for i in range(n):
            denom = 1.0 / (strength[i] + 1.0)  # the virtual game against the reference
            denom += sum(count / (strength[i] + strength[j]) for j, count in opponents[i])
            new.append(won[i] / denom)
        moved = max((abs(math.log(a / b)) for a, b in zip(new, strength, strict=True)), default=0.0)
        strength = new
        if moved < tol:
            break
    return {name: base + 400.0 * math.log10(strength[index[name]]) for name in names}
