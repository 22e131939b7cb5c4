"""GymnasiumEnv: single and vector envs, autoreset semantics, spaces."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

gym = pytest.importorskip("gymnasium")

from gymnasium import spaces  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

from marl.envs import GymnasiumEnv, check_env_specs  # noqa: E402


class _DictEnv(gym.Env):
    """Dict observations, MultiDiscrete actions; terminates after 3 steps."""

    def __init__(self, action: str = "multidiscrete") -> None:
        self.observation_space = spaces.Dict(
            {
                "position": spaces.Box(-1.0, 1.0, (2,), np.float32),
                "count": spaces.Discrete(10),
                "flags": spaces.MultiBinary(3),
            }
        )
        self.action_space = {
            "multidiscrete": spaces.MultiDiscrete([3, 4]),
            "multibinary": spaces.MultiBinary(2),
        }[action]
        self.t = 0

    def _obs(self):
        return {
            "position": np.full(2, self.t / 10, np.float32),
            "count": self.t,
            "flags": np.array([1, 0, self.t % 2], np.int8),
        }

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        if not self.action_space.contains(np.asarray(action, dtype=self.action_space.dtype)):
            raise ValueError(f"bad action {action}")
        self.t += 1
        return self._obs(), float(np.sum(action)), self.t >= 3, False, {}


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(env_id="CartPole-v1"),
        dict(env_id="CartPole-v1", num_envs=3),
        dict(env_id="CartPole-v1", num_envs=2, categorical_action_encoding=False),
        dict(env_id="Pendulum-v1"),
        dict(env_id="Pendulum-v1", num_envs=2),
    ],
    ids=["cartpole", "cartpole-vec", "cartpole-onehot", "pendulum", "pendulum-vec"],
)
def test_check_env_specs(kwargs):
    env = GymnasiumEnv(seed=0, **kwargs)
    check_env_specs(env, steps=5)
    env.close()


def test_async_vector_env():
    env = GymnasiumEnv("Pendulum-v1", num_envs=2, vectorization_mode="async", seed=0)
    td = env.rollout(3)
    assert td["observation"].shape == (2, 3, 3)
    env.close()


@pytest.mark.parametrize("action", ["multidiscrete", "multibinary"])
def test_dict_observation_env(action):
    env = GymnasiumEnv(env=_DictEnv(action), seed=0)
    check_env_specs(env, steps=5)
    td = env.rollout(5)
    assert td["observation", "position"].shape == (3, 2)
    assert td["observation", "count"].dtype == torch.int64
    assert td["next", "observation", "count"].tolist() == [1, 2, 3]
    assert td["next", "terminated"].flatten().tolist() == [False, False, True]


def test_dict_observation_vector_env():
    vec = gym.vector.SyncVectorEnv([_DictEnv, _DictEnv], autoreset_mode=AutoresetMode.DISABLED)
    env = GymnasiumEnv(env=vec, seed=0)
    check_env_specs(env, steps=5)


def test_halfcheetah():
    pytest.importorskip("mujoco", reason="mujoco is not installed (pip install gymnasium[mujoco])")
    env = GymnasiumEnv("HalfCheetah-v5", seed=0)
    assert env.observation_spec["observation"].shape == (17,)
    check_env_specs(env, steps=3)


def _first_done(td):
    done = td["next", "done"][..., 0]
    return [tuple(i) for i in done.nonzero().tolist()]


@pytest.mark.parametrize("mode", ["built", "same_step"])
def test_autoreset_keeps_final_observation(mode):
    if mode == "built":
        env = GymnasiumEnv("CartPole-v1", num_envs=3, seed=0)
    else:
        vec = gym.make_vec(
            "CartPole-v1",
            num_envs=3,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        )
        env = GymnasiumEnv(env=vec, seed=0)
    td = env.rollout(60, break_when_any_done=False)
    ends = [(i, t) for i, t in _first_done(td) if t + 1 < td.shape[1]]
    assert ends
    for i, t in ends:
        final = td["next", "observation"][i, t]
        # the last "next" is terminal (pole fell or cart left the track) ...
        assert bool(final[2].abs() > 0.2095) or bool(final[0].abs() > 2.4)
        assert bool(td["next", "terminated"][i, t])
        # ... and the next root observation is a fresh reset, within [-0.05, 0.05]
        assert bool(td["observation"][i, t + 1].abs().max() <= 0.05)
    # sub-envs that did not end continue from their own "next"
    i, t = ends[0]
    others = [j for j in range(3) if not bool(td["next", "done"][j, t])]
    for j in others:
        assert torch.equal(td["observation"][j, t + 1], td["next", "observation"][j, t])


def test_next_step_autoreset_rejected():
    vec = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    with pytest.raises(ValueError, match="DISABLED"):
        GymnasiumEnv(env=vec)


def test_terminated_and_truncated_distinguished():
    env = GymnasiumEnv("Pendulum-v1", num_envs=2, seed=0, max_episode_steps=4)
    td = env.rollout(4)
    assert td["next", "truncated"][:, -1].all()
    assert not td["next", "terminated"].any()
    assert td["next", "done"][:, -1].all()
    single = GymnasiumEnv("CartPole-v1", seed=0)
    td = single.rollout(500)
    assert bool(td["next", "terminated"][-1]) and not bool(td["next", "truncated"][-1])


def test_seeding_is_reproducible():
    a = GymnasiumEnv("CartPole-v1", num_envs=2, seed=3).reset()
    b = GymnasiumEnv("CartPole-v1", num_envs=2, seed=3).reset()
    assert torch.equal(a["observation"], b["observation"])


def test_errors():
    with pytest.raises(ValueError, match="exactly one"):
        GymnasiumEnv()
    with pytest.raises(ValueError, match="num_envs"):
        GymnasiumEnv("CartPole-v1", num_envs=0)
    with pytest.raises(ValueError, match="vectorization_mode"):
        GymnasiumEnv("CartPole-v1", num_envs=2, vectorization_mode="threads")


def test_missing_gymnasium(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium", None)
    with pytest.raises(ImportError, match=r"marl\[gymnasium\]"):
        GymnasiumEnv("CartPole-v1")
