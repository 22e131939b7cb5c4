"""Every built-in storage, sampler and writer passes its public checker."""

import pytest
import torch

from marl.data import (
    ListStorage,
    MaxValueWriter,
    MemmapStorage,
    PrioritizedSampler,
    RandomSampler,
    RoundRobinWriter,
    SamplerWithoutReplacement,
    SliceSampler,
    TensorStorage,
    check_sampler,
    check_storage,
    check_writer,
)
from marl.data.storages import Storage


@pytest.mark.parametrize(
    "make",
    [
        lambda tmp: ListStorage(10),
        lambda tmp: TensorStorage(10),
        lambda tmp: MemmapStorage(10, path=tmp / "mm"),
    ],
    ids=["list", "tensor", "memmap"],
)
def test_storages(make, tmp_path):
    check_storage(make(tmp_path))


@pytest.mark.parametrize(
    "sampler",
    [
        RandomSampler(),
        SamplerWithoutReplacement(),
        SamplerWithoutReplacement(drop_last=True, shuffle=False),
        PrioritizedSampler(16, alpha=0.7, beta=0.5),
        PrioritizedSampler(16, alpha=0.7, beta=0.5, dtype=torch.float64),
        SliceSampler(slice_len=2),
        SliceSampler(num_slices=2),
    ],
    ids=repr,
)
def test_samplers(sampler):
    check_sampler(sampler)


@pytest.mark.parametrize(
    "writer", [RoundRobinWriter(), MaxValueWriter(("next", "reward"))], ids=repr
)
def test_writers(writer):
    check_writer(writer)


def test_the_checkers_catch_broken_components():
    class Forgetful(TensorStorage):
        def get(self, index):
            return super().get(index).zero_()

    with pytest.raises(AssertionError, match="Forgetful: get"):
        check_storage(Forgetful(10))

    class OutOfRange(RandomSampler):
        def sample(self, storage, batch_size):
            return torch.full((batch_size,), len(storage)), {}

    with pytest.raises(AssertionError, match="OutOfRange: expected 4 slots"):
        check_sampler(OutOfRange())

    class Liar(RoundRobinWriter):
        def extend(self, data):
            return super().extend(data).flip(0)

    with pytest.raises(AssertionError, match="Liar: the items are not at the slots"):
        check_writer(Liar())
    with pytest.raises(AssertionError, match="empty storage"):
        storage = TensorStorage(10)
        storage.set(0, torch.zeros(1))
        check_storage(storage)
    assert issubclass(Forgetful, Storage)
