"""A zero-sum self-play task's headline: the trained policy against a random player.

Tictactoe's file declares ``evaluation: versus_random``: every evaluation of a run (and
its absolute metric) plays the policy against a uniformly random player from each seat
equally often, and ``results.json``'s ``"return"`` is the policy's side's return, no
longer the mean over both players (always 0 in a zero-sum game).
"""

from __future__ import annotations

import json

import pytest

from marl.experiment import Experiment, read_scalars

pytest.importorskip("pettingzoo")

_RATES = ("win_rate", "draw_rate", "loss_rate")


def _steps(run: dict) -> list[dict]:
    return [v for k, v in sorted(run.items()) if k.startswith("step_")]


def test_a_debug_tictactoe_run_reports_its_return_against_a_random_player(tmp_path):
    pytest.importorskip("hydra")
    from marl.experiment.cli import compose_config, run_config

    cfg = compose_config(
        ["experiment=debug", "task=pettingzoo/tictactoe", "experiment.progress=false"]
    )
    run_config(cfg, folder=tmp_path)
    run = json.loads((tmp_path / "results.json").read_text())["pettingzoo"]["tictactoe"]
    run = run["mappo"]["seed_0"]
    evaluations = [*_steps(run), run["absolute_metrics"]]
    returns = []
    for ev in evaluations:
        # the policy's side against the random player: +1 won, 0 drawn, -1 lost
        assert ev["return"] == [won - lost for won, lost in zip(ev["win_rate"], ev["loss_rate"])]
        assert all(sum(game) == 1 for game in zip(*(ev[k] for k in _RATES)))
        assert ev["player/return"] == [0.0] * len(ev["return"])  # both players: always 0
        returns += ev["return"]
    # the old headline, the mean over both players, was 0 in every episode
    assert any(r != 0 for r in returns), returns
    assert [len(s["return"]) for s in _steps(run)] == [2, 2, 2]  # one game from each seat
    assert len(run["absolute_metrics"]["return"]) == 20
    scalars = read_scalars(tmp_path / "scalars.csv")
    logged = [v for _, v in scalars["eval/episode_reward"]]
    assert logged == [sum(s["return"]) / 2 for s in _steps(run)]
    assert "eval/win_rate" in scalars and "eval/player/episode_reward" in scalars


def test_a_game_split_into_two_groups_cannot_be_evaluated_against_a_random_player(tmp_path):
    exp = Experiment(
        "pettingzoo/tictactoe",
        "mappo",
        task_overrides={"group_map": "one_per_agent"},  # player_1 and player_2 apart
        config=dict(
            num_envs=2,
            frames_per_batch=20,
            total_frames=20,
            evaluation_episodes=2,
            render=False,
            progress=False,
            save_folder=str(tmp_path),
        ),
    )
    with pytest.raises(
        ValueError,
        match=r"task 'pettingzoo/tictactoe' declares 'evaluation: versus_random'.*"
        r"symmetric game whose two seats share one group.*'player_1'.*'player_2'",
    ):
        exp.run()
    assert not (tmp_path / "results.json").exists()  # refused before any evaluation


def test_a_cooperative_task_declaring_versus_random_is_refused(tmp_path, monkeypatch):
    import marl.envs.tasks as tasks

    (tmp_path / "catalogue" / "vmas").mkdir(parents=True)
    (tmp_path / "catalogue" / "vmas" / "coop.yaml").write_text(
        "description: d\nfamily: vmas\nenv:\n  scenario: navigation\n  max_steps: 5\n"
        "evaluation: versus_random\n"
    )
    monkeypatch.setattr(tasks, "_catalogue_root", lambda: tmp_path / "catalogue")
    tasks._index.cache_clear()
    try:
        exp = Experiment(
            "vmas/coop",
            "mappo",
            config=dict(
                num_envs=2,
                frames_per_batch=10,
                total_frames=10,
                evaluation_episodes=2,
                render=False,
                progress=False,
                save_folder=str(tmp_path / "run"),
            ),
        )
        with pytest.raises(
            ValueError,
            match=r"task 'vmas/coop' declares 'evaluation: versus_random'.*two-seat game.*"
            r"cannot guess the two sides",
        ):
            exp.run()
    finally:
        tasks._index.cache_clear()
