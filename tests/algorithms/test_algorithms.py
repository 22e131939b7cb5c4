"""Unit tests of the algorithm interface, the registry, the learners and the Trainer."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tensordict.nn import InteractionType, set_interaction_type

from marl.algorithms import (
    Algorithm,
    AlgorithmSpec,
    DQNConfig,
    PPOConfig,
    Trainer,
    TrainerCallback,
    evaluate,
    get_algorithm,
    group_infos,
    list_algorithms,
)
from marl.envs import RewardSum, TransformedEnv
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv

ALL = ["a2c", "ddpg", "dqn", "ppo", "sac", "td3"]
SMALL = {"actor_cells": (16,), "critic_cells": (16,)}
OFF_SMALL = {**SMALL, "learning_starts": 0, "batch_size": 16}


def _small(name: str) -> dict:
    if name == "dqn":
        return {"cells": (16,), "learning_starts": 0, "batch_size": 16}
    return OFF_SMALL if not get_algorithm(name).on_policy else {**SMALL, "minibatch_size": 16}


def _single(discrete: bool, num_envs: int = 4) -> TransformedEnv:
    return TransformedEnv(
        SingleAgentFakeEnv(num_envs=num_envs, discrete=discrete, seed=0), RewardSum()
    )


def _multi(num_envs: int = 4) -> TransformedEnv:
    return TransformedEnv(MultiAgentFakeEnv(num_envs=num_envs, seed=0), RewardSum())


# ------------------------------------------------------------------ registry
def test_registry_lists_every_algorithm():
    assert set(ALL) <= set(list_algorithms())  # the MARL algorithms are tested elsewhere
    for name in ALL:
        spec = get_algorithm(name)
        assert isinstance(spec, AlgorithmSpec) and spec.name == name
        assert spec.action_spaces <= {"continuous", "discrete"}
        assert dataclasses.is_dataclass(spec.config_cls)


def test_unknown_algorithm_lists_available():
    with pytest.raises(ValueError, match=r"unknown algorithm 'ppp'.*available: a2c, ddpg"):
        get_algorithm("ppp")


def test_config_fields_are_documented_and_overridable():
    for name in ALL:
        cls = get_algorithm(name).config_cls
        for f in dataclasses.fields(cls):
            assert f.default is not dataclasses.MISSING, (name, f.name)
    assert get_algorithm("ppo").make_config({"lr": 0.1}).lr == 0.1
    with pytest.raises(ValueError, match=r"unknown ppo config field.*'lrr'"):
        get_algorithm("ppo").make_config({"lrr": 0.1})
    with pytest.raises(TypeError, match="PPOConfig"):
        get_algorithm("ppo").make_config(DQNConfig())


def test_unsupported_action_space_names_algorithm_and_space():
    with pytest.raises(ValueError, match=r"'dqn' supports \['discrete'\].*'root' has continuous"):
        Algorithm("dqn").build(SingleAgentFakeEnv(num_envs=2))
    with pytest.raises(ValueError, match=r"'td3'.*group 'picker' has discrete"):
        Algorithm("td3").build(MultiAgentFakeEnv(num_envs=2))


def test_per_group_mapping_errors():
    with pytest.raises(ValueError, match=r"unknown group.*'nobody'"):
        Algorithm({"walker": "ppo", "picker": "dqn", "nobody": "ppo"}).build(_multi())
    with pytest.raises(KeyError, match="no algorithm given for group 'picker'"):
        Algorithm({"walker": "ppo"}).build(_multi())


def test_unbuilt_algorithm_raises():
    with pytest.raises(RuntimeError, match="build"):
        _ = Algorithm("ppo").policy


# ------------------------------------------------------------------ group info
def test_group_infos():
    root = group_infos(SingleAgentFakeEnv(num_envs=3, discrete=True))["root"]
    assert root.name is None and root.key("action") == "action"
    assert root.next_key("reward") == ("next", "reward") and root.action_space == "discrete"
    infos = group_infos(MultiAgentFakeEnv(num_envs=3))
    walker, picker = infos["walker"], infos["picker"]
    assert walker.key("action") == ("walker", "action") and walker.n_agents == 2
    assert walker.action_shape == (2,) and walker.done_key() == ("next", "walker", "done")
    assert picker.has_action_mask and picker.n_actions == 5 and not walker.has_action_mask
    assert walker.groups == ("walker", "picker")


# ------------------------------------------------------------------ build + train
@pytest.mark.parametrize("name", ALL)
def test_single_agent_build_and_train(name):
    discrete = "discrete" in get_algorithm(name).action_spaces
    env = _single(discrete)
    algo = Algorithm(name, config=_small(name))
    trainer = Trainer(
        algo, env, frames_per_batch=32, total_frames=64, seed=0, eval_env=_single(discrete, 2)
    )
    history = list(trainer.train())
    assert [h["frames"] for h in history[:2]] == [32, 64]
    assert any(k.startswith("train/loss_") for k in history[1])
    assert all(torch.isfinite(torch.tensor(v)) for v in history[1].values())
    assert "eval/episode_reward" in history[-1]
    assert list(algo.learners) == ["root"]


@pytest.mark.parametrize("name", ["ppo", "a2c", "sac"])
def test_multi_group_build_and_train(name):
    env = _multi()
    algo = Algorithm(name, config=_small(name))
    logs = list(Trainer(algo, env, frames_per_batch=40, total_frames=80, seed=0).train())[-1]
    for group in ("walker", "picker"):
        assert any(k.startswith(f"train/{group}/loss_") for k in logs), sorted(logs)
        assert f"train/{group}/episode_reward" in logs
    assert "train/episode_reward" in logs


def test_mixed_algorithms_per_group():
    env = _multi()
    algo = Algorithm(
        {"walker": "td3", "picker": "dqn"},
        config={"walker": OFF_SMALL, "picker": _small("dqn")},
    )
    logs = list(Trainer(algo, env, frames_per_batch=40, total_frames=80, seed=0).train())[-1]
    assert "train/walker/loss_qvalue" in logs and "train/picker/loss_qvalue" in logs
    assert algo.learners["walker"].algorithm == "td3"
    assert algo.learners["picker"].algorithm == "dqn"
    assert not algo.on_policy


def test_collection_policy_writes_every_group_and_respects_masks():
    env = MultiAgentFakeEnv(num_envs=8, seed=0)
    algo = Algorithm({"walker": "ppo", "picker": "dqn"}, config={"picker": {"eps_init": 1.0}})
    algo.build(env, seed=0)
    td = algo.policy(env.reset())
    assert td["walker", "action"].shape == (8, 2, 2) and td["picker", "action"].shape == (8, 3)
    mask = td["picker", "action_mask"]
    for _ in range(10):
        td = algo.policy(env.reset())
        mask = td["picker", "action_mask"]
        assert mask.gather(-1, td["picker", "action"].unsqueeze(-1)).all()
    assert (td["walker", "action"].abs() <= 1).all()


def test_eval_policy_is_deterministic():
    env = SingleAgentFakeEnv(num_envs=4, seed=0)
    for name in ("ppo", "sac", "td3"):
        algo = Algorithm(name).build(env, seed=0)
        td = env.reset()
        a = algo.eval_policy()(td.clone())["action"]
        b = algo.eval_policy()(td.clone())["action"]
        assert torch.equal(a, b), name
        with set_interaction_type(InteractionType.RANDOM):
            c = algo.policy(td.clone())["action"]
        assert not torch.equal(a, c), name


def test_exploration_anneals_with_frames():
    env = _single(True)
    algo = Algorithm("dqn", config={"eps_annealing_frames": 64, **_small("dqn")})
    list(Trainer(algo, env, frames_per_batch=32, total_frames=64, seed=0).train())
    assert algo.learners["root"].exploration[0].eps == pytest.approx(0.04)


def test_prioritized_buffer_updates_priorities():
    env = _single(True)
    algo = Algorithm("dqn", config={"prioritized": True, **_small("dqn")})
    list(Trainer(algo, env, frames_per_batch=32, total_frames=64, seed=0).train())
    sampler = algo.learners["root"].buffer.sampler
    assert type(sampler).__name__ == "PrioritizedSampler"
    batch = algo.learners["root"].buffer.sample()
    assert "priority_weight" in batch.keys()


# ------------------------------------------------------------------ trainer
def test_callbacks_log_fn_and_stop():
    calls = []

    class Recorder(TrainerCallback):
        def on_train_start(self, trainer):
            calls.append("start")

        def on_iteration_end(self, trainer, logs):
            calls.append(("iter", logs["frames"]))
            if logs["frames"] >= 64:
                trainer.stop()

        def on_evaluation(self, trainer, logs):
            calls.append(("eval", trainer.frames))

        def on_train_end(self, trainer):
            calls.append("end")

    logged = []
    trainer = Trainer(
        Algorithm("ppo", config=_small("ppo")),
        _single(True),
        frames_per_batch=32,
        total_frames=1000,
        eval_env=_single(True, 2),
        eval_interval=32,
        callbacks=[Recorder()],
        log_fn=logged.append,
        seed=0,
    )
    list(trainer.train())
    assert calls == ["start", ("eval", 32), ("iter", 32), ("eval", 64), ("iter", 64), "end"]
    assert [entry["frames"] for entry in logged] == [32, 64]
    assert trainer.frames == 64


def test_evaluate_counts_whole_episodes():
    env = TransformedEnv(MultiAgentFakeEnv(num_envs=3, seed=0), RewardSum())
    logs = evaluate(env, env.rand_action, episodes=5)
    assert {"eval/episode_reward", "eval/walker/episode_reward", "eval/picker/episode_reward"} <= (
        set(logs)
    )
    assert 5 <= logs["eval/episode_length"] <= 10


def _first_update(seed: int, name: str) -> dict:
    torch.manual_seed(123)  # the global state before the trainer must not matter
    trainer = Trainer(
        Algorithm(name, config=_small(name)),
        _single("discrete" in get_algorithm(name).action_spaces),
        frames_per_batch=32,
        total_frames=32,
        seed=seed,
    )
    return next(trainer.train())


@pytest.mark.parametrize("name", ["ppo", "sac"])
def test_first_update_is_deterministic_with_a_seed(name):
    a, b = _first_update(0, name), _first_update(0, name)
    keys = [k for k in a if k.startswith("train/")]
    assert keys and all(a[k] == b[k] for k in keys)
    c = _first_update(1, name)
    assert any(a[k] != c[k] for k in keys)


@pytest.mark.parametrize("name", ["ppo", "td3"])
def test_state_dict_round_trip(name, tmp_path):
    discrete = name == "ppo"

    def make():
        return Trainer(
            Algorithm(name, config=_small(name)),
            _single(discrete),
            frames_per_batch=32,
            total_frames=96,
            seed=0,
        )

    trainer = make()
    trainer.total_frames = 64
    list(trainer.train())
    path = tmp_path / "ckpt.pt"
    torch.save(trainer.state_dict(include_buffers=True), path)
    restored = make()
    restored.load_state_dict(torch.load(path, weights_only=False))
    assert restored.frames == 64 and restored.iteration == 2
    assert restored.collector.frames == trainer.collector.frames
    for (k, p), (_, q) in zip(
        trainer.algorithm.state_dict().items(), restored.algorithm.state_dict().items()
    ):
        # tensors, and modules' extra state (TD3's delayed-actor counter)
        assert torch.equal(p, q) if isinstance(p, torch.Tensor) else p == q, k
    opt_a = trainer.algorithm.learners["root"].optimizer.state_dict()
    opt_b = restored.algorithm.learners["root"].optimizer.state_dict()
    assert all(
        torch.equal(opt_a["state"][i]["exp_avg"], opt_b["state"][i]["exp_avg"])
        for i in opt_a["state"]
    )
    if name == "td3":  # on-policy buffers hold one batch and are not saved
        assert len(restored.algorithm.learners["root"].buffer) == len(
            trainer.algorithm.learners["root"].buffer
        )
    history = list(restored.train())
    assert [h["frames"] for h in history] == [96]


def test_config_instances_are_accepted():
    algo = Algorithm("ppo", config=PPOConfig(clip_epsilon=0.1)).build(_single(True))
    assert algo.learners["root"].loss.clip_epsilon == 0.1


def test_a2c_critic_lr_sets_the_critic_rate_only():
    def rates(config):
        learner = Algorithm("a2c", config=config).build(_single(True)).learners["root"]
        return {group["name"]: group["lr"] for group in learner.optimizer.param_groups}

    assert rates({"lr": 1e-3}) == {"actor": 1e-3, "critic": 1e-3}  # None: the shared lr
    assert rates({"lr": 1e-3, "critic_lr": 1e-2}) == {"actor": 1e-3, "critic": 1e-2}


def _fake_cartpole():
    return TransformedEnv(SingleAgentFakeEnv(num_envs=2, discrete=True, seed=0), RewardSum())


def test_trainer_with_a_multiprocess_collector():
    from marl.collectors import MultiSyncCollector

    env = _fake_cartpole()
    algo = Algorithm("ppo", config=_small("ppo")).build(env, seed=0)
    collector = MultiSyncCollector(
        _fake_cartpole, algo.policy, num_workers=2, frames_per_batch=32, total_frames=64
    )
    try:
        trainer = Trainer(algo, env, frames_per_batch=32, total_frames=1000, collector=collector)
        logs = list(trainer.train())
    finally:
        collector.shutdown()
    # the collector's own total_frames ends the run
    assert [entry["frames"] for entry in logs] == [32, 64]
    assert "train/loss_objective" in logs[-1]


def test_train_streams_one_iteration_at_a_time():
    """``for logs in trainer.train()`` sees each iteration as it ends, not all at the end."""
    trainer = Trainer(Algorithm("ppo", config=_small("ppo")), _single(True), frames_per_batch=32,
                      total_frames=96, seed=0)  # fmt: skip
    run = trainer.train()
    assert trainer.frames == 0  # nothing runs before the first item is asked for
    first = next(run)
    assert first["frames"] == 32 and trainer.frames == 32
    assert [logs["frames"] for logs in run] == [64, 96]
    assert [logs["frames"] for logs in trainer.history] == [32, 64, 96]


def test_an_unused_train_call_warns():
    trainer = Trainer(Algorithm("ppo", config=_small("ppo")), _single(True), frames_per_batch=32,
                      total_frames=64, seed=0)  # fmt: skip
    with pytest.warns(RuntimeWarning, match="nothing was trained"):
        trainer.train()
        import gc

        gc.collect()
    assert trainer.frames == 0


# ------------------------------------------------------------------ foreign checkpoints
def _trainer(name, env, **config):
    algo = Algorithm(name, config={**_small(name), **config})
    return Trainer(algo, env, frames_per_batch=32, total_frames=64, seed=0)


def test_a_checkpoint_of_another_algorithm_is_refused():
    ppo = _trainer("ppo", _single(True))
    list(ppo.train())
    state = ppo.state_dict()
    a2c = _trainer("a2c", _single(True))
    before = {k: v.clone() for k, v in a2c.algorithm.state_dict().items()}
    # PPO and A2C have the same networks: this used to load without a word
    with pytest.raises(
        ValueError,
        match=r"built for groups \{'root': ppo\}, but this algorithm has \{'root': a2c\}",
    ):
        a2c.load_state_dict(state)
    after = a2c.algorithm.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # nothing was loaded
    assert a2c.frames == 0


def test_a_checkpoint_of_other_groups_or_network_shapes_is_refused():
    multi = _trainer("ppo", _multi())
    state = multi.state_dict()
    with pytest.raises(
        ValueError, match=r"\{'walker': ppo, 2 agents, 'picker': ppo, 3 agents\}.*\{'root': ppo\}"
    ):
        _trainer("ppo", _single(False)).load_state_dict(state)
    mixed = Algorithm({"walker": "ppo", "picker": "a2c"}, config={"walker": SMALL, "picker": SMALL})
    mixed_trainer = Trainer(mixed, _multi(), frames_per_batch=32, total_frames=64, seed=0)
    with pytest.raises(ValueError, match=r"'picker': ppo, 3 agents.*'picker': a2c, 3 agents"):
        mixed_trainer.load_state_dict(state)
    wider = _trainer("ppo", _multi(), actor_cells=(32,))
    with pytest.raises(
        ValueError,
        match=r"does not fit this algorithm's networks.*checkpoint \(16, \d+\), expected \(32, \d+\)",
    ):
        wider.load_state_dict(state)


def test_something_else_than_an_algorithm_state_is_refused():
    algo = Algorithm("ppo", config=_small("ppo")).build(_single(True))
    with pytest.raises(
        ValueError, match=r"expected an Algorithm.state_dict_full\(\) state.*\['frames'\]"
    ):
        algo.load_state_dict_full({"frames": 3})
    state = algo.state_dict_full()
    assert state["layout"] == {"root": {"algorithm": "ppo", "n_agents": None}}
    del state["layout"]  # a checkpoint written before layouts were saved still loads
    algo.load_state_dict_full(state)
