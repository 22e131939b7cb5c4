"""Self-play leagues: train against a pool of past selves, rate every snapshot by Elo.

- :class:`League` trains an :class:`~marl.algorithms.Algorithm` on a two-sided game
  against snapshots of itself and rates the snapshots (:meth:`League.rate`); its
  ``state_dict`` checkpoints it (``marl-league`` runs one from the command line);
- :class:`OpponentPool` holds the snapshots and draws opponents (``"latest"``,
  ``"uniform"``, ``"prioritized"``);
- :func:`elo_update` and :func:`fit_elo` compute Elo ratings;
- :class:`VersusReference` evaluates a policy against a fixed reference player from both
  seats of a zero-sum game (its headline return means something, unlike the mean over
  the game's players, which is always 0);
- :class:`LeagueRatings` writes ``elo.json``, ``elo.csv`` and ``elo.png`` to a run
  folder, which ``marl-report`` ranks.

A layer above ``algorithms``, below ``report`` and ``experiment``.
"""

from marl.league.elo import GameResult, elo_update, expected_score, fit_elo
from marl.league.games import RandomPlayer, compare_returns, play_games, play_sides
from marl.league.league import League
from marl.league.pool import STRATEGIES, OpponentPool, Snapshot
from marl.league.ratings import ELO_FILENAME, LeagueRatings, PlayerRating
from marl.league.reference import REFERENCE_PLAYERS, VersusReference
from marl.league.sides import Side, resolve_sides

__all__ = [
    "ELO_FILENAME",
    "REFERENCE_PLAYERS",
    "STRATEGIES",
    "GameResult",
    "League",
    "LeagueRatings",
    "OpponentPool",
    "PlayerRating",
    "RandomPlayer",
    "Side",
    "Snapshot",
    "VersusReference",
    "compare_returns",
    "elo_update",
    "expected_score",
    "fit_elo",
    "play_games",
    "play_sides",
    "resolve_sides",
]
