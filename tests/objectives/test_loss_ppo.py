"""PPO and A2C: loss values and gradients against hand-written formulas."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _loss_helpers import batch, categorical_actor
from tensordict.nn import TensorDictModule

from marl.objectives import A2CLoss, A2CSettings, PPOLoss, PPOSettings

B, N, A = 8, 3, 4


def _grouped():
    td = batch(B=B, n=N, group="agents", seed=1)
    actor = categorical_actor(
        ("agents", "observation"), ("agents", "action"), logits_key=("agents", "logits")
    )
    with torch.no_grad():
        actor(td)
    # pretend the data came from an older policy
    td["agents", "action_log_prob"] = td["agents", "action_log_prob"] + 0.3 * torch.randn(B, N)
    td["agents", "advantage"] = torch.randn(B, N, 1)
    td["agents", "value_target"] = torch.randn(B, N, 1)
    td["agents", "state_value"] = torch.randn(B, N, 1)
    critic = TensorDictModule(
        torch.nn.Linear(3, 1), [("agents", "observation")], [("agents", "state_value")]
    )
    return td, actor, critic


def _group_keys(loss):
    return loss.set_keys(
        action=("agents", "action"),
        sample_log_prob=("agents", "action_log_prob"),
        advantage=("agents", "advantage"),
        value_target=("agents", "value_target"),
        value=("agents", "state_value"),
        reward=("next", "agents", "reward"),
    )


def _manual(td, actor, critic, eps, ent_coef, crit_coef, exclude_agent_dim, clip=True):
    lin = actor[0].module
    logits = lin(td["agents", "observation"])
    logp_all = F.log_softmax(logits, -1)
    logp = logp_all.gather(-1, td["agents", "action"].unsqueeze(-1))  # [B, N, 1]
    adv = td["agents", "advantage"]
    dims = (0, 2) if exclude_agent_dim else (0, 1, 2)
    adv = (adv - adv.mean(dims, keepdim=True)) / adv.std(dims, keepdim=True)
    ratio = (logp - td["agents", "action_log_prob"].unsqueeze(-1)).exp()
    if clip:
        obj = -torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv).mean()
    else:
        obj = -(adv * logp).mean()
    entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
    value = critic.module(td["agents", "observation"])
    crit = crit_coef * F.smooth_l1_loss(value, td["agents", "value_target"])
    return obj, -ent_coef * entropy, crit


@pytest.mark.parametrize("exclude", [False, True])
def test_ppo_grouped_value_and_gradient(exclude):
    td, actor, critic = _grouped()
    loss = _group_keys(
        PPOLoss(
            actor,
            critic,
            # smooth_l1: the reference critic loss of _manual
            PPOSettings(
                clip_epsilon=0.1, entropy_coef=0.02, critic_coef=0.7, loss_critic_type="smooth_l1"
            ),
            normalize_advantage_exclude_dims=(-2,) if exclude else (),
        )
    )
    out = loss(td)
    obj, ent, crit = _manual(td, actor, critic, 0.1, 0.02, 0.7, exclude)
    torch.testing.assert_close(out["loss_objective"], obj)
    torch.testing.assert_close(out["loss_entropy"], ent)
    torch.testing.assert_close(out["loss_critic"], crit)
    params = [*actor.parameters(), *critic.parameters()]
    g_loss = torch.autograd.grad(
        out["loss_objective"] + out["loss_entropy"] + out["loss_critic"], params
    )
    g_ref = torch.autograd.grad(obj + ent + crit, params)
    for a, b in zip(g_loss, g_ref):
        torch.testing.assert_close(a, b)
    assert 0.0 <= out["clip_fraction"] <= 1.0
    # the critic must not overwrite the stored (old) values
    assert not td["agents", "state_value"].requires_grad


def test_ppo_single_agent_default_keys_and_gae():
    td = batch(B=B, seed=2)
    td = td.unsqueeze(0)  # [env, T]
    actor = categorical_actor("observation", "action")
    critic = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["state_value"])
    with torch.no_grad():
        actor(td)
    # an entropy bonus, so that loss_entropy is in the output
    loss = PPOLoss(actor, critic, PPOSettings(gamma=0.9, lmbda=0.8, entropy_coef=0.01))
    out = loss(td)
    assert "advantage" in td.keys() and td["advantage"].shape == (1, B, 1)
    for k in ("loss_objective", "loss_critic", "loss_entropy"):
        assert out[k].requires_grad and torch.isfinite(out[k])
    # on-policy data: ratio 1 everywhere, nothing is clipped
    assert out["clip_fraction"] == 0
    torch.testing.assert_close(out["kl_approx"], torch.tensor(0.0))


def test_ppo_clip_stops_gradient():
    td, actor, _ = _grouped()
    td["agents", "action_log_prob"] = td["agents", "action_log_prob"] - 5.0  # ratio >> 1 + eps
    td["agents", "advantage"] = torch.ones(B, N, 1).abs() + torch.rand(B, N, 1)
    loss = _group_keys(
        PPOLoss(actor, None, PPOSettings(entropy_coef=0.0, normalize_advantage=False))
    )
    out = loss(td)
    grads = torch.autograd.grad(out["loss_objective"], list(actor.parameters()))
    assert all(torch.count_nonzero(g) == 0 for g in grads)
    assert out["clip_fraction"] == 1


def test_a2c_value_and_gradient():
    td, actor, critic = _grouped()
    loss = _group_keys(
        A2CLoss(
            actor,
            critic,
            A2CSettings(
                entropy_coef=0.02,
                critic_coef=0.7,
                loss_critic_type="smooth_l1",
                normalize_advantage=True,
            ),
        )
    )
    out = loss(td)
    obj, _, _ = _manual(td, actor, critic, 0.0, 0.02, 0.7, False, clip=False)
    torch.testing.assert_close(out["loss_objective"], obj)
    g1 = torch.autograd.grad(out["loss_objective"], list(actor.parameters()))
    g2 = torch.autograd.grad(obj, list(actor.parameters()))
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)


def test_priority_weight_applied():
    td, actor, critic = _grouped()
    loss = _group_keys(PPOLoss(actor, critic, PPOSettings(entropy_coef=0.0)))
    base = loss(td)["loss_critic"]
    td["priority_weight"] = torch.full((B,), 2.0)
    torch.testing.assert_close(loss(td)["loss_critic"], 2 * base)


@pytest.mark.parametrize(
    ("cls", "settings"),
    [(PPOLoss, PPOSettings), (A2CLoss, A2CSettings)],
    ids=["PPOLoss", "A2CLoss"],
)
def test_entropy_bonus_is_weighted_like_the_objective(cls, settings):
    # Agents weighted out (dead, or not acting) must not reach the entropy term.
    td, actor, critic = _grouped()
    loss = _group_keys(cls(actor, critic, settings(entropy_coef=0.5)))
    plain = loss(td)
    assert torch.allclose(plain["loss_entropy"], -0.5 * plain["entropy"])
    td["priority_weight"] = torch.zeros(B)
    weighted = loss(td)
    assert weighted["loss_entropy"].item() == 0.0
    assert weighted["entropy"] == plain["entropy"]  # the diagnostic stays unweighted


def test_set_keys_errors_and_forwarding():
    _, actor, critic = _grouped()
    loss = PPOLoss(actor, critic)
    with pytest.raises(KeyError, match=r"valid names are .*'advantage'"):
        loss.set_keys(advantages="x")
    with pytest.raises(TypeError):
        loss.set_keys(action=3)
    _group_keys(loss)
    assert loss.value_estimator.tensor_keys.value == ("agents", "state_value")
    assert loss.value_estimator.tensor_keys.reward == ("next", "agents", "reward")
    with pytest.raises(TypeError, match="get_dist"):
        PPOLoss(critic)


def test_losses_deepcopy_and_pickle():
    import copy
    import pickle

    _, actor, critic = _grouped()
    loss = _group_keys(PPOLoss(actor, critic))
    clone = copy.deepcopy(loss)
    assert clone.tensor_keys.action == ("agents", "action")
    restored = pickle.loads(pickle.dumps(loss))
    assert restored.value_estimator.tensor_keys.value == ("agents", "state_value")
