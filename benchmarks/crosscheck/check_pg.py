"""PPO and A2C: marl's ``PPOLoss``/``A2CLoss`` next to TorchRL's ``ClipPPOLoss``/``A2CLoss``."""

from __future__ import annotations

import copy

import torch
from _harness import Difference, Report, compare_losses, pair_module, sync
from _nets import (
    categorical_actor,
    expand_flags,
    key,
    tanh_actor,
    transitions,
    value_net,
)
from torchrl.objectives import A2CLoss as TrA2C
from torchrl.objectives import ClipPPOLoss as TrPPO
from torchrl.objectives import ValueEstimators

from marl.objectives import A2CLoss, A2CSettings, PPOLoss, PPOSettings

BATCH = (4, 16)  # [envs, time]: the GAE cases need a time dim
FLAT = (64,)  # a minibatch of transitions, when the advantage is given
GAMMA, LMBDA = 0.9, 0.8

DIFFERENCES = [
    Difference(
        "pg-critic-coef",
        "PPO, A2C",
        "critic loss weight",
        "critic_coef=0.5",
        "critic_coeff=1.0",
        "0.5 is the value-loss weight c1 of the PPO paper and of the reference "
        "implementations (baselines, SB3, CleanRL), with one optimizer for actor and critic",
        "marl critic_coef=1.0",
    ),
    Difference(
        "ppo-norm-adv",
        "PPO",
        "advantage standardization",
        "normalize_advantage=True",
        "normalize_advantage=False",
        "per-minibatch standardization is part of the PPO reference implementations "
        "(baselines, SB3, CleanRL) and keeps the clip range meaningful across reward scales",
        "marl normalize_advantage=False (and a case with both True)",
    ),
    Difference(
        "ppo-kl",
        "PPO",
        "kl_approx diagnostic",
        "mean((r - 1) - log r)",
        "mean(log mu - log pi)",
        "the k3 estimator (Schulman, 'Approximating KL divergence') is unbiased and never "
        "negative; a diagnostic only, no loss term or gradient depends on it",
        "not aligned (marl has no option); the row stays an explained difference",
    ),
    Difference(
        "ppo-ev",
        "PPO",
        "explained_variance diagnostic",
        "1 - Var(target - V) / Var(target) over every element of the batch",
        "the same ratio per element of the trailing dims, variances over dim 0 only",
        "one number per batch is what is logged; on a flat minibatch [B, 1] the two agree, "
        "on [envs, time] data TorchRL returns one value per time step",
        "the cases with a flat minibatch agree; the [envs, time] (GAE) cases stay explained",
    ),
    Difference(
        "a2c-critic-loss",
        "A2C",
        "critic regression loss",
        "loss_critic_type='l2'",
        "loss_critic_type='smooth_l1'",
        "A2C/A3C (Mnih et al., 2016) regress the value with a squared error",
        "marl loss_critic_type='smooth_l1'",
    ),
]


TORCHRL_PG_DEFAULTS = {"entropy_coef": 0.01, "loss_critic_type": "smooth_l1"}
"""TorchRL's ``PPOLoss`` entropy weight and critic loss, the start of every PPO case."""


def _pairs(marl_loss, tr_loss):
    pairs = pair_module("actor", marl_loss.actor, tr_loss.actor_network_params)
    if marl_loss.critic is not None:
        pairs += pair_module("critic", marl_loss.critic, tr_loss.critic_network_params)
    return pairs


def _behaviour(actor, td, group, seed: int) -> None:
    """Write action / action_log_prob from a perturbed copy of ``actor`` (the old policy),
    so that importance ratios differ from 1 and some of them are clipped."""
    old = copy.deepcopy(actor)
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in old.parameters():
            p.add_(0.3 * torch.randn_like(p))
        dist = old.get_dist(td)
        action = dist.sample()
        td.set(key(group, "action"), action)
        td.set(key(group, "action_log_prob"), dist.log_prob(action))


def _batch(group, continuous, seed, with_targets=True):
    batch = FLAT if with_targets else BATCH
    td = transitions(batch, group, seed=seed, continuous=continuous)
    g = torch.Generator().manual_seed(seed + 1)
    lead = batch if group is None else (*batch, td.get(key(group, "observation")).shape[-2])
    dtype = torch.get_default_dtype()
    if with_targets:
        td.set(key(group, "advantage"), torch.randn(*lead, 1, generator=g, dtype=dtype))
        td.set(key(group, "value_target"), torch.randn(*lead, 1, generator=g, dtype=dtype))
        # the stored (old) value, for value clipping; without targets the loss computes it
        td.set(key(group, "state_value"), torch.randn(*lead, 1, generator=g, dtype=dtype))
    return td


def _keys(group):
    """marl keys and TorchRL keys for a group (TorchRL reads flags and reward under it)."""
    if group is None:
        return {}, {}
    marl = {
        "action": key(group, "action"),
        "sample_log_prob": key(group, "action_log_prob"),
        "value": key(group, "state_value"),
        "advantage": key(group, "advantage"),
        "value_target": key(group, "value_target"),
        "reward": ("next", group, "reward"),
    }
    tr = {
        "action": key(group, "action"),
        "sample_log_prob": key(group, "action_log_prob"),
        "value": key(group, "state_value"),
        "advantage": key(group, "advantage"),
        "value_target": key(group, "value_target"),
        "reward": (group, "reward"),
        "done": (group, "done"),
        "terminated": (group, "terminated"),
    }
    return marl, tr


def _case(
    report: Report,
    name: str,
    case: str,
    *,
    seed: int,
    marl_cls,
    tr_cls,
    marl_kw: dict,
    tr_kw: dict,
    expected: dict,
    continuous: bool = False,
    group: str | None = None,
    with_targets: bool = True,
    verbose: bool = False,
) -> None:
    torch.manual_seed(seed)
    actor = tanh_actor(group) if continuous else categorical_actor(group)
    critic = value_net(group)
    td = _batch(group, continuous, seed, with_targets)
    _behaviour(actor, td, group, seed + 2)
    # marl's losses take their hyperparameters as one settings object; the structural
    # option stays a keyword. The PPO cases start from TorchRL's entropy bonus and
    # smooth-L1 critic (marl's PPOSettings default to none and l2) so that every case
    # compares the same math; the cases say where they change them.
    kw = dict(marl_kw)
    structural = {k: kw.pop(k) for k in ("normalize_advantage_exclude_dims",) if k in kw}
    settings_cls = PPOSettings if marl_cls is PPOLoss else A2CSettings
    base = TORCHRL_PG_DEFAULTS if marl_cls is PPOLoss else {}
    settings = settings_cls(gamma=GAMMA, lmbda=LMBDA, **{**base, **kw})
    marl_loss = marl_cls(actor, critic, settings, **structural)
    tr_loss = tr_cls(copy.deepcopy(actor), copy.deepcopy(critic), **tr_kw)
    mk, tk = _keys(group)
    if mk:
        marl_loss.set_keys(**mk)
        tr_loss.set_keys(**tk)
    tr_loss.make_value_estimator(ValueEstimators.GAE, gamma=GAMMA, lmbda=LMBDA)
    pairs = _pairs(marl_loss, tr_loss)
    sync(pairs)
    td_tr = expand_flags(td, group) if group is not None else td.clone()
    out_m = marl_loss(td.clone())
    out_t = tr_loss(td_tr)
    terms = {"loss_objective": "loss_objective", "loss_critic": "loss_critic"}
    terms["loss_entropy"] = "loss_entropy"
    terms["entropy"] = "entropy"
    if name == "PPO":
        terms.update(clip_fraction="clip_fraction", kl_approx="kl_approx")
        terms["explained_variance"] = "explained_variance"
    if name == "PPO" and not with_targets:
        expected = {**expected, "explained_variance": "ppo-ev"}
    compare_losses(report, name, case, out_m, out_t, terms, pairs, expected, verbose)


def run(report: Report, verbose: bool = False) -> None:
    for d in DIFFERENCES:
        report.note_difference(d)
    kl = {"kl_approx": "ppo-kl"}
    ppo_aligned = {"critic_coef": 1.0, "normalize_advantage": False}
    common = {"marl_cls": PPOLoss, "tr_cls": TrPPO, "verbose": verbose}
    _case(
        report,
        "PPO",
        "defaults",
        seed=0,
        marl_kw={},
        tr_kw={},
        expected={"loss_objective": "ppo-norm-adv", "loss_critic": "pg-critic-coef", **kl},
        **common,
    )
    _case(report, "PPO", "aligned", seed=0, marl_kw=ppo_aligned, tr_kw={}, expected=kl, **common)
    _case(
        report,
        "PPO",
        "normalized adv.",
        seed=1,
        marl_kw={"critic_coef": 1.0},
        tr_kw={"normalize_advantage": True},
        expected=kl,
        **common,
    )
    _case(
        report,
        "PPO",
        "clip_value=0.1, l2",
        seed=2,
        marl_kw={**ppo_aligned, "clip_value": 0.1, "loss_critic_type": "l2"},
        tr_kw={"clip_value": 0.1, "loss_critic_type": "l2"},
        expected=kl,
        **common,
    )
    _case(
        report,
        "PPO",
        "GAE in loss",
        seed=3,
        marl_kw=ppo_aligned,
        tr_kw={},
        expected=kl,
        with_targets=False,
        **common,
    )
    _case(
        report,
        "PPO",
        "TanhNormal (MC entropy)",
        seed=4,
        marl_kw=ppo_aligned,
        tr_kw={},
        expected=kl,
        continuous=True,
        **common,
    )
    _case(
        report,
        "PPO",
        "grouped (MAPPO), GAE",
        seed=5,
        marl_kw={
            "critic_coef": 1.0,
            "normalize_advantage": True,
            "normalize_advantage_exclude_dims": (-2,),
        },
        tr_kw={"normalize_advantage": True, "normalize_advantage_exclude_dims": (-2,)},
        expected=kl,
        group="agents",
        with_targets=False,
        **common,
    )
    a2c = {"marl_cls": A2CLoss, "tr_cls": TrA2C, "verbose": verbose}
    a2c_aligned = {"critic_coef": 1.0, "loss_critic_type": "smooth_l1"}
    _case(
        report,
        "A2C",
        "defaults",
        seed=10,
        marl_kw={},
        tr_kw={},
        expected={"loss_critic": "pg-critic-coef+a2c-critic-loss"},
        **a2c,
    )
    _case(report, "A2C", "aligned", seed=10, marl_kw=a2c_aligned, tr_kw={}, expected={}, **a2c)
    _case(
        report,
        "A2C",
        "GAE in loss",
        seed=11,
        marl_kw=a2c_aligned,
        tr_kw={},
        expected={},
        with_targets=False,
        **a2c,
    )
    _case(
        report,
        "A2C",
        "TanhNormal (MC entropy)",
        seed=12,
        marl_kw=a2c_aligned,
        tr_kw={},
        expected={},
        continuous=True,
        **a2c,
    )
