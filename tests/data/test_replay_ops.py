"""The compiled replay kernels (csrc/replay_ops.cpp): the storage gather and the fused
prioritized sample / priority update. Same results as the plain torch/numpy math, and
a Python exception (never a crash, never a partial write) for bad input."""

import copy
import pickle

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from marl import _C
from marl.data import MemmapStorage, MinTree, PrioritizedSampler, SumTree, TensorStorage


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.int64, torch.uint8, torch.bool, torch.int16]
)
def test_gather_rows_equals_index_select(dtype):
    g = torch.Generator().manual_seed(0)
    sources = [
        (torch.rand(100, *shape, generator=g) * 10).to(dtype)
        for shape in ((), (1,), (3,), (2, 5), (0,), (40,))
    ]
    index = torch.randint(100, (64,), generator=g)
    rows = _C.gather_rows([s.numpy() for s in sources], index.numpy())
    for src, got in zip(sources, rows):
        assert got.dtype == src.numpy().dtype
        assert torch.equal(torch.from_numpy(got), src.index_select(0, index))
    assert [r.shape for r in _C.gather_rows([s.numpy() for s in sources], np.zeros(0, int))] == [
        (0, *s.shape[1:]) for s in sources
    ]


def test_gather_rows_rejects_bad_input():
    src = [torch.zeros(10, 3).numpy(), torch.zeros(12).numpy()]
    for bad in (np.array([0, 10]), np.array([-1]), np.array([11])):
        with pytest.raises(IndexError, match="out of range"):
            _C.gather_rows(src, bad)
    with pytest.raises(TypeError, match="integer"):
        _C.gather_rows(src, np.array([0.5]))
    with pytest.raises(ValueError, match="C-contiguous"):
        _C.gather_rows([torch.zeros(10, 3).t().numpy()], np.array([0]))
    with pytest.raises(ValueError, match="row dimension"):
        _C.gather_rows([np.float32(1.0).reshape(())], np.array([0]))


@pytest.mark.parametrize("storage_cls", [TensorStorage, MemmapStorage])
def test_storage_gather_matches_indexing_with_nested_keys(storage_cls):
    storage = storage_cls(50)
    data = TensorDict(
        {
            "agents": TensorDict(
                {"obs": torch.randn(50, 3, 4), "done": torch.rand(50, 3, 1) > 0.5}, [50, 3]
            ),
            "reward": torch.randn(50, 1),
            "step": torch.arange(50),
        },
        [50],
    )
    storage.set(slice(0, 50), data)
    index = torch.randint(50, (4, 7))
    got = storage.get(index)
    assert got.batch_size == torch.Size([4, 7])
    expected = data[index]
    for key in expected.keys(True, True):
        assert got.get(key).dtype == expected.get(key).dtype
        assert torch.equal(got.get(key), expected.get(key)), key


def test_storage_gather_falls_back_for_dtypes_numpy_lacks():
    storage = TensorStorage(10)
    data = TensorDict({"x": torch.randn(10, 2).bfloat16(), "y": torch.arange(10)}, [10])
    storage.set(slice(0, 10), data)
    index = torch.tensor([3, 1, 3])
    got = storage.get(index)
    assert torch.equal(got["x"], data["x"][index]) and got["x"].dtype == torch.bfloat16
    assert got["y"].tolist() == [3, 1, 3]


def test_a_copied_storage_gathers_its_own_data():
    # The numpy views the gather reads must alias the copy's tensors, not the original's.
    storage = TensorStorage(8)
    storage.set(slice(0, 8), TensorDict({"x": torch.arange(8.0)}, [8]))
    storage.get(torch.tensor([0]))  # makes the views
    for other in (pickle.loads(pickle.dumps(storage)), copy.deepcopy(storage)):
        other.set(slice(0, 8), TensorDict({"x": -torch.arange(8.0)}, [8]))
        assert other.get(torch.tensor([1, 2]))["x"].tolist() == [-1.0, -2.0]
        assert storage.get(torch.tensor([1, 2]))["x"].tolist() == [1.0, 2.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_sample_matches_the_numpy_math(dtype):
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    sampler = PrioritizedSampler(1000, alpha=0.6, beta=0.4, dtype=dtype)
    storage = TensorStorage(1000)
    storage.set(slice(0, 1000), torch.zeros(1000))
    sampler.extend(torch.arange(1000))
    sampler.update_priority(torch.arange(1000), torch.rand(1000) * 5)
    sampler.generator = torch.Generator().manual_seed(3)
    index, info = sampler.sample(storage, 4096)
    # The same draws through the trees' Python API, as the sampler did before fusing.
    u = torch.rand(4096, generator=torch.Generator().manual_seed(3), dtype=dtype).numpy()
    expected = sampler.sum_tree.scan_lower_bound(u * np_dtype(sampler.sum_tree.total()))
    leaf = sampler.sum_tree.get(expected)
    weight = (leaf / np_dtype(sampler.min_tree.total())) ** np_dtype(-0.4)
    assert index.tolist() == expected.tolist()
    assert info["priority_weight"].dtype == torch.float32
    np.testing.assert_allclose(info["priority_weight"].numpy(), weight, rtol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_update_matches_the_numpy_math_and_validates_first(dtype):
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    s, m = SumTree(16, dtype), MinTree(16, dtype)
    p = np.array([0.0, 1.5, 3.0, 0.25])
    top = _C.prioritized_update(s, m, np.array([2, 5, 2, 9]), p, 1e-3, 0.7, 16)
    assert top == 3.0
    value = ((p + 1e-3) ** 0.7).astype(np_dtype)
    assert s.get(np.array([2, 5, 9])).tolist() == value[[2, 1, 3]].tolist()  # last write wins
    assert m.total() == value[3]
    before = (s.get(np.arange(16)), m.get(np.arange(16)))
    for index, prio, err, match in (
        ([0, 16], [1.0, 1.0], IndexError, "out of range"),
        ([0, 8], [1.0, 1.0], IndexError, "out of range"),  # bound 8
        ([0, -1], [1.0, 1.0], IndexError, "out of range"),
        ([0, 1], [1.0, np.nan], ValueError, "finite and >= 0"),
        ([0, 1], [np.inf, 1.0], ValueError, "finite and >= 0"),
        ([0, 1], [1.0, -1e-9], ValueError, "finite and >= 0"),
        ([0, 1], [1.0], ValueError, "one priority per index"),
    ):
        with pytest.raises(err, match=match):
            _C.prioritized_update(s, m, np.array(index), np.array(prio), 0.0, 1.0, 8)
    with pytest.raises(ValueError, match="capacity"):
        _C.prioritized_update(s, m, np.array([0]), np.array([1.0]), 0.0, 1.0, 17)
    assert np.array_equal(before[0], s.get(np.arange(16)))
    assert np.array_equal(before[1], m.get(np.arange(16)))


def test_fused_sample_rejects_bad_uniforms_and_an_empty_tree():
    s, m = SumTree(4), MinTree(4)
    with pytest.raises(ValueError, match="nothing to sample"):
        _C.prioritized_sample(s, m, np.array([0.5], np.float32), 0.4)
    s.update(np.arange(4), 1.0)
    m.update(np.arange(4), 1.0)
    for bad in (1.0, -0.1, np.nan):
        with pytest.raises(ValueError, match=r"\[0, 1\)"):
            _C.prioritized_sample(s, m, np.array([0.5, bad], np.float32), 0.4)
    with pytest.raises(TypeError):
        _C.prioritized_sample(s, MinTree(4, torch.float64), np.array([0.5], np.float32), 0.4)
