"""Progress: a tqdm bar on a terminal, timed status lines elsewhere."""

import io
import logging

from marl.algorithms import Algorithm, Trainer
from marl.experiment import ProgressCallback
from marl.testing import SingleAgentFakeEnv


class Tty(io.StringIO):
    def isatty(self):
        return True


def train(callback):
    env = SingleAgentFakeEnv(num_envs=4, discrete=True, seed=0)
    from marl.envs import RewardSum, TransformedEnv

    trainer = Trainer(
        Algorithm("ppo"),
        TransformedEnv(env, RewardSum()),
        frames_per_batch=64,
        total_frames=256,
        callbacks=[callback],
        seed=0,
    )
    list(trainer.train())
    return trainer


def test_bar_on_a_terminal():
    stream = Tty()
    train(ProgressCallback(stream=stream))
    text = stream.getvalue()
    assert "256/256" in text and "frames" in text and "reward=" in text


def test_status_lines_when_not_a_terminal(caplog):
    stream = io.StringIO()
    with caplog.at_level(logging.INFO, logger="marl.experiment"):
        train(ProgressCallback(stream=stream, log_interval_s=1e-9))
    assert stream.getvalue() == ""
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4  # one per iteration at this interval, no duplicate at the end
    assert lines[-1].startswith("frames 256/256 (100%)")
    assert "frames/s" in lines[-1] and "ETA" in lines[-1] and "reward" in lines[-1]


def test_no_bar_still_logs_status_lines(caplog):
    """``experiment.progress=false`` turns off the bar only, as documented: on a terminal
    the status lines take its place."""
    stream = Tty()
    with caplog.at_level(logging.INFO, logger="marl.experiment"):
        train(ProgressCallback(bar=False, stream=stream, log_interval_s=1e-9))
    assert stream.getvalue() == ""
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4 and lines[-1].startswith("frames 256/256 (100%)")


def test_no_bar_and_no_interval_shows_nothing(caplog):
    stream = Tty()
    with caplog.at_level(logging.INFO, logger="marl.experiment"):
        train(ProgressCallback(bar=False, log_interval_s=None, stream=stream))
    assert stream.getvalue() == "" and not caplog.records


def test_experiment_progress_false_keeps_the_status_lines(tmp_path, caplog):
    from marl.experiment import Experiment
    from marl.testing import MultiAgentFakeEnv

    exp = Experiment(
        lambda num_envs, seed, device: MultiAgentFakeEnv(num_envs=num_envs, seed=seed),
        "mappo",
        task_name="fake/multiagent",
        config=dict(
            num_envs=4,
            frames_per_batch=64,
            total_frames=128,
            evaluation=False,
            render=False,
            progress=False,
            save_folder=str(tmp_path),
        ),
    )
    with caplog.at_level(logging.INFO, logger="marl.experiment"):
        exp.run()
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("frames 128/128 (100%)") for line in lines), lines


def test_the_status_shows_the_frame_0_evaluation_and_no_nan(caplog):
    """The untrained policy's evaluation (frame 0, before any iteration) is on the first
    line; a value not measured yet reads ``-``, never ``nan``."""
    from marl.envs import RewardSum, TransformedEnv

    env = TransformedEnv(SingleAgentFakeEnv(num_envs=4, discrete=True, seed=0), RewardSum())
    eval_env = TransformedEnv(SingleAgentFakeEnv(num_envs=4, discrete=True, seed=1), RewardSum())
    trainer = Trainer(
        Algorithm("ppo"),
        env,
        frames_per_batch=16,  # no episode (20 steps) ends in the first batch
        total_frames=32,
        eval_env=eval_env,
        eval_interval=10**6,
        eval_episodes=2,
        callbacks=[ProgressCallback(bar=False, log_interval_s=1e-9, stream=io.StringIO())],
        seed=0,
    )
    with caplog.at_level(logging.INFO, logger="marl.experiment"):
        first = trainer.evaluate()["eval/episode_reward"]
        list(trainer.train())
    lines = [r.getMessage() for r in caplog.records]
    assert "nan" not in " ".join(lines), lines
    assert "reward - |" in lines[0] and f"eval {first:.3f}" in lines[0], lines


def test_the_status_shows_each_evaluation_s_metrics_from_the_trainer_s_evaluator(caplog):
    """An evaluator's own metrics (``VersusReference``'s win rate) follow every evaluation
    in the status, not only the first one's."""
    from marl.algorithms import evaluate_episodes
    from marl.envs import RewardSum, TransformedEnv

    calls = []

    def evaluator(env, policy, episodes, *, deterministic=True):
        result = evaluate_episodes(env, policy, episodes, deterministic=deterministic)
        calls.append(len(calls))
        result.metrics["win_rate"] = [len(calls) / 10] * len(result.returns)
        return result

    env = TransformedEnv(SingleAgentFakeEnv(num_envs=4, discrete=True, seed=0), RewardSum())
    eval_env = TransformedEnv(SingleAgentFakeEnv(num_envs=4, discrete=True, seed=1), RewardSum())
    trainer = Trainer(
        Algorithm("ppo"),
        env,
        frames_per_batch=64,
        total_frames=192,
        eval_env=eval_env,
        eval_interval=64,
        eval_episodes=2,
        evaluator=evaluator,
        callbacks=[ProgressCallback(bar=False, log_interval_s=1e-9, stream=io.StringIO())],
        seed=0,
    )
    with caplog.at_level(logging.INFO, logger="marl.experiment"):
        trainer.evaluate()  # frame 0: win_rate 0.1
        list(trainer.train())  # evaluations at 64, 128, 192: 0.2, 0.3, 0.4
    assert len(calls) == 4
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("frames")]
    assert [line.split("(win_rate ")[1][:3] for line in lines] == ["0.2", "0.3", "0.4"], lines
