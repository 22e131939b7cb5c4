"""Value estimators: marl's GAE, TD(0), TD(lambda) and V-trace next to TorchRL's.

Batches are ``[envs, time]`` with terminations and truncations in the middle of trajectories.
The grouped cases give marl env-level flags and a team reward (``[E, T, 1]``) next to
per-agent values (``[E, T, n, 1]``), which marl broadcasts itself; TorchRL gets them copied
per agent, its documented layout. In this venv ``marl._C`` is not built, so marl runs its
torch scans; ``tests/objectives`` check those against the C++ kernels.
"""

from __future__ import annotations

import copy

import torch
from _harness import Difference, Report, compare_grads, pair_module, sync
from _nets import N_AGENTS, OBS, expand_flags, flags, value_net
from tensordict import TensorDict
from torchrl.objectives.value import GAE as TrGAE
from torchrl.objectives.value import TD0Estimator as TrTD0
from torchrl.objectives.value import TDLambdaEstimator as TrTDLambda
from torchrl.objectives.value import functional as trF

from marl.objectives import GAE, TD0, TDLambda
from marl.objectives import value as mF

E, T = 4, 32
GAMMA, LMBDA = 0.95, 0.9


def _data(seed: int, group: str | None) -> TensorDict:
    """Values, rewards and flags ``[E, T]``; with ``group``, per-agent values under it."""
    g = torch.Generator().manual_seed(seed)
    dtype = torch.get_default_dtype()
    lead = (E, T) if group is None else (E, T, N_AGENTS)
    vk = "state_value" if group is None else (group, "state_value")
    td = TensorDict(batch_size=[E, T])
    td.set(vk, torch.randn(*lead, 1, generator=g, dtype=dtype))
    td.set(
        ("next", *((vk,) if isinstance(vk, str) else vk)),
        torch.randn(*lead, 1, generator=g, dtype=dtype),
    )
    td.set(("next", "reward"), torch.randn(E, T, 1, generator=g, dtype=dtype))
    for name, value in flags((E, T, 1), g).items():
        td.set(("next", name), value)
    return td


def _functional(report: Report, seed: int, group: str | None) -> None:
    td = _data(seed, group)
    case = "flat" if group is None else "grouped (env-level flags, team reward)"
    tr_td = td if group is None else expand_flags(td, group)
    vk = "state_value" if group is None else (group, "state_value")
    pre = () if group is None else (group,)
    v, nv = td.get(vk), td.get(("next", *((vk,) if isinstance(vk, str) else vk)))
    r, d, term = (td.get(("next", k)) for k in ("reward", "done", "terminated"))
    tr_r, tr_d, tr_t = (tr_td.get(("next", *pre, k)) for k in ("reward", "done", "terminated"))
    t = -2 if group is None else -3

    adv, tgt = mF.generalized_advantage_estimate(GAMMA, LMBDA, v, nv, r, d, term, time_dim=t)
    for name, fn in (
        ("generalized_advantage_estimate", trF.generalized_advantage_estimate),
        ("vec_generalized_advantage_estimate", trF.vec_generalized_advantage_estimate),
    ):
        tr_adv, tr_tgt = fn(GAMMA, LMBDA, v, nv, tr_r, tr_d, tr_t, time_dim=t)
        report.add("GAE (functional)", case, f"advantage ~ {name}", adv, tr_adv)
        report.add("GAE (functional)", case, f"value_target ~ {name}", tgt, tr_tgt)

    ret = mF.td_lambda_return_estimate(GAMMA, LMBDA, nv, r, d, term, time_dim=t)
    for name, fn in (
        ("td_lambda_return_estimate", trF.td_lambda_return_estimate),
        ("vec_td_lambda_return_estimate", trF.vec_td_lambda_return_estimate),
    ):
        tr_ret = fn(GAMMA, LMBDA, nv, tr_r, tr_d, tr_t, time_dim=t)
        report.add("TD(lambda) (functional)", case, f"return ~ {name}", ret, tr_ret)

    if group is None:  # td0_return_estimate broadcasts right-aligned: per-agent input only
        report.add(
            "TD(0) (functional)",
            case,
            "return ~ td0_return_estimate",
            mF.td0_return_estimate(GAMMA, nv, r, term),
            trF.td0_return_estimate(GAMMA, nv, tr_r, tr_t),
        )
        g = torch.Generator().manual_seed(seed + 7)
        log_mu = torch.randn(E, T, 1, generator=g, dtype=v.dtype) * 0.3 - 1.0
        log_pi = log_mu + torch.randn(E, T, 1, generator=g, dtype=v.dtype) * 0.5
        adv, vs = mF.vtrace_advantage_estimate(
            GAMMA, log_pi, log_mu, v, nv, r, d, term, rho_thresh=1.0, c_thresh=0.9
        )
        tr_adv, tr_vs = trF.vtrace_advantage_estimate(
            GAMMA, log_pi, log_mu, v, nv, r, d, term, rho_thresh=1.0, c_thresh=0.9
        )
        report.add(
            "V-trace (functional)", case, "advantage ~ vtrace_advantage_estimate", adv, tr_adv
        )
        report.add(
            "V-trace (functional)", case, "value_target ~ vtrace_advantage_estimate", vs, tr_vs
        )


def _modules(report: Report, seed: int, group: str | None) -> None:
    """The estimator modules on a TensorDict that already holds both values."""
    td = _data(seed, group)
    case = "flat" if group is None else "grouped (env-level flags, team reward)"
    tr_td = td.clone() if group is None else expand_flags(td, group)
    pre = () if group is None else (group,)
    marl_keys = {}
    tr_keys = {}
    if group is not None:
        marl_keys = {
            "value": (group, "state_value"),
            "advantage": (group, "advantage"),
            "value_target": (group, "value_target"),
        }
        tr_keys = {
            **marl_keys,
            "reward": (group, "reward"),
            "done": (group, "done"),
            "terminated": (group, "terminated"),
        }
    adv_key, tgt_key = (*pre, "advantage"), (*pre, "value_target")
    cases = (
        ("GAE", GAE(gamma=GAMMA, lmbda=LMBDA), TrGAE(gamma=GAMMA, lmbda=LMBDA, value_network=None)),
        ("TD(0)", TD0(gamma=GAMMA), TrTD0(gamma=GAMMA, value_network=None)),
        (
            "TD(lambda)",
            TDLambda(gamma=GAMMA, lmbda=LMBDA),
            TrTDLambda(gamma=GAMMA, lmbda=LMBDA, value_network=None),
        ),
    )
    for name, marl_est, tr_est in cases:
        if marl_keys:
            marl_est.set_keys(**marl_keys)
            tr_est.set_keys(**tr_keys)
        out_m = marl_est(td.clone())
        out_t = tr_est(tr_td.clone())
        report.add(name, case, "advantage", out_m.get(adv_key), out_t.get(adv_key))
        report.add(name, case, "value_target", out_m.get(tgt_key), out_t.get(tgt_key))


def _differentiable_gae(report: Report, seed: int) -> None:
    """GAE of a value network's outputs, with gradients flowing through the estimate."""
    torch.manual_seed(seed)
    critic = value_net()
    g = torch.Generator().manual_seed(seed)
    dtype = torch.get_default_dtype()
    td = TensorDict(
        {
            "observation": torch.randn(E, T, OBS, generator=g, dtype=dtype),
            "next": {"observation": torch.randn(E, T, OBS, generator=g, dtype=dtype)},
        },
        batch_size=[E, T],
    )
    td.set(("next", "reward"), torch.randn(E, T, 1, generator=g, dtype=dtype))
    for name, value in flags((E, T, 1), g).items():
        td.set(("next", name), value)
    tr_critic = copy.deepcopy(critic)
    pairs = pair_module("critic", critic, TensorDict.from_module(tr_critic))
    sync(pairs)
    w = torch.linspace(-1, 1, E * T, dtype=dtype).reshape(E, T, 1)  # a non-trivial readout
    r, d, term = (td.get(("next", k)) for k in ("reward", "done", "terminated"))

    # functional forms on the network's (differentiable) values: the math of the gradient
    def values(net):
        return net(td.clone())["state_value"], net(td.get("next").clone())["state_value"]

    adv_m, _ = mF.generalized_advantage_estimate(GAMMA, LMBDA, *values(critic), r, d, term)
    adv_t, _ = trF.generalized_advantage_estimate(GAMMA, LMBDA, *values(tr_critic), r, d, term)
    case = "value network, gradients"
    report.add("GAE (functional)", case, "advantage", adv_m, adv_t)
    compare_grads(
        report,
        "GAE (functional)",
        case,
        "sum(w * advantage)",
        (w * adv_m).sum(),
        (w * adv_t).sum(),
        pairs,
    )
    # the modules with differentiable=True: TorchRL holds its value network out
    marl_est = GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic, differentiable=True)
    tr_est = TrGAE(gamma=GAMMA, lmbda=LMBDA, value_network=tr_critic, differentiable=True)
    out_m, out_t = marl_est(td.clone()), tr_est(td.clone())
    case = "value network, differentiable=True"
    for k in ("advantage", "value_target"):
        report.add("GAE", case, k, out_m.get(k), out_t.get(k))
    compare_grads(
        report,
        "GAE",
        case,
        "sum(w * advantage)",
        (w * out_m.get("advantage")).sum(),
        (w * out_t.get("advantage")).sum(),
        pairs,
        expected="gae-differentiable",
    )


def run(report: Report, verbose: bool = False) -> None:
    report.note_difference(
        Difference(
            "gae-differentiable",
            "GAE",
            "differentiable=True with a value network",
            "gradients reach the value network's parameters",
            "the network is held out (its parameters detached); only inputs get gradients",
            "marl's flag means what it says: the estimate is part of the graph, e.g. for a "
            "critic trained through its own GAE target",
            "the functional forms on the network's outputs: same values, same gradients",
        )
    )
    for group in (None, "agents"):
        _functional(report, 60, group)
        _modules(report, 61, group)
    _differentiable_gae(report, 62)
