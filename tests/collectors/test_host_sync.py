"""The step loop reads nothing on the host: no device sync per step on CUDA.

On CPU a host read costs nothing, so it is detected instead: the aten ops
that make a CUDA device sync are counted with a ``TorchDispatchMode``
(``bool(t)``, ``t.item()``, ``int(t)``: ``_local_scalar_dense``; ``nonzero``,
``masked_select``, ``unique``, and indexing with a boolean mask, whose result
size depends on the values), and ``t.tolist()``, ``t.cpu()`` and ``t.numpy()``,
which dispatch nothing on CPU, are wrapped. (A ``.to("cpu")`` of a CPU tensor
is a no-op and cannot be seen here.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import torch
from tensordict import TensorDict, TensorDictBase
from torch.utils._python_dispatch import TorchDispatchMode

from marl.collectors import Collector
from marl.collectors.utils import assign_traj_ids
from marl.envs import EnvBase, RewardSum, StepCounter, TransformedEnv
from marl.specs import Bounded, Composite, Unbounded

from ._helpers import linear_policy

TRAJ = ("collector", "traj_ids")

_SYNCING_OPS = {"_local_scalar_dense", "nonzero", "masked_select", "_unique2", "unique_dim"}
_SYNCING_OPS |= {"unique_consecutive", "nonzero_static"}
# plain methods only: wrapping a dunder (__getitem__, __index__...) on torch.Tensor
# changes the type's C slots for good (a 0-d tensor becomes a "sequence").
_HOST_METHODS = ("tolist", "cpu", "numpy")


class _CountSyncs(TorchDispatchMode):
    def __init__(self, calls: list[str]) -> None:
        super().__init__()
        self.calls = calls

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in _SYNCING_OPS:
            self.calls.append(name)
        elif name in ("index", "index_put", "index_put_"):
            indices = args[1] if len(args) > 1 else ()
            if any(i is not None and i.dtype == torch.bool for i in indices):
                self.calls.append(f"{name}[bool mask]")
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def count_host_reads() -> Iterator[list[str]]:
    """Count the calls that would make a CUDA device sync (``torch.cuda.set_sync_debug_mode``)."""
    calls: list[str] = []
    missing = object()
    saved = {name: torch.Tensor.__dict__.get(name, missing) for name in _HOST_METHODS}

    def wrap(name):
        orig = getattr(torch.Tensor, name)

        def method(self, *args, **kwargs):
            calls.append(name)
            return orig(self, *args, **kwargs)

        return method

    try:
        for name in _HOST_METHODS:
            setattr(torch.Tensor, name, wrap(name))
        with _CountSyncs(calls):
            yield calls
    finally:
        for name, value in saved.items():
            if value is missing:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, value)


class DeviceResetEnv(EnvBase):
    """Pure torch, resets under any mask with ``torch.where``: ``partial_resets_on_device``.

    Sub-env ``i`` ends every ``2 + i % 3`` steps, so ends are staggered and
    some steps end nothing. Observation ``[t, i, noise, noise]``, where the
    noise is a hash of (episode, t, i), not a random draw: a reset under an
    all-False mask must leave the env exactly as it was.
    """

    partial_resets_on_device = True

    def __init__(self, num_envs: int = 5) -> None:
        super().__init__(batch_size=(num_envs,))
        b = self.batch_size
        self.observation_spec = Composite({"observation": Unbounded((*b, 4))}, shape=b)
        self.action_spec = Composite({"action": Bounded(-1.0, 1.0, (*b, 2))}, shape=b)
        self.reward_spec = Composite({"reward": Unbounded((*b, 1))}, shape=b)
        self._horizon = 2 + torch.arange(num_envs) % 3
        self._t = torch.zeros(b, dtype=torch.long)
        self._episode = torch.zeros(b, dtype=torch.long)

    def _obs(self) -> torch.Tensor:
        index = torch.arange(self.batch_size[0]).float()
        x = self._episode.float() * 37.719 + self._t.float() * 12.9898 + index * 78.233
        noise = torch.stack([torch.sin(x), torch.cos(1.7 * x)], -1)
        return torch.cat([self._t.float()[:, None], index[:, None], noise], -1)

    def _reset(self, td: TensorDictBase | None) -> TensorDictBase:
        mask = None if td is None else td.get("_reset", None)
        where = torch.ones_like(self._t, dtype=torch.bool) if mask is None else mask.squeeze(-1)
        self._t = torch.where(where, torch.zeros_like(self._t), self._t)
        self._episode = self._episode + where.long()
        return TensorDict({"observation": self._obs()}, batch_size=self.batch_size)

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        self._t = self._t + 1
        done = (self._t >= self._horizon)[:, None]
        obs = self._obs()
        reward = -(td.get("action") - obs[:, 2:]).pow(2).sum(-1, keepdim=True)
        return TensorDict(
            {"observation": obs, "reward": reward, "terminated": done},
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed: int | None) -> None:
        pass


class HostResetEnv(DeviceResetEnv):
    """The same env, declared host-bound: the base class skips resets when nothing ended."""

    partial_resets_on_device = False


def _make(cls: type[DeviceResetEnv]) -> EnvBase:
    return TransformedEnv(cls(), RewardSum()).append_transform(StepCounter(7))


@pytest.mark.parametrize("max_frames_per_traj", [None, 3])
def test_no_host_read_per_step(max_frames_per_traj):
    collector = Collector(
        _make(DeviceResetEnv),
        linear_policy(0.2),
        frames_per_batch=5 * 6,
        max_frames_per_traj=max_frames_per_traj,
    )
    collector.rollout()  # the first batch allocates the buffer
    with count_host_reads() as calls:
        data = [collector.rollout() for _ in range(3)]
    assert calls == []
    # the counter does see host reads: the old collector's bool(done.any()) per step
    done = data[0]["next", "done"]
    with count_host_reads() as calls:
        bool(done.any())
        done[done]
        done.float().sum().item()
        done.tolist()
    assert calls == ["_local_scalar_dense", "index[bool mask]", "_local_scalar_dense", "tolist"]


def test_device_resets_give_the_same_data_as_host_resets():
    """Resetting under an all-False mask changes nothing: the same batches, ids included."""
    out = []
    for cls in (DeviceResetEnv, HostResetEnv):
        collector = Collector(
            _make(cls), linear_policy(0.2), frames_per_batch=5 * 6, max_frames_per_traj=3
        )
        out.append(torch.cat([collector.rollout() for _ in range(3)], 1))
    device, host = out
    done = host["next", "done"].squeeze(-1)
    assert bool(done.any()) and not bool(done.all(0).all())  # staggered ends
    assert set(device.keys(True, True)) == set(host.keys(True, True))
    for key in host.keys(True, True):
        assert torch.equal(device[key], host[key]), key
    # StepCounter(7) and max_frames_per_traj=3 truncate; horizons 2-4 terminate
    assert int(host["step_count"].max()) <= 2


def test_partial_reset_keeps_entries_a_reset_does_not_write():
    env = DeviceResetEnv(num_envs=3)
    td = env.reset()
    td.set("hidden", torch.ones(3, 2))
    td.set("_reset", torch.tensor([[True], [False], [False]]))
    out = env.reset(td)
    assert "_reset" not in out.keys()
    assert torch.equal(out["hidden"], torch.ones(3, 2))
    assert torch.equal(out["observation"][1:], td["observation"][1:])
    assert not torch.equal(out["observation"][0], td["observation"][0])


def _reference_ids(done, start, counter, stride, offset):
    """The old per-step loop: ended sub-envs get new ids, in sub-env order."""
    ids, cur, out = counter, start.clone(), []
    for t in range(done.shape[1]):
        out.append(cur.clone())
        for e in range(done.shape[0]):
            if done[e, t]:
                cur[e] = ids * stride + offset
                ids += 1
    return torch.stack(out, 1), cur, ids


@pytest.mark.parametrize("stride,offset", [(1, 0), (3, 2)])
def test_assign_traj_ids_matches_the_per_step_loop(stride, offset):
    gen = torch.Generator().manual_seed(0)
    done = torch.rand(6, 11, generator=gen) < 0.3
    start = torch.arange(6) * stride + offset
    ids, last, counter = assign_traj_ids(done, start, torch.tensor(6), stride, offset)
    ref_ids, ref_last, ref_counter = _reference_ids(done, start, 6, stride, offset)
    assert torch.equal(ids, ref_ids)
    assert torch.equal(last, ref_last)
    assert int(counter) == ref_counter
    assert bool(done.any(1).all())  # every sub-env ended at least once
