"""A zero-sum self-play task's headline: the trained policy against a random player.

Tictactoe's file declares ``evaluation: versus_random``: every evaluation of a run (and
its absolute metric) plays the policy against a uniformly random player from each seat
equally often, and ``results.json``'s ``"return"`` is the policy's side's return, no
longer the mean over both players (always 0 in a zero-sum game).
"""

from __future__ import annotations

import json

import pytest

from marl.envs.tasks import list_tasks, load_task_config, make_task, task_available
from marl.experiment import Experiment, read_scalars
from marl.experiment.parts import task_evaluator

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


def test_tictactoe_with_a_group_per_player_is_evaluated_against_a_random_player(tmp_path):
    # the two players in two groups (one learner each): the seats are the groups
    exp = Experiment(
        "pettingzoo/tictactoe",
        "mappo",
        task_overrides={"group_map": "one_per_agent"},
        config=dict(
            num_envs=2,
            frames_per_batch=20,
            total_frames=20,
            evaluation_episodes=10,
            render=False,
            progress=False,
            save_folder=str(tmp_path),
        ),
    )
    exp.run()
    ev = exp.results.to_dict()["pettingzoo"]["tictactoe"]["mappo"]["seed_0"]["step_0"]
    assert ev["return"] == [won - lost for won, lost in zip(ev["win_rate"], ev["loss_rate"])]
    # seat 0 (5 games): the policy plays player_1, then player_2
    assert ev["return"] == ev["player_1/return"][:5] + ev["player_2/return"][5:]
    assert any(r != 0 for r in ev["return"])


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
            match=r"task 'vmas/coop' declares 'evaluation: versus_random'.*game of two seats.*"
            r"cannot guess the two sides",
        ):
            exp.run()
    finally:
        tasks._index.cache_clear()


DECLARED = [n for n in list_tasks() if load_task_config(n).get("evaluation") == "versus_random"]


def test_the_zero_sum_tasks_declare_versus_random():
    assert DECLARED == ["pettingzoo/connect_four", "pettingzoo/tictactoe", "vmas/simple_tag"]


@pytest.mark.parametrize("name", DECLARED)
def test_every_task_declaring_versus_random_has_two_seats(name):
    if not task_available(name):
        pytest.skip(f"{name}: its package is not installed")
    env = make_task(name, num_envs=2, seed=0)
    try:
        evaluator = task_evaluator(name, name, env)
        assert [s.label for s in evaluator.seats(env)] in (
            ["player[0]", "player[1]"],
            ["adversary", "agent"],
        )
    finally:
        env.close()
