"""DDPG and TD3: marl's ``DDPGLoss``/``TD3Loss`` next to TorchRL's."""

from __future__ import annotations

import copy

import torch
from _harness import Difference, Report, compare_losses, pair_module, perturb_targets, sync
from _nets import deterministic_actor, expand_flags, key, q_net, transitions
from torchrl.objectives import DDPGLoss as TrDDPG
from torchrl.objectives import TD3Loss as TrTD3
from torchrl.objectives import ValueEstimators

from marl.objectives import DDPGLoss, DDPGSettings, TD3Loss, TD3Settings

BATCH = (64,)
GAMMA = 0.9

DIFFERENCES = [
    Difference(
        "td-error",
        "DDPG, TD3, DQN, QMIX",
        "priority written to 'td_error'",
        "|Q - y|",
        "(Q - y)^2",
        "proportional prioritized replay (Schaul et al., 2016) uses p = |delta|; SAC writes "
        "|delta| in both libraries",
        "not aligned (marl has no option); an extra row compares marl's td_error^2",
    ),
    Difference(
        "ddpg-target-actor",
        "DDPG",
        "policy in the bootstrap",
        "target actor mu'(s')",
        "online actor mu(s') (delay_actor=False)",
        "the DDPG paper (Lillicrap et al., 2016) bootstraps with target actor and critic",
        "TorchRL delay_actor=True (marl has no option to drop its target actor)",
    ),
    Difference(
        "td3-loss-fn",
        "TD3",
        "Q regression loss",
        "loss_function='l2'",
        "loss_function='smooth_l1'",
        "TD3 (Fujimoto et al., 2018) regresses both critics with a squared error",
        "marl loss_function='smooth_l1'",
    ),
    Difference(
        "td3-delay",
        "TD3",
        "delayed policy update",
        "in the loss: loss_actor is 0 on all but every policy_delay-th call",
        "outside the loss: the training loop skips actor steps",
        "stepping the actor optimizer on every call then updates it at the delayed rate, "
        "with no training-loop bookkeeping",
        "compare the first call (an actor-update call); the second call stays explained",
    ),
]


def td_error_rows(report, loss, case, td_m, td_t, expected=None):
    """``td_error`` (explained: |delta| vs delta^2), and marl's squared against TorchRL's."""
    err_m, err_t = td_m.get("td_error"), td_t.get("td_error")
    report.add(loss, case, "td_error", err_m, err_t, "td-error")
    report.add(loss, case, "td_error^2 ~ td_error", err_m**2, err_t, expected)


def _group_keys(marl_loss, tr_loss, group, action=True):
    """marl: per-agent action/value/reward, env-level flags; TorchRL: everything per agent."""
    if group is None:
        return
    sav = key(group, "state_action_value")
    marl_loss.set_keys(
        action=key(group, "action"), state_action_value=sav, reward=("next", group, "reward")
    )
    tr = {"state_action_value": sav, "reward": key(group, "reward")}
    tr.update(done=key(group, "done"), terminated=key(group, "terminated"))
    if action:
        tr["action"] = key(group, "action")
    tr_loss.set_keys(**tr)


def _ddpg(report, case, *, seed, tr_kw, expected, verbose, group=None):
    torch.manual_seed(seed)
    actor, q = deterministic_actor(group), q_net(group)
    marl_loss = DDPGLoss(actor, q, DDPGSettings(gamma=GAMMA))
    tr_loss = TrDDPG(copy.deepcopy(actor), copy.deepcopy(q), **tr_kw)
    _group_keys(marl_loss, tr_loss, group, action=False)
    tr_loss.make_value_estimator(ValueEstimators.TD0, gamma=GAMMA)
    pairs = pair_module("actor", marl_loss.actor, tr_loss.actor_network_params)
    pairs += pair_module("value", marl_loss.value_network, tr_loss.value_network_params)
    sync(pairs)
    perturb_targets(marl_loss)
    targets = pair_module(
        "target_value", marl_loss.target_value_network, tr_loss.target_value_network_params
    )
    if tr_loss.delay_actor:  # otherwise TorchRL's "target" is the online actor itself
        targets += pair_module(
            "target_actor", marl_loss.target_actor, tr_loss.target_actor_network_params
        )
    sync(targets)
    td = transitions(BATCH, group, seed=seed, continuous=True)
    td_m, td_t = td.clone(), (td.clone() if group is None else expand_flags(td, group))
    out_m, out_t = marl_loss(td_m), tr_loss(td_t)
    terms = {"loss_actor": "loss_actor", "loss_value": "loss_value"}
    compare_losses(report, "DDPG", case, out_m, out_t, terms, pairs, expected, verbose)
    td_error_rows(report, "DDPG", case, td_m, td_t, expected.get("loss_value"))


def _td3(report, case, *, seed, marl_kw, expected, verbose, group=None):
    torch.manual_seed(seed)
    actor, q = deterministic_actor(group), q_net(group)
    settings = TD3Settings(gamma=GAMMA, policy_delay=2, **marl_kw)
    marl_loss = TD3Loss(actor, q, settings, low=-1.0, high=1.0)
    tr_loss = TrTD3(copy.deepcopy(actor), copy.deepcopy(q), bounds=(-1.0, 1.0))
    _group_keys(marl_loss, tr_loss, group)
    tr_loss.make_value_estimator(ValueEstimators.TD0, gamma=GAMMA)
    pairs = pair_module("actor", marl_loss.actor, tr_loss.actor_network_params)
    pairs += pair_module("qvalue", marl_loss.qvalue_networks, tr_loss.qvalue_network_params)
    sync(pairs)
    perturb_targets(marl_loss)
    sync(
        pair_module("target_actor", marl_loss.target_actor, tr_loss.target_actor_network_params)
        + pair_module(
            "target_qvalue",
            marl_loss.target_qvalue_networks,
            tr_loss.target_qvalue_network_params,
        )
    )
    td = transitions(BATCH, group, seed=seed, continuous=True)
    # both draw the target-smoothing noise with one randn_like of the action's shape
    outs = []
    for _ in range(2):
        td_m, td_t = td.clone(), (td.clone() if group is None else expand_flags(td, group))
        torch.manual_seed(seed + 100)
        out_m = marl_loss(td_m)
        torch.manual_seed(seed + 100)
        out_t = tr_loss(td_t)
        outs.append((out_m, out_t, td_m, td_t))
    out_m, out_t, td_m, td_t = outs[0]
    terms = {"loss_actor": "loss_actor", "loss_qvalue": "loss_qvalue"}
    compare_losses(report, "TD3", case, out_m, out_t, terms, pairs, expected, verbose)
    td_error_rows(report, "TD3", case, td_m, td_t)
    out_m2, out_t2, _, _ = outs[1]
    report.add(
        "TD3",
        case,
        "loss_actor (2nd call)",
        out_m2["loss_actor"],
        out_t2["loss_actor"],
        "td3-delay",
    )


def run(report: Report, verbose: bool = False) -> None:
    for d in DIFFERENCES:
        report.note_difference(d)
    _ddpg(
        report,
        "defaults",
        seed=30,
        tr_kw={},
        expected={"loss_value": "ddpg-target-actor"},
        verbose=verbose,
    )
    _ddpg(report, "aligned", seed=30, tr_kw={"delay_actor": True}, expected={}, verbose=verbose)
    _td3(
        report,
        "defaults",
        seed=31,
        marl_kw={},
        expected={"loss_qvalue": "td3-loss-fn"},
        verbose=verbose,
    )
    _td3(
        report,
        "aligned",
        seed=31,
        marl_kw={"loss_function": "smooth_l1"},
        expected={},
        verbose=verbose,
    )
    _ddpg(
        report,
        "grouped (MADDPG-style), aligned",
        seed=32,
        tr_kw={"delay_actor": True},
        expected={},
        verbose=verbose,
        group="agents",
    )
    _td3(
        report,
        "grouped, aligned",
        seed=33,
        marl_kw={"loss_function": "smooth_l1"},
        expected={},
        verbose=verbose,
        group="agents",
    )
