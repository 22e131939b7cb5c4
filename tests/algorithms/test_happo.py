"""HAPPO: the sequential correction, one agent's slice per turn, the order, config, state."""

from __future__ import annotations

import copy

import pytest
import torch
from tensordict import TensorDict

from marl.algorithms import Algorithm, HAPPOConfig, Trainer, get_algorithm
from marl.algorithms._agent_adam import AgentAdam
from marl.envs import RewardSum, TransformedEnv
from marl.objectives import HAPPOLoss
from marl.specs import Unbounded
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv

SMALL = {"actor_cells": (16,), "critic_cells": (16,), "minibatch_size": 16, "epochs": 2}


def _multi(num_envs: int = 4, seed: int = 0) -> TransformedEnv:
    return TransformedEnv(MultiAgentFakeEnv(num_envs=num_envs, seed=seed), RewardSum())


def _batch(algo: Algorithm, env, steps: int = 3):
    with torch.no_grad():
        td = env.rollout(steps, algo.policy, break_when_any_done=False)
    return algo.process_batch(td)


def _actor_params(learner) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in learner.policy.named_parameters()}


# ------------------------------------------------------------------ AgentAdam
def test_agent_adam_is_adam_when_every_agent_steps():
    torch.manual_seed(0)
    a = torch.nn.Parameter(torch.randn(3, 4, 2))
    b = torch.nn.Parameter(torch.randn(5))
    a_ref, b_ref = (torch.nn.Parameter(p.detach().clone()) for p in (a, b))
    mine = AgentAdam([{"params": [a], "n_agents": 3}, {"params": [b]}], lr=0.01)
    ref = torch.optim.Adam([a_ref, b_ref], lr=0.01, foreach=False)
    for _ in range(5):
        for params, opt in (((a, b), mine), ((a_ref, b_ref), ref)):
            opt.zero_grad()
            x, y = params
            (x.sin().sum() * 3 + (y**2).sum()).backward()
            opt.step()
    torch.testing.assert_close(a, a_ref)
    torch.testing.assert_close(b, b_ref)
    assert mine.state[a]["step"].tolist() == [5.0, 5.0, 5.0]


def test_agent_adam_steps_only_the_chosen_agents_with_their_own_bias_correction():
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(3, 4))
    opt = AgentAdam([{"params": [w], "n_agents": 3}], lr=0.1)
    ref = torch.nn.Parameter(w.detach()[2].clone())
    ref_opt = torch.optim.Adam([ref], lr=0.1, foreach=False)
    for agents in ([0], [0, 1], [2], [2], [0]):
        before = {k: v.clone() for k, v in opt.state[w].items()}
        old = w.detach().clone()
        opt.zero_grad()
        (w**2).sum().backward()
        opt.step(agents=agents)
        others = [i for i in range(3) if i not in agents]
        assert torch.equal(w.detach()[others], old[others])
        assert not torch.equal(w.detach()[agents], old[agents])
        for key, value in before.items():  # the other agents' moments and steps stay
            assert torch.equal(opt.state[w][key][others], value[others]), key
        if agents == [2]:  # agent 2 alone is plain Adam on its own slice
            ref_opt.zero_grad()
            (ref**2).sum().backward()
            ref_opt.step()
            torch.testing.assert_close(w.detach()[2], ref.detach())
    assert opt.state[w]["step"].tolist() == [3.0, 1.0, 2.0]


def test_torch_adam_would_move_the_agents_out_of_turn():
    # why AgentAdam exists: a zero gradient still moves a slice with Adam's momentum
    w = torch.nn.Parameter(torch.ones(2, 3))
    opt = torch.optim.Adam([w], lr=0.1)
    for agent in (0, 1):
        opt.zero_grad()
        w[agent].sum().backward()
        opt.step()
    assert not torch.equal(w.detach()[0], w.detach()[0].new_full((3,), 0.9))


def test_agent_adam_refuses_a_parameter_not_stacked_over_its_agents():
    with pytest.raises(ValueError, match=r"stacked over 3 agents.*shape \(2, 4\)"):
        AgentAdam([{"params": [torch.nn.Parameter(torch.zeros(2, 4))], "n_agents": 3}])


def test_agent_adam_state_round_trips():
    w = torch.nn.Parameter(torch.ones(2, 3))
    opt = AgentAdam([{"params": [w], "n_agents": 2}], lr=0.1)
    w.sum().backward()
    opt.step(agents=[1])
    fresh = AgentAdam([{"params": [w], "n_agents": 2}], lr=0.1)
    fresh.load_state_dict(opt.state_dict())
    assert fresh.state[w]["step"].tolist() == [0.0, 1.0]
    torch.testing.assert_close(fresh.state[w]["exp_avg"], opt.state[w]["exp_avg"])


# ------------------------------------------------------------------ the loss
def test_actor_terms_are_one_agents_clipped_objective_times_the_factor():
    torch.manual_seed(0)
    algo = Algorithm("happo", config=SMALL).build(_multi(), seed=0)
    learner = algo.learners["picker"]  # 3 agents, masked discrete actions
    data = _batch(algo, _multi()).reshape(-1)
    loss: HAPPOLoss = learner.loss
    # move the actor away from the one that sampled, so that ratios differ from 1
    with torch.no_grad():
        for p in learner.policy.parameters():
            p.add_(0.3 * torch.randn_like(p))
    factor = torch.rand(data.numel()) + 0.5
    agent = 1
    out = loss.actor_terms(data, agent, factor)
    # direct computation
    dist = learner.policy.get_dist(data)
    log_prob = dist.log_prob(data["picker", "action"])[:, agent]
    ratio = (log_prob - data["picker", "action_log_prob"][:, agent]).exp()
    adv = data["picker", "advantage"][:, agent, 0] * factor
    eps = loss.clip_epsilon
    expected = -torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv).mean()
    torch.testing.assert_close(out["loss_objective"], expected)
    assert (ratio - 1).abs().max() > eps  # the clip is exercised
    params = list(learner.policy.parameters())
    got = torch.autograd.grad(out["loss_objective"], params)
    want = torch.autograd.grad(expected, params)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
        assert g[[0, 2]].abs().max() == 0  # the other agents get no gradient
    torch.testing.assert_close(loss.agent_ratio(data, agent), ratio.detach())


def test_a_tensor_entropy_coef_gives_each_value_its_term_inside_a_vmap():
    # PPOLoss.per_run_scalars, which HAPPOLoss inherits: the entropy coefficient may be a
    # 0-dim tensor inside a vmap (a stacked update's per-run value), 0 for some entries
    algo = Algorithm("happo", config=SMALL).build(_multi(), seed=0)
    loss: HAPPOLoss = algo.learners["picker"].loss
    data = _batch(algo, _multi()).reshape(-1)

    def entropy_term(coef):
        loss.entropy_coef = coef
        return loss.actor_terms(data, 1)["loss_entropy"]

    got = torch.func.vmap(entropy_term)(torch.tensor([0.0, 0.05]))
    loss.entropy_coef = 0.05
    assert got[0] == 0
    torch.testing.assert_close(got[1], loss.actor_terms(data, 1)["loss_entropy"])


# ------------------------------------------------------------------ the sequential update
def test_sequential_correction_matches_a_direct_computation():
    """Five agents of two groups, one full-batch Adam step each: replay the update by hand."""
    config = {**SMALL, "epochs": 1, "minibatch_size": 10_000, "max_grad_norm": None, "lr": 0.05}
    env = _multi()
    algo = Algorithm("happo", config=config).build(env, seed=0)
    batch = _batch(algo, env, steps=5)  # 4 envs x 5 steps: 20 samples
    data = batch.reshape(-1)
    actors = {g: copy.deepcopy(lr.policy) for g, lr in algo.group_learners()}
    advantages = {}
    for g in actors:
        adv = data[g, "advantage"]
        advantages[g] = (adv - adv.mean()) / adv.std()
    logs = algo.update(batch)
    order = algo.learners["walker"].updater.last_order
    assert sorted(order) == sorted(
        [("walker", i) for i in range(2)] + [("picker", i) for i in range(3)]
    )
    assert order == algo.learners["picker"].updater.last_order  # one order for both groups

    eps, lr = 0.2, 0.05
    factor = torch.ones(data.numel())
    factors = []
    for g, i in order:
        actor = actors[g]

        def log_prob(actor=actor, g=g, i=i):
            return actor.get_dist(data).log_prob(data[g, "action"])[:, i]

        ratio = (log_prob() - data[g, "action_log_prob"][:, i]).exp()
        adv = advantages[g][:, i, 0] * factor
        objective = -torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv).mean()
        params = list(actor.parameters())
        grads = torch.autograd.grad(objective, params)
        with torch.no_grad():
            for p, grad in zip(params, grads):
                # Adam's first step on agent i's slice: lr * g / (|g| + eps)
                p[i] -= lr * grad[i] / (grad[i].abs() + 1e-8)
            factor = factor * (log_prob() - data[g, "action_log_prob"][:, i]).exp()
        factors.append(factor)
    for g, learner in algo.group_learners():
        for (name, got), want in zip(learner.policy.named_parameters(), actors[g].parameters()):
            torch.testing.assert_close(got, want, msg=f"{g} {name}")
    assert logs["walker/correction_mean"] == pytest.approx(factor.mean().item(), rel=1e-5)
    assert logs["picker/correction_std"] == pytest.approx(factor.std().item(), rel=1e-4)
    assert factor.std() > 0 and not torch.equal(factors[0], factors[-1])  # M moved


def test_during_each_turn_only_that_agents_slice_and_adam_state_change():
    algo = Algorithm("happo", config=SMALL).build(_multi(), seed=0)
    batch = _batch(algo, _multi(), steps=10)
    seen = []
    for label, learner in algo.group_learners():
        opt = learner.optimizer
        actor = opt.param_groups[0]
        assert actor["name"] == "actor" and actor["n_agents"] == learner.info.n_agents
        snapshot = {}

        def pre(opt, args, kwargs, actor=actor, snapshot=snapshot):
            snapshot.clear()
            for p in actor["params"]:
                state = {k: v.clone() for k, v in opt.state[p].items()}
                snapshot[p] = (p.detach().clone(), state)

        def post(opt, args, kwargs, actor=actor, snapshot=snapshot, label=label):
            agents = kwargs.get("agents")
            seen.append((label, None if agents is None else tuple(agents)))
            n = actor["n_agents"]
            others = list(range(n)) if agents is None else [i for i in range(n) if i not in agents]
            for p in actor["params"]:
                old, state = snapshot[p]
                assert torch.equal(p.detach()[others], old[others]), (label, agents)
                if agents is not None:
                    assert not torch.equal(p.detach()[list(agents)], old[list(agents)])
                for key, value in state.items():
                    assert torch.equal(opt.state[p][key][others], value[others]), key

        opt.register_step_pre_hook(pre)
        opt.register_step_post_hook(post)
    algo.update(batch)
    # 40 samples in minibatches of 16, 2 epochs: 4 steps per turn, 4 per critic
    turns = [s for s in seen if s[1] is not None]
    assert len(turns) == 4 * 5 and all(len(s[1]) == 1 for s in turns)
    assert sum(s[1] is None for s in seen) == 4 * 2
    assert seen[-1][1] is None  # the critics train after every agent's turn


def test_the_order_is_seeded_and_redrawn_each_iteration():
    def orders(seed):
        algo = Algorithm("happo", config=SMALL)
        trainer = Trainer(algo, _multi(), frames_per_batch=20, total_frames=100, seed=seed)
        out = []
        for _ in trainer.train():
            out.append(tuple(algo.learners["walker"].updater.last_order))
        params = _actor_params(algo.learners["picker"])
        return out, params

    first, params = orders(0)
    again, params_again = orders(0)
    assert first == again
    assert all(torch.equal(params[k], params_again[k]) for k in params)
    assert len(set(first)) > 1  # a new permutation each iteration
    other, _ = orders(1)
    assert other != first


def test_other_groups_may_use_other_algorithms():
    algo = Algorithm({"walker": "happo", "picker": "ippo"}, config={"walker": SMALL})
    history = list(Trainer(algo, _multi(), frames_per_batch=40, total_frames=80, seed=0).train())
    logs = history[-1]
    assert "train/walker/correction_mean" in logs and "train/picker/loss_objective" in logs
    assert algo.learners["walker"].updater.last_order in (
        [("walker", 0), ("walker", 1)],
        [("walker", 1), ("walker", 0)],
    )


@pytest.mark.parametrize("group", ["walker", "picker"])
def test_continuous_and_discrete_groups_learn_something(group):
    algo = Algorithm("happo", config=SMALL).build(_multi(), seed=0)
    before = _actor_params(algo.learners[group])
    logs = algo.update(_batch(algo, _multi(), steps=10))
    after = _actor_params(algo.learners[group])
    assert all(not torch.equal(before[k], after[k]) for k in before)
    assert all(torch.isfinite(torch.tensor(v)) for v in logs.values())
    assert f"{group}/loss_critic" in logs and f"{group}/loss_objective" in logs


# ------------------------------------------------------------------ config, errors, state
def test_config_validation():
    with pytest.raises(ValueError, match="share_policy_params must be False, got True"):
        HAPPOConfig(share_policy_params=True)
    with pytest.raises(ValueError, match="share_policy_params must be False"):
        get_algorithm("happo").make_config({"share_policy_params": True})
    with pytest.raises(ValueError, match=r"algorithm.epochs: happo expects an integer >= 1, got 0"):
        get_algorithm("happo").make_config({"epochs": 0})
    with pytest.raises(ValueError, match="critic_scope"):
        HAPPOConfig(critic_scope="world")
    with pytest.raises(ValueError, match=r"single-agent env.*no agents to order: use ppo"):
        Algorithm("happo").build(SingleAgentFakeEnv(num_envs=2))
    assert HAPPOConfig().share_policy_params is False


def test_a_loss_given_an_agent_out_of_range_says_so():
    algo = Algorithm("happo", config=SMALL).build(_multi(), seed=0)
    data = _batch(algo, _multi()).reshape(-1)
    with pytest.raises(IndexError, match="agent 2 is out of range for a group of 2 agents"):
        algo.learners["walker"].loss.actor_terms(data, 2)
    with pytest.raises(ValueError, match="per-agent advantages"):
        td = TensorDict({"walker": {"advantage": torch.zeros(4, 1)}}, batch_size=[4])
        algo.learners["walker"].loss.actor_terms(td, 0)
    with pytest.raises(KeyError, match=r"advantage.*missing"):
        algo.learners["walker"].loss.actor_terms(TensorDict(batch_size=[4]), 0)


def test_a_tensor_agent_index_gives_the_ints_terms_and_gradients_exactly():
    # what the compiled update passes (one graph for every agent), checked here eagerly
    algo = Algorithm("happo", config={**SMALL, "entropy_coef": 0.01}).build(_multi(), seed=0)
    loss: HAPPOLoss = algo.learners["picker"].loss  # 3 agents, masked
    data = _batch(algo, _multi(), steps=6).reshape(-1)
    with torch.no_grad():
        for p in loss.actor.parameters():
            p.add_(0.3 * torch.randn_like(p))
    factor = torch.rand(data.numel()) + 0.5
    params = list(loss.actor.parameters())
    for agent in range(3):
        by_int = loss.actor_terms(data, agent, factor)
        by_tensor = loss.actor_terms(data, torch.tensor(agent), factor)
        assert by_int.keys() == by_tensor.keys()
        for key in by_int.keys():
            assert torch.equal(by_tensor[key], by_int[key]), (agent, key)
        total = by_int["loss_objective"] + by_int["loss_entropy"]
        total_t = by_tensor["loss_objective"] + by_tensor["loss_entropy"]
        for g, g_t in zip(torch.autograd.grad(total, params), torch.autograd.grad(total_t, params)):
            assert torch.equal(g_t, g)
        ratio = loss.agent_ratio(data, agent)
        assert torch.equal(loss.agent_ratio(data, torch.tensor(agent, dtype=torch.int32)), ratio)


def test_a_bad_tensor_agent_index_is_refused_by_name():
    algo = Algorithm("happo", config=SMALL).build(_multi(), seed=0)
    data = _batch(algo, _multi()).reshape(-1)
    loss = algo.learners["walker"].loss
    with pytest.raises(IndexError, match="agent 2 is out of range for a group of 2 agents"):
        loss.actor_terms(data, torch.tensor(2))
    with pytest.raises(IndexError, match="agent -1 is out of range"):
        loss.agent_ratio(data, torch.tensor(-1))
    with pytest.raises(TypeError, match=r"0-d int64/int32 tensor, got .* shape \(1,\)"):
        loss.actor_terms(data, torch.tensor([1]))
    with pytest.raises(TypeError, match=r"dtype torch\.float32"):
        loss.actor_terms(data, torch.tensor(1.0))


def test_the_loss_leaves_the_callers_data_as_it_was():
    # the updater reads its whole batch again after each turn (agent_ratio) and cuts the
    # next turns' minibatches from it: no actor output may be written into it
    algo = Algorithm("happo", config=SMALL).build(_multi(), seed=0)
    for group in ("walker", "picker"):
        data = (
            _batch(algo, _multi())
            .reshape(-1)
            .select(*algo.learners[group].loss.in_keys, strict=False)
        )
        keys = set(data.keys(include_nested=True, leaves_only=True))
        loss = algo.learners[group].loss
        loss.actor_terms(data, 1, torch.ones(data.numel()))
        loss.agent_ratio(data, 0)
        loss.critic_terms(data)
        assert set(data.keys(include_nested=True, leaves_only=True)) == keys, group


def test_checkpoint_round_trip_continues_identically():
    def make():
        return Algorithm("happo", config=SMALL).build(_multi(), seed=0)

    algo = make()
    algo.update(_batch(algo, _multi(), steps=10))
    # a copy, as torch.save makes: a state_dict holds the live tensors (optimizer moments too)
    state = copy.deepcopy(algo.state_dict_full())
    fresh = make()
    fresh.load_state_dict_full(state)
    walker = algo.learners["walker"].optimizer
    p = walker.param_groups[0]["params"][0]
    q = fresh.learners["walker"].optimizer.param_groups[0]["params"][0]
    assert (
        walker.state[p]["step"].tolist()
        == fresh.learners["walker"].optimizer.state[q]["step"].tolist()
    )
    batch = _batch(algo, _multi(), steps=10)
    torch.manual_seed(3)
    algo.update(batch.clone())
    torch.manual_seed(3)
    fresh.update(batch.clone())
    for (k, a), (_, b) in zip(algo.state_dict().items(), fresh.state_dict().items()):
        assert torch.equal(a, b), k


class _MaskedFakeEnv(MultiAgentFakeEnv):
    """The fake env plus a per-group ``"mask"`` (False once an agent is done)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        b = self.batch_size
        for g, n in (("walker", self.N_WALKERS), ("picker", self.N_PICKERS)):
            self.observation_spec[g, "mask"] = Unbounded((*b, n), dtype=torch.bool)

    def _observe(self):
        out = super()._observe()
        alive = self._alive()
        out.set(("walker", "mask"), alive[..., : self.N_WALKERS].clone())
        out.set(("picker", "mask"), alive[..., self.N_WALKERS :].clone())
        return out


def test_a_masked_agent_neither_learns_nor_changes_the_correction():
    env = TransformedEnv(_MaskedFakeEnv(num_envs=8, seed=0), RewardSum())
    algo = Algorithm("happo", config=SMALL).build(env, seed=0)
    loss = algo.learners["picker"].loss
    assert loss.tensor_keys.agent_mask == ("picker", "mask")
    data = _batch(algo, env, steps=5).reshape(-1)
    data["picker", "mask"][:, 0] = False  # agent 0 never acts
    with torch.no_grad():
        for p in algo.learners["picker"].policy.parameters():
            p.add_(0.3 * torch.randn_like(p))
    assert (loss.agent_ratio(data, 0) == 1).all()
    assert not (loss.agent_ratio(data, 1) == 1).all()
    params = list(algo.learners["picker"].policy.parameters())
    grads = torch.autograd.grad(loss.actor_terms(data, 0)["loss_objective"], params)
    assert all(g.abs().max() == 0 for g in grads)
    logs = algo.update(_batch(algo, env, steps=5))
    assert all(torch.isfinite(torch.tensor(v)) for v in logs.values())
