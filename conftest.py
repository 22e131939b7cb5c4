"""Run every test and doctest on one torch thread; ``--disable-learning`` for the learning tests.

The networks and envs in the tests are small: a second intra-op thread gains
nothing, and on a busy 2-core machine it stalls for milliseconds per op
(measured: a 64-frame PPO iteration took 2 s with 2 threads and 20 ms with 1).

``pytest --disable-learning tests/algorithms/test_learning_marl.py`` turns every
optimizer step into a no-op: each learning test must then fail (a learning test
that still passes without learning proves nothing).

The suite runs on several processes (pytest-xdist, ``-n auto`` in pyproject.toml):
one per CPU core, at most :data:`MAX_WORKERS`. ``pytest -n 0`` runs it in one.
"""

from __future__ import annotations

import importlib.util
import inspect
import os

import pytest
import torch

# Each worker imports torch and the env packages (about 1 GB each) and the learning tests
# run one torch thread each: beyond a few workers a big machine gains little and a small
# one runs out of memory.
MAX_WORKERS = 4


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker per CPU this process may use, at most ``MAX_WORKERS``."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_WORKERS))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--disable-learning",
        action="store_true",
        help="make every torch.optim optimizer's step() a no-op (the learning tests must fail)",
    )


# Doctests of modules whose package is not in the `all` extra (so CI does not install it):
# skipped, with the reason, where the package is missing. Module -> the package it needs.
_OPTIONAL_DOCTESTS = {"marl.envs.libs.meltingpot": "meltingpot"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for module, package in _OPTIONAL_DOCTESTS.items():
            if item.name.startswith(module + ".") and importlib.util.find_spec(package) is None:
                item.add_marker(
                    pytest.mark.skip(reason=f"{package} is not installed (marl[{package}])")
                )


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("--disable-learning"):
        return

    def no_step(self, closure=None, **kwargs):  # Optimizer.step's, and AgentAdam's agents=
        return None

    for _, cls in inspect.getmembers(torch.optim, inspect.isclass):
        if issubclass(cls, torch.optim.Optimizer):
            cls.step = no_step

    # marl's own optimizers (AgentAdam), imported or not yet
    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    for cls in list(subclasses(torch.optim.Optimizer)):
        cls.step = no_step

    def disable_subclass(cls, **kwargs):
        cls.step = no_step

    torch.optim.Optimizer.__init_subclass__ = classmethod(disable_subclass)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
