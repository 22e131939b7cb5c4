"""PQN's Q(lambda) targets and loss, checked against a direct computation."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from marl.objectives import PQNLoss, PQNSettings, QLambda


def _qnet(key="observation", out="action_value") -> TensorDictModule:
    """``Q(s, .) = [s, 2 s]``: greedy value ``2 s`` (``s`` when action 1 is illegal)."""
    lin = torch.nn.Linear(1, 2, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0], [2.0]]))
    return TensorDictModule(lin, [key], [out])


def _direct(gamma, lmbda, next_value, reward, done, term):
    """The lambda-returns by their definition, one step at a time from the end."""
    T = len(reward)
    out = [0.0] * T
    for t in reversed(range(T)):
        cut = done[t] or t == T - 1
        follow = next_value[t] if cut else out[t + 1]
        boot = (1 - lmbda) * next_value[t] + lmbda * follow
        out[t] = reward[t] + gamma * (0.0 if term[t] else 1.0) * boot
    return out


def _rollout():
    obs = torch.tensor([0.5, 1.0, 1.5, 2.0, 2.5]).reshape(1, 5, 1)
    nxt = torch.tensor([1.0, 1.5, 0.2, 2.5, 3.0]).reshape(1, 5, 1)
    reward = torch.tensor([1.0, -1.0, 0.5, 2.0, 1.0]).reshape(1, 5, 1)
    # step 1 truncated (cut, bootstrapped), step 3 terminated (no bootstrap)
    done = torch.tensor([0, 1, 0, 1, 0], dtype=torch.bool).reshape(1, 5, 1)
    term = torch.tensor([0, 0, 0, 1, 0], dtype=torch.bool).reshape(1, 5, 1)
    td = TensorDict(
        {
            "observation": obs,
            "action": torch.tensor([[0, 1, 1, 0, 1]]),
            "next": {"observation": nxt, "reward": reward, "done": done, "terminated": term},
        },
        batch_size=[1, 5],
    )
    return td, nxt.flatten().tolist(), reward.flatten().tolist(), done.flatten(), term.flatten()


@pytest.mark.parametrize("lmbda", [0.0, 0.65, 1.0])
def test_q_lambda_targets_match_the_definition(lmbda):
    td, nxt, reward, done, term = _rollout()
    QLambda(_qnet(), gamma=0.9, lmbda=lmbda)(td)
    greedy = [2 * s for s in nxt]
    expected = _direct(0.9, lmbda, greedy, reward, done.tolist(), term.tolist())
    assert td["value_target"].flatten().tolist() == pytest.approx(expected)
    chosen = [s * (1 + a) for s, a in zip([0.5, 1.0, 1.5, 2.0, 2.5], [0, 1, 1, 0, 1])]
    advantage = [g - q for g, q in zip(expected, chosen)]
    assert td["advantage"].flatten().tolist() == pytest.approx(advantage)


def test_the_bootstrap_maximum_is_over_legal_actions():
    td, nxt, reward, done, term = _rollout()
    td["next", "action_mask"] = torch.tensor([[True, False]]).expand(1, 5, 2)
    QLambda(_qnet(), gamma=0.9, lmbda=0.5)(td)
    expected = _direct(0.9, 0.5, nxt, reward, done.tolist(), term.tolist())  # Q(s', 0) = s'
    assert td["value_target"].flatten().tolist() == pytest.approx(expected)


def test_team_targets_sum_the_agents_values_on_the_mean_reward():
    td, nxt, reward, done, term = _rollout()
    n = 2
    group = TensorDict(
        {
            "observation": torch.stack([td["observation"], 2 * td["observation"]], 2),
            "action": torch.zeros(1, 5, n, dtype=torch.long),
        },
        batch_size=[1, 5, n],
    )
    next_group = TensorDict(
        {
            "observation": torch.stack([td["next", "observation"], -td["next", "observation"]], 2),
            "reward": torch.stack([td["next", "reward"], 3 * td["next", "reward"]], 2),
        },
        batch_size=[1, 5, n],
    )
    team = TensorDict(
        {
            "agents": group,
            "next": {
                "agents": next_group,
                "done": td["next", "done"],
                "terminated": term.reshape(1, 5, 1),
            },
        },
        batch_size=[1, 5],
    )
    est = QLambda(
        _qnet(("agents", "observation"), ("agents", "action_value")),
        gamma=0.9,
        lmbda=0.5,
        team=True,
    )
    est.set_keys(
        action=("agents", "action"),
        action_value=("agents", "action_value"),
        action_mask=("agents", "action_mask"),
        reward=("next", "agents", "reward"),
        advantage=("agents", "advantage"),
        value_target=("agents", "value_target"),
    )
    est(team)
    # agent 0 greedy 2 s', agent 1 (observing -s') greedy max(-s', -2 s') = -s'
    team_next = [2 * s + (-s) for s in nxt]
    team_reward = [(r + 3 * r) / 2 for r in reward]
    expected = _direct(0.9, 0.5, team_next, team_reward, done.tolist(), term.tolist())
    target = team["agents", "value_target"]
    assert target.shape == (1, 5, n, 1)
    assert target[0, :, 0, 0].tolist() == pytest.approx(expected)
    assert torch.equal(target[..., 0, :], target[..., 1, :])


def test_loss_regresses_the_chosen_value_on_the_target():
    td, *_ = _rollout()
    loss = PQNLoss(_qnet(), PQNSettings(gamma=0.9, lmbda=0.65))
    loss.value_estimator(td)
    flat = td.reshape(-1)
    out = loss(flat)
    q = flat["observation"].flatten() * (1 + flat["action"].float())
    expected = (q - flat["value_target"].flatten()).pow(2).mean()
    assert out["loss_qvalue"].item() == pytest.approx(expected.item())
    out["loss_qvalue"].backward()
    grad = loss.value_network.module.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    assert loss.in_keys == ["observation", "action", "value_target", "priority_weight"]


def test_bad_lambda_is_refused():
    with pytest.raises(ValueError, match="lmbda must be in"):
        QLambda(_qnet(), lmbda=1.5)
