"""League ratings in a report: read ``elo.json`` files and rank their policies by Elo.

``marl.league`` writes ``elo.json`` into a run folder (its format is described in
``marl.league.ratings``); this module only reads the files, so reports need no
torch. :func:`league_section` is the markdown section ``marl-report`` adds when its
folders hold league results.

Examples:
    >>> import json, tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> players = [{"name": "snapshot_0", "kind": "snapshot", "frames": 0, "rating": 900.0,
    ...             "games": 4, "wins": 1, "draws": 0, "losses": 3},
    ...            {"name": "random", "kind": "reference", "frames": None, "rating": 950.0,
    ...             "games": 4, "wins": 2, "draws": 0, "losses": 2}]
    >>> _ = (folder / "elo.json").write_text(json.dumps(
    ...     {"format": "marl-league-elo/1", "task": "pettingzoo/tictactoe", "players": players}))
    >>> [table.ranked()[0]["name"] for table in find_leagues([folder])]
    ['random']
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marl.report._format import ResultsFormatError
from marl.report.tables import table

__all__ = [
    "ELO_FILENAME",
    "LeagueTable",
    "find_leagues",
    "league_section",
    "load_league",
    "render_league_report",
]

ELO_FILENAME = "elo.json"
_FORMAT = "marl-league-elo/"
_FIELDS = ("name", "kind", "rating", "games", "wins", "draws", "losses")


@dataclass(frozen=True)
class LeagueTable:
    """One league's ratings, as read from its ``elo.json``.

    Attributes:
        path: the file.
        meta: its other fields (``task``, ``algorithm``, ``sides``, ...).
        players: one dict per player (``name``, ``kind``, ``frames``, ``rating``,
            ``games``, ``wins``, ``draws``, ``losses``).
    """

    path: Path
    meta: dict[str, Any]
    players: list[dict[str, Any]]

    def ranked(self) -> list[dict[str, Any]]:
        """The players, highest rating first."""
        return sorted(self.players, key=lambda p: -p["rating"])


def load_league(path: str | Path) -> LeagueTable:
    """Read one ``elo.json``.

    Raises:
        ResultsFormatError: when the file is not JSON, not a league file, or a player
            lacks a field.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ResultsFormatError(f"{path}: cannot read league ratings: {e}") from None
    if not isinstance(data, dict) or not str(data.get("format", "")).startswith(_FORMAT):
        raise ResultsFormatError(
            f"{path}: expected a league ratings file (format '{_FORMAT}1', written by "
            f"marl.league), got format {data.get('format') if isinstance(data, dict) else None!r}"
        )
    players = data.get("players")
    if not isinstance(players, list):
        raise ResultsFormatError(f"{path}: 'players' must be a list")
    for i, player in enumerate(players):
        missing = [f for f in _FIELDS if not isinstance(player, dict) or f not in player]
        if missing:
            raise ResultsFormatError(f"{path}: player {i} lacks {missing}")
    meta = {k: v for k, v in data.items() if k not in ("players", "results", "format")}
    return LeagueTable(path, meta, players)


def find_leagues(folders: Sequence[str | Path]) -> list[LeagueTable]:
    """Every ``elo.json`` under the folders (a file given directly is read too), sorted."""
    paths: list[Path] = []
    for folder in folders:
        folder = Path(folder)
        found = [folder] if folder.name == ELO_FILENAME else sorted(folder.rglob(ELO_FILENAME))
        paths += [p for p in found if p.is_file() and p not in paths]
    return [load_league(p) for p in paths]


def _display(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path.as_posix()


def league_section(leagues: Sequence[LeagueTable]) -> list[str]:
    """The markdown section ranking each league's policies by Elo (empty without leagues)."""
    if not leagues:
        return []

    out = [
        "## League ratings (Elo)",
        "",
        "Every snapshot of the learner and each reference player played every other on "
        "both sides; ratings are fitted to all those games (draws count half). Ranked "
        "highest first.",
        "",
    ]
    for league in leagues:
        title = " ".join(str(league.meta[k]) for k in ("task", "algorithm") if league.meta.get(k))
        out += [f"### {title or 'league'} (`{_display(league.path)}`)", ""]
        sides = league.meta.get("sides")
        if sides:
            out += [f"Sides: {', '.join(map(str, sides))}.", ""]
        rows = []
        for rank, p in enumerate(league.ranked(), 1):
            frames = p.get("frames")
            rows.append(
                [
                    rank,
                    p["name"],
                    p["kind"],
                    "" if frames is None else frames,
                    f"{p['rating']:.0f}",
                    p["games"],
                    f"{p['wins']}/{p['draws']}/{p['losses']}",
                ]
            )
        header = ["rank", "player", "kind", "frames", "Elo", "games", "W/D/L"]
        out += [table(header, rows), ""]
        if (league.path.parent / "elo.png").is_file():
            out += [f"Rating against frames: `{_display(league.path.parent / 'elo.png')}`.", ""]
    return out


def render_league_report(leagues: Sequence[LeagueTable], command: str | None = None) -> str:
    """``report.md`` for folders that hold league ratings but no ``results.json``."""
    from marl import __version__

    lines = ["# League report", ""]
    if command:
        lines += [f"Made by `{command}` (marl {__version__}).", ""]
    lines += league_section(leagues)
    lines += ["## Sources", ""] + [f"- `{_display(t.path)}`" for t in leagues] + [""]
    return "\n".join(lines)
