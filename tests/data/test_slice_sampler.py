"""SliceSampler: contiguous slices that never cross trajectory boundaries."""

import pytest
import torch
from tensordict import TensorDict

from marl.data import ListStorage, ReplayBuffer, SliceSampler, TensorStorage


def trajectories(lengths, first_id=0, start_step=0):
    ids = torch.cat([torch.full((n,), first_id + i) for i, n in enumerate(lengths)])
    step = torch.cat([torch.arange(n) for n in lengths]) + start_step
    done = torch.cat([torch.arange(n) == n - 1 for n in lengths])
    n = len(ids)
    return TensorDict(
        {
            ("collector", "traj_ids"): ids,
            "step": step,
            ("agents", "observation"): torch.randn(n, 2, 3),
            ("next", "done"): done[:, None],
        },
        [n],
    )


def check_slices(batch, slice_len):
    ids, step = batch["collector", "traj_ids"], batch["step"]
    assert (ids == ids[:, :1]).all(), "a slice crossed a trajectory boundary"
    assert (step[:, 1:] - step[:, :-1] == 1).all(), "a slice is not contiguous"
    assert batch.batch_size[1] == slice_len


def test_slices_stay_inside_trajectories_and_cover_every_start():
    lengths = [5, 2, 9, 1, 4, 7]
    rb = ReplayBuffer(
        TensorStorage(100),
        SliceSampler(slice_len=3),
        generator=torch.Generator().manual_seed(0),
    )
    rb.extend(trajectories(lengths))
    batch = rb.sample(3000)
    assert batch.batch_size == (1000, 3)
    check_slices(batch, 3)
    starts = batch["index"][:, 0]
    valid = sum(max(n - 2, 0) for n in lengths)  # every valid start is drawn ...
    assert len(starts.unique()) == valid
    counts = torch.bincount(starts).float()  # ... about equally often
    assert counts[counts > 0].min() > 1000 / valid * 0.5


def test_num_slices_mode_and_end_key_fallback():
    data = trajectories([6, 6, 6]).exclude(("collector", "traj_ids"))
    rb = ReplayBuffer(TensorStorage(50), SliceSampler(num_slices=4, end_key=("next", "done")))
    rb.extend(data)
    batch = rb.sample(20)
    assert batch.batch_size == (4, 5)
    step = batch["step"]
    assert (step[:, 1:] - step[:, :-1] == 1).all()
    assert (step[:, 0] <= 1).all()  # a 5-slice of a 6-step trajectory starts at 0 or 1


def test_runs_are_cut_where_new_data_meets_old_data():
    rb = ReplayBuffer(TensorStorage(10), SliceSampler(slice_len=2))
    rb.extend(trajectories([10], first_id=0))
    rb.extend(trajectories([4], first_id=0, start_step=100))  # same id, reused on purpose
    # slots: [100..103 | 4..9]; slot 3 (new) and slot 4 (old) must not be joined
    batch = rb.sample(400)
    check_slices(batch, 2)


def test_errors():
    with pytest.raises(ValueError, match="exactly one"):
        SliceSampler()
    with pytest.raises(ValueError, match="exactly one"):
        SliceSampler(slice_len=2, num_slices=2)
    with pytest.raises(ValueError, match="positive int"):
        SliceSampler(slice_len=0)
    rb = ReplayBuffer(TensorStorage(20), SliceSampler(slice_len=4))
    rb.extend(trajectories([3, 2]))
    with pytest.raises(ValueError, match="divisible"):
        rb.sample(6)
    with pytest.raises(RuntimeError, match="at least slice_len=4"):
        rb.sample(8)
    rb = ReplayBuffer(TensorStorage(20), SliceSampler(slice_len=2, traj_key="nope"))
    rb.extend(trajectories([3]))
    with pytest.raises(KeyError, match="neither"):
        rb.sample(2)
    rb = ReplayBuffer(ListStorage(20), SliceSampler(slice_len=2))
    rb.extend(["a", "b"])
    with pytest.raises(TypeError, match="TensorStorage"):
        rb.sample(2)


def test_state_dict_round_trip():
    s = SliceSampler(slice_len=2)
    s.extend(torch.arange(5))
    s2 = SliceSampler(slice_len=2)
    s2.load_state_dict(s.state_dict())
    assert s2.state_dict() == {"cut": 5}
    s.empty()
    assert s.state_dict() == {"cut": -1}
