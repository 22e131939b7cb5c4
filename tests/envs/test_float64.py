"""float64 sources: the wrappers give float32 specs and data unless ``keep_float64=True``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from marl.envs import RewardSum, TransformedEnv, check_env_specs


def _float_dtypes(env) -> set[torch.dtype]:
    td = env.rollout(3, break_when_any_done=False)
    return {
        v.dtype for v in td.values(include_nested=True, leaves_only=True) if v.is_floating_point()
    }


def test_knights_archers_zombies_trains_ppo_without_a_dtype_error():
    pytest.importorskip("pettingzoo.butterfly", reason="pettingzoo[butterfly] (pygame, pymunk)")
    from marl.algorithms import Algorithm, Trainer
    from marl.envs import PettingZooEnv

    def make(**kw):
        return PettingZooEnv("knights_archers_zombies_v11", seed=0, max_cycles=20, **kw)

    env = TransformedEnv(make(), RewardSum())
    # used to fail in the first update with "mat1 and mat2 must have the same dtype"
    trainer = Trainer(
        Algorithm("mappo", config={"minibatch_size": 16}),
        env,
        frames_per_batch=32,
        total_frames=64,
        seed=0,
    )
    history = list(trainer.train())
    assert [h["frames"] for h in history] == [32, 64]
    assert all(np.isfinite(v) for k, v in history[-1].items() if k.startswith("train/"))
    assert env.observation_spec["archer", "observation"].dtype == torch.float32
    check_env_specs(env)
    assert _float_dtypes(env) == {torch.float32}
    # the switch keeps the source dtype, with specs that say so
    raw = make(keep_float64=True)
    assert raw.observation_spec["archer", "observation"].dtype == torch.float64
    check_env_specs(raw)


def test_gymnasium_float64_observations_and_actions():
    gym = pytest.importorskip("gymnasium")
    from gymnasium import spaces

    from marl.envs import GymnasiumEnv

    class Float64Env(gym.Env):
        observation_space = spaces.Box(-1.0, 1.0, (3,), np.float64)
        action_space = spaces.Box(-2.0, 2.0, (2,), np.float64)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            return np.full(3, 0.25), {}

        def step(self, action):
            assert action.dtype == np.float64  # the env gets its own dtype back
            return np.full(3, 0.5), float(action.sum()), False, False, {}

    env = GymnasiumEnv(env=Float64Env(), seed=0)
    assert env.action_spec["action"].dtype == torch.float32
    check_env_specs(env)
    assert _float_dtypes(env) == {torch.float32}
    kept = GymnasiumEnv(env=Float64Env(), seed=0, keep_float64=True)
    check_env_specs(kept)
    assert _float_dtypes(kept) == {torch.float64}


def test_vmas_float64_scenario():
    pytest.importorskip("vmas")
    from vmas.scenarios.navigation import Scenario

    from marl.envs import VmasEnv

    class Float64Navigation(Scenario):
        def observation(self, agent):
            return super().observation(agent).double()

        def reward(self, agent):
            return super().reward(agent).double()

    kw = dict(num_envs=2, n_agents=2, max_steps=5, seed=0)
    env = VmasEnv(Float64Navigation(), **kw)
    check_env_specs(env)
    assert _float_dtypes(env) == {torch.float32}
    kept = VmasEnv(Float64Navigation(), keep_float64=True, **kw)
    check_env_specs(kept)
    td = kept.rollout(2)
    assert td["agent", "observation"].dtype == td["next", "agent", "reward"].dtype == torch.float64
