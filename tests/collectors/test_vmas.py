"""The collectors on a real wrapper: VMAS ``navigation`` (3 agents, continuous)."""

from __future__ import annotations

import pytest
import torch
from tensordict.nn import TensorDictModule
from torch import nn

from marl.collectors import Collector, MultiAsyncCollector, MultiSyncCollector

pytest.importorskip("vmas", reason='needs vmas (pip install "marl[vmas]")')
VmasEnv = pytest.importorskip("marl.envs").__dict__.get("VmasEnv")
if VmasEnv is None:  # the wrapper is written in parallel with the collectors
    pytest.skip("marl.envs.VmasEnv is not available yet", allow_module_level=True)

TRAJ = ("collector", "traj_ids")


def make_env(num_envs: int = 4, max_steps: int = 6):
    return VmasEnv("navigation", num_envs=num_envs, n_agents=3, max_steps=max_steps, seed=0)


def mlp_policy(obs_dim: int = 18) -> TensorDictModule:
    net = nn.Sequential(nn.Linear(obs_dim, 16), nn.Tanh(), nn.Linear(16, 2), nn.Tanh())
    return TensorDictModule(net, in_keys=[("agent", "observation")], out_keys=[("agent", "action")])


def _check(data, num_envs: int, steps: int, lead: tuple[int, ...] = ()):
    assert data.batch_size == (*lead, num_envs, steps)
    assert data["agent", "observation"].shape == (*lead, num_envs, steps, 3, 18)
    assert data["agent", "action"].shape == (*lead, num_envs, steps, 3, 2)
    assert data["next", "agent", "reward"].shape == (*lead, num_envs, steps, 3, 1)
    done = data["next", "done"].squeeze(-1)
    ids = data[TRAJ]
    assert bool((ids[..., 1:] != ids[..., :-1]).eq(done[..., :-1]).all())
    same = (
        data["next", "agent", "observation"][..., :-1, :, :]
        == data["agent", "observation"][..., 1:, :, :]
    )
    assert bool(same.flatten(-2).all(-1)[~done[..., :-1]].all())


def test_collector_on_vmas():
    policy = mlp_policy()
    collector = Collector(make_env(), policy, frames_per_batch=4 * 10, total_frames=80)
    batches = list(collector)
    data = torch.cat(batches, -1)
    _check(data, 4, 20)
    # max_steps=6: every sub-env is truncated at steps 6, 12 and 18, across the batch boundary
    assert data["next", "truncated"].squeeze(-1)[:, [5, 11, 17]].all()
    assert data[TRAJ][0, ::6].tolist() == [0, 4, 8, 12]
    out = policy(data[..., :1].exclude(("agent", "action")).clone())
    assert torch.allclose(out["agent", "action"], data["agent", "action"][..., :1, :, :])


def test_collector_on_vmas_partial_resets():
    env = make_env(num_envs=6, max_steps=None)
    collector = Collector(
        env, None, frames_per_batch=6 * 8, max_frames_per_traj=3, reset_at_each_iter=False
    )
    data = collector.rollout()
    _check(data, 6, 8)


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_multiprocess_on_vmas(cls):
    policy = mlp_policy()
    with cls(
        make_env, policy, num_workers=2, frames_per_batch=32, total_frames=64, seed=0
    ) as collector:
        batches = list(collector)
        if cls is MultiSyncCollector:
            assert len(batches) == 2
            _check(torch.cat(batches, -1), 4, 8, lead=(2,))
        else:
            assert len(batches) == 2
            for b in batches:
                _check(b, 4, 8)
        with torch.no_grad():
            for p in policy.parameters():
                p.zero_()
        collector.update_policy_weights_()
        batch = collector.next_batch()
        actions = batch["agent", "action"]
        assert bool((actions == 0).all())
