"""Every built-in collector keeps the `BatchCollector` contract; broken ones fail `check_collector`."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from tensordict import TensorDict

from marl.collectors import (
    TRAJ_IDS_KEY,
    BatchCollector,
    Collector,
    CollectorContractError,
    MultiAsyncCollector,
    MultiSyncCollector,
    RayCollector,
    check_collector,
)
from marl.collectors.checks import CHECKS
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv

from ._helpers import ListBuffer, linear_policy, multi_agent_module


def _single_env():
    # episodes of at most 3 steps: every batch of 4 steps holds ends and new trajectory ids
    return SingleAgentFakeEnv(num_envs=2, max_steps=3)


def _multi_env():
    return MultiAgentFakeEnv(num_envs=3, min_steps=2, max_steps=4)


BUILT_INS = {
    "collector": lambda: Collector(
        _single_env(), linear_policy(0.1), frames_per_batch=8, total_frames=64
    ),
    "collector-multi-agent": lambda: Collector(
        _multi_env(), multi_agent_module(0.2), frames_per_batch=12, total_frames=72
    ),
    "collector-endless-split": lambda: Collector(
        _single_env(), linear_policy(0.1), frames_per_batch=8, split_trajs=True
    ),
    "sync": lambda: MultiSyncCollector(
        _single_env, linear_policy(0.1), num_workers=2, frames_per_batch=16, total_frames=96
    ),
    "sync-multi-agent": lambda: MultiSyncCollector(
        _multi_env, multi_agent_module(0.2), num_workers=2, frames_per_batch=24, total_frames=144
    ),
    "async": lambda: MultiAsyncCollector(
        _single_env, linear_policy(0.1), num_workers=2, frames_per_batch=8, total_frames=80
    ),
}
# sync collectors are on-policy: the batch after an update must use the new weights
LAG = {"sync": 0, "sync-multi-agent": 0}


@pytest.mark.parametrize("name", sorted(BUILT_INS))
def test_built_in_collectors_keep_the_contract(name):
    make = BUILT_INS[name]
    collector = make()
    assert isinstance(collector, BatchCollector)
    collector.shutdown()
    passed = check_collector(make, max_weight_lag=LAG.get(name))
    expected = [c for c in CHECKS if not (c == "total_frames" and "endless" in name)]
    assert passed == expected


def test_random_policy_skips_only_the_weights_check():
    collector = Collector(MultiAgentFakeEnv(num_envs=2), None, frames_per_batch=8, total_frames=64)
    passed = check_collector(collector)
    assert passed == [c for c in CHECKS if c != "weights"]
    assert collector._closed  # the checker shuts down what it was given


def test_the_callers_policy_is_left_as_it_was():
    policy = linear_policy(0.3)
    before = TensorDict.from_module(policy).data.clone()
    check_collector(Collector(_single_env(), policy, frames_per_batch=8, total_frames=64))
    assert (TensorDict.from_module(policy).data == before).all()


@pytest.mark.ray
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
@pytest.mark.parametrize("sync", [True, False])
def test_ray_collector_keeps_the_contract(local_ray, sync):
    def make():
        return RayCollector(
            lambda: SingleAgentFakeEnv(num_envs=2, max_steps=3),  # a lambda travels by value
            linear_policy(0.1),
            num_collectors=2,
            sync=sync,
            frames_per_batch=16 if sync else 8,
            total_frames=96 if sync else 80,
            # the checker runs a second collector beside the first (its state_dict
            # check): four actors must fit the fixture's 2 CPUs
            remote_config={"num_cpus": 0.5},
        )

    passed = check_collector(make, max_weight_lag=0 if sync else None)
    assert passed == list(CHECKS)


# ------------------------------------------------------------ broken collectors
class FrozenFrames(Collector):
    """Its frame counter never advances."""

    def collect(self):
        buffer = super().collect()
        self._frames -= self.frames_per_batch
        return buffer


class ShortBatches(Collector):
    """Yields one step less than frames_per_batch."""

    def rollout(self):
        return super().rollout()[..., :-1]


class IntFlags(Collector):
    """Stores its terminated flags as integers."""

    def rollout(self):
        batch = super().rollout()
        batch.set(("next", "terminated"), batch.get(("next", "terminated")).int())
        return batch


class ZeroTrajIds(Collector):
    """Writes trajectory id 0 everywhere."""

    def collect(self):
        buffer = super().collect()
        buffer.get(TRAJ_IDS_KEY).zero_()
        return buffer


class ForgetfulState(Collector):
    """Ignores the state it is asked to load."""

    def load_state_dict(self, state):
        pass


class DeafToWeights(Collector):
    """Never updates its policy."""

    def update_policy_weights_(self, weights=None):
        pass


class NeverStops(Collector):
    """Ignores total_frames."""

    def __iter__(self):
        while True:
            yield self.rollout()


class FragileShutdown(Collector):
    """Raises when shut down twice."""

    def shutdown(self):
        if self._closed:
            raise RuntimeError("already shut down")
        super().shutdown()


@pytest.mark.parametrize(
    ("cls", "check"),
    [
        (FrozenFrames, "frames"),
        (ShortBatches, "batch_size"),
        (IntFlags, "layout"),
        (ZeroTrajIds, "traj_ids"),
        (ForgetfulState, "state_dict"),
        (DeafToWeights, "weights"),
        (NeverStops, "total_frames"),
        (FragileShutdown, "shutdown"),
    ],
)
def test_a_broken_collector_fails_the_check_it_breaks(cls, check):
    def make():
        return cls(_single_env(), linear_policy(0.1), frames_per_batch=8, total_frames=64)

    with pytest.raises(CollectorContractError, match=f"fails the '{check}' check") as err:
        check_collector(make)
    assert err.value.check == check
    assert "expected" in str(err.value) and "found" in str(err.value)


def test_a_lagging_sync_collector_fails_when_no_lag_is_allowed():
    class OneBatchLate(Collector):
        """Applies a weight update after the batch that follows it."""

        pending = due = None

        def update_policy_weights_(self, weights=None):
            self.pending = weights

        def collect(self):
            if self.due is not None:
                super().update_policy_weights_(self.due)
            self.due, self.pending = self.pending, None
            return super().collect()

    def make():
        return OneBatchLate(_single_env(), linear_policy(0.1), frames_per_batch=8, total_frames=64)

    with pytest.raises(CollectorContractError, match="did not reach the policy"):
        check_collector(make, max_weight_lag=0)
    assert "weights" in check_collector(make, max_weight_lag=1)


def test_a_collector_missing_members_fails_the_protocol_check():
    class NoShutdown:
        frames_per_batch, total_frames, frames = 8, 64, 0

        def __iter__(self):
            return iter(())

        def update_policy_weights_(self, weights=None): ...
        def state_dict(self): ...
        def load_state_dict(self, state): ...

    assert not isinstance(NoShutdown(), BatchCollector)
    with pytest.raises(CollectorContractError, match=r"'protocol'.*shutdown"):
        check_collector(NoShutdown())


def test_collectors_that_cannot_be_checked_say_why():
    buffer = ListBuffer()
    with pytest.raises(ValueError, match="replay buffer"):
        check_collector(
            Collector(
                _single_env(), None, frames_per_batch=8, total_frames=64, replay_buffer=buffer
            )
        )
    with pytest.raises(ValueError, match="larger total_frames"):
        check_collector(Collector(_single_env(), None, frames_per_batch=8, total_frames=8))


def test_collect_returns_the_reused_buffer():
    collector = Collector(_single_env(), linear_policy(0.1), frames_per_batch=8)
    first = collector.collect()
    kept = first.clone()
    second = collector.collect()
    assert second is first and collector.frames == 16
    assert not torch.equal(kept["observation"], second["observation"])  # written over
    assert collector.rollout() is not first  # rollout yields a copy
