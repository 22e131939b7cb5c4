"""Tests of `RayCollector` on a local Ray instance with 2 actors."""

from __future__ import annotations

import pytest
import torch

from marl.collectors import CollectorWorkerError, RayCollector
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv

from ._helpers import multi_agent_module

ray = pytest.importorskip("ray", reason='RayCollector needs ray (pip install "marl[ray]")')

pytestmark = pytest.mark.ray

TRAJ = ("collector", "traj_ids")


def test_sync_multi_agent_and_weights(local_ray):
    policy = multi_agent_module(0.1)
    with RayCollector(
        lambda: MultiAgentFakeEnv(num_envs=3, min_steps=2, max_steps=4),
        policy,
        num_collectors=2,
        frames_per_batch=48,
        total_frames=96,
    ) as collector:
        batches = list(collector)
        assert collector.frames == 96
        assert [b.batch_size for b in batches] == [torch.Size([2, 3, 8])] * 2
        data = torch.cat(batches, -1)
        ids = data[TRAJ]
        assert bool((ids[0] % 2 == 0).all()) and bool((ids[1] % 2 == 1).all())
        done = data["next", "done"].squeeze(-1)
        assert bool((ids[..., 1:] != ids[..., :-1]).eq(done[..., :-1]).all())
        assert torch.allclose(data["walker", "action"], torch.tensor(0.1))
        # weights travel through the object store
        with torch.no_grad():
            policy[0].module.bias.fill_(-0.3)
        collector.update_policy_weights_()
        assert torch.allclose(collector.next_batch()["walker", "action"], torch.tensor(-0.3))
        collector.update_policy_weights_(multi_agent_module(0.5).state_dict())
        assert torch.allclose(collector.next_batch()["walker", "action"], torch.tensor(0.5))
        state = collector.state_dict()
        assert state["frames"] == 192 and len(state["collectors"]) == 2
    assert ray.is_initialized()  # the collector did not start Ray, so it leaves it running


def test_async_heterogeneous_actors_fake_and_vmas(local_ray):
    pytest.importorskip("vmas")
    from marl.envs import VmasEnv

    fns = [
        lambda: MultiAgentFakeEnv(num_envs=4),
        lambda: VmasEnv("navigation", num_envs=4, n_agents=3, max_steps=5),
    ]
    with RayCollector(
        fns, None, num_collectors=2, frames_per_batch=16, total_frames=-1, sync=False
    ) as collector:
        seen = {}
        for batch in collector:
            wid = int(batch["collector", "worker_id"][0, 0])
            seen[wid] = batch
            if len(seen) == 2:
                break
        # async weight updates do not wait for busy actors; a failed one surfaces
        # at the next batch (here: these actors run random actions, no weights)
        collector.update_policy_weights_({"w": torch.zeros(1)})
        with pytest.raises(CollectorWorkerError, match="has no weights to update"):
            for _ in range(20):
                collector.next_batch()
    assert seen[0]["walker", "observation"].shape == (4, 4, 2, 6)
    assert seen[1]["agent", "observation"].shape == (4, 4, 3, 18)
    assert bool((seen[1][TRAJ] % 2 == 1).all())


def test_actor_error_names_the_actor(local_ray):
    fns = [
        lambda: SingleAgentFakeEnv(num_envs=2),
        lambda: SingleAgentFakeEnv(num_envs=2, p_terminate="not a probability"),
    ]
    collector = RayCollector(fns, None, num_collectors=2, frames_per_batch=8)
    with pytest.raises(CollectorWorkerError, match="RayCollector actor 1 failed with TypeError"):
        collector.next_batch()
    with pytest.raises(RuntimeError, match="shut down"):
        collector.next_batch()
