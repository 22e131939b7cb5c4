"""Replay buffers: storages, samplers, writers and the C++ segment trees.

``ReplayBuffer(storage, sampler, writer, transform, batch_size)`` serves every
algorithm. Prioritized replay runs on :class:`SumTree`/:class:`MinTree`, sum
and min segment trees compiled into ``marl._C``.
"""

from marl.data._trees import MinTree, SumTree
from marl.data.checks import check_sampler, check_storage, check_writer
from marl.data.list_storage import ListStorage
from marl.data.replay_buffer import ReplayBuffer
from marl.data.samplers import (
    PrioritizedSampler,
    RandomSampler,
    Sampler,
    SamplerWithoutReplacement,
)
from marl.data.slice_sampler import SliceSampler
from marl.data.storages import MemmapStorage, Storage, TensorStorage
from marl.data.writers import MaxValueWriter, RoundRobinWriter, Writer

__all__ = [
    "ListStorage",
    "MaxValueWriter",
    "MemmapStorage",
    "MinTree",
    "PrioritizedSampler",
    "RandomSampler",
    "ReplayBuffer",
    "RoundRobinWriter",
    "Sampler",
    "SamplerWithoutReplacement",
    "SliceSampler",
    "Storage",
    "SumTree",
    "TensorStorage",
    "Writer",
    "check_sampler",
    "check_storage",
    "check_writer",
]
