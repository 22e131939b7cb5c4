"""The registry knows each built-in algorithm's config without importing its module."""

import importlib

from marl.algorithms.registry import BUILTIN_CONFIGS, algorithm_configs, get_algorithm


def test_builtin_specs_carry_the_configs_the_registry_names():
    for name, config_cls in BUILTIN_CONFIGS.items():
        assert get_algorithm(name).config_cls is config_cls, name
        # the algorithm module re-exports its config: the old import path still works
        module = importlib.import_module(f"marl.algorithms.{name}")
        assert getattr(module, config_cls.__name__) is config_cls
    assert list(algorithm_configs()) == sorted(BUILTIN_CONFIGS)
