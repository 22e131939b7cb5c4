"""Packages that re-export lazily (``marl._lazy``) still give every name they list."""

import importlib

import pytest

LAZY = [
    "marl.algorithms",
    "marl.envs",
    "marl.envs.libs",
    "marl.experiment",
    "marl.objectives",
    "marl.tune",
]


@pytest.mark.parametrize("package", LAZY)
def test_every_listed_name_resolves(package):
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{package} lists names it cannot give: {missing}"
    assert set(module.__all__) <= set(dir(module))


def test_an_unknown_name_is_an_attribute_error_naming_it():
    import marl.envs

    with pytest.raises(AttributeError, match=r"'marl\.envs' has no attribute 'NoSuchEnv'"):
        marl.envs.NoSuchEnv  # noqa: B018
    assert importlib.import_module("marl.envs").native.__name__ == "marl.envs.native"
