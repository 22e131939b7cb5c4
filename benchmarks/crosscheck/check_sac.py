"""SAC, continuous and discrete: marl's ``SACLoss``/``DiscreteSACLoss`` next to TorchRL's."""

from __future__ import annotations

import copy

import torch
from _harness import (
    Difference,
    ParamPair,
    Report,
    compare_losses,
    pair_module,
    perturb_targets,
    sync,
)
from _nets import (
    ACT,
    N_ACTIONS,
    N_AGENTS,
    OBS,
    action_value_net,
    categorical_actor,
    expand_flags,
    key,
    mlp,
    q_net,
    tanh_actor,
    transitions,
)
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torchrl.data import Bounded, Composite
from torchrl.objectives import DiscreteSACLoss as TrDiscreteSAC
from torchrl.objectives import SACLoss as TrSAC
from torchrl.objectives import ValueEstimators

from marl.modules import MaskedCategorical
from marl.objectives import DiscreteSACLoss, SACLoss, SACSettings

BATCH = (64,)
GAMMA, ALPHA = 0.9, 0.5

DIFFERENCES = [
    Difference(
        "sac-loss-fn",
        "SAC, discrete SAC",
        "Q regression loss",
        "loss_function='l2'",
        "loss_function='smooth_l1'",
        "the SAC papers (Haarnoja et al., 2018; Christodoulou, 2019) minimise the squared "
        "soft Bellman residual",
        "marl loss_function='smooth_l1'",
    ),
]


def _masked_actor() -> ProbabilisticTensorDictSequential:
    return ProbabilisticTensorDictSequential(
        TensorDictModule(mlp(OBS, N_ACTIONS), ["observation"], ["logits"]),
        ProbabilisticTensorDictModule(
            {"logits": "logits", "mask": "action_mask"},
            ["action"],
            distribution_class=MaskedCategorical,
            return_log_prob=True,
            log_prob_key="action_log_prob",
        ),
    )


def _pairs(marl_loss, tr_loss) -> list[ParamPair]:
    pairs = pair_module("actor", marl_loss.actor, tr_loss.actor_network_params)
    pairs += pair_module("qvalue", marl_loss.qvalue_networks, tr_loss.qvalue_network_params)
    pairs.append(ParamPair("log_alpha", [marl_loss.log_alpha], tr_loss.log_alpha))
    return pairs


def _sync_all(marl_loss, tr_loss) -> list[ParamPair]:
    pairs = _pairs(marl_loss, tr_loss)
    sync(pairs)
    perturb_targets(marl_loss)
    sync(
        pair_module(
            "target_qvalue",
            marl_loss.target_qvalue_networks,
            tr_loss.target_qvalue_network_params,
        )
    )
    return pairs


def _terms() -> dict[str, str]:
    names = ("loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy")
    return {n: n for n in names}


def _continuous(report, case, *, seed, marl_kw, expected, group=None, verbose=False):
    torch.manual_seed(seed)
    actor, q = tanh_actor(group), q_net(group)
    marl_loss = SACLoss(actor, q, SACSettings(gamma=GAMMA, alpha_init=ALPHA, **marl_kw))
    if group is None:
        spec = Bounded(low=-1.0, high=1.0, shape=(ACT,))
    else:
        action = Bounded(low=-1.0, high=1.0, shape=(N_AGENTS, ACT))
        spec = Composite({group: Composite(action=action, shape=(N_AGENTS,))})
    tr_loss = TrSAC(copy.deepcopy(actor), copy.deepcopy(q), alpha_init=ALPHA, action_spec=spec)
    td = transitions(BATCH, group, seed=seed, continuous=True)
    td_tr = td.clone()
    if group is not None:
        marl_loss.set_keys(
            action=key(group, "action"),
            state_action_value=key(group, "state_action_value"),
            reward=("next", group, "reward"),
        )
        tr_loss.set_keys(
            action=key(group, "action"),
            state_action_value=key(group, "state_action_value"),
            log_prob=key(group, "action_log_prob"),
            reward=key(group, "reward"),
            done=key(group, "done"),
            terminated=key(group, "terminated"),
        )
        td_tr = expand_flags(td, group)
    tr_loss.make_value_estimator(ValueEstimators.TD0, gamma=GAMMA)
    pairs = _sync_all(marl_loss, tr_loss)
    td_m = td.clone()
    out_m, out_t = marl_loss(td_m), tr_loss(td_tr)
    out_m = out_m.set("td_error", td_m.get("td_error"))
    out_t = out_t.set("td_error", td_tr.get("td_error"))
    terms = {**_terms(), "td_error": "td_error"}
    compare_losses(report, "SAC", case, out_m, out_t, terms, pairs, expected, verbose)


def _discrete(report, case, *, seed, marl_kw, expected, masked=False, verbose=False):
    torch.manual_seed(seed)
    actor = _masked_actor() if masked else categorical_actor()
    q = action_value_net()
    settings = SACSettings(gamma=GAMMA, alpha_init=ALPHA, **marl_kw)
    marl_loss = DiscreteSACLoss(actor, q, settings, num_actions=N_ACTIONS)
    tr_loss = TrDiscreteSAC(
        copy.deepcopy(actor),
        copy.deepcopy(q),
        action_space="categorical",
        num_actions=N_ACTIONS,
        alpha_init=ALPHA,
    )
    tr_loss.make_value_estimator(ValueEstimators.TD0, gamma=GAMMA)
    pairs = _sync_all(marl_loss, tr_loss)
    td = transitions(BATCH, seed=seed, continuous=False, mask=masked)
    td_m, td_tr = td.clone(), td.clone()
    out_m, out_t = marl_loss(td_m), tr_loss(td_tr)
    out_m = out_m.set("td_error", td_m.get("td_error"))
    out_t = out_t.set("td_error", td_tr.get("td_error"))
    terms = {**_terms(), "td_error": "td_error"}
    compare_losses(report, "discrete SAC", case, out_m, out_t, terms, pairs, expected, verbose)


def run(report: Report, verbose: bool = False) -> None:
    for d in DIFFERENCES:
        report.note_difference(d)
    loss_fn = {"loss_qvalue": "sac-loss-fn"}
    aligned = {"loss_function": "smooth_l1"}
    _continuous(report, "defaults", seed=20, marl_kw={}, expected=loss_fn, verbose=verbose)
    _continuous(report, "aligned", seed=20, marl_kw=aligned, expected={}, verbose=verbose)
    _continuous(
        report,
        "grouped (MASAC), aligned",
        seed=21,
        marl_kw=aligned,
        expected={},
        group="agents",
        verbose=verbose,
    )
    _discrete(report, "defaults", seed=22, marl_kw={}, expected=loss_fn, verbose=verbose)
    _discrete(report, "aligned", seed=22, marl_kw=aligned, expected={}, verbose=verbose)
    _discrete(
        report,
        "masked, aligned",
        seed=23,
        marl_kw=aligned,
        expected={},
        masked=True,
        verbose=verbose,
    )
