"""DQN and QMIX/VDN losses on hand-made batches with a tabular Q-function."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from marl.modules import QMixer, VDNMixer
from marl.objectives import DQNLoss, DQNSettings, HardUpdate, QMixLoss, SoftUpdate

S, A, B, N = 4, 3, 6, 2
GAMMA = 0.9


def table_net(obs_key, out_key):
    """Q(s, .) = row s of a table: the observation is one-hot, the layer has no bias."""
    lin = torch.nn.Linear(S, A, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.arange(S * A, dtype=torch.float32).reshape(S, A).T.sin() * 3)
    return TensorDictModule(lin, [obs_key], [out_key])


def q_table(module):
    return module.module.weight.detach().T  # [S, A]


def grouped_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    s = torch.randint(S, (B, N), generator=g)
    s2 = torch.randint(S, (B, N), generator=g)
    mask = torch.rand(B, N, A, generator=g) < 0.6
    mask[..., 0] |= ~mask.any(-1)  # at least one legal action
    mask[0, 0] = False  # a dead agent: nothing legal -> bootstraps 0
    td = TensorDict(
        {
            "agents": {
                "observation": F.one_hot(s, S).float(),
                "action": torch.randint(A, (B, N), generator=g),
            },
            "next": {
                "agents": {
                    "observation": F.one_hot(s2, S).float(),
                    "action_mask": mask,
                    "reward": torch.randn(B, N, 1, generator=g),
                },
                "terminated": torch.tensor([[i % 3 == 0] for i in range(B)]),
                "truncated": torch.tensor([[i % 3 == 1] for i in range(B)]),
            },
        },
        batch_size=[B],
    )
    td["next", "done"] = td["next", "terminated"] | td["next", "truncated"]
    return td, s, s2, mask


def test_dqn_grouped_double_masked_value_gradient_td_error():
    td, s, s2, mask = grouped_batch()
    net = table_net(("agents", "observation"), ("agents", "action_value"))
    loss = DQNLoss(net, DQNSettings(gamma=GAMMA, loss_function="l2")).set_keys(
        action=("agents", "action"),
        action_value=("agents", "action_value"),
        action_mask=("agents", "action_mask"),
        reward=("next", "agents", "reward"),
    )
    with torch.no_grad():  # make the target network differ from the online one
        loss.target_value_network.module.weight.mul_(-0.5).add_(1.0)
    td["priority_weight"] = torch.linspace(0.5, 1.5, B)
    out = loss(td)
    Q, Qt = q_table(net), q_table(loss.target_value_network)
    expected = torch.zeros(B, N)
    for b in range(B):
        for i in range(N):
            q = Q[s[b, i], td["agents", "action"][b, i]]
            legal = mask[b, i]
            if legal.any():
                online = Q[s2[b, i]].masked_fill(~legal, -float("inf"))
                next_q = Qt[s2[b, i], online.argmax()]
            else:
                next_q = torch.tensor(0.0)
            term = bool(td["next", "terminated"][b, 0])  # truncated steps still bootstrap
            y = td["next", "agents", "reward"][b, i, 0] + GAMMA * (not term) * next_q
            expected[b, i] = q - y
    w = td["priority_weight"].unsqueeze(-1)
    torch.testing.assert_close(out["loss_qvalue"], (w * expected**2).mean())
    torch.testing.assert_close(td["td_error"], expected.abs())
    # gradient of mean(w * (Q[s,a] - y)^2) w.r.t. the table
    grad = torch.autograd.grad(out["loss_qvalue"], net.module.weight)[0]
    ref = torch.zeros(A, S)
    for b in range(B):
        for i in range(N):
            ref[td["agents", "action"][b, i], s[b, i]] += 2 * w[b, 0] * expected[b, i] / (B * N)
    torch.testing.assert_close(grad, ref)


def test_dqn_single_agent_one_hot_actions_and_plain_max():
    td, s, s2, _ = grouped_batch(seed=3)
    td = TensorDict(
        {
            "observation": td["agents", "observation"][:, 0],
            "action": F.one_hot(td["agents", "action"][:, 0], A).float(),
            "next": {
                "observation": td["next", "agents", "observation"][:, 0],
                "reward": td["next", "agents", "reward"][:, 0],
                "done": td["next", "done"],
            },
        },
        batch_size=[B],
    )
    net = table_net("observation", "action_value")
    out = DQNLoss(net, DQNSettings(gamma=GAMMA, double_dqn=False, loss_function="l1"))(td)
    Q = q_table(net)
    q = (Q[s[:, 0]] * td["action"]).sum(-1)
    # no terminated key: done is used (no bootstrapping at any end)
    y = (
        td["next", "reward"][:, 0]
        + GAMMA * (~td["next", "done"][:, 0]) * Q[s2[:, 0]].max(-1).values
    )
    torch.testing.assert_close(out["loss_qvalue"], (q - y).abs().mean())
    assert td["td_error"].shape == (B,)


@pytest.mark.parametrize("mixer_kind", ["vdn", "qmix"])
def test_qmix_loss_value_and_gradient(mixer_kind):
    td, s, s2, mask = grouped_batch(seed=1)
    td["state"] = torch.randn(B, 5)
    td["next", "state"] = torch.randn(B, 5)
    td["next", "reward"] = td["next", "agents", "reward"].mean(-2)  # team reward [B, 1]
    del td["next", "agents", "reward"]
    net = table_net(("agents", "observation"), ("agents", "action_value"))
    mixer = VDNMixer(N) if mixer_kind == "vdn" else QMixer((5,), 8, N)
    loss = QMixLoss(net, mixer, DQNSettings(gamma=GAMMA))
    out = loss(td)
    Q = net.module.weight.T  # with grad, for the reference gradient
    chosen = Q[s, td["agents", "action"]]  # [B, N]
    online_next = Q[s2].masked_fill(~mask, -float("inf"))
    Qt = q_table(loss.target_local_value_network)
    next_q = Qt[s2].gather(-1, online_next.argmax(-1, keepdim=True)).squeeze(-1)
    next_q = next_q.masked_fill(~mask.any(-1), 0.0)
    q_tot = mixer(chosen, td["state"])
    next_tot = loss.target_mixer(next_q.detach(), td["next", "state"])
    y = td["next", "reward"] + GAMMA * (~td["next", "terminated"]) * next_tot
    ref = ((q_tot - y.detach()) ** 2).mean()
    torch.testing.assert_close(out["loss_qvalue"], ref)
    params = [net.module.weight, *mixer.parameters()]
    for a, b in zip(
        torch.autograd.grad(out["loss_qvalue"], params), torch.autograd.grad(ref, params)
    ):
        torch.testing.assert_close(a, b)
    assert td["td_error"].shape == (B,)


def test_qmix_per_agent_reward_is_averaged():
    td, *_ = grouped_batch(seed=2)
    net = table_net(("agents", "observation"), ("agents", "action_value"))
    loss = QMixLoss(net, VDNMixer(N)).set_keys(reward=("next", "agents", "reward"))
    out1 = loss(td)
    td["next", "reward"] = td["next", "agents", "reward"].mean(-2)
    out2 = loss.set_keys(reward=("next", "reward"))(td)
    torch.testing.assert_close(out1["loss_qvalue"], out2["loss_qvalue"])


def test_qmix_per_agent_reward_keeps_float64():
    # the team reward of a float64 batch was averaged in float32 (found by the TorchRL
    # cross-check): the loss then differed from the float64 team reward's by ~1e-8
    td, *_ = grouped_batch(seed=3)
    td = td.apply(lambda x: x.double() if x.is_floating_point() else x)
    net = table_net(("agents", "observation"), ("agents", "action_value")).double()
    loss = QMixLoss(net, VDNMixer(N)).set_keys(reward=("next", "agents", "reward"))
    out1 = loss(td)
    td["next", "reward"] = td["next", "agents", "reward"].mean(-2)
    out2 = loss.set_keys(reward=("next", "reward"))(td)
    assert out1["loss_qvalue"].dtype == torch.float64
    torch.testing.assert_close(out1["loss_qvalue"], out2["loss_qvalue"], rtol=0, atol=1e-12)


def test_target_updates():
    net = table_net("observation", "action_value")
    loss = DQNLoss(net)
    ((online, target),) = loss.target_pairs()
    assert not any(p.requires_grad for p in target.parameters())
    with torch.no_grad():
        online.module.weight.add_(1.0)
    w0 = target.module.weight.clone()
    SoftUpdate(loss, tau=0.25).step()
    torch.testing.assert_close(target.module.weight, 0.75 * w0 + 0.25 * online.module.weight)
    hard = HardUpdate(loss, period=3)
    hard.step(), hard.step()
    assert not torch.equal(target.module.weight, online.module.weight)
    hard.step()
    assert torch.equal(target.module.weight, online.module.weight)
    with pytest.raises(ValueError, match="tau"):
        SoftUpdate(loss, tau=0.0)
    with pytest.raises(ValueError, match="period"):
        HardUpdate(loss, period=0)
