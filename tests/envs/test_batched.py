import os

import pytest
import torch

from marl.envs import (
    InitTracker,
    ParallelEnv,
    RewardSum,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    WorkerError,
    check_env_specs,
)
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv


def _ma():
    return MultiAgentFakeEnv(min_steps=2, max_steps=4)


def _ma_transformed():
    return TransformedEnv(MultiAgentFakeEnv(num_envs=2), [RewardSum(), StepCounter(3)])


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
@pytest.mark.parametrize("make", [_ma, _ma_transformed, SingleAgentFakeEnv])
def test_batched_envs_pass_check_env_specs(cls, make):
    env = cls(2, make)
    try:
        check_env_specs(env, steps=10)
        sub = make()
        assert env.batch_size == (2, *sub.batch_size)
        assert env.group_map == sub.group_map
    finally:
        env.close()


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
def test_batched_partial_reset_and_transforms_on_top(cls):
    inner = cls(3, lambda: SingleAgentFakeEnv(max_steps=1000, p_terminate=0.0))
    env = TransformedEnv(inner, [StepCounter(), InitTracker()])
    try:
        td = env.reset()
        for _ in range(2):
            td, td_root = env.step_and_maybe_reset(env.rand_action(td))
            td = td_root
        obs = td["observation"].clone()
        td["_reset"] = torch.tensor([[False], [True], [False]])
        out = env.reset(td)
        assert out["step_count"].squeeze(-1).tolist() == [2, 0, 2]
        assert out["is_init"].squeeze(-1).tolist() == [False, True, False]
        assert torch.equal(out["observation"][[0, 2]], obs[[0, 2]])
        assert not torch.equal(out["observation"][1], obs[1])
    finally:
        env.close()


def test_parallel_matches_serial_with_same_seed():
    actions = torch.rand(6, 2, 2) * 2 - 1

    def run(env):
        env.set_seed(3)
        td = env.reset()
        rewards = []
        for t in range(6):
            td["action"] = actions[t]
            td, td_root = env.step_and_maybe_reset(td)
            rewards.append(td["next", "reward"])
            td = td_root
        env.close()
        return torch.stack(rewards)

    serial = run(SerialEnv(2, SingleAgentFakeEnv))
    parallel = run(ParallelEnv(2, SingleAgentFakeEnv))
    assert torch.allclose(serial, parallel)


class _Crashing(SingleAgentFakeEnv):
    def __init__(self, mode: str):
        super().__init__()
        self.mode, self.n = mode, 0

    def _step(self, td):
        self.n += 1
        if self.n == 2:
            if self.mode == "raise":
                raise RuntimeError("boom from the env")
            os._exit(3)
        return super()._step(td)


@pytest.mark.parametrize("mode, match", [("raise", "boom from the env"), ("exit", "died")])
def test_parallel_worker_failure_raises_in_parent(mode, match):
    env = ParallelEnv(2, _Crashing, {"mode": mode}, timeout=20)
    try:
        td = env.rand_action(env.reset())
        td = env.step(td)
        with pytest.raises(WorkerError, match=match):
            env.step(env.rand_action(env.reset()))
    finally:
        env.close()
    assert all(not p.is_alive() for p in env._procs)


def test_parallel_bad_factory_and_arguments():
    with pytest.raises(ValueError, match="num_workers must be a positive int"):
        ParallelEnv(0, SingleAgentFakeEnv)
    with pytest.raises(TypeError, match="must return an EnvBase"):
        SerialEnv(2, lambda: object())
    with pytest.raises(TypeError, match="create_env_fn must be callable"):
        ParallelEnv(2, "env")


def test_parallel_close_leaves_no_process():
    env = ParallelEnv(2, SingleAgentFakeEnv)
    procs = list(env._procs)
    env.rollout(3)
    env.close()
    assert all(not p.is_alive() for p in procs)
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()
