"""The algorithm configs are compositions of settings, each default with one owner."""

import dataclasses
import inspect

import pytest

import marl.objectives as objectives
from marl.algorithms import get_algorithm, list_algorithms, settings
from marl.algorithms.settings import NetworkSettings
from marl.experiment._conf import field_docs
from marl.experiment.config import ModelConfig

CONFIGS = {name: get_algorithm(name).config_cls for name in list_algorithms()}


def test_no_algorithm_config_subclasses_another_algorithms_config():
    registered = set(CONFIGS.values())
    inherited = {
        name: [base.__name__ for base in cls.__mro__[1:] if base in registered]
        for name, cls in CONFIGS.items()
    }
    assert not any(inherited.values()), inherited


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_config_field_has_a_docstring_and_a_default(name):
    cls = CONFIGS[name]
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        assert f.name in docs, f"{cls.__name__}.{f.name} has no docstring"
        assert f.default is not dataclasses.MISSING, f"{cls.__name__}.{f.name} has no default"


@pytest.mark.parametrize(
    "name", sorted(n for n, c in CONFIGS.items() if issubclass(c, NetworkSettings))
)
def test_model_keys_cover_every_model_setting(name):
    # every model.* key is mapped (to a field of the config, or to None: left out), so
    # model= never guesses and never fails on a key it does not know
    keys = CONFIGS[name].MODEL_KEYS
    model_fields = {f.name for f in dataclasses.fields(ModelConfig)}
    assert set(keys) == model_fields
    config_fields = {f.name for f in dataclasses.fields(CONFIGS[name])}
    assert {v for v in keys.values() if v is not None} <= config_fields


LOSSES = [
    objectives.A2CLoss,
    objectives.PPOLoss,
    objectives.HAPPOLoss,
    objectives.DDPGLoss,
    objectives.TD3Loss,
    objectives.SACLoss,
    objectives.DiscreteSACLoss,
    objectives.DQNLoss,
    objectives.QMixLoss,
    objectives.PQNLoss,
]
# what a loss may still take as a keyword: its structure, never a hyperparameter
STRUCTURAL = {
    "normalize_advantage_exclude_dims",
    "value_from_actor",
    "action_spec",
    "low",
    "high",
    "num_actions",
    "team",
}


@pytest.mark.parametrize("loss", LOSSES, ids=lambda c: c.__name__)
def test_losses_keep_no_hyperparameter_defaults_of_their_own(loss):
    params = inspect.signature(loss.__init__).parameters
    assert "settings" in params
    settings_fields = set()
    for cls in vars(objectives.settings).values():
        if dataclasses.is_dataclass(cls):
            settings_fields |= {f.name for f in dataclasses.fields(cls)}
    defaults = {
        n for n, p in params.items() if p.default is not inspect.Parameter.empty and n != "settings"
    }
    assert defaults <= STRUCTURAL | {"critic"}, defaults - STRUCTURAL
    assert not (set(params) & settings_fields), set(params) & settings_fields


# A dataclass runs only the first __post_init__ of its MRO: a config that composes two
# settings classes with checks would silently skip one. Each check must fire in every
# config that composes its class.
SETTINGS_CHECKS = [
    (settings.CentralCritic, {"critic_scope": "bogus"}, "critic_scope must be one of"),
    (settings.EpsilonGreedy, {"eps_init": 0.1, "eps_end": 0.5}, "eps_end <= eps_init"),
]


@pytest.mark.parametrize("name", list_algorithms())
def test_every_settings_check_runs_in_every_config_that_composes_it(name):
    config_cls = get_algorithm(name).config_cls
    for owner, bad, message in SETTINGS_CHECKS:
        if issubclass(config_cls, owner):
            with pytest.raises(ValueError, match=message):
                config_cls(**bad)
