"""Compiled updates (marl/algorithms/_compile.py): same losses and gradients, really used.

Compiling is slow on a small CPU (10-60 s a graph with a cold inductor cache): one
small case per family, tiny networks; SAC's, DQN's and the end-to-end run are marked
slow.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDictBase

from marl.algorithms import Algorithm, Trainer, compile_report
from marl.algorithms._compile import compile_counts, compiled_loss_terms
from marl.algorithms.updates import loss_and_backward, loss_terms
from marl.collectors import Collector
from marl.testing import MultiAgentFakeEnv

SMALL = {"actor_cells": (8,), "critic_cells": (8,), "cells": (8,)}
# float32, with inductor fusing and reordering the reductions: a few ulps on the losses
# and the gradients (seen: <= 2e-7 absolute on these tiny networks)
RTOL, ATOL = 1e-4, 1e-5


def _config(name: str) -> dict:
    from marl.algorithms import get_algorithm

    fields = get_algorithm(name).config_cls.__dataclass_fields__
    config = {k: v for k, v in SMALL.items() if k in fields}
    if "minibatch_size" in fields:
        config.update(minibatch_size=16, epochs=1)
    else:
        config.update(learning_starts=0, batch_size=16)
    return config


def _learner_and_minibatch(name: str, group: str) -> tuple[object, TensorDictBase]:
    """``name`` trains ``group`` of the fake env; a 16-row minibatch of what its loss reads."""
    env = MultiAgentFakeEnv(num_envs=4, seed=0)
    other = "picker" if group == "walker" else "walker"
    algo = Algorithm(
        {group: name, other: "ippo"}, {group: _config(name), other: _config("ippo")}
    ).build(env, seed=0)
    batch = algo.process_batch(Collector(env, algo.policy, frames_per_batch=40).rollout())
    learner = algo.learners[group]
    minibatch = batch.select(*learner.loss.in_keys, strict=False).reshape(-1)[:16]
    return learner, minibatch.clone()


def _step(loss, minibatch, terms):
    for p in loss.parameters():
        p.grad = None
    torch.manual_seed(1)  # SAC's loss samples actions
    out, stepped = loss_and_backward(loss, minibatch, terms)
    assert stepped
    grads = {n: p.grad.clone() for n, p in loss.named_parameters() if p.grad is not None}
    return out, grads


@pytest.mark.parametrize(
    ("name", "group"),
    [
        ("mappo", "picker"),
        # 40-60 s each to compile on a loaded 2-core CPU with a cold inductor cache
        pytest.param("masac", "walker", marks=pytest.mark.slow),
        pytest.param("qmix", "picker", marks=pytest.mark.slow),
    ],
    ids=["ppo-mappo-masked-discrete", "sac-masac-continuous", "dqn-qmix-masked-discrete"],
)
def test_compiled_loss_matches_eager(name, group):
    learner, minibatch = _learner_and_minibatch(name, group)
    eager_out, eager_grads = _step(learner.loss, minibatch, loss_terms)
    before = compile_counts()
    # SAC's sampled actions must be the same ones for the losses to be comparable:
    # fallback_random makes inductor draw torch's own random numbers, by construction
    with torch._inductor.config.patch(fallback_random=True):
        out, grads = _step(learner.loss, minibatch, compiled_loss_terms(loss_terms))
    after = compile_counts()
    # the compiled path ran: one new graph, without breaks
    assert after["graphs"] > before["graphs"]
    assert after["graph_breaks"] == before["graph_breaks"]
    losses = [k for k in eager_out.keys() if k.startswith("loss_")]
    assert losses and set(out.keys()) == set(eager_out.keys())
    for key in eager_out.keys():
        torch.testing.assert_close(out[key], eager_out[key], rtol=RTOL, atol=ATOL)
    assert grads.keys() == eager_grads.keys() and grads
    for key, grad in eager_grads.items():
        assert grad.abs().sum() > 0 or key.startswith("target")
        torch.testing.assert_close(grads[key], grad, rtol=RTOL, atol=ATOL)


def test_compiled_happo_update_matches_eager_with_one_actor_graph_for_every_agent():
    """HAPPO has no GradientStep: its updater compiles its actor turns and critic steps."""
    start = compile_counts()
    env = MultiAgentFakeEnv(num_envs=4, seed=0)
    # picker: 3 agents, masked discrete actions and per-agent masks; walker: eager IPPO
    config = {"picker": _config("happo"), "walker": _config("ippo")}
    eager, compiled = (
        Algorithm({"picker": "happo", "walker": "ippo"}, config).build(env, seed=0, compile=c)
        for c in (False, True)
    )
    updater, eager_updater = compiled.learners["picker"].updater, eager.learners["picker"].updater
    assert updater.compiled and not eager_updater.compiled
    batch = eager.process_batch(Collector(env, eager.policy, frames_per_batch=32).rollout())
    loss = eager.learners["picker"].loss
    initial = {k: p.detach().clone() for k, p in loss.named_parameters()}
    torch.manual_seed(1)  # the agents' order and the minibatches
    eager_logs = eager_updater.update(batch.clone())
    before = compile_counts()
    assert before == start  # nothing compiled HAPPO's loss before its compiled update
    torch.manual_seed(1)
    logs = updater.update(batch.clone())
    after = compile_counts()
    # compiled: one actor-turn graph for the 3 agents (the index is a tensor input; an
    # int would recompile per agent) and one critic graph, no graph break
    assert 0 < after["frames"] - before["frames"] <= 2
    assert after["graph_breaks"] == before["graph_breaks"]
    # 32 samples in minibatches of 16, one epoch: 2 steps per agent, 2 for the critic
    assert updater.steps == eager_updater.steps == 3 * 2 + 2
    assert compile_report(compiled)["steps"]["picker"] == 8
    assert compile_report(eager)["eager_steps"]["picker"] == 8
    assert logs.keys() == eager_logs.keys()
    for key, value in eager_logs.items():
        assert logs[key] == pytest.approx(value, rel=RTOL, abs=ATOL), key
    params = dict(compiled.learners["picker"].loss.named_parameters())
    for key, param in eager.learners["picker"].loss.named_parameters():
        assert not torch.equal(param, initial[key]), key  # every actor and critic part trained
        torch.testing.assert_close(params[key], param, rtol=RTOL, atol=ATOL)


def test_compile_needs_a_bool():
    with pytest.raises(TypeError, match="compile must be True, False or None"):
        Algorithm("mappo").build(MultiAgentFakeEnv(num_envs=2), compile="yes")


def test_compile_is_off_by_default_and_reaches_every_step():
    env = MultiAgentFakeEnv(num_envs=2)
    eager = Algorithm("mappo").build(env)
    assert not eager.compiled
    assert not any(lr.updater.gradient_step.compiled for _, lr in eager.group_learners())
    compiled = Algorithm("mappo").build(env, compile=True)
    assert compiled.compiled
    assert all(lr.updater.gradient_step.compiled for _, lr in compiled.group_learners())
    # the policy is compiled in place: same parameters, same state_dict
    assert compiled.policy.state_dict().keys() == eager.policy.state_dict().keys()


@pytest.mark.slow
def test_compiled_training_runs_the_compiled_step_and_policy():
    env = MultiAgentFakeEnv(num_envs=4, seed=0)
    algo = Algorithm("mappo", _config("mappo")).build(env, seed=0, compile=True)
    before = compile_counts()
    trainer = Trainer(algo, env, frames_per_batch=64, total_frames=192)
    history = list(trainer.train())
    after = compile_counts()
    assert len(history) == 3
    steps = [lr.updater.gradient_step for _, lr in algo.group_learners()]
    # every optimizer step went through the compiled loss: 64 frames / 16 per minibatch
    assert [s.steps for s in steps] == [12, 12] and all(s.compiled for s in steps)
    # one graph per loss, one for the policy; no graph break, no recompilation after
    # the first batch (the later batches added nothing)
    assert after["graphs"] - before["graphs"] == 3
    assert after["graph_breaks"] == before["graph_breaks"]


def test_compiled_masked_categorical_still_refuses_an_all_masked_row():
    from marl.modules.distributions import MaskedCategorical

    logits = torch.compile(lambda x, m: MaskedCategorical(logits=x, mask=m).logits, dynamic=False)
    legal = torch.tensor([[True, False], [False, True]])
    assert logits(torch.zeros(2, 2), legal)[legal].eq(0).all()
    # the eager ValueError's check, kept in the graph (a host check would break it)
    with pytest.raises(RuntimeError, match="every mask row must allow at least one action"):
        logits(torch.zeros(2, 2), torch.tensor([[True, False], [False, False]]))
