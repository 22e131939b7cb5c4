"""DQN and QMIX/VDN: marl's ``DQNLoss``/``QMixLoss`` next to TorchRL's ``DQNLoss``/``QMixerLoss``.

TorchRL's Q-losses need a ``QValueModule`` after the network (it writes the greedy action and
its value); marl's losses take the bare network. Both get the same network: TorchRL's copy is
wrapped, so its parameter names carry a ``module.0.`` prefix that the pairing strips.
"""

from __future__ import annotations

import copy

import torch
from _harness import Difference, Report, compare_losses, pair_module, perturb_targets, sync
from _nets import N_AGENTS, action_value_net, transitions
from check_det import td_error_rows
from tensordict.nn import TensorDictModule, TensorDictSequential
from torchrl.modules import QValueModule
from torchrl.modules.models.multiagent import QMixer as TrQMixer
from torchrl.modules.models.multiagent import VDNMixer as TrVDNMixer
from torchrl.objectives import DQNLoss as TrDQN
from torchrl.objectives import QMixerLoss as TrQMixerLoss
from torchrl.objectives import ValueEstimators

from marl.modules import QMixer, VDNMixer
from marl.objectives import DQNLoss, DQNSettings, QMixLoss

BATCH = (64,)
GAMMA = 0.9
STATE = 7

DIFFERENCES = [
    Difference(
        "dqn-double",
        "DQN, QMIX",
        "next action in the target",
        "double_dqn=True (online network picks, target network scores)",
        "double_dqn=False (DQN); QMixerLoss has no double-Q option",
        "double Q-learning (van Hasselt et al., 2016) removes the max-operator's "
        "overestimation; pymarl's QMIX configs use it too",
        "marl double_dqn=False (and a DQN case with both double)",
    ),
    Difference(
        "dqn-loss-fn",
        "DQN",
        "Q regression loss",
        "loss_function='smooth_l1'",
        "loss_function='l2'",
        "Mnih et al. (2015) clip the TD error, i.e. a Huber loss, as SB3 and CleanRL do",
        "marl loss_function='l2'",
    ),
    Difference(
        "per-weights",
        "DQN (every off-policy loss)",
        "reduction with priority weights w",
        "mean(w * l)",
        "sum(w * l) / sum(w)",
        "Schaul et al. (2016) weight each sample's loss by w (normalised by its max in the "
        "sampler) and average; TorchRL self-normalises",
        "weights rescaled to mean 1, where the two reductions coincide",
    ),
    Difference(
        "dead-mask",
        "DQN, QMIX",
        "next state with no legal action (all-False mask)",
        "max over legal actions := 0",
        "finfo.min is bootstrapped",
        "a dead agent has no legal action; marl bootstraps 0 (its value) rather than a huge "
        "negative number",
        "not aligned; the masked cases give every row a legal action",
    ),
    Difference(
        "qmix-mixer",
        "QMIX",
        "QMixer architecture (a module, not the loss)",
        "two-layer hypernetworks for both mixing weights (hypernet_embed)",
        "one linear layer for each",
        "pymarl's QMIX (hypernet_layers=2) as used for the SMAC results",
        "the loss cases wrap one mixer for both losses: marl's QMixer, then TorchRL's",
    ),
]


def _qvalue_actor(net, group=None, mask=False):
    """TorchRL's view of ``net``: the network followed by a ``QValueModule``."""

    def k(name):
        return name if group is None else (group, name)

    qv = QValueModule(
        action_space="categorical",
        action_value_key=k("action_value"),
        action_mask_key=k("action_mask") if mask else None,
        out_keys=[k("action"), k("action_value"), k("chosen_action_value")],
    )
    return TensorDictSequential(copy.deepcopy(net), qv)


def _dqn(report, case, *, seed, marl_kw, tr_kw, expected, mask=False, weights=None, dead=False):
    torch.manual_seed(seed)
    net = action_value_net()
    marl_loss = DQNLoss(net, DQNSettings(gamma=GAMMA, **marl_kw))
    tr_loss = TrDQN(_qvalue_actor(net, mask=mask), action_space="categorical", **tr_kw)
    tr_loss.make_value_estimator(ValueEstimators.TD0, gamma=GAMMA)
    pairs = pair_module("qnet", marl_loss.value_network, tr_loss.value_network_params, "module.0.")
    sync(pairs)
    perturb_targets(marl_loss)
    sync(
        pair_module(
            "target_qnet",
            marl_loss.target_value_network,
            tr_loss.target_value_network_params,
            "module.0.",
        )
    )
    td = transitions(BATCH, seed=seed, continuous=False, mask=mask)
    if dead:  # a few non-terminal next states where no action is legal
        rows = torch.arange(0, BATCH[0], 8)
        td.get(("next", "action_mask"))[rows] = False
        td.get(("next", "terminated"))[rows] = False
        td.get(("next", "done"))[rows] = False
    if weights is not None:
        td.set("priority_weight", weights)
    td_m, td_t = td.clone(), td.clone()
    out_m, out_t = marl_loss(td_m), tr_loss(td_t)
    terms = {"loss_qvalue": "loss"}
    compare_losses(report, "DQN", case, out_m, out_t, terms, pairs, expected)
    # td errors do not depend on the reduction: "td_error^2" may override the loss's entry
    td_error_rows(
        report, "DQN", case, td_m, td_t, expected.get("td_error^2", expected.get("loss_qvalue"))
    )


def _per_agent_signals(td, group, seed):
    """Per-agent rewards and termination flags for marl; their team reduction for TorchRL
    (the mean reward, ``any`` termination), which is what marl documents it computes."""
    g = torch.Generator().manual_seed(seed)
    shape = (*BATCH, N_AGENTS, 1)
    reward = torch.randn(shape, generator=g, dtype=torch.get_default_dtype())
    term = torch.rand(shape, generator=g) < 0.05
    td_m = td.clone()
    td_m.set(("next", group, "reward"), reward)
    td_m.set(("next", group, "terminated"), term)
    td_t = td.clone()
    td_t.set(("next", "reward"), reward.mean(-2))
    td_t.set(("next", "terminated"), term.any(-2))
    return td_m, td_t


def _qmix(report, case, *, seed, marl_kw, expected, mixer="marl", mask=False, per_agent=False):
    torch.manual_seed(seed)
    g = "agents"
    net = action_value_net(g)
    if mixer == "marl":
        mix = QMixer(state_shape=(STATE,), mixing_embed_dim=8, n_agents=N_AGENTS, hypernet_embed=16)
    elif mixer == "torchrl":
        mix = TrQMixer(state_shape=(STATE,), mixing_embed_dim=8, n_agents=N_AGENTS, device="cpu")
    else:
        mix = VDNMixer(N_AGENTS)
    marl_loss = QMixLoss(net, mix, DQNSettings(gamma=GAMMA, **marl_kw))
    if mixer == "vdn":  # each library's own VDN mixer (no parameters)
        tr_mix = TensorDictModule(
            TrVDNMixer(N_AGENTS, device="cpu"),
            [(g, "chosen_action_value")],
            ["chosen_action_value"],
        )
    else:
        tr_mix = TensorDictModule(
            copy.deepcopy(mix), [(g, "chosen_action_value"), "state"], ["chosen_action_value"]
        )
    tr_loss = TrQMixerLoss(_qvalue_actor(net, g, mask), tr_mix, action_space="categorical")
    tr_loss.make_value_estimator(ValueEstimators.TD0, gamma=GAMMA)
    pairs = pair_module(
        "local_q", marl_loss.local_value_network, tr_loss.local_value_network_params, "module.0."
    )
    targets = pair_module(
        "target_local_q",
        marl_loss.target_local_value_network,
        tr_loss.target_local_value_network_params,
        "module.0.",
    )
    if mixer != "vdn":
        pairs += pair_module("mixer", marl_loss.mixer, tr_loss.mixer_network_params, "module.")
        targets += pair_module(
            "target_mixer", marl_loss.target_mixer, tr_loss.target_mixer_network_params, "module."
        )
    sync(pairs)
    perturb_targets(marl_loss)
    sync(targets)
    td = transitions(BATCH, g, seed=seed, continuous=False, team_reward=True, mask=mask)
    gen = torch.Generator().manual_seed(seed + 1)
    dtype = torch.get_default_dtype()
    td.set("state", torch.randn(*BATCH, STATE, generator=gen, dtype=dtype))
    td.set(("next", "state"), torch.randn(*BATCH, STATE, generator=gen, dtype=dtype))
    td_m, td_t = td.clone(), td.clone()
    if per_agent:
        marl_loss.set_keys(reward=("next", g, "reward"), terminated=("next", g, "terminated"))
        td_m, td_t = _per_agent_signals(td, g, seed + 2)
    out_m, out_t = marl_loss(td_m), tr_loss(td_t)
    terms = {"loss_qvalue": "loss"}
    compare_losses(report, "QMIX", case, out_m, out_t, terms, pairs, expected)
    td_error_rows(report, "QMIX", case, td_m, td_t, expected.get("loss_qvalue"))


def run(report: Report, verbose: bool = False) -> None:
    for d in DIFFERENCES:
        report.note_difference(d)
    aligned = {"double_dqn": False, "loss_function": "l2"}
    _dqn(
        report,
        "defaults",
        seed=40,
        # the DQN recipe's Huber loss (the `dqn` algorithm's default; DQNSettings' is l2)
        marl_kw={"loss_function": "smooth_l1"},
        tr_kw={},
        expected={"loss_qvalue": "dqn-double+dqn-loss-fn"},
    )
    _dqn(report, "aligned", seed=40, marl_kw=aligned, tr_kw={}, expected={})
    both_double = {"double_dqn": True, "loss_function": "l2"}
    _dqn(
        report, "double DQN", seed=41, marl_kw=both_double, tr_kw={"double_dqn": True}, expected={}
    )
    _dqn(
        report,
        "masked, double DQN",
        seed=42,
        marl_kw=both_double,
        tr_kw={"double_dqn": True},
        expected={},
        mask=True,
    )
    _dqn(
        report,
        "masked, dead next states",
        seed=42,
        marl_kw=aligned,
        tr_kw={},
        expected={"loss_qvalue": "dead-mask"},
        mask=True,
        dead=True,
    )
    w = torch.rand(BATCH, generator=torch.Generator().manual_seed(43)) + 0.1
    _dqn(
        report,
        "priority weights",
        seed=43,
        marl_kw=aligned,
        tr_kw={},
        expected={"loss_qvalue": "per-weights", "td_error^2": None},
        weights=w.to(torch.get_default_dtype()),
    )
    _dqn(
        report,
        "priority weights, mean 1",
        seed=43,
        marl_kw=aligned,
        tr_kw={},
        expected={},
        weights=(w / w.mean()).to(torch.get_default_dtype()),
    )
    _qmix(report, "defaults", seed=50, marl_kw={}, expected={"loss_qvalue": "dqn-double"})
    _qmix(report, "aligned", seed=50, marl_kw={"double_dqn": False}, expected={})
    _qmix(
        report,
        "masked, aligned",
        seed=51,
        marl_kw={"double_dqn": False},
        expected={},
        mask=True,
    )
    _qmix(
        report,
        "TorchRL's QMixer, aligned",
        seed=52,
        marl_kw={"double_dqn": False},
        expected={},
        mixer="torchrl",
    )
    _qmix(report, "VDN, aligned", seed=53, marl_kw={"double_dqn": False}, expected={}, mixer="vdn")
    _qmix(
        report,
        "per-agent reward & terminated, aligned",
        seed=54,
        marl_kw={"double_dqn": False},
        expected={},
        per_agent=True,
    )
