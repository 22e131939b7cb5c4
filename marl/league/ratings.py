"""A league's ratings table: ``elo.json``, ``elo.csv`` and ``elo.png`` in a run folder.

``elo.json`` (read by ``marl-report``, which only reads files)::

    {"format": "marl-league-elo/1", "task": "pettingzoo/tictactoe", "algorithm": "iql",
     "sides": ["player[0]", "player[1]"], "games_per_pairing": 10, "base": 1000.0,
     "method": "...",
     "players": [{"name": "snapshot_0", "kind": "snapshot", "iteration": 0, "frames": 0,
                  "rating": 1012.3, "games": 40, "wins": 20, "draws": 3, "losses": 17},
                 {"name": "random", "kind": "reference", "iteration": null, ...}],
     "results": [["snapshot_0", "random", 1.0], ...]}

``results`` lists every game as ``[first, second, first's score]``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from marl.extras import require
from marl.league.elo import GameResult, fit_elo, player_records

__all__ = ["ELO_FILENAME", "ELO_FORMAT", "LeagueRatings", "PlayerRating", "rate_results"]

ELO_FILENAME = "elo.json"
ELO_FORMAT = "marl-league-elo/1"
METHOD = (
    "Elo-scale ratings fitted to all games at once (maximum likelihood of the Elo model, "
    "draws counted 0.5, one virtual draw against a reference rated base)"
)


@dataclass(frozen=True)
class PlayerRating:
    """One player's rating and record over the evaluation games."""

    name: str
    kind: str  # "snapshot" or "reference"
    iteration: int | None
    frames: int | None
    rating: float
    games: int
    wins: int
    draws: int
    losses: int


@dataclass
class LeagueRatings:
    """Every player's rating, and the games they come from.

    Attributes:
        players: in pool order (snapshots, oldest first), then the reference players.
        results: every evaluation game.
        meta: ``task``, ``algorithm``, ``sides``, ``games_per_pairing`` (written to JSON).
    """

    players: list[PlayerRating]
    results: list[GameResult]
    meta: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> PlayerRating:
        for player in self.players:
            if player.name == name:
                return player
        raise KeyError(f"no player {name!r}; players: {[p.name for p in self.players]}")

    @property
    def snapshots(self) -> list[PlayerRating]:
        """The snapshot players, oldest first."""
        return [p for p in self.players if p.kind == "snapshot"]

    def to_json(self) -> dict[str, Any]:
        """The ``elo.json`` content."""
        return {
            "format": ELO_FORMAT,
            **self.meta,
            "base": 1000.0,
            "method": METHOD,
            "players": [asdict(p) for p in self.players],
            "results": [[g.first, g.second, g.score] for g in self.results],
        }

    def write(self, folder: str | Path, *, plot: bool = True) -> list[Path]:
        """Write ``elo.json`` and ``elo.csv`` (and ``elo.png`` with ``plot``) into ``folder``.

        Raises:
            ImportError: with ``plot``, when matplotlib (the ``report`` extra) is missing.
        """
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / ELO_FILENAME
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n")
        table = folder / "elo.csv"
        with table.open("w", newline="") as f:
            writer = csv.writer(f)
            names = [
                "name",
                "kind",
                "iteration",
                "frames",
                "rating",
                "games",
                "wins",
                "draws",
                "losses",
            ]
            writer.writerow(names)
            for p in self.players:
                row = asdict(p)
                row["rating"] = f"{p.rating:.1f}"
                writer.writerow(["" if row[k] is None else row[k] for k in names])
        paths = [path, table]
        if plot:
            paths.append(self.plot(folder / "elo.png"))
        return paths

    def plot(self, path: str | Path) -> Path:
        """Rating against the frames at which each snapshot was taken; references as lines.

        Raises:
            ImportError: naming the ``report`` extra when matplotlib is missing.
        """
        matplotlib = require("matplotlib", "plotting league ratings", "report")
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        snaps = self.snapshots
        ax.plot([p.frames for p in snaps], [p.rating for p in snaps], marker="o", label="snapshots")
        for i, ref in enumerate(p for p in self.players if p.kind == "reference"):
            ax.axhline(ref.rating, linestyle="--", color=f"C{i + 1}", label=ref.name)
        ax.set_xlabel("frames when the snapshot was taken")
        ax.set_ylabel("Elo rating")
        title = " ".join(str(self.meta[k]) for k in ("task", "algorithm") if self.meta.get(k))
        ax.set_title(f"League ratings {title}".strip())
        ax.legend()
        fig.tight_layout()
        path = Path(path)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path


def rate_results(
    results: Sequence[GameResult],
    snapshots: Sequence[tuple[str, int, int]],
    references: Sequence[str],
    meta: dict[str, Any] | None = None,
) -> LeagueRatings:
    """Fit ratings to ``results``; ``snapshots`` are ``(name, iteration, frames)``."""
    names = [s[0] for s in snapshots] + list(references)
    ratings = fit_elo(results, names)
    records = player_records(results)
    empty = {"games": 0, "wins": 0, "draws": 0, "losses": 0}
    players = [
        PlayerRating(name, "snapshot", it, fr, ratings[name], **records.get(name, empty))
        for name, it, fr in snapshots
    ] + [
        PlayerRating(name, "reference", None, None, ratings[name], **records.get(name, empty))
        for name in references
    ]
    return LeagueRatings(players, list(results), dict(meta or {}))
