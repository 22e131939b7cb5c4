"""Learning tests of the recurrent models on ``marl/recall``, where memory is required.

``marl/recall`` (2 agents, 3 cues, cue -> 2 blank steps -> query): a memoryless policy
sees the same query whatever its cue, so no MLP can beat the better of the random and
no-op baselines there; a GRU can score 1. One seed each (CI's time budget).

Measured (one torch thread, seed 0, 64 evaluation episodes of 16 envs, load ~5 on 2
cores): ippo + gru 1.000 after 20,480 frames (3.8 CPU-s); qmix + gru 1.000 (20.2 CPU-s);
ippo + lstm 1.000 (3.4 CPU-s);
ippo + mlp 0.469 (its deterministic policy names one cue: exactly the no-op's 0.469;
random 0.320). With ``pytest --disable-learning`` (optimizer steps are no-ops) the three
recurrent cases fail: untrained, they score 0.234 (ippo + gru), 0.469 (qmix + gru) and
0.469 (ippo + lstm), required > 0.769.
"""

from __future__ import annotations

import time

import pytest
import torch

from marl.algorithms import Algorithm, Trainer
from marl.envs import InitTracker, TransformedEnv, make_task
from marl.testing import compare_with_baselines

pytestmark = pytest.mark.slow

FRAMES = 20_480
MARGIN = 0.3  # over the better baseline (about 0.47): the gru cases reach 1.0


def _make_env(num_envs: int, seed: int, recurrent: bool = True):
    env = make_task("marl/recall", num_envs=num_envs, seed=seed)
    return TransformedEnv(env, InitTracker()) if recurrent else env


CONFIGS = {
    "ippo": dict(
        lr=3e-3,
        entropy_coef=0.01,
        actor_cells=(32,),
        critic_cells=(32,),
        epochs=4,
        minibatch_size=512,
    ),
    "qmix": dict(
        lr=3e-3,
        cells=(32,),
        batch_size=256,
        learning_starts=500,
        utd_ratio=0.05,
        eps_annealing_frames=FRAMES // 2,
        sequence_length=4,
    ),
}


def _train(algorithm: str, network: str, seed: int = 0):
    torch.manual_seed(seed)
    recurrent = network != "mlp"
    algo = Algorithm(algorithm, config=dict(CONFIGS[algorithm], network=network))
    start, cpu = time.perf_counter(), time.process_time()
    trainer = Trainer(
        algo, _make_env(64, seed, recurrent), frames_per_batch=1024, total_frames=FRAMES, seed=seed
    )
    for _ in trainer.train():
        pass
    result = compare_with_baselines(
        lambda: _make_env(16, seed + 100, recurrent), algo.eval_policy(), episodes=64
    )
    print(
        f"\n{algorithm} {network}: trained {result.trained:.3f} random {result.random:.3f} "
        f"noop {result.noop:.3f} ({time.perf_counter() - start:.1f} s, "
        f"{time.process_time() - cpu:.1f} CPU-s)"
    )
    return result


@pytest.mark.parametrize(
    ("algorithm", "network"), [("ippo", "gru"), ("qmix", "gru"), ("ippo", "lstm")]
)
def test_recurrent_model_learns_to_remember_the_cue(algorithm, network):
    result = _train(algorithm, network)
    best = max(result.random, result.noop)
    assert result.trained > best + MARGIN, result


def test_an_mlp_cannot_beat_the_baselines_there():
    # what makes the task a memory test: the same training with an MLP stays at chance
    result = _train("ippo", "mlp")
    assert result.trained <= max(result.random, result.noop) + 0.05, result
