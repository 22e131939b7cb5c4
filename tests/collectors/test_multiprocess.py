"""Tests of `MultiSyncCollector` and `MultiAsyncCollector`: data, weights, crashes, shutdown."""

from __future__ import annotations

import time

import pytest
import torch

from marl.collectors import CollectorWorkerError, MultiAsyncCollector, MultiSyncCollector
from marl.envs import WorkerError
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv

from ._helpers import CrashingEnv, DyingEnv, linear_policy, multi_agent_policy, zombie_children

TRAJ = ("collector", "traj_ids")


def _assert_reaped(collector):
    for proc in collector._procs:
        assert not proc.is_alive()
        assert proc.exitcode is not None
    assert zombie_children() == []


def test_sync_multi_agent_shapes_frames_and_traj_ids():
    with MultiSyncCollector(
        lambda: MultiAgentFakeEnv(num_envs=3, min_steps=2, max_steps=4),
        multi_agent_policy,
        num_workers=2,
        frames_per_batch=48,
        total_frames=96,
        seed=0,
    ) as collector:
        batches = list(collector)
        # the workers' buffers are shared memory, handed over once and then reused
        assert all(buf.is_shared() for buf in collector._buffers)
    assert collector.frames == 96
    assert [b.batch_size for b in batches] == [torch.Size([2, 3, 8])] * 2
    b = torch.cat(batches, -1)
    assert b["picker", "action"].shape == (2, 3, 16, 3)
    ids = b[TRAJ]
    # ids are unique across workers (worker w owns ids = w mod 2) and change exactly at dones
    assert bool((ids[0] % 2 == 0).all()) and bool((ids[1] % 2 == 1).all())
    done = b["next", "done"].squeeze(-1)
    assert bool(done.any())
    assert bool((ids[..., 1:] != ids[..., :-1]).eq(done[..., :-1]).all())
    # consistency across the batch boundary (shared buffers are reused in place)
    same = (
        b["next", "walker", "observation"][..., :-1, :, :]
        == b["walker", "observation"][..., 1:, :, :]
    )
    assert bool(same.flatten(-2).all(-1)[~done[..., :-1]].all())
    _assert_reaped(collector)


def test_sync_rounding_warning_and_workers_differ():
    with pytest.warns(UserWarning, match="rounded up to 12"):
        collector = MultiSyncCollector(
            [lambda: SingleAgentFakeEnv(num_envs=3)] * 2, None, frames_per_batch=10
        )
    with collector:
        batch = collector.next_batch()
    assert batch.batch_size == (2, 3, 2)
    assert not torch.equal(batch["action"][0], batch["action"][1])  # per-worker RNG
    with pytest.raises(ValueError, match="num_workers"):
        MultiSyncCollector([SingleAgentFakeEnv] * 2, num_workers=3, frames_per_batch=4)


def test_async_yields_worker_batches():
    with MultiAsyncCollector(
        lambda: MultiAgentFakeEnv(num_envs=2),
        None,
        num_workers=2,
        frames_per_batch=8,
        total_frames=48,
    ) as collector:
        batches = list(collector)
    assert len(batches) == 6 and collector.frames == 48
    for b in batches:
        assert b.batch_size == (2, 4)
        wid = b["collector", "worker_id"]
        assert bool((wid == wid[0, 0]).all())
        assert bool((b[TRAJ] % 2 == wid).all())
    _assert_reaped(collector)


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_weight_updates_reach_the_workers(cls):
    policy = linear_policy(0.1)
    with cls(
        lambda: SingleAgentFakeEnv(num_envs=2), policy, num_workers=2, frames_per_batch=8
    ) as collector:
        it = iter(collector)
        assert torch.allclose(next(it)["action"], torch.tensor(0.1))
        for new, weights in ((-0.5, None), (0.25, linear_policy(0.25).state_dict())):
            old = 0.1 if new == -0.5 else -0.5
            with torch.no_grad():
                policy.module.bias.fill_(new if weights is None else 0.0)
            collector.update_policy_weights_(weights)
            _assert_switched([next(it) for _ in range(6)], old, new, cls is MultiSyncCollector)


def _assert_switched(batches, old: float, new: float, sync: bool) -> None:
    """Sync: every batch is new. Async: each worker yields at most one old batch (the
    one it was collecting when the weights were sent), then only new ones."""
    if sync:
        assert all(torch.allclose(b["action"], torch.tensor(new)) for b in batches)
        return
    per_worker: dict[int, list[float]] = {}
    for b in batches:
        value = float(b["action"].flatten()[0])
        assert torch.allclose(b["action"], torch.tensor(value))
        per_worker.setdefault(int(b["collector", "worker_id"][0, 0]), []).append(value)
    for values in per_worker.values():
        n_old = sum(abs(v - old) < 1e-6 for v in values)
        assert n_old <= 1 and all(abs(v - new) < 1e-6 for v in values[n_old:])
    assert sum(abs(v - new) < 1e-6 for vs in per_worker.values() for v in vs) >= 4


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_worker_exception_is_raised_with_worker_and_cause(cls):
    fns = [lambda: SingleAgentFakeEnv(num_envs=2), lambda: CrashingEnv(crash_at=6, num_envs=2)]
    collector = cls(fns, None, frames_per_batch=8)
    start = time.monotonic()
    with pytest.raises(CollectorWorkerError) as info:
        for _ in collector:
            pass
    assert time.monotonic() - start < 20
    msg = str(info.value)
    assert "worker 1 raised ValueError: boom at step 6" in msg
    assert "Traceback" in msg and "_step" in msg
    assert isinstance(info.value, WorkerError)
    _assert_reaped(collector)


def test_worker_death_is_detected():
    fns = [lambda: SingleAgentFakeEnv(num_envs=2), lambda: DyingEnv(die_at=3, num_envs=2)]
    collector = MultiSyncCollector(fns, None, frames_per_batch=8)
    start = time.monotonic()
    with pytest.raises(CollectorWorkerError, match=r"worker 1 died \(exit code 3\)"):
        list(collector)
    assert time.monotonic() - start < 20
    _assert_reaped(collector)


def test_crash_while_building_env():
    def bad():
        raise RuntimeError("no such scenario")

    with pytest.raises(
        CollectorWorkerError, match="worker 0 raised RuntimeError: no such scenario"
    ):
        MultiAsyncCollector([bad, SingleAgentFakeEnv], None, frames_per_batch=4)
    assert zombie_children() == []


def test_shutdown_mid_async_leaves_no_zombies():
    collector = MultiAsyncCollector(
        lambda: SingleAgentFakeEnv(num_envs=2), None, num_workers=2, frames_per_batch=400
    )
    next(iter(collector))  # a worker is collecting its next batch right now
    collector.shutdown()
    _assert_reaped(collector)
    collector.shutdown()  # idempotent
    with pytest.raises(RuntimeError, match="shut down"):
        collector.next_batch()


def test_split_trajs_and_state_dict():
    with MultiSyncCollector(
        lambda: SingleAgentFakeEnv(num_envs=2, max_steps=3, p_terminate=0.0),
        linear_policy(0.2),
        num_workers=2,
        frames_per_batch=16,
        split_trajs=True,
    ) as collector:
        data = collector.next_batch()
        assert data.batch_size == (8, 3)  # 2 workers x 2 envs x (3, 1) steps
        assert data["collector", "mask"].sum().item() == 16
        state = collector.state_dict()
        assert state["frames"] == 16 and "policy" in state
        collector.load_state_dict({"frames": 0, "policy": linear_policy(0.6).state_dict()})
        assert collector.frames == 0
        data = collector.next_batch()
        assert torch.allclose(data["action"][data["collector", "mask"]], torch.tensor(0.6))
