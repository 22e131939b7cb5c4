"""Fixtures shared by the collector tests."""

from __future__ import annotations

import pytest

from . import _helpers


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance with 2 CPUs for the tests of a module (left alone if already up)."""
    ray = pytest.importorskip("ray", reason='RayCollector needs ray (pip install "marl[ray]")')
    # Ray workers cannot import the test package: send its helpers by value.
    ray.cloudpickle.register_pickle_by_value(_helpers)
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()
