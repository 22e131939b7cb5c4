"""PrioritizedSampler: frequencies, importance weights, priorities, bad inputs."""

import copy
import pickle

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from marl.data import PrioritizedSampler, ReplayBuffer, TensorStorage

# Chi-square critical value, df=7, p=0.001 (scipy.stats.chi2.ppf(0.999, 7)).
CHI2_CRIT_DF7 = 24.322


def make_buffer(n=8, capacity=None, alpha=0.7, beta=0.4, eps=1e-8, seed=0, **kw):
    capacity = capacity or n
    sampler = PrioritizedSampler(capacity, alpha=alpha, beta=beta, eps=eps, **kw)
    rb = ReplayBuffer(
        TensorStorage(n), sampler=sampler, generator=torch.Generator().manual_seed(seed)
    )
    return rb, sampler


def items(n, start=0, **extra):
    data = {"obs": torch.arange(start, start + n, dtype=torch.float32)[:, None].expand(n, 3)}
    data.update(extra)
    return TensorDict(data, [n])


def test_sampling_frequencies_match_priorities_to_the_alpha():
    rb, _ = make_buffer(alpha=0.7)
    rb.extend(items(8))
    priority = torch.tensor([0.5, 1.0, 2.0, 3.0, 0.1, 4.0, 1.5, 0.8])
    rb.update_priority(torch.arange(8), priority)
    draws = 40_000
    index = torch.cat([rb.sample(1000)["index"] for _ in range(draws // 1000)])
    observed = torch.bincount(index, minlength=8).double().numpy()
    p = (priority.double().numpy() + 1e-8) ** 0.7
    expected = draws * p / p.sum()
    chi2 = ((observed - expected) ** 2 / expected).sum()
    assert chi2 < CHI2_CRIT_DF7, (observed, expected)
    # and the test has power: uniform expectations are rejected
    uniform = np.full(8, draws / 8)
    assert ((observed - uniform) ** 2 / uniform).sum() > 10 * CHI2_CRIT_DF7


def test_importance_weights_match_a_hand_computation():
    alpha, beta, eps = 0.6, 0.4, 0.01
    rb, _ = make_buffer(n=5, alpha=alpha, beta=beta, eps=eps)
    rb.extend(items(5))
    priority = np.array([0.2, 1.0, 3.0, 0.05, 2.0])
    rb.update_priority(torch.arange(5), torch.tensor(priority))
    batch = rb.sample(500)
    # w_i = (N P(i))^-beta / max_j (N P(j))^-beta, computed in float64 by hand
    pa = (priority + eps) ** alpha
    prob = pa / pa.sum()
    w = (5 * prob) ** -beta
    w /= w.max()
    idx = batch["index"].numpy()
    np.testing.assert_allclose(batch["priority_weight"].numpy(), w[idx], rtol=1e-5)
    assert batch["priority_weight"].dtype == torch.float32
    assert batch["priority_weight"].shape == (500,)
    # annealing beta changes the weights accordingly
    rb.sampler.beta = 1.0
    batch = rb.sample(200)
    w1 = (5 * prob) ** -1.0
    np.testing.assert_allclose(
        batch["priority_weight"].numpy(), (w1 / w1.max())[batch["index"].numpy()], rtol=1e-5
    )
    with pytest.raises(ValueError, match="beta"):
        rb.sampler.beta = -0.1


def test_new_items_get_the_max_priority_seen_so_far():
    rb, s = make_buffer(n=6, alpha=1.0, eps=0.0)
    rb.extend(items(2))
    assert s.sum_tree.get(np.arange(2)).tolist() == [1.0, 1.0]  # initial max_priority
    rb.update_priority(torch.tensor([0, 1]), torch.tensor([7.0, 0.5]))
    rb.extend(items(2))
    assert s.sum_tree.get(np.arange(4)).tolist() == [7.0, 0.5, 7.0, 7.0]
    assert s.max_priority == 7.0
    rb.add(items(1)[0])
    assert s.sum_tree.get(4) == 7.0
    # priorities carried by the data are used instead
    rb, s = make_buffer(n=6, alpha=1.0, eps=0.0)
    rb.extend(items(2, td_error=torch.tensor([[2.5], [0.5]])))
    rb.add(items(1, td_error=torch.tensor([[4.0]]))[0])
    assert s.sum_tree.get(np.arange(3)).tolist() == [2.5, 0.5, 4.0]
    assert s.max_priority == 4.0


def test_overwriting_a_slot_of_a_full_buffer_resets_its_priority():
    rb, s = make_buffer(n=4, alpha=0.5, eps=0.0)
    rb.extend(items(4))
    rb.update_priority(torch.arange(4), torch.tensor([1e-4, 5.0, 1.0, 1.0]))
    assert s.min_tree.total() == pytest.approx(1e-2)  # slot 0 is the minimum
    index = rb.extend(items(1, start=100))  # the round-robin cursor is back at slot 0
    assert index.tolist() == [0]
    assert rb.storage.get(0)["obs"][0].item() == 100
    assert s.sum_tree.get(0) == pytest.approx(5.0**0.5)  # max priority, not the stale 1e-4
    assert s.min_tree.total() == pytest.approx(1.0)  # the stale minimum is gone
    np.testing.assert_allclose(s.sum_tree.total(), 2 * 5**0.5 + 2, rtol=1e-6)
    # weights now normalise against the new minimum
    batch = rb.sample(100)
    assert batch["priority_weight"].max().item() == pytest.approx(1.0)
    assert batch["priority_weight"].min().item() == pytest.approx((5**0.5) ** -0.4, rel=1e-5)


@pytest.mark.parametrize(("reduction", "expected"), [("max", [3.0, 4.0]), ("mean", [2.0, 2.5])])
def test_per_agent_priorities_are_reduced(reduction, expected):
    rb, s = make_buffer(n=2, alpha=1.0, eps=0.0, reduction=reduction)
    rb.extend(items(2))
    per_agent = torch.tensor([[[1.0], [3.0], [2.0]], [[4.0], [1.0], [2.5]]])  # [N, n_agents, 1]
    rb.update_priority(torch.tensor([0, 1]), per_agent)
    assert s.sum_tree.get(np.arange(2)).tolist() == expected
    batch = rb.sample(4)
    batch["td_error"] = torch.ones(4, 3, 1)
    rb.update_tensordict_priority(batch)
    assert set(s.sum_tree.get(batch["index"].numpy()).tolist()) == {1.0}


def test_scalar_priority_is_broadcast():
    rb, s = make_buffer(n=3, alpha=1.0, eps=0.0)
    rb.extend(items(3))
    rb.update_priority(torch.arange(3), 2.0)
    assert s.sum_tree.get(np.arange(3)).tolist() == [2.0] * 3
    rb.update_priority(1, torch.tensor(4.0))
    assert s.sum_tree.get(1) == 4.0


def test_bad_priorities_raise_and_change_nothing():
    rb, s = make_buffer(n=4, alpha=1.0, eps=0.0)
    rb.extend(items(3))
    rb.update_priority(torch.arange(3), torch.tensor([1.0, 2.0, 3.0]))
    before = s.state_dict()
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="finite and >= 0"):
            rb.update_priority(torch.arange(3), torch.tensor([1.0, bad, 1.0]))
    with pytest.raises(ValueError, match=r"one row per index"):
        rb.update_priority(torch.arange(3), torch.ones(2))
    with pytest.raises(IndexError, match="stored items"):
        rb.update_priority(torch.tensor([0, 3]), torch.ones(2))  # slot 3 holds nothing yet
    with pytest.raises(IndexError, match="stored items"):
        rb.update_priority(torch.tensor([-1]), torch.ones(1))
    with pytest.raises(IndexError, match="out of range"):
        s.update_priority(torch.tensor([4]), torch.ones(1))  # past the capacity
    with pytest.raises(KeyError, match="td_error"):
        rb.update_tensordict_priority(TensorDict({"index": torch.tensor([0])}, [1]))
    after = s.state_dict()
    assert torch.equal(before["sum"], after["sum"]) and torch.equal(before["min"], after["min"])
    assert after["max_priority"] == before["max_priority"] == 3.0


def test_constructor_and_sampling_errors():
    for kwargs, match in (
        ({"alpha": -1.0}, "alpha"),
        ({"beta": -1.0}, "beta"),
        ({"eps": -1.0}, "eps"),
        ({"reduction": "sum"}, "reduction"),
        ({"max_priority": 0.0}, "max_priority"),
        ({"dtype": torch.int32}, "float32 and float64"),
    ):
        args = {"alpha": 0.6, "beta": 0.4, **kwargs}
        with pytest.raises((ValueError, TypeError), match=match):
            PrioritizedSampler(4, **args)
    with pytest.raises(ValueError, match="capacity"):
        PrioritizedSampler(0, alpha=0.6, beta=0.4)
    rb, _ = make_buffer(n=8, capacity=4)
    with pytest.raises(RuntimeError, match="empty"):
        rb.sample(2)
    rb.extend(items(2))
    with pytest.raises(ValueError, match="smaller than the storage"):
        rb.sample(2)
    rb, _ = make_buffer(n=2, alpha=1.0, eps=0.0)
    rb.extend(items(2))
    rb.update_priority(torch.arange(2), 0.0)
    with pytest.raises(RuntimeError, match="priority 0"):
        rb.sample(2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_state_dict_round_trip_gives_identical_later_samples(dtype, tmp_path):
    rb, s = make_buffer(n=50, capacity=64, dtype=dtype)
    rb.extend(items(50))
    rb.update_priority(torch.arange(50), torch.rand(50, generator=torch.Generator().manual_seed(1)))
    for restore in ("state_dict", "dumps"):
        rb2, s2 = make_buffer(n=50, capacity=64, dtype=dtype)
        if restore == "state_dict":
            rb2.load_state_dict(rb.state_dict())
        else:
            rb.dumps(tmp_path / "rb")
            rb2.loads(tmp_path / "rb")
        assert s2.max_priority == s.max_priority
        for g in (rb.sampler.generator, rb2.sampler.generator):
            g.manual_seed(123)
        a, b = rb.sample(32), rb2.sample(32)
        assert (a == b).all()
        rb.update_priority(a["index"], torch.ones(32))
        rb2.update_priority(b["index"], torch.ones(32))
        assert (rb.sample(32) == rb2.sample(32)).all()


def test_empty_resets_priorities():
    rb, s = make_buffer(n=4, alpha=1.0, eps=0.0)
    rb.extend(items(4))
    rb.update_priority(torch.arange(4), 9.0)
    rb.empty()
    assert len(rb) == 0 and s.sum_tree.total() == 0 and s.max_priority == 1.0
    with pytest.raises(RuntimeError, match="empty"):
        rb.sample(1)
    rb.extend(items(1))
    assert s.sum_tree.total() == 1.0


def test_a_pickled_buffer_samples_identically():
    rb, _ = make_buffer(n=20, alpha=0.8)
    rb.extend(items(20))
    rb.update_priority(torch.arange(20), torch.linspace(0.1, 2.0, 20))
    for other in (pickle.loads(pickle.dumps(rb)), copy.deepcopy(rb)):
        rb.sampler.generator.manual_seed(7)
        other.sampler.generator.manual_seed(7)
        assert (rb.sample(16) == other.sample(16)).all()
        other.update_priority(torch.arange(20), 1.0)  # independent trees
        assert rb.sampler.sum_tree.get(0) != other.sampler.sum_tree.get(0)


def test_nan_priorities_in_the_data_leave_no_trace():
    rb, s = make_buffer(n=4, alpha=1.0, eps=0.0)
    rb.extend(items(2, td_error=torch.tensor([[1.0], [2.0]])))
    bad = items(2, start=10, td_error=torch.tensor([[1.0], [float("nan")]]))
    with pytest.raises(ValueError, match="finite"):
        rb.extend(bad)  # validated before the write: nothing is stored
    with pytest.raises(ValueError, match="finite"):
        rb.add(bad[1])
    assert len(rb) == 2 and rb.extend(items(1, td_error=torch.ones(1, 1))).tolist() == [2]
    assert s.sum_tree.get(np.arange(4)).tolist() == [1.0, 2.0, 1.0, 0.0]


def test_zero_priorities_do_not_set_the_max_weight():
    rb, _ = make_buffer(n=3, alpha=1.0, beta=1.0, eps=0.0)
    rb.extend(items(3))
    rb.update_priority(torch.arange(3), torch.tensor([0.0, 2.0, 4.0]))
    batch = rb.sample(200)
    assert set(batch["index"].tolist()) == {1, 2}  # slot 0 is never drawn
    expected = {1: 1.0, 2: 0.5}  # normalized by the smallest drawable priority, 2
    for i, w in zip(batch["index"].tolist(), batch["priority_weight"].tolist()):
        assert w == pytest.approx(expected[i])
