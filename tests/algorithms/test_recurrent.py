"""Recurrent (gru/lstm) policies: hidden state carried in the data, training on sequences."""

from __future__ import annotations

import pytest
import torch

from marl.algorithms import Algorithm, get_algorithm
from marl.algorithms._recurrent import is_recurrent
from marl.algorithms.updates import off_policy_buffer
from marl.collectors import Collector
from marl.envs import InitTracker, TransformedEnv
from marl.testing import MultiAgentFakeEnv

STEPS = 24  # several episodes per env (horizons 5..10) inside one batch


def _env(seed: int = 0) -> TransformedEnv:
    return TransformedEnv(MultiAgentFakeEnv(num_envs=3, seed=seed), InitTracker())


def _collect(algorithm: str, network: str, **config):
    torch.manual_seed(0)
    env = _env()
    cfg = get_algorithm(algorithm).config_cls(network=network, actor_cells=(16,), **config)
    algo = Algorithm(algorithm, config=cfg).build(env, seed=0)
    collector = Collector(env, algo.policy, frames_per_batch=3 * STEPS)
    batch = collector.rollout()
    collector.shutdown()
    return algo, batch


def _sequence_log_probs(learner, data):
    """The loss actor's (sequence-mode) log-probs of the stored actions on ``data``."""
    info = learner.info
    with torch.no_grad():
        dist = learner.loss.actor.get_dist(data.clone())
        return dist.log_prob(data.get(info.key("action")))


def _sequence_params(learner, data, collected):
    """The loss actor's distribution parameters (logits, or loc and scale) on ``data``."""
    info = learner.info
    names = ("logits", "loc", "scale")
    keys = [info.key(k) for k in names if info.key(k) in collected.keys(True)]
    out = data.clone()
    with torch.no_grad():
        for module in learner.loss.actor.module[:-1]:
            out = module(out)
    return {k: out.get(k) for k in keys}


@pytest.mark.parametrize("network", ["gru", "lstm"])
@pytest.mark.parametrize("algorithm", ["ippo", "mappo"])
@pytest.mark.parametrize("sequence_length", [None, 8])
def test_train_time_log_probs_equal_collection_ones(algorithm, network, sequence_length):
    algo, batch = _collect(algorithm, network, sequence_length=sequence_length)
    assert bool(batch["is_init"][:, 1:].any()), "the batch must hold resets inside it"
    for label, learner in algo.group_learners():
        assert is_recurrent(learner.policy) and is_recurrent(learner.loss.actor)
        updater = learner.updater
        assert updater.sequence_length is not None
        data = updater.sequences(batch)
        expected_len = sequence_length or STEPS
        assert data.batch_size == (3 * STEPS // expected_len, expected_len)
        # the same chunks of the whole batch, with what the policy wrote at collection
        full = batch.reshape(-1, expected_len)
        assert (full.get(learner.info.key("action")) == data.get(learner.info.key("action"))).all()
        params = _sequence_params(learner, data, full)
        assert params, label
        for key, value in params.items():
            torch.testing.assert_close(value, full.get(key), atol=1e-5, rtol=0, msg=str(key))
        # log-probs too; a tanh-squashed action is inverted with ~3e-5 error (an MLP's too)
        stored = data.get(learner.info.key("action_log_prob"))
        replayed = _sequence_log_probs(learner, data)
        atol = 1e-4 if learner.info.action_space == "continuous" else 1e-5
        torch.testing.assert_close(replayed, stored, atol=atol, rtol=0, msg=label)


@pytest.mark.parametrize("network", ["gru", "lstm"])
def test_a_broken_reset_or_start_state_changes_the_train_time_log_probs(network):
    # the check above can fail: unrolled without the resets at episode starts (the hidden
    # state carried over from the previous episode), the log-probs differ ...
    algo, batch = _collect("ippo", network, sequence_length=8)
    for _, learner in algo.group_learners():
        info = learner.info
        data = learner.updater.sequences(batch)
        stored = data.get(info.key("action_log_prob"))
        no_reset = data.clone()
        no_reset.set("is_init", torch.zeros_like(data["is_init"]))
        no_reset["is_init"][:, 0] = data["is_init"][:, 0]
        assert not torch.allclose(_sequence_log_probs(learner, no_reset), stored, atol=1e-3)
        # ... and so do they from a zero state at each chunk start instead of the stored one
        zero_start = data.clone()
        for key in zero_start.keys(True, True):
            if isinstance(key, tuple) and key[-1].startswith("actor_rnn"):
                zero_start.set(key, torch.zeros_like(zero_start.get(key)))
        assert not torch.allclose(_sequence_log_probs(learner, zero_start), stored, atol=1e-3)


def test_sequence_minibatches_are_whole_chunks_in_time_order(monkeypatch):
    algo, batch = _collect("ippo", "gru", sequence_length=6, minibatch_size=12)
    learner = algo.learners["walker"]
    step = learner.updater.gradient_step
    seen = []
    original = type(step).__call__

    def record(self, minibatch):
        if self is step:
            seen.append(minibatch)
        return original(self, minibatch)

    monkeypatch.setattr(type(step), "__call__", record)  # observe what the updater trains on
    batch = algo.process_batch(batch)
    learner.updater.update(batch)
    # 72 steps -> 12 chunks of 6; 12 transitions per minibatch -> 2 chunks, 6 per epoch
    assert len(seen) == learner.config.epochs * 6
    chunks = batch.reshape(-1, 6)
    for minibatch in seen:
        assert minibatch.batch_size == (2, 6)
        for chunk in minibatch.unbind(0):  # each is one whole chunk of one env, in time order
            found = (chunks["walker", "action"] == chunk["walker", "action"]).flatten(1).all(1)
            assert int(found.sum()) == 1


def test_env_step_keeps_what_the_policy_wrote_under_next():
    env = _env()
    td = env.reset()
    env.rand_action(td)
    td.set(("next", "walker", "memory"), torch.ones(3, 2, 4))
    td, root = env.step_and_maybe_reset(td)
    assert (td["next", "walker", "memory"] == 1).all()
    assert (root["walker", "memory"] == 1).all()  # carried to the next step
    assert "reward" in td["next", "walker"].keys()  # the env's own outputs are there


def test_trainer_refuses_a_recurrent_policy_on_an_env_without_init_tracker():
    from marl.algorithms import Trainer

    cfg = get_algorithm("ippo").config_cls(network="gru")
    algo = Algorithm("ippo", config=cfg).build(_env(), seed=0)
    assert algo.recurrent
    with pytest.raises(ValueError, match="InitTracker"):
        Trainer(algo, MultiAgentFakeEnv(num_envs=3), frames_per_batch=30, total_frames=30)
    with pytest.raises(ValueError, match="eval_env"):
        Trainer(
            algo,
            _env(),
            frames_per_batch=30,
            total_frames=30,
            eval_env=MultiAgentFakeEnv(num_envs=1),
        )


@pytest.mark.parametrize("network", ["gru", "lstm"])
@pytest.mark.parametrize("algorithm", ["iql", "vdn", "qmix"])
def test_unrolled_q_values_equal_step_by_step_ones(algorithm, network):
    torch.manual_seed(0)
    env = _env()
    cfg = get_algorithm(algorithm).config_cls(
        network=network, cells=(16,), sequence_length=5, batch_size=40, learning_starts=0
    )
    # the picker group has discrete actions (and an agent mask); the walker is continuous
    algo = Algorithm({"picker": algorithm, "walker": "ippo"}, config={"picker": cfg})
    algo.build(env, seed=0)
    learner = algo.learners["picker"]
    info = learner.info
    collector = Collector(env, algo.policy, frames_per_batch=3 * STEPS)
    batch = collector.rollout()
    collector.shutdown()
    buffer = off_policy_buffer(1000, 40, slice_len=5)  # the learner's kind, its own keys
    # the loss's entries, and the values the collection policy computed step by step
    keys = [*learner.updater._keys, info.key("action_value")]
    buffer.extend(batch.select(*keys, strict=False).reshape(-1))
    qnet = learner.loss.local_value_network if algorithm != "iql" else learner.loss.value_network
    step_net = learner.policy[0]
    for _ in range(5):
        data = buffer.sample()
        assert data.batch_size == (8, 5)
        ids = data["collector", "traj_ids"]
        assert (ids == ids[:, :1]).all()  # a slice never crosses an episode
        with torch.no_grad():
            q_now, q_next = qnet.now_and_next(data)
            # step by step: what the collection policy computed (stored), and the values of
            # each next observation from the state stored after the step
            step_next = step_net(data["next"].clone()).get(info.key("action_value"))
        torch.testing.assert_close(q_now, data.get(info.key("action_value")), atol=1e-5, rtol=0)
        torch.testing.assert_close(q_next, step_next, atol=1e-5, rtol=0)
        if not data["is_init"][:, 0].all():  # the check can fail: from a zero state it does
            zero = data.clone()
            for leaf in ("q_rnn",) if network == "gru" else ("q_rnn_h", "q_rnn_c"):
                zero.set(info.key(leaf), torch.zeros_like(data.get(info.key(leaf))))
            with torch.no_grad():
                assert not torch.allclose(qnet.now_and_next(zero)[0], q_now, atol=1e-3)
    # and the learner trains on such slices
    logs = learner.updater.update(batch)
    assert logs and all(torch.isfinite(torch.tensor(v)) for v in logs.values())


def test_export_refuses_a_recurrent_policy():
    from marl.export import tensor_policy

    cfg = get_algorithm("ippo").config_cls(network="lstm")
    algo = Algorithm("ippo", config=cfg).build(_env(), seed=0)
    with pytest.raises(ValueError, match=r"'walker' policy is recurrent \(lstm\).*stateless"):
        tensor_policy(algo, "walker")


def test_an_experiment_with_a_recurrent_model_tracks_episode_starts_and_resumes(tmp_path):
    from marl.experiment import Experiment

    def task(num_envs, seed, device):
        return MultiAgentFakeEnv(num_envs=num_envs, seed=seed)

    config = dict(
        num_envs=2,
        frames_per_batch=40,
        total_frames=80,
        evaluation_interval=40,
        evaluation_episodes=2,
        checkpoint_interval=40,
        render=False,
        progress=False,
        save_folder=str(tmp_path),
    )
    exp = Experiment(task, "mappo", task_name="fake/x", config=config, model={"network": "gru"})
    assert exp.recurrent and "is_init" in exp.make_env(2, 0).observation_spec.keys()
    plain = Experiment(task, "mappo", task_name="fake/x", config=config)
    assert not plain.recurrent and "is_init" not in plain.make_env(2, 0).observation_spec.keys()
    exp.run()
    assert exp.trainer.algorithm.recurrent
    # the hidden state is per-step data: a checkpoint holds parameters only, and loads
    state = exp.trainer.algorithm.state_dict()
    assert not any("rnn_h" in k or k.endswith("actor_rnn") for k in state)
    again = Experiment(task, "mappo", task_name="fake/x", config=config, model={"network": "gru"})
    again.algorithm.build(again.make_env(2, 0), seed=0)
    again.algorithm.load_state_dict(state)
