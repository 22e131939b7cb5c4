"""ExperimentConfig / ModelConfig validation, and the hydra structured configs built from them."""

import dataclasses

import pytest
import torch
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

from marl.algorithms import get_algorithm, list_algorithms
from marl.algorithms.settings import ActorCriticNetworks, NetworkSettings, QNetworks
from marl.experiment import Experiment, ExperimentConfig, ModelConfig
from marl.experiment._conf import CONF_DIR, field_docs
from marl.experiment.cli import compose_config
from marl.testing import MultiAgentFakeEnv


def composed(*overrides):
    """The config ``marl-run <overrides>`` composes (hydra's compose API, in process)."""
    return compose_config(overrides)


def fake_task(num_envs, seed, device):
    return MultiAgentFakeEnv(num_envs=num_envs, seed=seed)


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("frames_per_batch", 0, "experiment.frames_per_batch: expected an integer >= 1, got 0"),
        ("total_frames", -5, "experiment.total_frames"),
        ("num_envs", 0, "experiment.num_envs: expected None or an integer >= 1"),
        ("keep_checkpoints", 0, "experiment.keep_checkpoints"),
        ("loggers", ["csv", "mlflow"], "unknown logger 'mlflow'"),
    ],
)
def test_experiment_config_rejects_bad_values(field, value, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        ExperimentConfig(**{field: value}).validate()


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("total_frames", "abc", "experiment.total_frames: expected int, got 'abc'"),
        ("total_frames", 1.5, "experiment.total_frames: expected int, got 1.5"),
        ("progress", "no", "experiment.progress: expected bool, got 'no'"),
        ("num_envs", True, "experiment.num_envs: expected int | None, got True"),
    ],
)
def test_python_api_checks_types(field, value, message):
    """Python users do not go through hydra: the dataclass types are checked at the boundary."""
    with pytest.raises(TypeError) as err:
        ExperimentConfig(**{field: value}).validate()
    assert str(err.value) == message
    with pytest.raises(TypeError, match=r"model.actor_cells: expected list\[int\] \| None"):
        Experiment(fake_task, "mappo", model={"actor_cells": ["big"]}, task_name="fake/x")


def test_every_experiment_field_has_a_docstring():
    docs = field_docs(ExperimentConfig)
    missing = [f.name for f in dataclasses.fields(ExperimentConfig) if f.name not in docs]
    assert not missing


def test_model_maps_onto_each_algorithm():
    model = ModelConfig(actor_cells=[32, 32], critic_cells=[16], activation="relu")
    network = ModelConfig(network="gnn", gnn_radius=0.5, gnn_position=[2, 4])
    for name in list_algorithms():
        config = get_algorithm(name).config_cls()
        if not isinstance(config, NetworkSettings):
            # no MLP to size (mat: a transformer, sized by embed_dim and n_blocks): refused
            with pytest.raises(ValueError, match=r"'mat' does not take these model settings"):
                model.apply_to(config, name)
            continue
        # every algorithm with an MLP to size also takes another body in its place
        bodied = network.apply_to(config, name)
        assert (bodied.network, bodied.gnn_radius, bodied.gnn_position) == ("gnn", 0.5, (2, 4))
        sized = model.apply_to(config, name)
        assert sized.activation == "relu"
        if isinstance(sized, ActorCriticNetworks):
            assert (sized.actor_cells, sized.critic_cells) == ((32, 32), (16,))
        else:  # the Q-learners: the Q-network takes actor_cells, and there is no critic
            assert isinstance(sized, QNetworks) and sized.cells == (32, 32)
        # the model changes nothing it does not name
        untouched = {"actor_cells", "critic_cells", "cells", "activation"}
        for f in dataclasses.fields(config):
            if f.name not in untouched:
                assert getattr(sized, f.name) == getattr(config, f.name), (name, f.name)


def test_model_settings_an_algorithm_cannot_take_are_refused_with_its_name():
    with pytest.raises(ValueError, match=r"algorithm 'mat' does not take these model settings"):
        Experiment(fake_task, "mat", model={"actor_cells": [8]}, task_name="fake/multiagent")


def test_model_and_algorithm_config_reach_the_networks():
    exp = Experiment(
        fake_task,
        "ippo",
        model={"actor_cells": [7, 7]},
        task_name="fake/multiagent",
        algorithm_config={"lr": 1e-3},
    )
    assert exp.algorithm.config.actor_cells == (7, 7)
    assert exp.algorithm.config.lr == 1e-3
    assert exp.describe()["algorithm_config"]["actor_cells"] == (7, 7)


def test_unknown_task_names_the_closest_ones():
    with pytest.raises(
        ValueError, match=r"unknown task 'vmas/navigaton'; closest names: \['vmas/navigation'"
    ):
        Experiment("vmas/navigaton", "mappo")


def test_unknown_algorithm_lists_the_registry():
    with pytest.raises((KeyError, ValueError), match="mappo"):
        Experiment("vmas/navigation", "mapo")


@pytest.mark.parametrize(
    "override,key,message",
    [
        ("algorithm.lr=abc", "algorithm.lr", "Value 'abc' of type 'str' could not be converted"),
        ("experiment.total_frames=1.5", "experiment.total_frames", "could not be converted"),
        ("seed=abc", "seed", "could not be converted to Integer"),
        ("experiment.progress=maybe", "experiment.progress", "'maybe' is not a valid bool"),
        ("model.actor_cells=[a,b]", "model.actor_cells", "could not be converted to Integer"),
    ],
)
def test_hydra_checks_types_when_composing(override, key, message):
    """``marl-run algorithm.lr=abc`` fails while the config is composed, before any env or
    network exists, naming the key, the expected type and the value."""
    with pytest.raises(ConfigCompositionException) as err:
        composed(override)
    cause = err.value.__cause__
    assert isinstance(cause, ValidationError)
    assert f"full_key: {key}" in str(cause) and message in str(cause)


@pytest.mark.parametrize(
    "override", ["experiment.total_framez=1", "algorithm.lrr=1", "model.cellz=[1]", "sed=1"]
)
def test_hydra_refuses_unknown_keys(override):
    key = override.split("=")[0]
    with pytest.raises(ConfigCompositionException) as err:
        composed(override)
    assert f"Key '{key.split('.')[-1]}' not in" in str(err.value.__cause__)
    assert f"full_key: {key}" in str(err.value.__cause__)


@pytest.mark.parametrize(
    "override,message",
    [
        ("+experiment.total_framez=1", "experiment: unknown field(s) ['total_framez']"),
        ("+algorithm.lrr=1", "unknown mappo config field(s) ['lrr']"),
    ],
)
def test_a_forced_unknown_key_is_refused_before_anything_is_built(override, message, monkeypatch):
    """hydra's ``+`` adds a key even to a structured config; the run refuses it at once."""
    from marl.experiment import cli

    built = []
    monkeypatch.setattr("marl.experiment.parts.make_task", lambda *a, **k: built.append(1))
    with pytest.raises(ValueError) as err:
        cli.run_config(composed(override), overrides=[override])
    assert message in str(err.value) and not built


def test_defaults_come_from_the_dataclasses():
    """One source of truth: the composed defaults are the dataclasses' defaults."""
    cfg = composed()
    assert OmegaConf.to_container(cfg.experiment) == dataclasses.asdict(ExperimentConfig())
    assert OmegaConf.to_container(cfg.model) == dataclasses.asdict(ModelConfig())
    for name in list_algorithms():
        node = OmegaConf.to_container(composed(f"algorithm={name}").algorithm)
        assert node.pop("name") == name and node.pop("groups") == {}
        config = get_algorithm(name).config_cls()
        settable = {f.name for f in dataclasses.fields(config) if f.init}
        expected = {k: v for k, v in dataclasses.asdict(config).items() if k in settable}
        assert node == {k: list(v) if isinstance(v, tuple) else v for k, v in expected.items()}
        node = {k: tuple(v) if isinstance(v, list) else v for k, v in node.items()}
        assert get_algorithm(name).make_config(node) == config  # every key is a field


@pytest.mark.parametrize(
    "preset",
    [
        "experiment=debug",
        "experiment=gpu",
        "model=small",
        "model=large",
        "model=mlp",
        "model=deepsets",
        "model=gnn",
        "model=cnn",
    ],
)
def test_every_preset_composes_into_the_dataclass(preset):
    group = preset.split("=")[0]
    node = composed(preset)[group]
    cls = ExperimentConfig if group == "experiment" else ModelConfig
    assert OmegaConf.get_type(node) is cls  # typed: a bad key or value in the YAML fails
    config = cls(**OmegaConf.to_container(node))
    assert config.validate() is config


def test_no_generated_yaml_is_left():
    """The dataclasses are registered directly: no YAML copy of their defaults to go stale."""
    assert not (CONF_DIR / "algorithm").exists()
    assert sorted(p.name for p in (CONF_DIR / "experiment").iterdir()) == ["debug.yaml", "gpu.yaml"]
    assert sorted(p.name for p in (CONF_DIR / "model").iterdir()) == [
        "cnn.yaml",
        "deepsets.yaml",
        "gnn.yaml",
        "gru.yaml",
        "large.yaml",
        "lstm.yaml",
        "mlp.yaml",
        "small.yaml",
    ]


def test_debug_preset_checks_actions_in_every_env():
    """``experiment=debug`` turns the envs' action checks on; the default leaves them off."""
    from marl.envs import InvalidActionError
    from marl.experiment import Experiment

    assert composed("experiment=debug").experiment.check_actions is True
    assert composed().experiment.check_actions is False
    for task in ("vmas/navigation", fake_task):
        checked = Experiment(task, "mappo", config={"check_actions": True}, task_name="fake/t")
        env = checked.make_env(2, seed=0)
        td = env.rand_action(env.reset())
        key = next(k for k in env.action_keys if td[k].is_floating_point())
        td[key] = torch.full_like(td[key], float("nan"))
        with pytest.raises(InvalidActionError, match="NaN"):
            env.step(td)
        unchecked = Experiment(task, "mappo", task_name="fake/t").make_env(2, seed=0)
        assert not unchecked.check_actions
