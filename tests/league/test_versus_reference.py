"""The headline of a zero-sum self-play game: the policy against a random player, both seats.

Tictactoe's two players share one group, so the plain evaluation's mean over the players
is 0 whatever the policy. :class:`~marl.league.VersusReference` plays the policy on one
seat and a uniformly random player on the other, from each seat equally often: a random
policy then scores about 0 and a strong hand-written one clearly more from either seat.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from tensordict import TensorDictBase

from marl.envs.tasks import make_task
from marl.league import RandomPlayer, VersusReference
from marl.testing import SingleAgentFakeEnv

pytest.importorskip("pettingzoo")

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]
PREFERENCE = [4, 0, 2, 6, 8, 1, 3, 5, 7]  # centre, corners, edges


def _choose(own: list[int], theirs: list[int], free: list[int]) -> int:
    if not free:  # not this agent's turn: its action is not played
        return 0
    for marks in (own, theirs):  # complete a line of our own, else block theirs
        for line in LINES:
            empty = [i for i in line if i in free]
            if len(empty) == 1 and sum(marks[i] for i in line) == 2:
                return empty[0]
    return next(i for i in PREFERENCE if i in free)


def strong_player(td: TensorDictBase) -> TensorDictBase:
    """Win if one move wins, else block the opponent's win, else centre, corner, edge.

    The observation is the board from the agent's view, ``[3, 3, 2]``: its own marks,
    then the opponent's; cell ``(r, c)`` is action ``3 r + c``.
    """
    obs = td.get(("player", "observation"))
    own, theirs = obs[..., 0].flatten(-2).tolist(), obs[..., 1].flatten(-2).tolist()
    legal = td.get(("player", "action_mask"))
    action = torch.zeros(legal.shape[:-1], dtype=torch.long)
    for idx in itertools.product(*(range(n) for n in legal.shape[:-1])):
        free = legal[idx].nonzero().flatten().tolist()
        o, t = own, theirs
        for i in idx:
            o, t = o[i], t[i]
        action[idx] = _choose(o, t, free)
    td.set(("player", "action"), action)
    return td


@pytest.fixture
def env():
    torch.manual_seed(0)
    env = make_task("pettingzoo/tictactoe", num_envs=8, seed=0)
    yield env
    env.close()


def test_a_random_policy_scores_about_zero(env):
    result = VersusReference("random")(env, RandomPlayer(env), episodes=400)
    assert len(result.returns) == 400
    headline = sum(result.returns) / 400
    # random against random: the first seat wins about 58% and loses 29% of its games,
    # the second seat the other way round; over both seats the mean is 0 (std ~0.045 here)
    assert abs(headline) < 0.15, headline
    first = sum(result.returns[:200]) / 200
    assert first > 0.15, first  # the first seat's edge: both seats were played, in order
    assert result.group_returns == {"player": [0.0] * 400}  # zero-sum: the group mean is 0


@pytest.mark.parametrize("seat", [0, 1])
def test_a_strong_policy_scores_well_above_half_from_either_seat(env, seat):
    evaluator = VersusReference("random")
    result = evaluator.play_seat(env, strong_player, 100, seat)
    mean = sum(result.returns) / len(result.returns)
    assert mean > 0.6, (seat, mean)
    assert sum(result.metrics["loss_rate"]) <= 10, result.metrics["loss_rate"]


def test_a_strong_policy_headline_and_outcome_rates(env):
    result = VersusReference("random")(env, strong_player, episodes=61)
    assert len(result.returns) == 62  # rounded up: 31 games from each seat
    headline = sum(result.returns) / len(result.returns)
    assert headline > 0.6, headline
    m = result.metrics
    for i, ret in enumerate(result.returns):  # tictactoe: +1 a win, 0 a draw, -1 a loss
        assert m["win_rate"][i] + m["draw_rate"][i] + m["loss_rate"][i] == 1.0
        assert ret == m["win_rate"][i] - m["loss_rate"][i]


def test_two_groups_are_two_seats_and_keep_their_group_returns():
    # tictactoe's players in two groups: each group's return is its player's, whoever
    # plays it; the headline is still the policy's side's
    torch.manual_seed(0)
    env = make_task("pettingzoo/tictactoe", num_envs=8, seed=0, group_map="one_per_agent")
    result = VersusReference()(env, RandomPlayer(env), episodes=400)
    assert abs(sum(result.returns) / 400) < 0.15
    first, second = result.group_returns["player_1"], result.group_returns["player_2"]
    assert all(a == -b for a, b in zip(first, second))  # zero-sum
    assert result.returns == first[:200] + second[200:]  # seat 0: player_1, then player_2
    assert any(r != 0 for r in result.returns)


def test_games_that_are_not_two_seats_are_refused():
    with pytest.raises(ValueError, match=r"needs a game of two seats.*a single agent"):
        VersusReference().seats(SingleAgentFakeEnv(num_envs=2))
    env = make_task("vmas/navigation", num_envs=2, seed=0)  # one group of cooperating agents
    with pytest.raises(ValueError, match=r"needs a game of two seats.*cannot guess the two sides"):
        VersusReference().seats(env)
    with pytest.raises(ValueError, match=r"unknown reference player 'randm'.*'random'"):
        VersusReference("randm")
    env = make_task("pettingzoo/tictactoe", seed=0)
    with pytest.raises(ValueError, match=r"seat must be 0 .* or 1 .*got 2"):
        VersusReference().play_seat(env, RandomPlayer(env), 1, 2)
