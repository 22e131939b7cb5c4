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


def test_disabled_shows_nothing(caplog):
    stream = Tty()
    with caplog.at_level(logging.INFO, logger="marl.experiment"):
        train(ProgressCallback(enabled=False, stream=stream))
    assert stream.getvalue() == "" and not caplog.records
