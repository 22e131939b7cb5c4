"""A League survives being killed: its state_dict restores a freshly built league exactly.

A league trains 4 batches, is checkpointed (through a file, as a killed run would be),
and trains 4 more; a second league, built the same way, loads the checkpoint and trains
the same 4 batches. Both must end bitwise equal: the learner's networks, optimizer and
replay buffer, every snapshot's weights and training record (what the ratings and the
prioritized draws use), the draws themselves, the counters and the logs.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from marl.algorithms import Algorithm
from marl.envs.tasks import make_task
from marl.league import League

CONFIGS = {
    "iql": {"learning_starts": 50, "batch_size": 32, "utd_ratio": 0.25},
    "ippo": {"epochs": 1, "minibatch_size": 50},
}


def _league(algorithm: str = "iql", **kwargs) -> League:
    pytest.importorskip("pettingzoo")
    env = make_task("pettingzoo/tictactoe", seed=0)
    options = {
        "frames_per_batch": 50,
        "total_frames": 400,
        "snapshot_interval": 100,
        "strategy": "prioritized",
        "pool_size": 3,  # the pool drops snapshots: the league still keeps (and rates) them
        "seed": 0,
    }
    return League(Algorithm(algorithm, config=CONFIGS[algorithm]), env, **{**options, **kwargs})


def _snapshots(league: League) -> list[tuple]:
    return [(s.name, s.iteration, s.frames, s.wins, s.draws, s.losses) for s in league.snapshots]


def _assert_same(a: League, b: League) -> None:
    assert a.history == b.history  # sides, opponents drawn, scores and losses, batch by batch
    assert (a.frames, a.iteration) == (b.frames, b.iteration)
    assert _snapshots(a) == _snapshots(b)
    assert [s.name for s in a.pool] == [s.name for s in b.pool]
    for x, y in zip(a.snapshots, b.snapshots, strict=True):
        assert all(torch.equal(x.state[k], y.state[k]) for k in x.state), x.name
    ours, theirs = a.algorithm.state_dict_full(), b.algorithm.state_dict_full()
    for k, v in ours["modules"].items():
        assert torch.equal(v, theirs["modules"][k]), k
    assert str(ours["extra"]) == str(theirs["extra"])  # counters, exploration, optimizers
    for label, lr in a.algorithm.group_learners():
        buffer = lr.updater.buffer
        if buffer is not None:
            other = dict(b.algorithm.group_learners())[label].updater.buffer
            assert len(buffer) == len(other) > 0
            index = torch.arange(len(buffer))
            assert (buffer.storage.get(index) == other.storage.get(index)).all()


@pytest.mark.parametrize("algorithm", ["iql", "ippo"])
def test_a_league_restored_from_a_checkpoint_continues_exactly(algorithm, tmp_path):
    league = _league(algorithm)
    batches = league.train()
    first = list(itertools.islice(batches, 4))
    assert first[-1]["frames"] == 200
    path = tmp_path / "league.pt"
    torch.save(league.state_dict(include_buffers=True), path)
    rest = list(batches)  # the original league trains on
    assert [h["frames"] for h in rest] == [250, 300, 350, 400]

    resumed = _league(algorithm)
    resumed.load_state_dict(torch.load(path, weights_only=False))
    assert resumed.frames == 200 and resumed.learner_side == 0
    assert [h["frames"] for h in resumed.train()] == [250, 300, 350, 400]
    _assert_same(league, resumed)
    # the run was not trivial: the pool dropped snapshots, opponents were scored and
    # drawn from several snapshots, and the learner moved
    assert [s.name for s in league.pool] == ["snapshot_200", "snapshot_300", "snapshot_400"]
    assert len(league.snapshots) == 5 and sum(s.games for s in league.snapshots) > 0
    assert len({h["opponent"] for h in league.history}) > 1
    start = league.snapshots[0].state
    learned = league.algorithm.policy.state_dict()
    assert any(not torch.equal(learned[k], v) for k, v in start.items() if v.is_floating_point())


def test_a_state_is_a_copy_that_training_on_leaves_unchanged():
    league = _league(total_frames=100)
    state = league.state_dict()
    weights = {k: v.clone() for k, v in state["algorithm"]["modules"].items()}
    list(league.train())
    assert state["frames"] == 0 and len(state["pool"]["snapshots"]) == 1
    assert all(torch.equal(state["algorithm"]["modules"][k], v) for k, v in weights.items())
    fresh = _league(total_frames=100)
    fresh.load_state_dict(state)
    learned, restored = league.algorithm.policy.state_dict(), fresh.algorithm.policy.state_dict()
    assert any(not torch.equal(learned[k], restored[k]) for k in learned)


def test_a_checkpoint_of_another_league_is_refused_before_anything_is_loaded():
    league = _league(total_frames=100)
    list(league.train())
    state = league.state_dict()
    other_sides = _league(sides=[("player", [1]), ("player", [0])])
    with pytest.raises(
        ValueError,
        match=r"league with sides \['player\[0\]', 'player\[1\]'\], but this league has sides "
        r"\['player\[1\]', 'player\[0\]'\]",
    ):
        other_sides.load_state_dict(state)
    other_algorithm = _league("ippo")
    before = {k: v.clone() for k, v in other_algorithm.algorithm.state_dict().items()}
    with pytest.raises(
        ValueError,
        match=r"cannot load this league checkpoint: this checkpoint was built for groups "
        r"\{'player': iql, 2 agents\}, but this algorithm has \{'player': ippo, 2 agents\}",
    ):
        other_algorithm.load_state_dict(state)
    for refused in (other_sides, other_algorithm):
        assert refused.frames == 0 and [s.name for s in refused.pool] == ["snapshot_0"]
    after = other_algorithm.algorithm.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())
    with pytest.raises(
        ValueError, match=r"expected a League.state_dict\(\) \(with a 'league' key\)"
    ):
        other_algorithm.load_state_dict(league.algorithm.state_dict_full())
