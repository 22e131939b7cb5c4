"""Run every test and doctest on one torch thread.

The networks and envs in the tests are small: a second intra-op thread gains
nothing, and on a busy 2-core machine it stalls for milliseconds per op
(measured: a 64-frame PPO iteration took 2 s with 2 threads and 20 ms with 1).
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
