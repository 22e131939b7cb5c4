"""Elo math against hand computation, ratings from a known table, and the opponent pool."""

from __future__ import annotations

import math

import pytest
import torch

from marl.league import GameResult, OpponentPool, elo_update, expected_score, fit_elo


def test_elo_update_matches_hand_computation():
    # 1200 vs 1000: E = 1 / (1 + 10^(-200/400)) = 0.75975..., K = 32
    e = 1 / (1 + 10 ** (-0.5))
    assert expected_score(1200, 1000) == pytest.approx(e)
    win = elo_update(1200, 1000, 1.0, k=32)
    draw = elo_update(1200, 1000, 0.5, k=32)
    loss = elo_update(1200, 1000, 0.0, k=32)
    assert win == pytest.approx((1200 + 32 * (1 - e), 1000 - 32 * (1 - e)))
    assert win[0] == pytest.approx(1207.688, abs=1e-3)
    assert draw == pytest.approx((1200 - 32 * (e - 0.5), 1000 + 32 * (e - 0.5)))
    assert draw[0] == pytest.approx(1191.688, abs=1e-3)
    assert loss == pytest.approx((1200 - 32 * e, 1000 + 32 * e))
    assert loss[0] == pytest.approx(1175.688, abs=1e-3)
    for new_a, new_b in (win, draw, loss):  # zero-sum
        assert new_a + new_b == pytest.approx(2200)


def test_elo_rejects_bad_scores_and_k():
    with pytest.raises(ValueError, match="score must be 1"):
        elo_update(1000, 1000, 0.3)
    with pytest.raises(ValueError, match="K factor"):
        elo_update(1000, 1000, 1.0, k=0)
    with pytest.raises(ValueError, match=r"1 \(win\), 0.5"):
        GameResult("a", "b", 2.0)
    with pytest.raises(ValueError, match="cannot play itself"):
        GameResult("a", "a", 1.0)


def test_fit_elo_orders_players_by_a_known_table_and_ignores_game_order():
    # a beats b 8-2, b beats c 8-2, a beats c 9-1: the order must be a > b > c
    games = (
        [GameResult("a", "b", 1.0)] * 8
        + [GameResult("b", "a", 1.0)] * 2
        + [GameResult("b", "c", 1.0)] * 8
        + [GameResult("c", "b", 1.0)] * 2
        + [GameResult("a", "c", 1.0)] * 9
        + [GameResult("c", "a", 1.0)] * 1
    )
    ratings = fit_elo(games)
    assert ratings["a"] > ratings["b"] > ratings["c"]
    shuffled = [
        games[i] for i in torch.randperm(len(games), generator=torch.Generator().manual_seed(0))
    ]
    again = fit_elo(shuffled)
    assert all(again[k] == pytest.approx(v, abs=1e-6) for k, v in ratings.items())
    # at the fit, each player's expected score over its games (plus the virtual draw
    # against the 1000 reference) equals its actual score
    for player in ratings:
        actual = 0.5 + sum(
            g.score if g.first == player else 1 - g.score
            for g in games
            if player in (g.first, g.second)
        )
        expected = expected_score(ratings[player], 1000) + sum(
            expected_score(ratings[player], ratings[g.second if g.first == player else g.first])
            for g in games
            if player in (g.first, g.second)
        )
        assert expected == pytest.approx(actual, abs=1e-4)


def test_fit_elo_two_players_even_record_and_unbeaten_player_finite():
    even = fit_elo(
        [GameResult("a", "b", 1.0), GameResult("b", "a", 1.0), GameResult("a", "b", 0.5)]
    )
    assert even["a"] == pytest.approx(1000) and even["b"] == pytest.approx(1000)
    unbeaten = fit_elo([GameResult("a", "b", 1.0)] * 20, players=["idle"])
    assert math.isfinite(unbeaten["a"]) and unbeaten["a"] > 1300 > 700 > unbeaten["b"]
    assert unbeaten["idle"] == pytest.approx(1000)


def _pool(strategy: str, n: int = 4, seed: int = 0) -> OpponentPool:
    pool = OpponentPool(strategy, seed=seed)
    for i in range(n):
        pool.add({"w": torch.full((2,), float(i))}, iteration=i, frames=100 * i)
    return pool


def test_latest_always_draws_the_newest_snapshot():
    pool = _pool("latest")
    assert {pool.sample().name for _ in range(50)} == {"snapshot_300"}
    pool.add({"w": torch.zeros(2)}, iteration=9, frames=900)
    assert {pool.sample().name for _ in range(50)} == {"snapshot_900"}


def test_uniform_draws_every_snapshot_and_is_seeded():
    pool = _pool("uniform", seed=3)
    names = [pool.sample().name for _ in range(400)]
    assert {n: names.count(n) for n in set(names)}.keys() == {
        f"snapshot_{100 * i}" for i in range(4)
    }
    assert all(70 < names.count(n) < 130 for n in set(names))
    again = _pool("uniform", seed=3)
    assert [again.sample().name for _ in range(400)] == names


def test_prioritized_favours_the_opponents_the_learner_loses_to():
    pool = _pool("prioritized", seed=0)
    hard, easy = pool["snapshot_100"], pool["snapshot_200"]
    for _ in range(20):
        hard.record(0.0)  # the learner loses every game
        easy.record(1.0)  # and wins every game
    weights = dict(zip([s.name for s in pool], pool.weights().tolist(), strict=True))
    assert weights["snapshot_100"] > weights["snapshot_0"] > weights["snapshot_200"] > 0
    names = [pool.sample().name for _ in range(1000)]
    assert names.count("snapshot_100") > 2 * names.count("snapshot_0")
    assert names.count("snapshot_0") > 2 * names.count("snapshot_200")


def test_snapshots_are_frozen_copies_and_the_pool_checks_its_input():
    net = torch.nn.Linear(2, 1)
    pool = OpponentPool("latest", max_size=2)
    snap = pool.add(net.state_dict(), iteration=0, frames=0)
    before = {k: v.clone() for k, v in snap.state.items()}
    with torch.no_grad():
        net.weight.add_(1.0)
    assert all(torch.equal(snap.state[k], before[k]) for k in before)
    pool.add(net.state_dict(), iteration=1, frames=1)
    pool.add(net.state_dict(), iteration=2, frames=2)
    assert [s.name for s in pool] == ["snapshot_1", "snapshot_2"]  # the oldest left
    with pytest.raises(ValueError, match="already has a snapshot"):
        pool.add(net.state_dict(), iteration=2, frames=2)
    with pytest.raises(ValueError, match="unknown opponent sampling strategy 'best'"):
        OpponentPool("best")
    with pytest.raises(RuntimeError, match="empty"):
        OpponentPool("uniform").sample()
    with pytest.raises(ValueError, match="max_size"):
        OpponentPool("uniform", max_size=0)
