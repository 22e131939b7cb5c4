import pytest
import torch

from marl.specs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    OneHot,
    Unbounded,
    stack_specs,
)

LEAVES = [
    lambda: Unbounded((3, 2)),
    lambda: Bounded(-1.0, 2.0, (3, 2)),
    lambda: Categorical(4, (3,)),
    lambda: OneHot(4, (3, 4)),
    lambda: MultiCategorical([2, 5], (3, 2)),
    lambda: Binary(3, (2, 3)),
]


@pytest.mark.parametrize("make", LEAVES)
def test_leaf_common_api(make):
    spec = make()
    x = spec.rand()
    assert x.shape == spec.shape and x.dtype == spec.dtype and x.device == spec.device
    assert spec.is_in(x)
    assert spec.is_in(spec.project(spec.zero())) or isinstance(spec, OneHot)
    big = spec.expand(5, *spec.shape)
    assert big.shape == (5, *spec.shape)
    assert big.is_in(big.rand())
    assert spec == make() and spec.clone() == spec
    assert spec.to("cpu") == spec
    assert spec != big
    # wrong shape is never in the spec
    assert not spec.is_in(x.unsqueeze(0))


def test_bounded_domain_and_project():
    spec = Bounded(torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 5.0]))
    assert spec.shape == (2,)
    assert not spec.is_in(torch.tensor([2.0, 1.0]))
    assert torch.equal(spec.project(torch.tensor([2.0, -3.0])), torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="low <= high"):
        Bounded(1.0, -1.0, (2,))
    with pytest.raises(ValueError, match="do not broadcast"):
        Bounded(torch.zeros(3), torch.ones(3), (2,))
    ints = Bounded(0, 3, (1000,), dtype=torch.int64).rand()
    assert ints.min() == 0 and ints.max() == 3


def test_categorical_mask_respected_by_rand_and_is_in():
    mask = torch.tensor([[True, False, False, True], [False, False, True, False]])
    spec = Categorical(4, (2,), mask=mask)
    samples = torch.stack([spec.rand() for _ in range(200)])
    assert set(samples[:, 0].tolist()) == {0, 3}
    assert set(samples[:, 1].tolist()) == {2}
    assert not spec.is_in(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="no legal choice"):
        Categorical(3, (1,), mask=torch.zeros(1, 3, dtype=torch.bool)).rand()
    with pytest.raises(ValueError, match="boolean"):
        Categorical(3, mask=torch.ones(3))
    # a mask given at sampling time overrides the stored one
    override = torch.tensor([[False, True, False, False]] * 2)
    assert spec.rand(mask=override).tolist() == [1, 1]


def test_onehot_mask_and_validation():
    spec = OneHot(3, (4, 3), mask=torch.tensor([False, True, True]))
    x = spec.rand()
    assert (x.sum(-1) == 1).all() and (x[:, 0] == 0).all()
    with pytest.raises(ValueError, match="must end with n=3"):
        OneHot(3, (4, 2))
    assert spec.to_categorical(x).shape == (4,)


def test_composite_nested_keys_and_tensordicts():
    spec = Composite(
        {
            "agents": Composite(
                {"observation": Unbounded((2, 3, 5)), "action": Categorical(4, (2, 3))},
                shape=(2, 3),
            ),
            "state": Unbounded((2, 7)),
        },
        shape=(2,),
    )
    assert set(spec.keys()) == {"agents", "state"}
    assert set(spec.keys(include_nested=True, leaves_only=True)) == {
        ("agents", "observation"),
        ("agents", "action"),
        "state",
    }
    assert ("agents", "observation") in spec and ("agents", "nope") not in spec
    assert spec["agents", "action"].n == 4
    td = spec.rand()
    assert td.batch_size == (2,) and td["agents"].batch_size == (2, 3)
    assert spec.is_in(td)
    td["agents", "action"][0, 0] = 9
    assert not spec.is_in(td)
    spec.project(td)
    assert spec.is_in(td)
    big = spec.expand(4, 2)
    assert big["agents", "observation"].shape == (4, 2, 3, 5)
    assert big.zero().batch_size == (4, 2)
    assert spec.clone() == spec and spec != big
    with pytest.raises(KeyError, match="no spec at key"):
        spec["agents", "reward"]
    with pytest.raises(ValueError, match="does not start with"):
        spec["bad"] = Unbounded((3,))
    spec[("new", "leaf")] = Unbounded((2, 1))
    assert spec["new"].shape == (2,)
    del spec["new", "leaf"]
    assert "leaf" not in spec["new"]


def test_stack_specs_builds_agent_dim_and_names_mismatch():
    per_agent = [
        Composite({"obs": Unbounded((4,)), "act": Bounded(-1.0, 1.0, (2,))}) for _ in range(3)
    ]
    stacked = stack_specs(per_agent)
    assert stacked.shape == (3,)
    assert stacked["obs"].shape == (3, 4) and stacked["act"].shape == (3, 2)
    bad = [*per_agent[:2], Composite({"obs": Unbounded((5,)), "act": Bounded(-1.0, 1.0, (2,))})]
    with pytest.raises(ValueError) as err:
        stack_specs(bad, names=["a_0", "a_1", "a_2"])
    msg = str(err.value)
    assert "'obs'" in msg and "(4,)" in msg and "(5,)" in msg and "a_2" in msg
    with pytest.raises(ValueError, match="different keys"):
        stack_specs([Composite({"x": Unbounded(())}), Composite({"y": Unbounded(())})])
    # stacking along an inner dim, e.g. after the env batch dim
    inner = stack_specs([Categorical(3, (8,)), Categorical(3, (8,))], dim=1)
    assert inner.shape == (8, 2)
