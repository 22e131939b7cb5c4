"""The League on a turn-based game (tictactoe) and a simultaneous one (VMAS simple_tag).

Short runs: the pool grows, opponents are drawn, each side's data reaches only the
learner, snapshots stay frozen while the learner trains, ratings are written; and bad
input gets clear errors. The learning test is test_league_tictactoe.py.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from marl.algorithms import Algorithm, group_infos
from marl.envs.tasks import make_task
from marl.league import League, Side, resolve_sides
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv

IQL = {"learning_starts": 50, "batch_size": 32, "utd_ratio": 0.25}


def _tictactoe_league(**kwargs) -> League:
    pytest.importorskip("pettingzoo")
    env = make_task("pettingzoo/tictactoe", seed=0)
    options = {"frames_per_batch": 50, "total_frames": 200, "snapshot_interval": 100, "seed": 0}
    return League(Algorithm("iql", config=IQL), env, **{**options, **kwargs})


def test_tictactoe_league_masks_the_opponent_seat_and_keeps_snapshots_frozen(tmp_path):
    league = _tictactoe_league(strategy="prioritized")
    first = {k: v.clone() for k, v in league.pool["snapshot_0"].state.items()}
    history = list(league.train())
    assert [h["frames"] for h in history] == [50, 100, 150, 200]
    assert [h["learner_side"] for h in history] == ["player[0]", "player[1]"] * 2
    assert [s.name for s in league.pool] == ["snapshot_0", "snapshot_100", "snapshot_200"]
    assert all(h["opponent"] in {"snapshot_0", "snapshot_100"} for h in history)
    assert sum(s.games for s in league.pool) > 0  # training games were scored
    # the learner trained; the first snapshot did not move
    learned = league.algorithm.policy.state_dict()
    assert any(not torch.equal(learned[k], v) for k, v in first.items() if v.is_floating_point())
    assert all(torch.equal(league.pool["snapshot_0"].state[k], v) for k, v in first.items())
    # the learner's replay buffer holds only its own seat's turns: batch i (50 steps)
    # has the learner on seat i % 2, and the other seat is masked out everywhere
    buffer = league.algorithm.learners["player"].buffer
    stored = buffer.storage.get(torch.arange(len(buffer)))
    mask = stored.get(("player", "mask")).reshape(4, 50, 2)
    assert not mask[0::2, :, 1].any() and not mask[1::2, :, 0].any()
    assert mask[0::2, :, 0].any() and mask[1::2, :, 1].any()
    ratings = league.rate(make_task("pettingzoo/tictactoe", seed=1), games=2, meta={"task": "t"})
    assert [p.name for p in ratings.players] == [
        "snapshot_0",
        "snapshot_100",
        "snapshot_200",
        "random",
    ]
    # every pair on both seats: 6 pairs x 2 assignments x 2 games
    assert len(ratings.results) == 24 and all(p.games == 12 for p in ratings.players)
    ratings.write(tmp_path)
    data = json.loads((tmp_path / "elo.json").read_text())
    assert data["sides"] == ["player[0]", "player[1]"] and data["task"] == "t"
    assert [p["name"] for p in data["players"]] == [p.name for p in ratings.players]
    assert (tmp_path / "elo.csv").read_text().startswith("name,kind,iteration,frames,rating")
    assert (tmp_path / "elo.png").stat().st_size > 0


def test_on_policy_league_on_tictactoe_trains_and_masks_the_opponent():
    pytest.importorskip("pettingzoo")
    env = make_task("pettingzoo/tictactoe", seed=0)
    algo = Algorithm("ippo", config={"epochs": 1, "minibatch_size": 50})
    league = League(algo, env, frames_per_batch=50, total_frames=100, snapshot_interval=50, seed=0)
    seen = []
    original = algo.learners["player"].process_batch

    def spy(batch):  # what the learner is given: the opponent seat is masked out
        seen.append(batch.get(("player", "mask")).clone())
        return original(batch)

    object.__setattr__(algo.learners["player"], "process_batch", spy)
    before = {k: v.clone() for k, v in algo.policy.state_dict().items()}
    history = list(league.train())
    assert any("train/player/loss_objective" in h for h in history)
    assert not seen[0][:, 1].any() and seen[0][:, 0].any()  # learner on seat 0
    assert not seen[1][:, 0].any() and seen[1][:, 1].any()  # then on seat 1
    after = algo.policy.state_dict()
    assert any(not torch.equal(after[k], v) for k, v in before.items() if v.is_floating_point())


def test_simple_tag_league_trains_each_group_only_on_its_own_side():
    pytest.importorskip("vmas")
    env = make_task("vmas/simple_tag", num_envs=8, seed=0, continuous_actions=False, max_steps=25)
    algo = Algorithm("ippo", config={"epochs": 1, "minibatch_size": 100})
    league = League(
        algo,
        env,
        frames_per_batch=200,
        total_frames=800,
        snapshot_interval=400,
        strategy="latest",
        seed=0,
    )
    assert [s.label for s in league.sides] == ["adversary", "agent"]

    def frozen():
        return {
            g: {k: v.clone() for k, v in lr.loss.state_dict().items()}
            for g, lr in algo.group_learners()
        }

    params = frozen()
    seen = []
    for logs in league.train():
        side = logs["learner_side"]
        other = "agent" if side == "adversary" else "adversary"
        now = frozen()
        # the opponent side's group did not learn from this batch; the learner's did
        assert all(torch.equal(now[other][k], params[other][k]) for k in now[other])
        assert any(not torch.equal(now[side][k], params[side][k]) for k in now[side])
        assert any(k.startswith(f"train/{side}/") for k in logs)
        assert not any(k.startswith(f"train/{other}/") for k in logs)
        params = now
        seen.append((side, logs["opponent"], logs["pool_size"]))
    # latest: the newest snapshot each time; the pool grew every 400 frames
    assert seen == [
        ("adversary", "snapshot_0", 1),
        ("agent", "snapshot_0", 2),
        ("adversary", "snapshot_400", 2),
        ("agent", "snapshot_400", 3),
    ]
    eval_env = make_task(
        "vmas/simple_tag", num_envs=4, seed=1, continuous_actions=False, max_steps=25
    )
    ratings = league.rate(eval_env, games=4)
    assert [p.name for p in ratings.players] == [
        "snapshot_0",
        "snapshot_400",
        "snapshot_800",
        "random",
    ]
    assert all(p.games == 3 * 2 * 4 for p in ratings.players)


def test_batches_too_short_for_a_whole_game_warn():
    # a tictactoe game lasts at least 5 moves: 4-frame batches that restart the games
    # never finish one
    league = _tictactoe_league(frames_per_batch=4, total_frames=8, snapshot_interval=4)
    with pytest.warns(RuntimeWarning, match="no game ended within a batch of 4 frames"):
        list(league.train())


def test_bad_leagues_get_clear_errors():
    pytest.importorskip("pettingzoo")
    env = make_task("pettingzoo/tictactoe", seed=0)
    common = {"frames_per_batch": 50, "total_frames": 100, "snapshot_interval": 50}
    with pytest.raises(ValueError, match="no group 'players'; the env's groups are \\['player'\\]"):
        League(Algorithm("iql"), env, sides=["players", "player"], **common)
    with pytest.raises(ValueError, match="no agent 'player_3' in group 'player'"):
        League(
            Algorithm("iql"),
            env,
            sides=[("player", ["player_1"]), ("player", ["player_3"])],
            **common,
        )
    with pytest.raises(ValueError, match="two sides against each other, got 3"):
        League(
            Algorithm("iql"),
            env,
            sides=[("player", [0]), ("player", [1]), ("player", [0])],
            **common,
        )
    with pytest.raises(ValueError, match="share agents"):
        League(Algorithm("iql"), env, sides=[("player", [0, 1]), ("player", [1])], **common)
    with pytest.raises(ValueError, match="unknown opponent sampling strategy 'best'"):
        League(Algorithm("iql"), env, strategy="best", **common)
    with pytest.raises(ValueError, match="snapshot_interval must be an integer >= 1"):
        League(Algorithm("iql"), env, frames_per_batch=50, total_frames=100, snapshot_interval=0)
    league = League(Algorithm("iql"), env, sides=[Side("player", (1,)), ("player", [0])], **common)
    assert [s.label for s in league.sides] == ["player[1]", "player[0]"]
    with pytest.raises(ValueError, match="separate eval_env"):
        league.rate(env)
    with pytest.raises(ValueError, match="reference player 'random' clashes"):
        league.rate(make_task("pettingzoo/tictactoe", seed=1), references={"random": None})
    with pytest.raises(KeyError, match="no snapshot 'snapshot_7'"):
        league.snapshot_policy("snapshot_7")
    with pytest.raises(ValueError, match="single agent"):
        League(Algorithm("ppo"), SingleAgentFakeEnv(discrete=True), **common)
    fake = MultiAgentFakeEnv(num_envs=2)
    # a simultaneous group has no per-agent mask: it cannot be split between sides
    with pytest.raises(ValueError, match="splits group 'walker', which needs the env's per-agent"):
        League(Algorithm("ppo"), fake, sides=[("walker", [0]), "picker"], **common)
    # with masks (as a turn-based env would have), agents left out of both sides are named
    infos = {k: dataclasses.replace(v, has_agent_mask=True) for k, v in group_infos(fake).items()}
    with pytest.raises(ValueError, match="not on any: walker \\['walker_1'\\]"):
        resolve_sides([("walker", [0]), "picker"], infos, fake.group_map)
    with pytest.raises(ValueError, match="cannot guess the two sides"):
        resolve_sides(None, {**infos, "third": infos["walker"]}, fake.group_map)
