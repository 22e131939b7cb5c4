"""Distributions, exploration modules and recurrent modules."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import TensorDict
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    set_interaction_type,
)
from torch import distributions as D

from marl.modules import (
    AdditiveGaussian,
    EGreedy,
    GRUModule,
    LSTMModule,
    MaskedCategorical,
    OneHotCategorical,
    OrnsteinUhlenbeck,
    TanhNormal,
)

# -- distributions ----------------------------------------------------------------------


def test_tanh_normal_log_prob_matches_transformed_distribution():
    loc, scale = torch.randn(6, 3, dtype=torch.float64), torch.rand(6, 3, dtype=torch.float64) + 0.1
    low, high = -2.0, 3.0
    d = TanhNormal(loc, scale, low=low, high=high)
    ref = D.TransformedDistribution(
        D.Normal(loc, scale),
        [D.TanhTransform(), D.AffineTransform((high + low) / 2, (high - low) / 2)],
    )
    a = d.sample()
    assert bool(((a > low) & (a < high)).all())
    torch.testing.assert_close(d.log_prob(a), ref.log_prob(a).sum(-1))
    torch.testing.assert_close(d.log_prob(a.clone()), ref.log_prob(a).sum(-1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(d.mode, torch.tanh(loc) * 2.5 + 0.5)


def test_tanh_normal_is_stable_at_the_bounds():
    d = TanhNormal(torch.full((4, 2), 20.0), torch.full((4, 2), 0.01))
    a = d.rsample()  # saturates to exactly 1.0 in float32
    lp = d.log_prob(a)
    assert torch.isfinite(lp).all()
    assert torch.isfinite(d.log_prob(torch.ones(4, 2))).all()
    loc = torch.zeros(3, 2, requires_grad=True)
    d = TanhNormal(loc, torch.ones(3, 2))
    d.log_prob(d.rsample()).sum().backward()
    assert torch.isfinite(loc.grad).all()
    with pytest.raises(ValueError, match="high > low"):
        TanhNormal(torch.zeros(2), torch.ones(2), low=1.0, high=1.0)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(2, 6),
    batch=st.integers(1, 5),
    seed=st.integers(0, 10_000),
)
def test_masked_categorical_samples_and_mode_are_legal(n, batch, seed):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(batch, n, generator=g) < 0.5
    mask[torch.arange(batch), torch.randint(n, (batch,), generator=g)] = True
    logits = torch.randn(batch, n, generator=g) * 5
    logits[~mask] += 100.0  # illegal actions are the most attractive ones
    d = MaskedCategorical(logits=logits, mask=mask)
    samples = d.sample((200,))
    assert bool(mask.gather(-1, samples.T).all())
    assert bool(mask.gather(-1, d.mode.unsqueeze(-1)).all())
    assert torch.isfinite(d.entropy()).all()
    oh = OneHotCategorical(logits=logits, mask=mask)
    assert bool((oh.sample((50,)).bool() <= mask).all())
    assert bool((oh.mode.bool() <= mask).all())


def test_masked_categorical_errors_and_tensordict_integration():
    with pytest.raises(ValueError, match="at least one"):
        MaskedCategorical(
            logits=torch.zeros(2, 3), mask=torch.tensor([[True, False, False]] * 1 + [[False] * 3])
        )
    with pytest.raises(ValueError, match="last dim"):
        MaskedCategorical(logits=torch.zeros(2, 3), mask=torch.ones(2, 4, dtype=torch.bool))
    policy = ProbabilisticTensorDictSequential(
        TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["logits"]),
        ProbabilisticTensorDictModule(
            {"logits": "logits", "mask": "action_mask"},
            ["action"],
            distribution_class=MaskedCategorical,
            return_log_prob=True,
        ),
    )
    mask = torch.tensor([[False, False, True, True]]).expand(64, 4)
    td = TensorDict(observation=torch.randn(64, 3), action_mask=mask, batch_size=[64])
    with set_interaction_type(InteractionType.RANDOM):
        assert bool((policy(td.clone())["action"] >= 2).all())
    with set_interaction_type(InteractionType.DETERMINISTIC):
        assert bool((policy(td.clone())["action"] >= 2).all())


def test_one_hot_rsample_straight_through():
    logits = torch.zeros(5, 3, requires_grad=True)
    a = OneHotCategorical(logits=logits).rsample()
    assert bool((a.sum(-1) == 1).all())
    (a * torch.arange(3.0)).sum().backward()
    assert logits.grad.abs().sum() > 0


# -- exploration ------------------------------------------------------------------------


def test_egreedy_respects_masks_and_anneals():
    B, n_agents, A = 500, 3, 5
    mask = torch.rand(B, n_agents, A) < 0.4
    mask[..., 4] = True
    eg = EGreedy(
        n_actions=A,
        eps_init=1.0,
        eps_end=0.0,
        annealing_num_steps=10,
        action_key=("agents", "action"),
        action_mask_key=("agents", "action_mask"),
    )
    td = TensorDict(
        {"agents": {"action": torch.full((B, n_agents), 4), "action_mask": mask}}, batch_size=[B]
    )
    out = eg(td.clone())["agents", "action"]
    assert bool(mask.gather(-1, out.unsqueeze(-1)).all())
    assert (out != 4).float().mean() > 0.3  # mostly random at eps = 1
    eg.step(5)
    assert eg.eps == pytest.approx(0.5)
    eg.step(100)
    assert eg.eps == 0.0
    assert torch.equal(eg(td.clone())["agents", "action"], td["agents", "action"])
    eg2 = EGreedy(n_actions=A, eps_init=1.0)
    with set_interaction_type(InteractionType.DETERMINISTIC):
        assert torch.equal(
            eg2(td.clone().set("action", td["agents", "action"]))["action"], td["agents", "action"]
        )


def test_egreedy_one_hot_and_trailing_dim():
    mask = torch.tensor([[False, True, False]]).expand(200, 3)
    eg = EGreedy(eps_init=1.0, one_hot=True)
    td = TensorDict(
        action=torch.eye(3)[torch.zeros(200, dtype=torch.long)], action_mask=mask, batch_size=[200]
    )
    assert bool((eg(td)["action"].argmax(-1) == 1).all())
    eg = EGreedy(n_actions=3, eps_init=1.0, action_mask_key=None)
    td = TensorDict(action=torch.zeros(200, 1, dtype=torch.long), batch_size=[200])
    a = eg(td)["action"]
    assert a.shape == (200, 1) and set(a.unique().tolist()) == {0, 1, 2}
    with pytest.raises(ValueError, match="n_actions"):
        EGreedy(action_mask_key=None)(TensorDict(action=torch.zeros(2).long(), batch_size=[2]))


def test_egreedy_group_of_one_agent_with_masks():
    """A group of one agent (``group_map=one_per_agent``) has ``[B, 1]`` index actions
    and ``[B, 1, n]`` masks: its trailing 1 is the agent dim, not the action's own."""
    B, A = 300, 9
    mask = torch.zeros(B, 1, A, dtype=torch.bool)
    mask[:, 0, 2] = mask[:, 0, 7] = True
    eg = EGreedy(
        n_actions=A, eps_init=1.0, action_key=("p", "action"), action_mask_key=("p", "action_mask")
    )
    td = TensorDict({"p": {"action": torch.zeros(B, 1, dtype=torch.long)}}, batch_size=[B])
    td["p", "action_mask"] = mask
    a = eg(td)["p", "action"]
    assert a.shape == (B, 1) and set(a.unique().tolist()) == {2, 7}
    # an index action with its own trailing dim ([B, 1]) and a [B, n] mask, as before
    td = TensorDict(
        action=torch.zeros(B, 1, dtype=torch.long), action_mask=mask[:, 0], batch_size=[B]
    )
    a = EGreedy(n_actions=A, eps_init=1.0)(td)["action"]
    assert a.shape == (B, 1) and set(a.unique().tolist()) == {2, 7}


def test_additive_gaussian_and_ou():
    ag = AdditiveGaussian(
        low=torch.tensor([-1.0, 0.0]), high=torch.tensor([1.0, 0.5]), sigma_init=5.0
    )
    a = ag(TensorDict(action=torch.zeros(300, 2), batch_size=[300]))["action"]
    assert bool((a[:, 0].abs() <= 1).all() and (a[:, 1] >= 0).all() and (a[:, 1] <= 0.5).all())
    assert a.std(0).min() > 0.1
    ou = OrnsteinUhlenbeck(sigma=1.0, dt=1.0, theta=0.0)
    td = TensorDict(
        action=torch.zeros(4, 2), is_init=torch.zeros(4, 1, dtype=torch.bool), batch_size=[4]
    )
    ou(td)
    first = td["_ou_noise"].clone()
    td2 = TensorDict(
        action=torch.zeros(4, 2),
        _ou_noise=first,
        is_init=torch.tensor([[True], [False], [False], [False]]),
        batch_size=[4],
    )
    torch.manual_seed(0)
    ou(td2)
    torch.manual_seed(0)
    step = torch.randn(4, 2)
    # theta = 0: a random walk continued from the stored noise, restarted where is_init
    torch.testing.assert_close(td2["_ou_noise"][1:], first[1:] + step[1:])
    torch.testing.assert_close(td2["_ou_noise"][0], step[0])
    torch.testing.assert_close(td2["next", "_ou_noise"], td2["_ou_noise"])


# -- recurrent --------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [GRUModule, LSTMModule])
def test_recurrent_step_mode_resets_on_is_init(cls):
    torch.manual_seed(0)
    rnn = cls(
        3,
        6,
        num_layers=2,
        in_key=("agents", "observation"),
        out_key=("agents", "embed"),
        hidden_key=("agents", "h"),
    )
    B, n = 4, 2
    obs = torch.randn(B, n, 3)
    td = TensorDict(
        {"agents": {"observation": obs}, "is_init": torch.ones(B, 1, dtype=torch.bool)},
        batch_size=[B],
    )
    fresh = rnn(td.clone())["agents", "embed"]
    # carry a non-zero state forward, then flag a reset on envs 0 and 2
    state = rnn(td.clone())["next"]
    td2 = td.clone()
    td2.update(state)
    td2["is_init"] = torch.tensor([[True], [False], [True], [False]])
    out = rnn(td2)["agents", "embed"]
    torch.testing.assert_close(out[[0, 2]], fresh[[0, 2]])
    assert not torch.allclose(out[[1, 3]], fresh[[1, 3]])
    for k in rnn.hidden_keys:
        assert td2["next"][k].shape == (B, n, 2, 6)


@pytest.mark.parametrize("cls", [GRUModule, LSTMModule])
def test_recurrent_sequence_mode_matches_step_loop(cls):
    torch.manual_seed(1)
    rnn = cls(3, 5)
    B, T = 3, 7
    is_init = torch.zeros(B, T, 1, dtype=torch.bool)
    is_init[:, 0] = True
    is_init[1, 3] = True
    is_init[2, 5] = True
    seq = TensorDict(observation=torch.randn(B, T, 3), is_init=is_init, batch_size=[B, T])
    rnn.set_recurrent_mode(True)
    out_seq = rnn(seq.clone())["embed"]
    rnn.set_recurrent_mode(False)
    carry = TensorDict({}, batch_size=[B])
    outs = []
    for t in range(T):
        step = seq[:, t].clone()
        step.update(carry)
        rnn(step)
        outs.append(step["embed"])
        carry = step["next"].clone()
    torch.testing.assert_close(out_seq, torch.stack(outs, 1))


def test_exploration_with_marl_specs():
    specs = pytest.importorskip("marl.specs")
    eg = EGreedy(specs.OneHot(4, shape=(2, 4)), eps_init=1.0, action_mask_key=None)
    td = TensorDict(action=torch.eye(4)[torch.zeros(300, 2, dtype=torch.long)], batch_size=[300])
    out = eg(td)["action"]
    assert out.shape == (300, 2, 4) and bool((out.sum(-1) == 1).all())
    assert set(out.argmax(-1).unique().tolist()) == {0, 1, 2, 3}
    eg = EGreedy(specs.Categorical(3, shape=(2,)), eps_init=1.0, action_mask_key=None)
    a = eg(TensorDict(action=torch.zeros(300, 2, dtype=torch.long), batch_size=[300]))["action"]
    assert set(a.unique().tolist()) == {0, 1, 2}
    spec = specs.Bounded(low=-0.5, high=0.25, shape=(2, 3))
    ag = AdditiveGaussian(spec, sigma_init=10.0)
    a = ag(TensorDict(action=torch.zeros(100, 2, 3), batch_size=[100]))["action"]
    assert bool(((a >= spec.low) & (a <= spec.high)).all())


def test_tanh_normal_draws_torch_normals_numbers_and_each_vmapped_run_its_own():
    # the same draws as torch's Normal from one generator state (a seed reproduces a run
    # as before), and out of place, so vmap(randomness="different") gives each run its own
    from torch.func import vmap

    loc, scale = torch.zeros(4, 2), torch.full((4, 2), 0.5)
    torch.manual_seed(3)
    ours = TanhNormal(loc, scale).rsample()
    torch.manual_seed(3)
    assert torch.equal(ours, torch.tanh(torch.distributions.Normal(loc, scale).rsample()))
    draws = vmap(lambda m: TanhNormal(m, scale).rsample(), randomness="different")(
        torch.zeros(2, 4, 2)
    )
    assert not torch.equal(draws[0], draws[1])
