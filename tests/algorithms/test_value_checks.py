"""Out-of-range hyperparameters are refused when the config is read, naming the key."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest

from marl.algorithms import get_algorithm, list_algorithms
from marl.algorithms.value_checks import RULES

BAD = {
    "a finite number >= 0": -1.0,
    "a finite number > 0": 0.0,
    "a number in [0, 1]": 1.5,
    "an integer >= 1": 0,
    "an integer >= 0": -1,
    "integers >= 1": (64, 0),
}


def _fields(name):
    return [f.name for f in dataclasses.fields(get_algorithm(name).config_cls) if f.init]


@pytest.mark.parametrize("name", list_algorithms())
def test_every_algorithm_refuses_out_of_range_values(name):
    spec = get_algorithm(name)
    spec.make_config({})  # the defaults pass
    checked = [f for f in _fields(name) if f in RULES]
    assert checked, f"{name} has no checked field"
    for field in checked:
        bad = BAD[RULES[field]]
        try:
            made = spec.make_config({field: bad})
        except ValueError as err:
            # a config's own __post_init__ check may come first: it names the field too
            assert field in str(err), (field, str(err))
            continue
        raise AssertionError(f"{name}: {field}={bad!r} was accepted: {made}")


@pytest.mark.parametrize("name", list_algorithms())
def test_nan_and_inf_are_refused_in_every_float_field(name):
    spec = get_algorithm(name)
    config_cls = spec.config_cls
    floats = [
        f.name
        for f in dataclasses.fields(config_cls)
        if f.init and isinstance(getattr(config_cls(), f.name), float)
    ]
    for field in floats:
        for value in (float("nan"), float("inf")):
            with pytest.raises(ValueError, match=field):
                spec.make_config({field: value})


def test_an_instance_is_checked_too():
    config = get_algorithm("mappo").config_cls(lr=-1e-3)
    with pytest.raises(ValueError, match=r"algorithm\.lr: mappo expects a finite number >= 0"):
        get_algorithm("mappo").make_config(config)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("algorithm.lr=-1", "algorithm.lr: mappo expects a finite number >= 0, got -1.0"),
        ("algorithm.lr=nan", "algorithm.lr: mappo expects a finite number >= 0, got nan"),
        ("seed=-1", "seed: expected an integer in [0, 2**32 - 4], got -1"),
    ],
)
def test_marl_run_names_the_bad_key(tmp_path, override, message):
    out = subprocess.run(
        ["marl-run", "experiment=debug", override, f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    # the refusal's one line, exit 2: no traceback before it
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [f"marl-run: {message}"], out.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()
