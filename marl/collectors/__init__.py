"""Collectors: turn envs and policies into batches of experience.

- :class:`Collector` runs in this process.
- :class:`MultiSyncCollector` and :class:`MultiAsyncCollector` run a
  ``Collector`` per worker process; data comes back through shared memory.
- :class:`RayCollector` runs collectors as Ray actors (``pip install "marl[ray]"``).

Each of them is a :class:`BatchCollector` (the contract the rest of marl relies on),
which :func:`check_collector` checks by running a collector.
"""

from marl.collectors.checks import CollectorContractError, check_collector
from marl.collectors.collector import Collector
from marl.collectors.contracts import BatchCollector
from marl.collectors.multiprocess import MultiAsyncCollector, MultiSyncCollector
from marl.collectors.ray import RayCollector
from marl.collectors.utils import (
    MASK_KEY,
    TRAJ_IDS_KEY,
    WORKER_ID_KEY,
    CollectorWorkerError,
    split_trajectories,
)

__all__ = [
    "MASK_KEY",
    "TRAJ_IDS_KEY",
    "WORKER_ID_KEY",
    "BatchCollector",
    "Collector",
    "CollectorContractError",
    "CollectorWorkerError",
    "MultiAsyncCollector",
    "MultiSyncCollector",
    "RayCollector",
    "check_collector",
    "split_trajectories",
]
