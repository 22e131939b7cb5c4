"""MAT (marl/algorithms/mat.py, marl/modules/transformer.py): the sequential decoding,
its teacher-forced log-probabilities, causality over the agents, masks, bounds, size."""

from __future__ import annotations

import io

import pytest
import torch
from tensordict.nn import InteractionType, set_interaction_type

from marl.algorithms import Algorithm, MATConfig, Trainer, get_algorithm
from marl.envs import RewardSum, TransformedEnv
from marl.modules.transformer import MATPolicy, MultiAgentTransformer
from marl.specs import Unbounded
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv

SMALL = {"embed_dim": 16, "n_heads": 2, "minibatch_size": 16, "epochs": 2}


class ManyPickersEnv(MultiAgentFakeEnv):
    """The fake env with 16 discrete agents (pickers, with action masks)."""

    N_PICKERS = 16


class MaskedFakeEnv(MultiAgentFakeEnv):
    """The fake env plus PettingZoo's per-group ``"mask"`` (False once an agent is done)."""

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


def _build(env_cls=MultiAgentFakeEnv, num_envs: int = 8, **extra) -> tuple[Algorithm, object]:
    env = TransformedEnv(env_cls(num_envs=num_envs, seed=0), RewardSum())
    return Algorithm("mat", config={**SMALL, **extra}).build(env, seed=0), env


def _rollout(algo: Algorithm, env, steps: int = 6):
    with torch.no_grad(), set_interaction_type(InteractionType.RANDOM):
        return env.rollout(steps, algo.policy, break_when_any_done=False)


def _params(dist) -> torch.Tensor:
    """The decoder's output behind a distribution: logits or means."""
    return dist.logits if hasattr(dist, "logits") else dist.loc


# ------------------------------------------------------------- teacher forcing, causality
@pytest.mark.parametrize("env_cls", [MultiAgentFakeEnv, ManyPickersEnv])
@pytest.mark.parametrize("group", ["walker", "picker"])
def test_teacher_forced_log_probs_are_those_of_the_sequential_decoding(env_cls, group):
    algo, env = _build(env_cls)
    td = _rollout(algo, env)
    policy = algo.learners[group].policy
    with torch.no_grad():
        forced = policy.get_dist(td).log_prob(td[group, "action"])
    collected = td[group, "action_log_prob"]
    assert forced.shape == collected.shape == td[group, "action"].shape[:3]
    torch.testing.assert_close(forced, collected, atol=1e-5, rtol=1e-5)
    # the log-probabilities are of the joint actions: another agent order would differ
    swapped = td.clone()
    swapped[group, "action"] = td[group, "action"].flip(2)
    with torch.no_grad():
        other = policy.get_dist(swapped).log_prob(swapped[group, "action"])
    assert not torch.allclose(other, collected.flip(2), atol=1e-3)


@pytest.mark.parametrize("env_cls", [MultiAgentFakeEnv, ManyPickersEnv])
@pytest.mark.parametrize("group", ["walker", "picker"])
def test_an_agents_distribution_ignores_the_actions_of_the_agents_after_it(env_cls, group):
    algo, env = _build(env_cls)
    td = _rollout(algo, env, steps=3)
    policy = algo.learners[group].policy
    n = td[group, "action"].shape[2]
    with torch.no_grad():
        base = _params(policy.get_dist(td))
        for k in range(n):
            perturbed = td.clone()
            other = _rollout(algo, env, steps=3)  # other actions, legal ones
            perturbed[group, "action"][:, :, k:] = other[group, "action"][:, :, k:]
            changed = _params(policy.get_dist(perturbed))
            # agents 0..k read the actions of agents 0..k-1 only, which are unchanged
            torch.testing.assert_close(changed[:, :, : k + 1], base[:, :, : k + 1])
            if k + 1 < n:  # and the later ones do read them
                assert not torch.allclose(changed[:, :, k + 1 :], base[:, :, k + 1 :])


# ------------------------------------------------------------- masks and bounds
def test_discrete_actions_never_break_the_action_mask():
    algo, env = _build(ManyPickersEnv, num_envs=32)
    for _ in range(5):
        td = env.reset()
        with set_interaction_type(InteractionType.RANDOM):
            sampled = algo.policy(td.clone())["picker", "action"]
        mode = algo.eval_policy()(td.clone())["picker", "action"]
        mask = td["picker", "action_mask"]
        assert mask.gather(-1, sampled.unsqueeze(-1)).all()
        assert mask.gather(-1, mode.unsqueeze(-1)).all()
        assert not (sampled == 4).any()  # the fake env never allows action 4


def test_continuous_actions_stay_within_bounds():
    # a large initial std puts many pre-tanh samples far outside [-1, 1]
    algo, env = _build(log_std_init=2.0)
    td = _rollout(algo, env, steps=10)
    action = td["walker", "action"]
    assert action.min() >= -1 and action.max() <= 1
    assert action.abs().max() > 0.99  # the bounds are reached, not only a narrow centre
    td = env.reset()
    mode = algo.eval_policy()(td.clone())["walker", "action"]
    assert mode.min() >= -1 and mode.max() <= 1
    torch.testing.assert_close(algo.eval_policy()(td.clone())["walker", "action"], mode)


def test_deterministic_policy_is_the_mode_decoded_in_order():
    algo, env = _build()
    td = env.reset()
    first = algo.eval_policy()(td.clone())
    second = algo.eval_policy()(td.clone())
    for g in ("walker", "picker"):
        torch.testing.assert_close(first[g, "action"], second[g, "action"])
    # the picker's mode is the argmax of the teacher-forced logits at its own actions
    dist = algo.learners["picker"].policy.get_dist(first)
    torch.testing.assert_close(dist.logits.argmax(-1), first["picker", "action"])


# ------------------------------------------------------------- training, sizes, masks
def test_sixteen_agents_collect_and_train():
    algo, env = _build(ManyPickersEnv, num_envs=4)
    before = {k: v.clone() for k, v in algo.learners["picker"].named_parameters()}
    history = list(Trainer(algo, env, frames_per_batch=40, total_frames=80, seed=0).train())
    logs = history[-1]
    assert torch.isfinite(torch.tensor(logs["train/picker/loss_objective"]))
    after = dict(algo.learners["picker"].named_parameters())
    assert any(not torch.equal(before[k], after[k]) for k in before)
    td = _rollout(algo, env, steps=2)
    assert td["picker", "action"].shape == (4, 2, 16)
    assert td["picker", "action_log_prob"].shape == (4, 2, 16)


def test_sixteen_agent_vmas_navigation():
    pytest.importorskip("vmas")
    from marl.envs.tasks import make_task

    env = make_task("vmas/navigation", num_envs=4, seed=0, n_agents=16)
    algo = Algorithm("mat", config=SMALL).build(env, seed=0)
    td = _rollout(algo, env, steps=3)
    action = td["agent", "action"]
    assert action.shape == (4, 3, 16, 2)
    forced = algo.learners["agent"].policy.get_dist(td).log_prob(action)
    torch.testing.assert_close(forced, td["agent", "action_log_prob"], atol=1e-4, rtol=1e-4)


def test_each_group_gets_its_own_transformer():
    algo, env = _build()
    walker = {id(p) for p in algo.learners["walker"].parameters()}
    picker = {id(p) for p in algo.learners["picker"].parameters()}
    assert walker and picker and not walker & picker
    assert algo.learners["walker"].policy.net.n_agents == 2
    assert algo.learners["picker"].policy.net.n_agents == 3
    # the critic is the encoder's value head: the same network as the policy
    learner = algo.learners["picker"]
    assert learner.loss.critic.net is learner.policy.net
    logs = list(Trainer(algo, env, frames_per_batch=40, total_frames=40, seed=0).train())[-1]
    assert "train/walker/loss_critic" in logs and "train/picker/loss_critic" in logs


def test_masked_out_agents_are_left_out_of_the_loss():
    algo, env = _build(MaskedFakeEnv)
    learner = algo.learners["picker"]
    assert learner.loss.tensor_keys.agent_mask == ("picker", "mask")
    batch = algo.process_batch(_rollout(algo, env, steps=10)).reshape(-1)
    batch["picker", "mask"][:, 0] = False  # agent 0 never acts
    garbage = batch.clone()
    garbage["picker", "action_log_prob"][:, 0] = torch.randn(batch.shape[0]) * 10
    garbage["picker", "advantage"][:, 0] = torch.randn(batch.shape[0], 1) * 10
    garbage["picker", "value_target"][:, 0] = torch.randn(batch.shape[0], 1) * 10
    with torch.no_grad():
        out, out_garbage = learner.loss(batch.clone()), learner.loss(garbage)
    for term in ("loss_objective", "loss_critic"):
        torch.testing.assert_close(out[term], out_garbage[term])
    # while an unmasked agent's garbage changes it
    garbage["picker", "action_log_prob"][:, 1] = torch.randn(batch.shape[0]) * 10
    with torch.no_grad():
        assert not torch.allclose(learner.loss(garbage)["loss_objective"], out["loss_objective"])


# ------------------------------------------------------------- one encoder pass per minibatch
@pytest.mark.parametrize("group", ["walker", "picker"])
def test_the_loss_runs_the_encoder_once_and_equals_the_two_pass_loss(group):
    """``value_from_actor``: the values come from the policy's encoder pass. The terms and
    the gradients are those of calling the policy and the critic separately."""
    algo, env = _build(MaskedFakeEnv)
    loss = algo.learners[group].loss
    assert loss.value_from_actor
    batch = algo.process_batch(_rollout(algo, env, steps=10)).reshape(-1)
    net = loss.actor.net
    calls = []
    hook = net.obs_embed.register_forward_hook(lambda *a: calls.append(1))
    torch.manual_seed(0)  # the walkers' entropy is a one-sample estimate: the same sample
    one = loss(batch.clone())
    hook.remove()
    assert len(calls) == 1
    sum(one[k] for k in one.keys() if k.startswith("loss")).backward()
    grads = [p.grad.clone() for p in net.parameters() if p.grad is not None]
    net.zero_grad()
    loss.value_from_actor = False  # the two-pass path: get_dist, then the critic
    torch.manual_seed(0)
    two = loss(batch.clone())
    sum(two[k] for k in two.keys() if k.startswith("loss")).backward()
    for k in ("loss_objective", "loss_critic", "loss_entropy", "explained_variance"):
        torch.testing.assert_close(one[k], two[k])
    torch.testing.assert_close(grads, [p.grad for p in net.parameters() if p.grad is not None])


def test_value_from_actor_needs_an_actor_critic():
    from tensordict.nn import (
        ProbabilisticTensorDictModule,
        ProbabilisticTensorDictSequential,
        TensorDictModule,
    )

    from marl.objectives import ActorCritic, PPOLoss

    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["logits"]),
        ProbabilisticTensorDictModule(
            ["logits"], ["action"], distribution_class=torch.distributions.Categorical
        ),
    )
    assert not isinstance(actor, ActorCritic)
    with pytest.raises(TypeError, match=r"needs an actor with get_dist_and_value"):
        PPOLoss(actor, value_from_actor=True)
    algo, _ = _build()
    assert isinstance(algo.learners["walker"].loss.actor, ActorCritic)


# ------------------------------------------------------------- config and checkpoints
def test_config_validation_errors():
    with pytest.raises(ValueError, match=r"embed_dim \(30\) must be a multiple of n_heads \(4\)"):
        MATConfig(embed_dim=30, n_heads=4)
    for field in ("epochs", "minibatch_size", "embed_dim", "n_heads", "n_blocks"):
        with pytest.raises(ValueError, match=rf"mat: {field} must be an integer >= 1, got 0"):
            MATConfig(**{field: 0})
    with pytest.raises(ValueError, match="lr and clip_epsilon must be > 0"):
        MATConfig(lr=0.0)
    with pytest.raises(ValueError, match=r"unknown mat config field\(s\) \['actor_cells'\]"):
        get_algorithm("mat").make_config({"actor_cells": (8,)})
    with pytest.raises(ValueError, match=r"single-agent.*use ppo"):
        Algorithm("mat").build(SingleAgentFakeEnv(num_envs=2))
    with pytest.raises(ValueError, match="kind must be one of"):
        MATPolicy(MultiAgentTransformer(3, 2, 2, discrete=True), ["o"], [1], "a", "lp", kind="beta")


def test_checkpoint_restores_and_resumes_identically():
    def make():
        return _build(num_envs=4)

    algo, env = make()
    list(Trainer(algo, env, frames_per_batch=40, total_frames=40, seed=0).train())
    # through bytes, as a checkpoint file: an in-memory state_dict_full() holds the
    # optimizer's own state tensors, which load_state_dict would share, not copy
    buffer = io.BytesIO()
    torch.save(algo.state_dict_full(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=False)
    fresh, fresh_env = make()
    fresh.load_state_dict_full(state)
    for (k, a), b in zip(algo.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), k
    # one more update from the same state on the same batch gives the same networks
    batch = _rollout(algo, env, steps=10)
    for a in (algo, fresh):
        torch.manual_seed(1)
        a.update(a.process_batch(batch.clone()))
    for (k, a), b in zip(algo.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), k
    # and the restored policy acts as the original
    td = fresh_env.reset()
    torch.testing.assert_close(
        algo.eval_policy()(td.clone())["walker", "action"],
        fresh.eval_policy()(td.clone())["walker", "action"],
    )
