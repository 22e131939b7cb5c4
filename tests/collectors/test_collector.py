"""Tests of the single-process `Collector` on the fake envs."""

from __future__ import annotations

import warnings

import pytest
import torch
from tensordict.nn import InteractionType

from marl.collectors import Collector, split_trajectories
from marl.envs import StepCounter, TransformedEnv
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv

from ._helpers import ListBuffer, gaussian_policy, linear_policy, multi_agent_policy

TRAJ = ("collector", "traj_ids")


# ---------------------------------------------------------------- frame accounting
def test_frames_and_shapes_multi_agent():
    env = MultiAgentFakeEnv(num_envs=4, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        collector = Collector(env, None, frames_per_batch=32, total_frames=96)
    batches = list(collector)
    assert len(batches) == 3
    assert collector.frames == 96
    for b in batches:
        assert b.batch_size == (4, 8)
        assert b["walker", "action"].shape == (4, 8, 2, 2)
        assert b["picker", "action"].shape == (4, 8, 3)
        assert b["next", "walker", "reward"].shape == (4, 8, 2, 1)
        assert b["next", "done"].shape == (4, 8, 1)
        assert b["state"].shape == (4, 8, 8)
        assert b[TRAJ].shape == (4, 8)
        assert b[TRAJ].dtype == torch.long
        # random actions honour the picker's action mask
        legal = b["picker", "action_mask"].gather(-1, b["picker", "action"][..., None])
        assert bool(legal.all())


def test_frames_per_batch_rounded_up_with_warning():
    with pytest.warns(UserWarning, match="rounded up to 12"):
        collector = Collector(SingleAgentFakeEnv(num_envs=3), frames_per_batch=10)
    assert collector.frames_per_batch == 12
    assert collector.rollout().batch_size == (3, 4)


def test_total_frames_rounded_up_with_warning():
    with pytest.warns(UserWarning, match="18 frames"):
        collector = Collector(SingleAgentFakeEnv(num_envs=3), frames_per_batch=6, total_frames=14)
    assert sum(b.numel() for b in collector) == 18
    assert collector.frames == 18


def test_endless_collector_and_env_factory():
    collector = Collector(lambda: SingleAgentFakeEnv(num_envs=2), frames_per_batch=4)
    it = iter(collector)
    for _ in range(5):
        next(it)
    assert collector.frames == 20
    env = collector.env
    collector.shutdown()
    assert env.is_closed  # the collector built it, so it closes it


def test_unbatched_env():
    collector = Collector(SingleAgentFakeEnv(seed=0), frames_per_batch=7, total_frames=14)
    batches = list(collector)
    assert [b.batch_size for b in batches] == [torch.Size([7])] * 2
    assert batches[0][TRAJ].shape == (7,)


def test_bad_arguments():
    env = SingleAgentFakeEnv(num_envs=2)
    with pytest.raises(ValueError, match="frames_per_batch"):
        Collector(env, frames_per_batch=0)
    with pytest.raises(TypeError, match="EnvBase"):
        Collector(42, frames_per_batch=2)
    with pytest.raises(TypeError, match="callable"):
        Collector(env, policy=3, frames_per_batch=2)
    with pytest.raises(ValueError, match="exploration"):
        Collector(env, frames_per_batch=2, exploration="greedy")
    with pytest.raises(TypeError, match="extend"):
        Collector(env, frames_per_batch=2, replay_buffer=object())
    with pytest.raises(ValueError, match="env_device"):
        Collector(env, frames_per_batch=2, env_device="meta")


def test_worker_arguments_traj_id_stride_offset_and_close_env():
    """What the multi-process and Ray workers pass: ids never collide, the env is closed."""
    env = TransformedEnv(
        SingleAgentFakeEnv(num_envs=2, max_steps=100, p_terminate=0.0), StepCounter(3)
    )
    collector = Collector(
        env, frames_per_batch=12, traj_id_stride=3, traj_id_offset=2, close_env=True
    )
    ids = collector.rollout()[TRAJ]
    # local ids 0, 1 | 2, 3 | 4, 5 (a new episode every 3 steps) -> local * 3 + 2
    assert ids[0].tolist() == [2, 2, 2, 8, 8, 8]
    assert ids[1].tolist() == [5, 5, 5, 11, 11, 11]
    collector.shutdown()
    assert env.is_closed  # close_env=True: closed although the caller built it
    env = SingleAgentFakeEnv(num_envs=2)
    Collector(env, frames_per_batch=4).shutdown()
    assert not env.is_closed  # default: the caller's env stays open
    for bad, err in (
        ({"traj_id_stride": 0}, ValueError),
        ({"traj_id_stride": 2, "traj_id_offset": 2}, ValueError),
        ({"traj_id_offset": -1}, ValueError),
        ({"traj_id_stride": 2.0}, TypeError),
    ):
        with pytest.raises(err, match="traj_id"):
            Collector(env, frames_per_batch=4, **bad)


# ---------------------------------------------------------------- data correctness
def test_transitions_are_consistent_across_batches():
    """next obs at t is the obs at t+1 (or across the batch boundary), unless done."""
    env = SingleAgentFakeEnv(num_envs=3, max_steps=4, p_terminate=0.1, seed=1)
    collector = Collector(env, linear_policy(0.3), frames_per_batch=15, total_frames=45)
    batches = list(collector)
    data = torch.cat(batches, dim=1)  # [3, 15]
    done = data["next", "done"].squeeze(-1)
    same = data["next", "observation"][:, :-1] == data["observation"][:, 1:]
    assert bool(same.all(-1)[~done[:, :-1]].all())
    assert bool(done.any())
    # the policy's actions are stored, and the buffer is not shared between batches
    assert torch.allclose(data["action"], torch.full_like(data["action"], 0.3))
    assert batches[0]["observation"].data_ptr() != batches[1]["observation"].data_ptr()


def test_traj_ids_and_resets_across_batch_boundaries():
    env = TransformedEnv(
        SingleAgentFakeEnv(num_envs=2, max_steps=100, p_terminate=0.0), StepCounter(3)
    )
    collector = Collector(env, frames_per_batch=10, total_frames=20)  # T = 5
    b1, b2 = list(collector)
    data = torch.cat([b1, b2], 1)
    ids, count = data[TRAJ], data["step_count"].squeeze(-1)
    # episodes last 3 steps and continue over the boundary at t = 5
    assert count[0].tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
    assert ids[0, 3:6].unique().numel() == 1  # one trajectory spans both batches
    assert ids[:, 0].tolist() == [0, 1]
    # every episode gets a new id; ids are unique across envs
    assert ids[0].tolist() == [0, 0, 0, 2, 2, 2, 4, 4, 4, 6]
    assert ids[1].tolist() == [1, 1, 1, 3, 3, 3, 5, 5, 5, 7]
    done = data["next", "done"].squeeze(-1)
    assert bool((ids[:, 1:] != ids[:, :-1]).eq(done[:, :-1]).all())


def test_partial_reset_multi_agent():
    """Sub-envs end at different times; only those are reset."""
    env = MultiAgentFakeEnv(num_envs=6, min_steps=2, max_steps=6, seed=3)
    data = Collector(env, multi_agent_policy, frames_per_batch=6 * 20).rollout()
    done = data["next", "done"].squeeze(-1)
    ids = data[TRAJ]
    assert bool(done.any()) and not bool(done.all(0).any())
    assert bool((ids[:, 1:] != ids[:, :-1]).eq(done[:, :-1]).all())
    # the plain-callable policy's actions are stored
    assert torch.equal(data["picker", "action"], data["picker", "observation"].argmax(-1))
    assert bool((data["next", "picker", "reward"] >= 0).all())


def test_split_trajs():
    env = SingleAgentFakeEnv(num_envs=2, max_steps=3, p_terminate=0.0)
    data = Collector(env, frames_per_batch=16, split_trajs=True).rollout()  # T = 8
    # each env: lengths 3, 3, 2 -> 6 trajectories padded to 3
    assert data.batch_size == (6, 3)
    mask = data["collector", "mask"]
    assert mask.sum(-1).tolist() == [3, 3, 2, 3, 3, 2]
    assert bool((data["observation"][~mask] == 0).all())
    ids = data[TRAJ]
    assert bool((ids == ids[:, :1])[mask].all())
    assert ids[:, 0].unique().numel() == 6


def test_split_trajectories_function_matches_loop():
    env = MultiAgentFakeEnv(num_envs=3, min_steps=1, max_steps=4, seed=0)
    data = Collector(env, frames_per_batch=3 * 12).rollout()
    out = split_trajectories(data)
    rows = []
    for e in range(3):
        ids = data[TRAJ][e]
        for tid in ids.unique_consecutive():
            rows.append(data[e][ids == tid])
    assert out.batch_size[0] == len(rows)
    for i, row in enumerate(rows):
        n = row.batch_size[0]
        assert torch.equal(out[i, :n]["walker", "observation"], row["walker", "observation"])
        assert bool(out["collector", "mask"][i, :n].all()) and not bool(
            out["collector", "mask"][i, n:].any()
        )


# ---------------------------------------------------------------- options
def test_exploration_modes():
    env = SingleAgentFakeEnv(num_envs=4, seed=0)
    policy = gaussian_policy()
    for mode in ("mode", "deterministic", InteractionType.MODE):
        data = Collector(env, policy, frames_per_batch=8, exploration=mode).rollout()
        assert torch.allclose(data["action"], data["loc"])
    data = Collector(env, policy, frames_per_batch=8, exploration="random").rollout()
    assert not torch.allclose(data["action"], data["loc"])


def test_init_random_frames():
    env = SingleAgentFakeEnv(num_envs=2, seed=0)
    collector = Collector(env, linear_policy(0.0), frames_per_batch=8, init_random_frames=6)
    first, second = collector.rollout(), collector.rollout()
    nonzero = first["action"].abs().sum(-1) > 0  # [2, 4]
    assert nonzero[:, :3].all() and not nonzero[:, 3].any()
    assert bool((second["action"] == 0).all())


def test_no_policy_is_random():
    env = SingleAgentFakeEnv(num_envs=2, discrete=True, seed=0)
    data = Collector(env, frames_per_batch=40).rollout()
    assert set(data["action"].unique().tolist()) == {0, 1, 2}


def test_max_frames_per_traj():
    env = MultiAgentFakeEnv(num_envs=2, min_steps=50, max_steps=60)
    data = Collector(env, frames_per_batch=2 * 7, max_frames_per_traj=3).rollout()
    done = data["next", "done"].squeeze(-1)
    assert done[:, [2, 5]].all() and done.sum() == 4
    assert bool(data["next", "truncated"].squeeze(-1)[:, [2, 5]].all())
    assert bool(data["next", "walker", "truncated"][:, [2, 5]].all())
    assert data[TRAJ][0].tolist() == [0, 0, 0, 2, 2, 2, 4]
    # the truncated sub-env restarted: progress (state[-1]) is 0 after the reset
    assert torch.equal(data["state"][:, 3, -1], torch.zeros(2))


def test_reset_at_each_iter():
    env = TransformedEnv(SingleAgentFakeEnv(num_envs=2, p_terminate=0.0), StepCounter())
    collector = Collector(env, frames_per_batch=6, reset_at_each_iter=True)
    a, b = collector.rollout(), collector.rollout()
    assert a["step_count"][:, 0].eq(0).all() and b["step_count"][:, 0].eq(0).all()
    assert set(a[TRAJ].unique().tolist()).isdisjoint(b[TRAJ].unique().tolist())
    state = collector.state_dict()  # the transforms' state is the env's state
    assert state["frames"] == 12 and isinstance(state["env"], dict)
    collector.load_state_dict(state)


def test_replay_buffer_and_postproc():
    rb = ListBuffer()
    seen = []

    def postproc(td):
        seen.append(td.batch_size)
        return td.reshape(-1)

    collector = Collector(
        SingleAgentFakeEnv(num_envs=2),
        frames_per_batch=8,
        total_frames=16,
        replay_buffer=rb,
        postproc=postproc,
    )
    assert list(collector) == [None, None]
    assert [d.batch_size for d in rb.data] == [torch.Size([8])] * 2
    assert seen == [torch.Size([2, 4])] * 2
    rb2 = ListBuffer()
    assert (
        Collector(SingleAgentFakeEnv(num_envs=2), frames_per_batch=8, replay_buffer=rb2).rollout()
        is None
    )
    assert rb2.data[0].batch_size == (2, 4)


def test_update_policy_weights_and_state_dict():
    env = SingleAgentFakeEnv(num_envs=2)
    policy = linear_policy(0.1)
    collector = Collector(env, policy, frames_per_batch=4)
    assert torch.allclose(collector.rollout()["action"], torch.tensor(0.1))
    new = linear_policy(-0.2)
    collector.update_policy_weights_(new.state_dict())
    assert torch.allclose(collector.rollout()["action"], torch.tensor(-0.2))
    from tensordict import TensorDict

    collector.update_policy_weights_(TensorDict.from_module(linear_policy(0.4)))
    assert torch.allclose(collector.rollout()["action"], torch.tensor(0.4))
    state = collector.state_dict()
    assert state["frames"] == 12
    other = Collector(SingleAgentFakeEnv(num_envs=2), linear_policy(0.0), frames_per_batch=4)
    other.load_state_dict(state)
    assert other.frames == 12
    assert torch.allclose(other.rollout()["action"], torch.tensor(0.4))
    with pytest.raises(TypeError, match="no weights"):
        Collector(env, multi_agent_policy, frames_per_batch=4).update_policy_weights_({})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_policy_on_another_device_is_copied_and_synced():
    env = SingleAgentFakeEnv(num_envs=2)
    policy = linear_policy(0.1)  # on CPU, like the env
    collector = Collector(env, policy, frames_per_batch=4, policy_device="cuda")
    assert collector.policy is not policy
    assert next(collector.policy.parameters()).device.type == "cuda"
    data = collector.rollout()
    assert data.device == torch.device("cpu") and torch.allclose(data["action"], torch.tensor(0.1))
    with torch.no_grad():
        policy.module.bias.fill_(0.7)
    collector.update_policy_weights_()
    assert torch.allclose(collector.rollout()["action"], torch.tensor(0.7))
    stored = Collector(env, policy, frames_per_batch=4, storing_device="cuda").rollout()
    assert stored["action"].device.type == "cuda"


def test_context_manager_and_shutdown():
    with Collector(SingleAgentFakeEnv(num_envs=2), frames_per_batch=4) as collector:
        collector.rollout()
    with pytest.raises(RuntimeError, match="shut down"):
        collector.rollout()


def test_two_env_batch_dims_serial_env():
    from marl.envs import SerialEnv

    env = SerialEnv(2, lambda: SingleAgentFakeEnv(num_envs=3, max_steps=4, p_terminate=0.0))
    collector = Collector(env, frames_per_batch=36, split_trajs=False)  # 6 envs -> T = 6
    data = collector.rollout()
    assert data.batch_size == (2, 3, 6)
    assert data[TRAJ].shape == (2, 3, 6)
    assert data[TRAJ][..., 0].flatten().tolist() == list(range(6))
    assert bool(data["next", "done"][..., 3, 0].all())
    assert bool((data[TRAJ][..., 4] >= 6).all())
    split = split_trajectories(data)
    assert split.batch_size == (12, 4)
    assert split["collector", "mask"].sum().item() == 36


def test_init_random_frames_keeps_room_for_policy_outputs():
    env = SingleAgentFakeEnv(num_envs=2, seed=0)
    collector = Collector(env, gaussian_policy(), frames_per_batch=8, init_random_frames=4)
    first, second = collector.rollout(), collector.rollout()
    assert "loc" in first.keys() and "loc" in second.keys()
    assert bool((first["loc"][:, :2] == 0).all())  # random steps: zeros
    assert bool((first["loc"][:, 2:] != 0).any()) and bool((second["loc"] != 0).any())


def test_changing_shapes_raise_a_clear_error():
    calls = {"n": 0}

    def policy(td):
        calls["n"] += 1
        td.set("action", torch.zeros(2, 2))
        td.set("extra", torch.zeros(2, 1 if calls["n"] < 3 else 3))
        return td

    collector = Collector(SingleAgentFakeEnv(num_envs=2), policy, frames_per_batch=8)
    with pytest.raises(ValueError, match=r"'extra' has shape \(2, 3\), but \(2, 1\)"):
        collector.rollout()

    def forgetful(td):
        td.set("action", torch.zeros(2, 2))
        if calls["n"] < 100:
            td.set("extra", torch.zeros(2, 1))
        calls["n"] += 100
        return td

    collector = Collector(SingleAgentFakeEnv(num_envs=2), forgetful, frames_per_batch=8)
    with pytest.raises(KeyError, match="lacks \\['extra'\\]"):
        collector.rollout()
