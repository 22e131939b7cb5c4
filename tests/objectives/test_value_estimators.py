"""Value estimators against plain reference loops, on random data with dones and truncations."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from marl.objectives import GAE, TD0, TDLambda, VTrace, value
from marl.objectives import value as value_mod


def _data(shape_v, shape_flags, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(shape_v, generator=g, dtype=dtype)
    nv = torch.randn(shape_v, generator=g, dtype=dtype)
    r = torch.randn(shape_flags, generator=g, dtype=dtype)
    term = torch.rand(shape_flags, generator=g) < 0.1
    trunc = (torch.rand(shape_flags, generator=g) < 0.1) & ~term
    return v, nv, r, term | trunc, term


def _bcast(x, like, t):
    """Reference alignment: insert missing dims right after the time axis."""
    while x.ndim < like.ndim:
        x = x.unsqueeze(t + 1)
    return x.expand_as(like).to(like.dtype) if x.dtype != torch.bool else x.expand_as(like)


def nt(flag):
    """1 - flag, in float64 (a python float times a bool tensor would round to float32)."""
    return (~flag).double()


def ref_gae(gamma, lmbda, v, nv, r, done, term, t):
    r, done, term = (_bcast(x, v, t) for x in (r, done, term))
    adv = torch.zeros_like(v)
    a = torch.zeros_like(v.select(t, 0))
    for i in reversed(range(v.shape[t])):
        delta = r.select(t, i) + gamma * nt(term.select(t, i)) * nv.select(t, i) - v.select(t, i)
        a = delta + gamma * lmbda * nt(done.select(t, i)) * a
        adv.select(t, i).copy_(a)
    return adv, adv + v


def ref_td_lambda(gamma, lmbda, nv, r, done, term, t):
    r, done, term = (_bcast(x, nv, t) for x in (r, done, term))
    out = torch.zeros_like(nv)
    g = nv.select(t, nv.shape[t] - 1)
    for i in reversed(range(nv.shape[t])):
        last = i == nv.shape[t] - 1
        boot = torch.where(done.select(t, i) | last, nv.select(t, i), g)
        g = r.select(t, i) + gamma * nt(term.select(t, i)) * (
            (1 - lmbda) * nv.select(t, i) + lmbda * boot
        )
        out.select(t, i).copy_(g)
    return out


def ref_vtrace(gamma, lp, lm, v, nv, r, done, term, t, rho_bar=1.0, c_bar=1.0):
    r, done, term = (_bcast(x, v, t) for x in (r, done, term))
    ratio = (lp - lm).exp()
    rho, c = ratio.clamp(max=rho_bar), ratio.clamp(max=c_bar)
    vs = torch.zeros_like(v)
    acc = torch.zeros_like(v.select(t, 0))
    n = v.shape[t]
    for i in reversed(range(n)):
        delta = rho.select(t, i) * (
            r.select(t, i) + gamma * nt(term.select(t, i)) * nv.select(t, i) - v.select(t, i)
        )
        acc = delta + gamma * c.select(t, i) * nt(done.select(t, i)) * acc
        vs.select(t, i).copy_(v.select(t, i) + acc)
    adv = torch.zeros_like(v)
    for i in range(n):
        cut = done.select(t, i) | (i == n - 1)
        nxt = nv.select(t, i) if i == n - 1 else vs.select(t, i + 1)
        nxt = torch.where(cut, nv.select(t, i), nxt)
        adv.select(t, i).copy_(
            rho.select(t, i)
            * (r.select(t, i) + gamma * nt(term.select(t, i)) * nxt - v.select(t, i))
        )
    return adv, vs


SHAPES = [
    # (value shape, reward/flag shape, time_dim)
    ((4, 17, 1), (4, 17, 1), -2),
    ((3, 2, 11, 1), (3, 2, 11, 1), -2),  # two env-batch dims
    ((5, 13, 3, 1), (5, 13, 1), -3),  # per-agent values, env-level reward/done
    ((5, 13, 3, 2), (5, 13, 3, 2), -3),
    ((1, 1), (1, 1), -2),  # T = 1
    # the kernel's fixed-width paths (1, 2, 4, 8 agents; rows not a multiple of its
    # row block) and its generic path (5 agents), with env-level reward and flags
    ((17, 9, 1), (17, 9, 1), -2),
    ((3, 5, 2, 1), (3, 5, 1), -3),
    ((11, 7, 4, 1), (11, 7, 1), -3),
    ((9, 6, 8, 1), (9, 6, 1), -3),
    ((4, 6, 5, 1), (4, 6, 1), -3),
]


@pytest.fixture(params=["kernel", "torch"])
def path(request, monkeypatch):
    if request.param == "torch":
        monkeypatch.setattr(value_mod, "_C", None)
    elif value_mod._C is None:
        pytest.skip("marl._C not built")
    return request.param


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gae_matches_reference(shapes, dtype, path):
    sv, sf, td_ = shapes
    v, nv, r, done, term = _data(sv, sf, dtype)
    t = len(sv) + td_
    adv, target = value.generalized_advantage_estimate(0.9, 0.8, v, nv, r, done, term, time_dim=td_)
    radv, rtarget = ref_gae(0.9, 0.8, v, nv, r, done, term, t)
    torch.testing.assert_close(adv, radv)
    torch.testing.assert_close(target, rtarget)
    assert adv.dtype == dtype


@pytest.mark.parametrize("shapes", SHAPES)
def test_td_lambda_matches_reference(shapes, path):
    sv, sf, td_ = shapes
    _, nv, r, done, term = _data(sv, sf, torch.float64, seed=1)
    out = value.td_lambda_return_estimate(0.95, 0.7, nv, r, done, term, time_dim=td_)
    torch.testing.assert_close(out, ref_td_lambda(0.95, 0.7, nv, r, done, term, len(sv) + td_))


@pytest.mark.parametrize("shapes", SHAPES)
def test_vtrace_matches_reference(shapes, path):
    sv, sf, td_ = shapes
    v, nv, r, done, term = _data(sv, sf, torch.float64, seed=2)
    lp, lm = torch.randn(sv, dtype=torch.float64), torch.randn(sv, dtype=torch.float64)
    adv, vs = value.vtrace_advantage_estimate(
        0.9, lp, lm, v, nv, r, done, term, rho_thresh=1.5, c_thresh=0.9, time_dim=td_
    )
    radv, rvs = ref_vtrace(0.9, lp, lm, v, nv, r, done, term, len(sv) + td_, 1.5, 0.9)
    torch.testing.assert_close(vs, rvs)
    torch.testing.assert_close(adv, radv)


def test_vtrace_on_policy_equals_td_lambda_one():
    v, nv, r, done, term = _data((3, 9, 1), (3, 9, 1), torch.float64, seed=3)
    lp = torch.zeros(3, 9, 1, dtype=torch.float64)
    _, vs = value.vtrace_advantage_estimate(0.9, lp, lp, v, nv, r, done, term)
    _, target = value.generalized_advantage_estimate(0.9, 1.0, v, nv, r, done, term)
    torch.testing.assert_close(vs, target)


def test_truncation_bootstraps_termination_does_not():
    v = torch.zeros(1, 2, 1)
    nv = torch.full((1, 2, 1), 10.0)
    r = torch.ones(1, 2, 1)
    term = torch.tensor([[[True], [False]]])
    done = torch.tensor([[[True], [True]]])  # step 1 is truncated
    adv, _ = value.generalized_advantage_estimate(0.5, 1.0, v, nv, r, done, term)
    assert adv.flatten().tolist() == [1.0, 6.0]


def test_large_input_multithreaded_matches_torch(monkeypatch):
    # > 2**17 elements: the kernel splits the rows over threads
    v, nv, r, done, term = _data((2100, 128, 4, 1), (2100, 128, 1), seed=4)
    adv, _ = value.generalized_advantage_estimate(0.99, 0.95, v, nv, r, done, term, time_dim=-3)
    monkeypatch.setattr(value_mod, "_C", None)
    adv2, _ = value.generalized_advantage_estimate(0.99, 0.95, v, nv, r, done, term, time_dim=-3)
    torch.testing.assert_close(adv, adv2, rtol=1e-4, atol=1e-4)


def test_gradient_flows_through_torch_path():
    v, nv, r, done, term = _data((2, 5, 1), (2, 5, 1), torch.float64)
    v.requires_grad_(True)
    adv, _ = value.generalized_advantage_estimate(0.9, 0.9, v, nv, r, done, term)
    adv.sum().backward()
    assert v.grad is not None and torch.isfinite(v.grad).all()


def test_discounted_scan_noncontiguous_and_broadcast():
    x = torch.randn(7, 4).t()  # [4, 7] non-contiguous, time last
    out = value.discounted_scan(x.unsqueeze(-1), torch.tensor(0.5), time_dim=-2)
    ref = torch.zeros(4, 7)
    acc = torch.zeros(4)
    for i in reversed(range(7)):
        acc = x[:, i] + 0.5 * acc
        ref[:, i] = acc
    torch.testing.assert_close(out.squeeze(-1), ref)


@pytest.mark.skipif(value_mod._C is None, reason="marl._C not built")
def test_kernel_validates_inputs():
    C = value_mod._C
    v = torch.zeros(2, 3, 1)
    f = torch.zeros(2, 3, 1, dtype=torch.uint8)
    out = torch.empty(2, 3, 1)
    with pytest.raises(ValueError, match="next_value"):
        C.gae_scan(v, torch.zeros(2, 4, 1), v, f, f, out, out, 0.9, 0.9)
    with pytest.raises(ValueError, match="gamma"):
        C.gae_scan(v, v, v, f, f, out, out, 1.5, 0.9)
    with pytest.raises(ValueError, match="done"):
        C.td_lambda_scan(v, v, torch.zeros(2, 3, 2, dtype=torch.uint8), f, out, 0.9, 0.9)
    with pytest.raises(TypeError):
        # a non-contiguous output cannot be written in place: refused, not copied
        C.discounted_scan(v, v, torch.empty(3, 2, 1).transpose(0, 1))
    with pytest.raises(TypeError):
        C.discounted_scan(v[0], v, out)  # not 3-d
    with pytest.raises(TypeError):
        C.discounted_scan(v, v, out.long())  # an output of the wrong dtype


def test_functional_shape_errors():
    with pytest.raises(ValueError, match="time_dim"):
        value.generalized_advantage_estimate(
            0.9,
            0.9,
            torch.zeros(3),
            torch.zeros(3),
            torch.zeros(3),
            torch.zeros(3).bool(),
            time_dim=-2,
        )
    with pytest.raises(ValueError, match="broadcast"):
        value.generalized_advantage_estimate(
            0.9,
            0.9,
            torch.zeros(2, 3, 1),
            torch.zeros(2, 3, 1),
            torch.zeros(2, 4, 1),
            torch.zeros(2, 3, 1).bool(),
        )


# -- estimator classes --------------------------------------------------------------------


def _group_td(B=4, T=9, n=3, seed=0):
    v, nv, r, done, term = _data((B, T, n, 1), (B, T, 1), seed=seed)
    return TensorDict(
        {
            "agents": {"state_value": v, "observation": torch.randn(B, T, n, 2)},
            "next": {
                "agents": {"state_value": nv, "observation": torch.randn(B, T, n, 2)},
                "reward": r,
                "done": done,
                "terminated": term,
            },
        },
        batch_size=[B, T],
    )


def test_gae_class_with_group_keys_and_env_level_flags():
    td = _group_td()
    est = GAE(gamma=0.9, lmbda=0.8).set_keys(
        value=("agents", "state_value"),
        advantage=("agents", "advantage"),
        value_target=("agents", "value_target"),
    )
    est(td)
    radv, rtarget = ref_gae(
        0.9,
        0.8,
        td["agents", "state_value"],
        td["next", "agents", "state_value"],
        td["next", "reward"],
        td["next", "done"],
        td["next", "terminated"],
        1,
    )
    torch.testing.assert_close(td["agents", "advantage"], radv)
    torch.testing.assert_close(td["agents", "value_target"], rtarget)


def test_estimator_classes_match_functional():
    td = _group_td(seed=5)
    keys = {"value": ("agents", "state_value")}
    v, nv = td["agents", "state_value"], td["next", "agents", "state_value"]
    r, d, te = td["next", "reward"], td["next", "done"], td["next", "terminated"]
    TDLambda(gamma=0.9, lmbda=0.5).set_keys(**keys)(td)
    torch.testing.assert_close(td["value_target"], ref_td_lambda(0.9, 0.5, nv, r, d, te, 1))
    torch.testing.assert_close(td["advantage"], td["value_target"] - v)
    TD0(gamma=0.9).set_keys(**keys)(td)
    ref = r.unsqueeze(-1) + 0.9 * (~te).unsqueeze(-1) * nv
    torch.testing.assert_close(td["value_target"], ref)


def test_done_from_terminated_and_truncated():
    td = _group_td(seed=6)
    done = td["next"].pop("done")
    td["next", "truncated"] = done & ~td["next", "terminated"]
    GAE(gamma=0.9, lmbda=0.8).set_keys(value=("agents", "state_value"))(td)
    radv, _ = ref_gae(
        0.9,
        0.8,
        td["agents", "state_value"],
        td["next", "agents", "state_value"],
        td["next", "reward"],
        done,
        td["next", "terminated"],
        1,
    )
    torch.testing.assert_close(td["advantage"], radv)


def test_estimator_runs_value_network_without_grad():
    from tensordict.nn import TensorDictModule

    td = _group_td(seed=7)
    del td["agents", "state_value"], td["next", "agents", "state_value"]
    net = TensorDictModule(
        torch.nn.Linear(2, 1), [("agents", "observation")], [("agents", "state_value")]
    )
    est = GAE(gamma=0.9, lmbda=0.8, value_network=net).set_keys(value=("agents", "state_value"))
    est(td)
    assert td["advantage"].shape == (4, 9, 3, 1)
    assert not td["advantage"].requires_grad
    assert td["next", "agents", "state_value"].shape == (4, 9, 3, 1)


@pytest.mark.parametrize("cls", [GAE, TD0, TDLambda])
def test_value_network_runs_once_on_s_and_next_s(cls):
    from tensordict.nn import TensorDictModule

    calls = []

    class Counted(torch.nn.Linear):
        def forward(self, x):
            calls.append(tuple(x.shape))
            return super().forward(x)

    td = _group_td(seed=9)
    del td["agents", "state_value"], td["next", "agents", "state_value"]
    net = TensorDictModule(Counted(2, 1), [("agents", "observation")], [("agents", "state_value")])
    est = cls(gamma=0.9, value_network=net).set_keys(value=("agents", "state_value"))
    est(td)
    # one call for V(s) and V(s'): the two inputs stacked on a leading dim
    assert calls == [(2, 4, 9, 3, 2)]
    # the same values and advantages as two separate calls (the old way)
    obs, next_obs = td["agents", "observation"], td["next", "agents", "observation"]
    with torch.no_grad():
        value, next_value = net.module(obs), net.module(next_obs)
    torch.testing.assert_close(td["agents", "state_value"], value)
    torch.testing.assert_close(td["next", "agents", "state_value"], next_value)
    ref = _group_td(seed=9)
    ref["agents", "state_value"], ref["next", "agents", "state_value"] = value, next_value
    cls(gamma=0.9).set_keys(value=("agents", "state_value"))(ref)
    torch.testing.assert_close(td["advantage"], ref["advantage"])
    torch.testing.assert_close(td["value_target"], ref["value_target"])


def test_vtrace_class_reads_log_probs():
    td = _group_td(seed=8)
    lp = torch.randn(4, 9, 3)
    td["agents", "learner_log_prob"] = lp
    td["agents", "action_log_prob"] = lp
    VTrace(gamma=0.9).set_keys(
        value=("agents", "state_value"),
        log_prob=("agents", "learner_log_prob"),
        sample_log_prob=("agents", "action_log_prob"),
    )(td)
    _, target = value.generalized_advantage_estimate(
        0.9,
        1.0,
        td["agents", "state_value"],
        td["next", "agents", "state_value"],
        td["next", "reward"],
        td["next", "done"],
        td["next", "terminated"],
        time_dim=-3,
    )
    torch.testing.assert_close(td["value_target"], target)


def test_estimator_errors():
    with pytest.raises(KeyError, match="valid names"):
        GAE().set_keys(values="x")
    td = _group_td()
    with pytest.raises(KeyError, match="state_value"):
        GAE()(td)
    with pytest.raises(ValueError, match="time dim"):
        GAE().set_keys(value=("agents", "state_value"))(td[0, 0])


def test_torch_path_launches_log_many_ops(monkeypatch):
    """The CUDA/fallback path must not run one set of kernels per time step."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    monkeypatch.setattr(value_mod, "_C", None)
    counts = {}
    for T in (16, 1024):
        v, nv, r, done, term = _data((3, T, 1), (3, T, 1))
        with Count() as c:
            value.generalized_advantage_estimate(0.9, 0.9, v, nv, r, done, term)
            value.td_lambda_return_estimate(0.9, 0.9, nv, r, done, term)
        counts[T] = c.n
    # O(log T): 64x more steps cost 6 more doubling rounds, not 1000 more op groups
    assert counts[1024] < 3 * counts[16] < 1024, counts
