import base64
import pickle

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


def test_masked_rand_draws_what_torch_multinomial_draws():
    """Masked sampling keeps torch.multinomial's draws: seeded runs are unchanged."""
    mask = torch.rand(5, 3, 7, generator=torch.Generator().manual_seed(0)) > 0.5
    mask[..., 2] = True
    spec = Categorical(7, (5, 3), mask=mask)
    ours, theirs = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    for _ in range(50):
        expected = torch.multinomial(mask.reshape(-1, 7).float(), 1, generator=theirs)
        assert torch.equal(spec.rand(generator=ours), expected.reshape(5, 3))
    # the uniform law over legal actions: each of 4 legal actions near 1/4
    one = Categorical(6, (4000,), mask=torch.tensor([True, False, True, True, False, True]))
    counts = torch.bincount(one.rand(generator=ours), minlength=6)
    assert counts[[1, 4]].tolist() == [0, 0]
    assert ((counts[[0, 2, 3, 5]] - 1000).abs() < 150).all()


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


def _every_kind() -> Composite:
    return Composite(
        {
            ("agents", "obs"): Bounded(-1.0, 1.0, (2, 3)),
            ("agents", "action"): Categorical(
                3, shape=(2,), mask=torch.tensor([True, False, True])
            ),
            "oh": OneHot(2),
            "mc": MultiCategorical([2, 3]),
            "b": Binary(2),
            "u": Unbounded(()),
        }
    )


def test_specs_pickle_round_trip():
    spec = _every_kind()
    restored = pickle.loads(pickle.dumps(spec))
    assert restored == spec and restored is not spec
    assert torch.equal(restored["agents", "action"].mask, torch.tensor([[True, False, True]] * 2))


# pickle.dumps(_every_kind(), protocol=2) made by the one-module marl/specs.py (before it
# became a package): its classes are named marl.specs.<Name>, which must still resolve.
_OLD_PICKLE = (
    "gAJjbWFybC5zcGVjcwpDb21wb3NpdGUKcQApgXEBfXECKFgFAAAAc2hhcGVxA2N0b3JjaApTaXplCnEEKYVxBVJx"
    "BlgGAAAAZGV2aWNlcQdOWAYAAABfc3BlY3NxCH1xCShYBgAAAGFnZW50c3EKaAApgXELfXEMKGgDaAQphXENUnEO"
    "aAdOaAh9cQ8oWAMAAABvYnNxEGNtYXJsLnNwZWNzCkJvdW5kZWQKcREpgXESfXETKGgDaARLAksDhnEUhXEVUnEW"
    "WAUAAABkdHlwZXEXY3RvcmNoCmZsb2F0MzIKcRhoB2N0b3JjaApkZXZpY2UKcRlYAwAAAGNwdXEahXEbUnEcWAMA"
    "AABsb3dxHWN0b3JjaC5fdXRpbHMKX3JlYnVpbGRfdGVuc29yX3YyCnEeKGN0b3JjaC5zdG9yYWdlCl9sb2FkX2Zy"
    "b21fYnl0ZXMKcR9jX2NvZGVjcwplbmNvZGUKcSBYLAEAAMKAAsKKCmzDvMKcRsO5IGrCqFAZLsKAAk3DqQMuwoAC"
    "fXEAKFgQAAAAcHJvdG9jb2xfdmVyc2lvbnEBTcOpA1gNAAAAbGl0dGxlX2VuZGlhbnECwohYCgAAAHR5cGVfc2l6"
    "ZXNxA31xBChYBQAAAHNob3J0cQVLAlgDAAAAaW50cQZLBFgEAAAAbG9uZ3EHSwR1dS7CgAIoWAcAAABzdG9yYWdl"
    "cQBjdG9yY2gKRmxvYXRTdG9yYWdlCnEBWA4AAAA5NDkwMjUzNTM0NTc2MHECWAMAAABjcHVxA0sGTnRxBFEuwoAC"
    "XXEAWA4AAAA5NDkwMjUzNTM0NTc2MHEBYS4GAAAAAAAAAAAAwoDCvwAAwoDCvwAAwoDCvwAAwoDCvwAAwoDCvwAA"
    "woDCv3EhWAYAAABsYXRpbjFxIoZxI1JxJIVxJVJxJksASwJLA4ZxJ0sDSwGGcSiJY2NvbGxlY3Rpb25zCk9yZGVy"
    "ZWREaWN0CnEpKVJxKnRxK1JxLFgEAAAAaGlnaHEtaB4oaB9oIFgmAQAAwoACwooKbMO8wpxGw7kgasKoUBkuwoAC"
    "TcOpAy7CgAJ9cQAoWBAAAABwcm90b2NvbF92ZXJzaW9ucQFNw6kDWA0AAABsaXR0bGVfZW5kaWFucQLCiFgKAAAA"
    "dHlwZV9zaXplc3EDfXEEKFgFAAAAc2hvcnRxBUsCWAMAAABpbnRxBksEWAQAAABsb25ncQdLBHV1LsKAAihYBwAA"
    "AHN0b3JhZ2VxAGN0b3JjaApGbG9hdFN0b3JhZ2UKcQFYDgAAADk0OTAyNTEwMjA4MTYwcQJYAwAAAGNwdXEDSwZO"
    "dHEEUS7CgAJdcQBYDgAAADk0OTAyNTEwMjA4MTYwcQFhLgYAAAAAAAAAAADCgD8AAMKAPwAAwoA/AADCgD8AAMKA"
    "PwAAwoA/cS5oIoZxL1JxMIVxMVJxMksASwJLA4ZxM0sDSwGGcTSJaCkpUnE1dHE2UnE3dWJYBgAAAGFjdGlvbnE4"
    "Y21hcmwuc3BlY3MKQ2F0ZWdvcmljYWwKcTkpgXE6fXE7KGgDaARLAoVxPIVxPVJxPmgXY3RvcmNoCmludDY0CnE/"
    "aAdoGVgDAAAAY3B1cUCFcUFScUJYAQAAAG5xQ0sDWAQAAABtYXNrcURoHihoH2ggWA0BAADCgALCigpsw7zCnEbD"
    "uSBqwqhQGS7CgAJNw6kDLsKAAn1xAChYEAAAAHByb3RvY29sX3ZlcnNpb25xAU3DqQNYDQAAAGxpdHRsZV9lbmRp"
    "YW5xAsKIWAoAAAB0eXBlX3NpemVzcQN9cQQoWAUAAABzaG9ydHEFSwJYAwAAAGludHEGSwRYBAAAAGxvbmdxB0sE"
    "dXUuwoACKFgHAAAAc3RvcmFnZXEAY3RvcmNoCkJvb2xTdG9yYWdlCnEBWA4AAAA5NDkwMjUzNTI2NDE3NnECWAMA"
    "AABjcHVxA0sGTnRxBFEuwoACXXEAWA4AAAA5NDkwMjUzNTI2NDE3NnEBYS4GAAAAAAAAAAEAAQEAAXFFaCKGcUZS"
    "cUeFcUhScUlLAEsCSwOGcUpLA0sBhnFLiWgpKVJxTHRxTVJxTnVidXViWAIAAABvaHFPY21hcmwuc3BlY3MKT25l"
    "SG90CnFQKYFxUX1xUihoA2gESwKFcVOFcVRScVVoF2g/aAdoGVgDAAAAY3B1cVaFcVdScVhoQ0sCaEROdWJYAgAA"
    "AG1jcVljbWFybC5zcGVjcwpNdWx0aUNhdGVnb3JpY2FsCnFaKYFxW31xXChoA2gESwKFcV2FcV5ScV9oF2g/aAdo"
    "GVgDAAAAY3B1cWCFcWFScWJYBAAAAG52ZWNxY2geKGgfaCBYFwEAAMKAAsKKCmzDvMKcRsO5IGrCqFAZLsKAAk3D"
    "qQMuwoACfXEAKFgQAAAAcHJvdG9jb2xfdmVyc2lvbnEBTcOpA1gNAAAAbGl0dGxlX2VuZGlhbnECwohYCgAAAHR5"
    "cGVfc2l6ZXNxA31xBChYBQAAAHNob3J0cQVLAlgDAAAAaW50cQZLBFgEAAAAbG9uZ3EHSwR1dS7CgAIoWAcAAABz"
    "dG9yYWdlcQBjdG9yY2gKTG9uZ1N0b3JhZ2UKcQFYDgAAADk0OTAyNDk0MDgzNDg4cQJYAwAAAGNwdXEDSwJOdHEE"
    "US7CgAJdcQBYDgAAADk0OTAyNDk0MDgzNDg4cQFhLgIAAAAAAAAAAgAAAAAAAAADAAAAAAAAAHFkaCKGcWVScWaF"
    "cWdScWhLAEsChXFpSwGFcWqJaCkpUnFrdHFsUnFtdWJYAQAAAGJxbmNtYXJsLnNwZWNzCkJpbmFyeQpxbymBcXB9"
    "cXEoaANoBEsChXFyhXFzUnF0aBdjdG9yY2gKaW50OApxdWgHaBlYAwAAAGNwdXF2hXF3UnF4aENLAnViWAEAAAB1"
    "cXljbWFybC5zcGVjcwpVbmJvdW5kZWQKcXopgXF7fXF8KGgDaAQphXF9UnF+aBdoGGgHaBlYAwAAAGNwdXF/hXGA"
    "UnGBdWJ1dWIu"
)


def test_a_spec_pickled_by_the_one_module_marl_specs_still_loads():
    data = base64.b64decode(_OLD_PICKLE)
    assert b"cmarl.specs\nComposite" in data  # the old module path, as the pickle names it
    assert pickle.loads(data) == _every_kind()
