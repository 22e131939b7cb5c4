"""The C++ sum/min segment trees against a numpy reference."""

import copy
import pickle
import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from marl import _C
from marl.data import MinTree, SumTree

DTYPES = [torch.float32, torch.float64]
NP = {torch.float32: np.float32, torch.float64: np.float64}
KINDS = [(SumTree, np.sum, 0.0), (MinTree, np.min, np.inf)]


def ref_scan(values: np.ndarray, masses: np.ndarray) -> np.ndarray:
    """First index whose inclusive prefix sum exceeds the mass; else the last positive one."""
    cs = np.cumsum(values.astype(np.float64))
    out = np.searchsorted(cs, masses, side="right")
    last_pos = np.nonzero(values > 0)[0][-1]
    return np.where(out >= len(values), last_pos, out)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("cls", "agg", "identity"), KINDS)
def test_fresh_tree_holds_the_identity(cls, agg, identity, dtype):
    tree = cls(37, dtype)
    assert isinstance(tree, cls)
    assert tree.capacity == len(tree) == 37
    assert tree.dtype == str(dtype).split(".")[1]
    assert tree.total() == identity
    assert tree.get(np.arange(37)).tolist() == [identity] * 37
    assert tree.query(3, 3) == identity
    assert cls.__name__ in repr(tree)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("cls", "agg", "identity"), KINDS)
@pytest.mark.parametrize("capacity", [1, 16, 17, 255, 256, 257, 5000])
def test_random_updates_match_numpy(cls, agg, identity, dtype, capacity):
    rng = np.random.default_rng(capacity)
    tree, ref = cls(capacity, dtype), np.full(capacity, identity)
    for _ in range(20):
        idx = rng.integers(0, capacity, size=rng.integers(1, 64))
        val = rng.integers(0, 100, size=idx.size).astype(NP[dtype])
        tree.update(idx, val)
        for i, v in zip(idx, val):  # sequential reference: last write wins
            ref[i] = v
        assert tree.total() == agg(ref)
        lo, hi = sorted(rng.integers(0, capacity + 1, size=2))
        assert tree.query(int(lo), int(hi)) == (agg(ref[lo:hi]) if hi > lo else identity)
    np.testing.assert_array_equal(tree.get(np.arange(capacity)), ref.astype(NP[dtype]))


# Integer leaves keep float sums exact, so the tree must equal numpy bit for bit.
ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("update"),
            st.lists(st.integers(0, 299), min_size=1, max_size=40),
            st.lists(st.integers(0, 50), min_size=1, max_size=40),
        ),
        st.tuples(st.just("query"), st.integers(0, 300), st.integers(0, 300)),
        st.tuples(st.just("scan"), st.lists(st.integers(0, 4000), min_size=1, max_size=40)),
        st.tuples(st.just("get"), st.lists(st.integers(0, 299), min_size=1, max_size=20)),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(capacity=st.integers(1, 300), dtype=st.sampled_from(DTYPES), program=ops)
def test_fuzz_sum_and_min_trees_against_numpy(capacity, dtype, program):
    s, m = SumTree(capacity, dtype), MinTree(capacity, dtype)
    ref_s, ref_m = np.zeros(capacity), np.full(capacity, np.inf)
    for op in program:
        if op[0] == "update":
            idx = np.array([i % capacity for i in op[1]], dtype=np.int64)
            val = np.resize(np.array(op[2], dtype=NP[dtype]), idx.size)
            s.update(idx, val)
            m.update(idx, val)
            for i, v in zip(idx, val):
                ref_s[i], ref_m[i] = v, v
        elif op[0] == "query":
            lo, hi = sorted((op[1] % (capacity + 1), op[2] % (capacity + 1)))
            assert s.query(lo, hi) == ref_s[lo:hi].sum()
            assert m.query(lo, hi) == (ref_m[lo:hi].min() if hi > lo else np.inf)
        elif op[0] == "get":
            idx = np.array([i % capacity for i in op[1]])
            np.testing.assert_array_equal(s.get(idx), ref_s[idx])
            np.testing.assert_array_equal(m.get(idx), ref_m[idx])
        elif ref_s.sum() > 0:  # scan, with half-integer masses, some past the total
            masses = np.array(op[1], dtype=NP[dtype]) / 2
            got = s.scan_lower_bound(masses)
            np.testing.assert_array_equal(got, ref_scan(ref_s, masses))
            assert (ref_s[got] > 0).all()
        assert s.total() == ref_s.sum()
        assert m.total() == ref_m.min()


@pytest.mark.parametrize("dtype", DTYPES)
def test_scan_with_real_valued_leaves_never_returns_an_empty_slot(dtype):
    rng = np.random.default_rng(0)
    n = 10_000
    values = rng.random(n).astype(NP[dtype])
    values[rng.random(n) < 0.5] = 0  # many empty slots, which must never be chosen
    tree = SumTree(n, dtype)
    tree.update(np.arange(n), values)
    masses = (rng.random(5000) * tree.total()).astype(NP[dtype])
    masses[:3] = [0, tree.total(), tree.total() * 2]
    got = tree.scan_lower_bound(masses)
    assert (values[got] > 0).all()
    # Away from rounding boundaries the answer is exactly the float64 reference.
    ref = ref_scan(values, masses.astype(np.float64))
    assert (got == ref).mean() > 0.99
    assert got[2] == np.nonzero(values)[0][-1]
    assert tree.scan_lower_bound(0.0) == np.nonzero(values)[0][0]


def test_large_batches_take_the_threaded_path_and_stay_exact():
    rng = np.random.default_rng(1)
    n = 1 << 18
    tree, ref = SumTree(n, torch.float64), np.zeros(n)
    idx = rng.integers(0, n, size=200_000)  # > the parallel grain, with duplicates
    val = rng.integers(1, 8, size=idx.size).astype(np.float64)
    tree.update(idx, val)
    for i, v in zip(idx.tolist(), val.tolist()):
        ref[i] = v
    np.testing.assert_array_equal(tree.get(np.arange(n)), ref)
    assert tree.total() == ref.sum()
    masses = rng.integers(0, int(ref.sum()) * 2, size=100_000) / 2.0
    np.testing.assert_array_equal(tree.scan_lower_bound(masses), ref_scan(ref, masses))
    assert tree.query(100, n - 100) == ref[100 : n - 100].sum()


def test_capacity_2_pow_26():
    n = 1 << 26
    tree = SumTree(n)
    tree.update(np.array([0, n - 1]), np.array([1.0, 3.0], dtype=np.float32))
    assert tree.total() == 4.0
    assert tree.scan_lower_bound(np.array([0.5, 1.5, 3.9], dtype=np.float32)).tolist() == [
        0,
        n - 1,
        n - 1,
    ]
    assert tree.query(1, n) == 3.0


def test_duplicate_indices_last_write_wins():
    tree = SumTree(8)
    tree.update(np.array([3, 3, 5, 3]), np.array([1, 2, 4, 7], dtype=np.float32))
    assert tree.get(3) == 7 and tree.get(5) == 4 and tree.total() == 11


def test_inputs_without_copy_and_with_conversion():
    tree = SumTree(10)
    tree.update(torch.arange(10), torch.ones(10))  # torch tensors
    tree.update(np.arange(10, dtype=np.int32)[::2], np.full(5, 2.0))  # strided int32, float64
    assert tree.get(np.arange(10)).tolist() == [2.0, 1.0] * 5
    tree.update(np.array([1]), 5.0)  # one broadcast value
    tree.update(9, 3.0)  # scalars
    tree[0] = 4.0
    assert tree[1] == 5.0 and tree[9] == 3.0 and tree.get(0) == 4.0
    strided = torch.arange(10).reshape(2, 5)[:, ::2]  # 2-D, strided: converted here
    assert tree.get(strided).tolist() == [[4.0, 2.0, 2.0], [1.0, 1.0, 3.0]]
    assert tree.get(np.arange(10)[::-3]).tolist() == [3.0, 2.0, 1.0, 4.0]  # negative strides
    assert tree.get(np.array([1], dtype=np.uint8)).tolist() == [5.0]
    got = tree.get(np.array([[0, 1], [2, 3]]))  # any shape in, same shape out
    assert got.shape == (2, 2) and got.dtype == np.float32
    masses = torch.tensor([[0.5, 4.5]], dtype=torch.float32)
    assert tree.scan_lower_bound(masses).tolist() == [[0, 1]]
    assert tree.query(np.array([0, 2]), np.array([2, 10])).tolist() == [9.0, 14.0]
    empty = np.array([], dtype=np.int64)
    tree.update(empty, np.array([], dtype=np.float32))
    assert tree.get(empty).shape == (0,)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cls", [SumTree, MinTree])
def test_bad_inputs_raise_and_change_nothing(cls, dtype):
    tree = cls(10, dtype)
    tree.update(np.arange(10), np.arange(1, 11, dtype=NP[dtype]))
    before = tree.state_dict()["values"].copy()
    good = np.arange(3)
    for bad_idx in ([0, 10, 1], [-1, 0, 2], [0, 1, 1 << 40]):
        with pytest.raises(IndexError, match="out of range"):
            tree.update(np.array(bad_idx), np.ones(3, dtype=NP[dtype]))
        with pytest.raises(IndexError):
            tree.get(np.array(bad_idx))
    for bad in (np.nan, np.inf, -np.inf, -1.0):
        vals = np.array([1.0, bad, 1.0], dtype=NP[dtype])
        with pytest.raises(ValueError, match="finite and >= 0"):
            tree.update(good, vals)
        with pytest.raises(ValueError):
            tree.update(0, float(bad))
        with pytest.raises(ValueError):
            tree[0] = float(bad)
    with pytest.raises(ValueError, match="as many values as indices"):
        tree.update(good, np.ones(2, dtype=NP[dtype]))
    with pytest.raises(IndexError):
        tree[10] = 1.0
    with pytest.raises(IndexError):
        tree.get(-1)
    for lo, hi in ((-1, 3), (3, 2), (0, 11)):
        with pytest.raises(IndexError, match="lo <= hi"):
            tree.query(lo, hi)
    with pytest.raises(TypeError):
        tree.update(np.array(["a"]), np.ones(1))
    # float or bool indices are rejected, never silently truncated
    for bad_idx in (np.array([0.5]), np.array([True]), torch.tensor([1.0])):
        with pytest.raises(TypeError, match="indices must be an integer array"):
            tree.update(bad_idx, np.ones(1, dtype=NP[dtype]))
        with pytest.raises(TypeError, match="indices must be an integer array"):
            tree.get(bad_idx)
    with pytest.raises(TypeError, match="values must be an integer or float32/float64"):
        tree.update(good, torch.ones(3, dtype=torch.float16))
    with pytest.raises(ValueError, match="finite"):  # overflows float32 to inf
        tree.update(good, np.array([1.0, 1e300, 1.0]) if dtype == torch.float32 else np.inf)
    np.testing.assert_array_equal(tree.state_dict()["values"], before)
    with pytest.raises(ValueError, match="capacity"):
        cls(0, dtype)
    with pytest.raises(ValueError, match="capacity"):
        cls((1 << 40) + 1, dtype)
    with pytest.raises(TypeError, match="float32 and float64"):
        cls(4, torch.int64)


def test_scan_rejects_bad_masses_and_an_empty_tree():
    tree = SumTree(4)
    with pytest.raises(ValueError, match="total is 0"):
        tree.scan_lower_bound(np.array([0.0], dtype=np.float32))
    tree.update(0, 1.0)
    for bad in (np.nan, -0.5, np.inf):
        with pytest.raises(ValueError, match="masses"):
            tree.scan_lower_bound(np.array([0.1, bad], dtype=np.float32))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cls", [SumTree, MinTree])
def test_pickle_deepcopy_and_state_dict_round_trip_exactly(cls, dtype):
    rng = np.random.default_rng(2)
    tree = cls(1000, dtype)
    idx = rng.integers(0, 1000, size=700)
    tree.update(idx, rng.random(700).astype(NP[dtype]))
    masses = rng.random(100) * (tree.total() if cls is SumTree else 1.0)
    state = tree.state_dict()
    for other in (pickle.loads(pickle.dumps(tree)), copy.deepcopy(tree), cls(1000, dtype)):
        if other.total() != tree.total():
            other.load_state_dict(state)
        np.testing.assert_array_equal(other.state_dict()["values"], state["values"])
        assert other.total() == tree.total()  # internal levels rebuilt bit-exact
        assert other.query(17, 801) == tree.query(17, 801)
        if cls is SumTree:
            m = masses.astype(NP[dtype])
            np.testing.assert_array_equal(other.scan_lower_bound(m), tree.scan_lower_bound(m))
        other.update(0, 0.25)  # independent copies
        assert tree.get(0) != 0.25 or other is tree


def test_load_state_dict_validates():
    tree = SumTree(4)
    values = np.ones(4, dtype=np.float32)
    with pytest.raises(ValueError, match="expected capacity=4"):
        tree.load_state_dict({"capacity": 5, "dtype": "float32", "values": values})
    with pytest.raises(ValueError, match="expected capacity=4, dtype=float32"):
        tree.load_state_dict({"capacity": 4, "dtype": "float64", "values": values})
    with pytest.raises(ValueError, match="missing key"):
        tree.load_state_dict({"capacity": 4})
    with pytest.raises(TypeError, match="CPU array"):
        tree.load_state_dict({"capacity": 4, "dtype": "float32", "values": [1, 2, 3, 4]})
    with pytest.raises(ValueError, match="capacity elements"):
        tree.load_state_dict({"capacity": 4, "dtype": "float32", "values": values[:3]})
    values[2] = np.nan
    with pytest.raises(ValueError, match="finite"):
        tree.load_state_dict({"capacity": 4, "dtype": "float32", "values": values})
    assert tree.total() == 0
    with pytest.raises(ValueError, match="corrupt"):
        _C.SumTreeF32.__new__(_C.SumTreeF32).__setstate__((4, b"abc"))


def test_concurrent_python_threads_do_not_crash():
    tree = SumTree(1 << 16)
    tree.update(np.arange(1 << 16), np.ones(1 << 16, dtype=np.float32))
    errors = []

    def writer():
        rng = np.random.default_rng(3)
        for _ in range(200):
            tree.update(rng.integers(0, 1 << 16, 512), rng.random(512).astype(np.float32) + 0.1)

    def reader():
        rng = np.random.default_rng(4)
        for _ in range(200):
            m = (rng.random(512) * tree.total() * 0.99).astype(np.float32)
            got = tree.scan_lower_bound(m)
            if not ((got >= 0) & (got < 1 << 16)).all():
                errors.append(got)

    threads = [threading.Thread(target=f) for f in (writer, reader, writer, reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
