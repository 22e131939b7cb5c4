"""The one episode loop (marl.envs.episodes) that evaluation and league games share."""

from __future__ import annotations

import pytest
import torch

from marl.algorithms import evaluate_episodes
from marl.envs.episodes import play_episodes
from marl.league import RandomPlayer, Side, play_games
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv


def _two_speeds(seed=0):
    """Sub-env 0 ends every step, sub-env 1 every 5 steps (truncation only)."""
    env = SingleAgentFakeEnv(num_envs=2, p_terminate=0.0, seed=seed)
    env.max_steps = torch.tensor([1, 5])  # compared with each sub-env's step counter
    return env


def _steps(td):
    return torch.ones(1, td.batch_size.numel())


def test_short_episodes_are_not_favoured():
    # 4 episodes over 2 sub-envs: 2 each. Keeping the first 4 to end would keep
    # four 1-step episodes of sub-env 0 and none of sub-env 1.
    played = play_episodes(_two_speeds(), lambda td: td.set("action", torch.zeros(2, 2)), 4, _steps)
    assert played.complete
    assert sorted(played.lengths) == [1, 1, 5, 5]
    assert [float(v) for v in played.values] == [1.0, 1.0, 5.0, 5.0]  # summed step values


def test_evaluation_counts_the_same_way():
    env = _two_speeds()
    result = evaluate_episodes(env, env.rand_action, episodes=4)
    assert sorted(result.lengths) == [1, 1, 5, 5]


def test_a_cap_on_steps_returns_what_ended():
    played = play_episodes(
        _two_speeds(), lambda td: td.set("action", torch.zeros(2, 2)), 4, _steps, max_steps=3
    )
    # sub-env 0 played its 2 (its third is not counted), sub-env 1 none yet
    assert not played.complete and played.lengths == [1, 1]


@pytest.mark.parametrize("episodes", [0, -1, 2.0, True])
def test_bad_episode_counts_are_refused(episodes):
    with pytest.raises(ValueError, match="episodes must be an integer >= 1"):
        play_episodes(_two_speeds(), lambda td: td, episodes, _steps)


class _TwoSpeedTeams(MultiAgentFakeEnv):
    """Sub-env 0's episodes last 1 step, sub-env 1's 5."""

    def _reset(self, td):
        out = super()._reset(td)
        self._horizon[0], self._horizon[1] = 1, 5
        return out


def test_league_games_count_like_evaluation():
    """``play_games`` used to keep the first games to end: four 1-step games of sub-env
    0 after 4 steps. Each sub-env now plays its 2 of the 4 games: 10 steps."""
    env = _TwoSpeedTeams(num_envs=2, seed=0)
    calls = []

    def first(td):
        calls.append(1)
        return env.rand_action(td)

    scores = play_games(env, first, RandomPlayer(env), (Side("walker"), Side("picker")), 4)
    assert len(scores) == 4 and len(calls) == 10


def test_observe_sees_every_step_before_its_reset():
    """A video renders in ``observe``: it must see the state a step ended in, not the
    next episode's start that the partial reset puts there."""
    env = _two_speeds()
    counters = []
    play_episodes(
        env,
        lambda td: td.set("action", torch.zeros(2, 2)),
        2,
        _steps,
        observe=lambda td: counters.append(env._t.tolist()),
    )
    # reset, then 5 steps; sub-env 0 ends at every step and is seen at its end (1),
    # sub-env 1 counts up to its end (5) before the loop stops
    assert counters == [[0, 0], [1, 1], [1, 2], [1, 3], [1, 4], [1, 5]]


def test_a_video_is_one_episode_of_the_first_sub_env(monkeypatch):
    from marl.experiment import video

    env = _two_speeds()
    env.max_steps = torch.tensor([3, 1])  # sub-env 1's episodes end first: not counted
    monkeypatch.setattr(video, "_frame", lambda env: env._t[0].item())
    frames = video.record_episode(env, lambda td: td.set("action", torch.zeros(2, 2)))
    assert frames == [0, 1, 2, 3]  # the reset, then every step up to the episode's end
