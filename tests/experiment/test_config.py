"""ExperimentConfig / ModelConfig validation and the generated hydra YAML files."""

import dataclasses

import pytest
import yaml

from marl.algorithms import get_algorithm, list_algorithms
from marl.experiment import Experiment, ExperimentConfig, ModelConfig
from marl.experiment._conf import CONF_DIR, expected_files, field_docs


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


def test_every_experiment_field_has_a_docstring():
    docs = field_docs(ExperimentConfig)
    missing = [f.name for f in dataclasses.fields(ExperimentConfig) if f.name not in docs]
    assert not missing


def test_model_maps_onto_each_algorithm():
    model = ModelConfig(actor_cells=[32, 32], critic_cells=[16], activation="relu")
    for name in list_algorithms():
        config = get_algorithm(name).config_cls()
        fields = {f.name for f in dataclasses.fields(config) if f.init}
        changes = model.algorithm_overrides(fields)
        assert changes["activation"] == "relu"
        assert changes.get("actor_cells", changes.get("cells")) == (32, 32)
        if "critic_cells" in fields:
            assert changes["critic_cells"] == (16,)


def test_model_and_algorithm_config_reach_the_networks():
    from marl.testing import MultiAgentFakeEnv

    exp = Experiment(
        lambda num_envs, seed, device: MultiAgentFakeEnv(num_envs=num_envs, seed=seed),
        "ippo",
        model={"actor_cells": [7, 7]},
        task_name="fake/multiagent",
        algorithm_config={"lr": 1e-3},
    )
    assert exp.algorithm.config.actor_cells == (7, 7)
    assert exp.algorithm.config.lr == 1e-3
    assert exp.describe()["algorithm_config"]["all"]["actor_cells"] == (7, 7)


def test_unknown_task_lists_the_catalogue():
    with pytest.raises(ValueError, match=r"unknown task 'vmas/navigaton'; available tasks: \["):
        Experiment("vmas/navigaton", "mappo")


def test_unknown_algorithm_lists_the_registry():
    with pytest.raises((KeyError, ValueError), match="mappo"):
        Experiment("vmas/navigation", "mapo")


def test_generated_conf_files_are_current():
    stale = [
        str(p.relative_to(CONF_DIR))
        for p, text in expected_files().items()
        if not p.exists() or p.read_text() != text
    ]
    assert not stale, f"run `python -m marl.experiment._conf`; stale: {stale}"


def test_algorithm_yaml_matches_its_dataclass():
    for name in list_algorithms():
        data = yaml.safe_load((CONF_DIR / "algorithm" / f"{name}.yaml").read_text())
        assert data.pop("name") == name
        data = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        config = get_algorithm(name).make_config(data)  # every key is a valid field
        assert dataclasses.asdict(config) == dataclasses.asdict(get_algorithm(name).config_cls())
