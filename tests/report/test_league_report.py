"""marl-report ranks a league's policies by Elo: alone, and next to a suite's runs."""

from __future__ import annotations

import json

import pytest

from marl.report import ResultsFormatError, load_league
from marl.report.cli import main

from ._synthetic import make_suite


def _elo(folder, task="pettingzoo/tictactoe"):
    folder.mkdir(parents=True, exist_ok=True)
    players = [
        {"name": "snapshot_0", "kind": "snapshot", "iteration": 0, "frames": 0, "rating": 700.0,
         "games": 20, "wins": 2, "draws": 1, "losses": 17},
        {"name": "snapshot_500", "kind": "snapshot", "iteration": 5, "frames": 500,
         "rating": 1250.5, "games": 20, "wins": 17, "draws": 1, "losses": 2},
        {"name": "random", "kind": "reference", "iteration": None, "frames": None,
         "rating": 990.0, "games": 20, "wins": 9, "draws": 0, "losses": 11},
    ]  # fmt: skip
    data = {"format": "marl-league-elo/1", "task": task, "algorithm": "iql",
            "sides": ["player[0]", "player[1]"], "players": players, "results": []}  # fmt: skip
    (folder / "elo.json").write_text(json.dumps(data))


def test_league_only_folder_gets_a_report_ranking_by_elo(tmp_path, capsys):
    _elo(tmp_path / "runs" / "league")
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--no-figures"]) == 0
    text = (tmp_path / "out" / "report.md").read_text()
    assert "## League ratings (Elo)" in text and "### pettingzoo/tictactoe iql" in text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    order = [name for name in ("snapshot_500", "random", "snapshot_0") if name in text]
    assert [text.index(n) for n in order] == sorted(text.index(n) for n in order)
    assert "| 1 | snapshot_500 | snapshot | 500 | 1250 | 20 | 17/1/2 |" in text, rows
    assert "1 leagues, 3 rated players" in capsys.readouterr().out


def test_league_section_sits_next_to_a_suite_report(tmp_path):
    make_suite(tmp_path / "runs", seeds=2, evaluations=2)
    _elo(tmp_path / "runs" / "league")
    out = tmp_path / "out"
    assert (
        main([str(tmp_path / "runs"), "--out", str(out), "--no-figures", "--quiet", "--reps", "20"])
        == 0
    )
    text = (out / "report.md").read_text()
    assert "# Benchmark report" in text and "## League ratings (Elo)" in text
    assert text.index("## League ratings (Elo)") < text.index("## Sources")


def test_a_malformed_league_file_is_named(tmp_path, capsys):
    (tmp_path / "elo.json").write_text(json.dumps({"format": "other", "players": []}))
    with pytest.raises(ResultsFormatError, match="expected a league ratings file"):
        load_league(tmp_path / "elo.json")
    assert main([str(tmp_path), "--no-figures"]) == 2
    assert "elo.json" in capsys.readouterr().err
