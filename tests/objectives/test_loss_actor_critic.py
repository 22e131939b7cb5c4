"""SAC, discrete SAC, TD3 and DDPG on small grouped batches ``[B, n_agents, ...]``."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import (
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import nn

from marl.modules import MaskedCategorical, TanhNormal
from marl.objectives import (
    DDPGLoss,
    DDPGSettings,
    DiscreteSACLoss,
    SACLoss,
    SACSettings,
    TD3Loss,
    TD3Settings,
)

B, N, OBS, ACT, NA = 5, 2, 3, 2, 4
GAMMA = 0.9
G = "agents"


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(OBS + ACT, 1)

    def forward(self, obs, act):
        return self.lin(torch.cat([obs, act], -1))


def data(seed=0, discrete=False):
    g = torch.Generator().manual_seed(seed)
    action = (
        torch.randint(NA, (B, N), generator=g)
        if discrete
        else torch.rand(B, N, ACT, generator=g) * 2 - 1
    )
    td = TensorDict(
        {
            G: {"observation": torch.randn(B, N, OBS, generator=g), "action": action},
            "next": {
                G: {
                    "observation": torch.randn(B, N, OBS, generator=g),
                    "reward": torch.randn(B, N, 1, generator=g),
                },
                "terminated": torch.tensor([[i % 2 == 0] for i in range(B)]),
            },
        },
        batch_size=[B],
    )
    if discrete:
        mask = torch.rand(B, N, NA, generator=g) < 0.7
        mask[..., 1] = True
        td[G, "action_mask"] = mask
        td["next", G, "action_mask"] = (torch.rand(B, N, NA, generator=g) < 0.7) | torch.eye(NA)[
            0
        ].bool()
        td[G, "action"] = torch.where(mask.gather(-1, action.unsqueeze(-1)).squeeze(-1), action, 1)
    td["next", "done"] = td["next", "terminated"].clone()
    return td


def keys(loss):
    return loss.set_keys(
        action=(G, "action"),
        reward=("next", G, "reward"),
        **{k: (G, k) for k in ("state_action_value", "action_value") if k in loss.default_keys},
    )


def tanh_actor():
    net = nn.Sequential(nn.Linear(OBS, 2 * ACT), NormalParamExtractor())
    return ProbabilisticTensorDictSequential(
        TensorDictModule(net, [(G, "observation")], [(G, "loc"), (G, "scale")]),
        ProbabilisticTensorDictModule(
            [(G, "loc"), (G, "scale")], [(G, "action")], distribution_class=TanhNormal
        ),
    )


def q_module():
    return TensorDictModule(
        QNet(), [(G, "observation"), (G, "action")], [(G, "state_action_value")]
    )


def test_sac_grouped_value_and_gradients():
    td = data()
    actor, q = tanh_actor(), q_module()
    loss = keys(SACLoss(actor, q, SACSettings(gamma=GAMMA, alpha_init=0.5)))
    q1, q2 = loss.qvalue_networks
    assert not torch.equal(q1.module.lin.weight, q2.module.lin.weight)  # independent init
    torch.manual_seed(0)
    out = loss(td)

    def dist(obs):
        loc, scale = actor[0].module(obs)
        return TanhNormal(loc, scale)

    torch.manual_seed(0)
    alpha = 0.5
    with torch.no_grad():
        nd = dist(td["next", G, "observation"])
        na = nd.sample()
        nlp = nd.log_prob(na).unsqueeze(-1)
        tq = [t.module(td["next", G, "observation"], na) for t in loss.target_qvalue_networks]
        next_v = torch.minimum(*tq) - alpha * nlp
        y = td["next", G, "reward"] + GAMMA * (~td["next", "terminated"]).unsqueeze(-1) * next_v
    obs = td[G, "observation"]
    preds = [qq.module(obs, td[G, "action"]) for qq in (q1, q2)]
    ref_q = sum(((p - y) ** 2).mean() for p in preds)
    d = dist(obs)
    a = d.rsample()
    lp = d.log_prob(a).unsqueeze(-1)
    qpi = torch.minimum(q1.module(obs, a), q2.module(obs, a))
    ref_actor = (alpha * lp - qpi).mean()
    ref_alpha = loss.log_alpha * (-lp.detach() - (-ACT)).mean()
    torch.testing.assert_close(out["loss_qvalue"], ref_q)
    torch.testing.assert_close(out["loss_actor"], ref_actor)
    torch.testing.assert_close(out["loss_alpha"], ref_alpha)
    actor_params = list(actor.parameters())
    for x, y_ in zip(
        torch.autograd.grad(out["loss_actor"], actor_params, retain_graph=True),
        torch.autograd.grad(ref_actor, actor_params, retain_graph=True),
    ):
        torch.testing.assert_close(x, y_)
    # the actor term must not train the critics
    qgrads = torch.autograd.grad(
        out["loss_actor"], list(loss.qvalue_networks.parameters()), allow_unused=True
    )
    assert all(g is None or torch.count_nonzero(g) == 0 for g in qgrads)
    assert td["td_error"].shape == (B, N)


def test_sac_alpha_moves_towards_target_entropy():
    td = data()
    loss = keys(SACLoss(tanh_actor(), q_module(), SACSettings(target_entropy=100.0)))
    (g,) = torch.autograd.grad(loss(td)["loss_alpha"], [loss.log_alpha])
    assert g < 0  # entropy far below target: gradient descent raises alpha
    fixed = keys(SACLoss(tanh_actor(), q_module(), SACSettings(fixed_alpha=True)))
    assert not fixed.log_alpha.requires_grad


def discrete_actor():
    return ProbabilisticTensorDictSequential(
        TensorDictModule(nn.Linear(OBS, NA), [(G, "observation")], [(G, "logits")]),
        ProbabilisticTensorDictModule(
            {"logits": (G, "logits"), "mask": (G, "action_mask")},
            [(G, "action")],
            distribution_class=MaskedCategorical,
        ),
    )


def test_discrete_sac_masked_value_and_gradient():
    td = data(discrete=True)
    actor = discrete_actor()
    q = TensorDictModule(nn.Linear(OBS, NA), [(G, "observation")], [(G, "action_value")])
    loss = keys(DiscreteSACLoss(actor, q, SACSettings(gamma=GAMMA, alpha_init=0.3)))
    out = loss(td)
    alpha = 0.3
    lin = actor[0].module

    def policy(obs, mask):
        logp = torch.log_softmax(lin(obs).masked_fill(~mask, -1e9), -1)
        p = logp.exp()
        return p, torch.where(mask, logp, torch.zeros_like(logp))

    with torch.no_grad():
        np_, nlogp = policy(td["next", G, "observation"], td["next", G, "action_mask"])
        nq = torch.minimum(
            *[t.module(td["next", G, "observation"]) for t in loss.target_qvalue_networks]
        )
        nv = (np_ * (nq - alpha * nlogp)).sum(-1, keepdim=True)
        y = td["next", G, "reward"] + GAMMA * (~td["next", "terminated"]).unsqueeze(-1) * nv
    obs = td[G, "observation"]
    qs = [m.module(obs) for m in loss.qvalue_networks]
    a = td[G, "action"].unsqueeze(-1)
    ref_q = sum(((qq.gather(-1, a) - y) ** 2).mean() for qq in qs)
    p, logp = policy(obs, td[G, "action_mask"])
    ref_actor = (p * (alpha * logp - torch.minimum(*qs).detach())).sum(-1).mean()
    torch.testing.assert_close(out["loss_qvalue"], ref_q)
    torch.testing.assert_close(out["loss_actor"], ref_actor)
    for x, y_ in zip(
        torch.autograd.grad(out["loss_actor"], list(actor.parameters()), retain_graph=True),
        torch.autograd.grad(ref_actor, list(actor.parameters())),
    ):
        torch.testing.assert_close(x, y_)
    assert all(torch.isfinite(v).all() for v in out.values())
    ent = -(p * logp).sum(-1).mean()
    torch.testing.assert_close(out["loss_alpha"], loss.log_alpha * (ent - 0.98 * math.log(NA)))


def det_actor():
    return TensorDictModule(
        nn.Sequential(nn.Linear(OBS, ACT), nn.Tanh()), [(G, "observation")], [(G, "action")]
    )


def test_ddpg_value_and_gradients():
    td = data()
    actor, q = det_actor(), q_module()
    loss = keys(DDPGLoss(actor, q, DDPGSettings(gamma=GAMMA)))
    out = loss(td)
    obs, nobs = td[G, "observation"], td["next", G, "observation"]
    with torch.no_grad():
        na = loss.target_actor.module(nobs)
        y = td["next", G, "reward"] + GAMMA * (~td["next", "terminated"]).unsqueeze(-1) * (
            loss.target_value_network.module(nobs, na)
        )
    ref_value = ((q.module(obs, td[G, "action"]) - y) ** 2).mean()
    ref_actor = -q.module(obs, actor.module(obs)).mean()
    torch.testing.assert_close(out["loss_value"], ref_value)
    torch.testing.assert_close(out["loss_actor"], ref_actor)
    ga = torch.autograd.grad(out["loss_actor"], list(actor.parameters()), retain_graph=True)
    gr = torch.autograd.grad(ref_actor, list(actor.parameters()))
    for x, y_ in zip(ga, gr):
        torch.testing.assert_close(x, y_)
    qg = torch.autograd.grad(out["loss_actor"], list(q.parameters()), allow_unused=True)
    assert all(g is None for g in qg)
    # the input batch keeps its data action
    assert not td[G, "action"].requires_grad


def test_td3_value_delay_and_smoothing():
    td = data()
    actor, q = det_actor(), q_module()
    loss = keys(TD3Loss(actor, q, TD3Settings(gamma=GAMMA, policy_noise=0.0, policy_delay=2)))
    out = loss(td)
    obs, nobs = td[G, "observation"], td["next", G, "observation"]
    with torch.no_grad():
        na = loss.target_actor.module(nobs)
        tq = torch.minimum(*[t.module(nobs, na) for t in loss.target_qvalue_networks])
        y = td["next", G, "reward"] + GAMMA * (~td["next", "terminated"]).unsqueeze(-1) * tq
    ref_q = sum(((m.module(obs, td[G, "action"]) - y) ** 2).mean() for m in loss.qvalue_networks)
    torch.testing.assert_close(out["loss_qvalue"], ref_q)
    torch.testing.assert_close(
        out["loss_actor"], -loss.qvalue_networks[0].module(obs, actor.module(obs)).mean()
    )
    assert bool(out["update_actor"])
    out2 = loss(td)
    assert not bool(out2["update_actor"]) and out2["loss_actor"] == 0
    assert bool(loss(td)["update_actor"])
    # smoothing noise is clipped and the action stays in bounds: a huge noise changes nothing
    # beyond the bounds, so the target lies within the bounded Q range
    noisy = keys(
        TD3Loss(actor, q, TD3Settings(policy_noise=100.0, noise_clip=0.5), low=-1.0, high=1.0)
    )
    assert torch.isfinite(noisy(td)["loss_qvalue"])
    with pytest.raises(ValueError, match="policy_delay"):
        TD3Loss(actor, q, TD3Settings(policy_delay=0))
