"""The wrapper-vs-raw timing loop that the env benchmarks share (benchmarks/envs/_timing.py)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from benchmarks.envs._timing import (
    Case,
    paired_rates,
    rate_row,
    rollout_rate,
    rows,
    step_loop_rate,
    verdict,
    wrapper_rate,
)


def test_paired_rates_warms_up_alternates_and_takes_medians():
    calls = []
    raw_rates = {0: 100.0, 1: 300.0, 2: 200.0}  # by seed, for the timed runs
    wrap_rates = {0: 90.0, 1: 150.0, 2: 190.0}

    def raw(steps, seed):
        calls.append(("raw", steps, seed))
        return raw_rates[seed]

    def wrapper(steps, seed):
        calls.append(("wrapper", steps, seed))
        return wrap_rates[seed]

    m = paired_rates(raw, wrapper, reps=3, steps=40, warmup=5)
    assert calls == [
        ("raw", 5, 0),
        ("wrapper", 5, 0),  # warm-up
        ("raw", 40, 0),
        ("wrapper", 40, 0),
        ("wrapper", 40, 1),  # odd repetitions: the wrapper first
        ("raw", 40, 1),
        ("raw", 40, 2),
        ("wrapper", 40, 2),
    ]
    # medians of each side, and the median of the per-pair ratios (0.9, 0.5, 0.95),
    # not the ratio of the medians (190 / 200)
    assert m == {"raw": 200.0, "wrapper": 150.0, "ratio": 0.9}


class _FakeEnv:
    def __init__(self, batch):
        self.batch, self.resets = batch, 0

    def reset(self):
        self.resets += 1

    def rollout(self, steps, break_when_any_done):
        assert break_when_any_done is False
        return TensorDict({}, batch_size=self.batch)


def test_rollout_rate_counts_every_env_and_checks_the_batch():
    env = _FakeEnv([4, 10])
    assert rollout_rate(env, 10, num_envs=4) > 0 and env.resets == 1
    with pytest.raises(RuntimeError, match=r"expected torch.Size\(\[10\]\)"):
        rollout_rate(_FakeEnv([4, 10]), 10)
    assert rollout_rate(_FakeEnv(torch.Size([10])), 10) > 0


def test_rate_row_and_verdict():
    row = rate_row("x rollout", "raw x loop", {"raw": 10.0, "wrapper": 8.0, "ratio": 0.8})
    assert row == {
        "name": "x rollout",
        "value": 8.0,
        "unit": "env-steps/s",
        "baseline_name": "raw x loop",
        "baseline_value": 10.0,
        "ratio": 0.8,
    }
    assert verdict(0.85, 0.8) == "median paired ratio  85.0% (target 80%) OK"
    assert verdict(0.5, 0.6).endswith("(target 60%) BELOW TARGET")


class _StepEnv:
    """Counts the step loop's calls; the root it hands back is the one it was given."""

    def __init__(self, batch):
        self.batch_size = torch.Size(batch)
        self.calls = []

    def reset(self):
        self.calls.append("reset")
        return TensorDict({}, batch_size=self.batch_size)

    def rand_action(self, td):
        self.calls.append("rand_action")
        return td

    def step_and_maybe_reset(self, td):
        self.calls.append("step")
        return td, td


def test_step_loop_rate_steps_with_random_actions_and_keeps_nothing():
    env = _StepEnv([3])
    assert step_loop_rate(env, 4, num_envs=3) > 0
    assert env.calls == ["reset"] + ["rand_action", "step"] * 4
    with pytest.raises(RuntimeError, match=r"expected torch\.Size"):
        step_loop_rate(_StepEnv([3]), 4)  # one env expected, a batch of 3 given
    assert wrapper_rate(_StepEnv([]), 2, 1, "step") > 0
    assert wrapper_rate(_FakeEnv(torch.Size([2])), 2, 1, "rollout") > 0
    with pytest.raises(ValueError, match="mode must be one of"):
        wrapper_rate(_StepEnv([]), 2, 1, "steps")


def test_rows_cover_both_env_counts_and_both_modes():
    class _Both(_StepEnv):
        def rollout(self, steps, break_when_any_done):
            return TensorDict({}, batch_size=[*self.batch_size, steps])

    case = Case(
        label="toy",
        baseline="raw toy loop",
        raw=lambda num_envs, steps, seed: 100.0,
        make_env=lambda n, seed: _Both([] if n == 1 else [n]),
        warmup=1,
    )
    out = rows([case], steps=16, reps=1)
    assert [r["name"] for r in out] == [
        "toy step loop, 1 env(s) x 16 steps",
        "toy rollout loop, 1 env(s) x 16 steps",
        "toy step loop, 8 env(s) x 2 steps",
        "toy rollout loop, 8 env(s) x 2 steps",
    ]
    assert all(r["baseline_name"] == "raw toy loop" and r["baseline_value"] == 100.0 for r in out)


def test_env_floor_measures_what_marl_adds_to_a_null_env():
    """bench_floor on a few steps: the null env's own loop is fast, marl adds to it."""
    pytest.importorskip("pettingzoo")
    from benchmarks.envs.bench_floor import measure, null_env

    env = null_env()
    obs, _ = env.reset()
    assert set(obs) == set(env.possible_agents)
    for _ in range(24):
        assert env.agents
        env.step({a: 0 for a in env.agents})
    env.step({a: 0 for a in env.agents})
    assert not env.agents  # the 25th step ends the episode
    m = measure(num_envs=2, reps=1, steps=50)
    assert 0 < m["raw_us"] < m["marl_us"]
    assert m["floor_us"] == pytest.approx(m["marl_us"] - m["raw_us"])
