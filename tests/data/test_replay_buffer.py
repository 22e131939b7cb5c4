"""ReplayBuffer with every storage, the plain samplers and the writers."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from marl.data import (
    ListStorage,
    MaxValueWriter,
    MemmapStorage,
    PrioritizedSampler,
    RandomSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    TensorStorage,
)


def marl_batch(n, start=0):
    """Multi-agent data with nested group keys of different shapes."""
    t = torch.arange(start, start + n, dtype=torch.float32)
    return TensorDict(
        {
            ("agents", "observation"): t[:, None, None].expand(n, 3, 5).clone(),
            ("agents", "action"): t[:, None, None].expand(n, 3, 2).long(),
            ("adversary", "observation"): t[:, None, None].expand(n, 1, 7).clone(),
            ("next", "agents", "reward"): t[:, None, None].expand(n, 3, 1).clone(),
            "state": t[:, None].expand(n, 4).double(),
        },
        [n],
    )


STORAGES = {
    "list": lambda n, tmp: ListStorage(n),
    "tensor": lambda n, tmp: TensorStorage(n),
    "memmap": lambda n, tmp: MemmapStorage(n, path=tmp / "mm"),
}


@pytest.mark.parametrize("kind", STORAGES)
def test_round_trip_of_nested_group_keys(kind, tmp_path):
    rb = ReplayBuffer(STORAGES[kind](10, tmp_path), batch_size=4)
    assert rb.extend(marl_batch(6)).tolist() == list(range(6))
    assert rb.add(marl_batch(1, start=6)[0]) == 6
    assert len(rb) == 7
    batch = rb.sample()
    assert batch.batch_size == (4,)
    assert batch["agents", "observation"].shape == (4, 3, 5)
    assert batch["adversary", "observation"].shape == (4, 1, 7)
    assert batch["agents", "action"].dtype == torch.long
    assert batch["state"].dtype == torch.float64
    value = batch["index"].float()  # each item stores its own slot number
    assert torch.equal(batch["agents", "observation"][:, 0, 0], value)
    assert torch.equal(batch["next", "agents", "reward"][:, 2, 0], value)
    assert "priority_weight" not in batch.keys()


def test_items_with_their_own_batch_dims():
    rb = ReplayBuffer(TensorStorage(10))
    data = TensorDict({"x": torch.arange(24.0).reshape(4, 3, 2)}, [4, 3])  # items of batch [3]
    rb.extend(data)
    batch = rb.sample(5)
    assert batch.batch_size == (5, 3) and batch["index"].shape == (5, 3)  # broadcast
    assert torch.equal(batch["x"], data["x"][batch["index"][:, 0]])
    one = rb.storage.get(2)
    assert one.batch_size == (3,) and torch.equal(one["x"], data["x"][2])
    assert rb.storage.get(torch.tensor([[1, 2]], dtype=torch.int32)).batch_size == (1, 2, 3)
    # prioritized: the weight is broadcast too, and priorities are reduced per item
    sampler = PrioritizedSampler(10, alpha=1.0, beta=1.0, eps=0.0)
    rb = ReplayBuffer(TensorStorage(10), sampler=sampler)
    rb.extend(data)
    batch = rb.sample(4)
    assert batch["priority_weight"].shape == (4, 3)
    batch["td_error"] = torch.arange(12.0).reshape(4, 3, 1)
    rb.update_tensordict_priority(batch)
    last = {i: 3.0 * k + 2 for k, i in enumerate(batch["index"][:, 0].tolist())}  # max per item
    assert sampler.sum_tree.get(np.array(list(last))).tolist() == list(last.values())


def test_round_robin_wraps_and_overwrites_oldest():
    rb = ReplayBuffer(TensorStorage(5))
    assert rb.extend(marl_batch(4)).tolist() == [0, 1, 2, 3]
    assert rb.extend(marl_batch(3, start=4)).tolist() == [4, 0, 1]
    assert len(rb) == 5
    assert rb.storage.get(torch.arange(5))["state"][:, 0].tolist() == [5, 6, 2, 3, 4]
    # a batch larger than the storage keeps only its last max_size items
    index = rb.extend(marl_batch(7, start=10))
    assert index.tolist() == [2, 3, 4, 0, 1, 2, 3]
    assert rb.storage.get(torch.arange(5))["state"][:, 0].tolist() == [13, 14, 15, 16, 12]


def test_plain_tensor_and_object_storages():
    rb = ReplayBuffer(TensorStorage(8))
    rb.extend(torch.arange(6.0))
    x, info = rb.sample(5, return_info=True)
    assert torch.equal(x, info["index"].float())
    rb = ReplayBuffer(ListStorage(3))
    rb.extend(["a", "b"])
    rb.add({"c": 1})
    out, info = rb.sample(4, return_info=True)
    assert len(out) == 4 and all(o in ("a", "b", {"c": 1}) for o in out)


def test_transforms_run_on_sample():
    def double(td):
        return td.set("state", td["state"] * 2)

    rb = ReplayBuffer(TensorStorage(10), transform=[double, double])
    rb.extend(marl_batch(10))
    batch = rb.sample(6)
    assert torch.equal(batch["state"][:, 0], 4 * batch["index"].double())
    assert rb.storage.get(torch.arange(10))["state"][:, 0].tolist() == list(range(10))


def test_iter_is_one_pass_in_minibatches():
    rb = ReplayBuffer(TensorStorage(20), batch_size=4, generator=torch.Generator().manual_seed(0))
    rb.extend(marl_batch(10))
    sizes, seen = [], []
    for batch in rb:
        sizes.append(batch.numel())
        seen += batch["index"].tolist()
    assert sizes == [4, 4, 2] and sorted(seen) == list(range(10)) and seen != sorted(seen)
    rb = ReplayBuffer(
        TensorStorage(20), SamplerWithoutReplacement(drop_last=True, shuffle=False), batch_size=4
    )
    rb.extend(marl_batch(10))
    assert [b["index"].tolist() for b in rb] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_sampler_without_replacement_epochs():
    storage = TensorStorage(10)
    storage.set(slice(0, 7), torch.arange(7))
    s = SamplerWithoutReplacement(generator=torch.Generator().manual_seed(0))
    first = [s.sample(storage, 3)[0] for _ in range(3)]
    assert [len(i) for i in first] == [3, 3, 1] and s.ran_out
    assert sorted(torch.cat(first).tolist()) == list(range(7))
    state = s.state_dict()
    nxt = s.sample(storage, 3)[0]  # a new epoch starts
    assert not s.ran_out and len(nxt) == 3
    s2 = SamplerWithoutReplacement()
    s2.load_state_dict(state)
    s2.generator = torch.Generator().manual_seed(5)
    s.generator.manual_seed(5)
    s.load_state_dict(state)
    assert torch.equal(s.sample(storage, 3)[0], s2.sample(storage, 3)[0])
    d = SamplerWithoutReplacement(drop_last=True)
    assert [len(d.sample(storage, 3)[0]) for _ in range(3)] == [3, 3, 3]
    with pytest.raises(ValueError, match="drop_last"):
        d.sample(storage, 8)


def test_random_sampler_stays_in_range_and_is_seeded():
    storage = TensorStorage(100)
    storage.set(slice(0, 30), torch.arange(30))
    a = RandomSampler(torch.Generator().manual_seed(3)).sample(storage, 1000)[0]
    b = RandomSampler(torch.Generator().manual_seed(3)).sample(storage, 1000)[0]
    assert torch.equal(a, b) and a.min() >= 0 and a.max() < 30 and len(a.unique()) == 30


def test_max_value_writer_keeps_the_best_items():
    rb = ReplayBuffer(TensorStorage(4), writer=MaxValueWriter(("next", "agents", "reward")))
    data = marl_batch(6)
    reward = torch.tensor([5.0, 1.0, 3.0, 2.0, 4.0, 0.0])
    data["next", "agents", "reward"] = reward[:, None, None].expand(6, 3, 1).clone()
    data["state"] = reward[:, None].expand(6, 4).double()
    index = rb.extend(data)
    assert index.tolist() == [0, -1, 1, 2, 3, -1]  # the best 4 of the 6, in order
    kept = sorted(rb.storage.get(torch.arange(4))["state"][:, 0].tolist())
    assert kept == [2.0, 3.0, 4.0, 5.0]
    one = marl_batch(1)
    one["state"] = torch.full((1, 4), 9.0, dtype=torch.float64)
    one["next", "agents", "reward"] = torch.full((1, 3, 1), 3.0)  # rank 9 > lowest rank 6
    assert rb.add(one[0]) >= 0
    assert sorted(rb.storage.get(torch.arange(4))["state"][:, 0].tolist()) == [3.0, 4.0, 5.0, 9.0]
    one["next", "agents", "reward"] = torch.full((1, 3, 1), 3.0)  # tie with the lowest: dropped
    assert rb.add(one[0]) == -1
    with pytest.raises(ValueError, match="reduction"):
        MaxValueWriter("r", reduction="median")
    with pytest.raises(KeyError, match="rank_key"):
        ReplayBuffer(TensorStorage(2), writer=MaxValueWriter("nope")).extend(marl_batch(1))


def test_bad_inputs():
    with pytest.raises(ValueError, match="max_size"):
        TensorStorage(0)
    with pytest.raises(TypeError, match="Storage"):
        ReplayBuffer([])
    with pytest.raises(TypeError, match="Sampler"):
        ReplayBuffer(TensorStorage(2), sampler=object())
    with pytest.raises(ValueError, match="batch_size"):
        ReplayBuffer(TensorStorage(2), batch_size=0)
    rb = ReplayBuffer(TensorStorage(4))
    with pytest.raises(RuntimeError, match="empty"):
        rb.sample(2)
    rb.extend(marl_batch(2))
    with pytest.raises(ValueError, match="no batch size"):
        rb.sample()
    with pytest.raises(ValueError, match="positive int"):
        rb.sample(0)
    with pytest.raises(KeyError, match="expected the keys"):
        rb.extend(marl_batch(2).exclude("state"))
    with pytest.raises(TypeError, match="plain tensor"):
        rb.extend(torch.zeros(2))
    with pytest.raises(TypeError, match="TensorDicts or tensors"):
        TensorStorage(2).set(0, [1, 2])
    with pytest.raises(IndexError, match="slots must lie"):
        rb.storage.set(slice(3, 5), marl_batch(2))
    with pytest.raises(ValueError, match="leading item"):
        rb.extend(marl_batch(1)[0])
    bad = marl_batch(2)
    bad["state"] = torch.zeros(2, 5, dtype=torch.float64)
    before = rb.storage.get(torch.arange(2)).clone()
    with pytest.raises(ValueError, match=r"'state' has item shape \[4\], got \[5\]"):
        rb.extend(bad)
    assert (rb.storage.get(torch.arange(2)) == before).all()  # no partial write
    assert rb.storage.get(2)["agents", "observation"].abs().sum() == 0
    with pytest.raises(ValueError, match="items have batch size"):
        rb.extend(torch.stack([marl_batch(2)] * 2, dim=1))
    holes = ListStorage(4)
    holes.set(2, "x")  # like a TensorStorage, any slot may be written first
    assert len(holes) == 3 and holes.get(2) == "x"
    with pytest.raises(IndexError, match="slot 0 of the ListStorage was never written"):
        holes.get(torch.tensor([2, 0]))
    # errors left the buffer as it was
    assert len(rb) == 2


def _contents(storage):
    """What a storage holds, slot by slot, as one TensorDict (lists are stacked)."""
    items = storage.get(torch.arange(len(storage)))
    return torch.stack(items) if isinstance(items, list) else items


@pytest.mark.parametrize("writer", ["round_robin", "max_value"])
def test_every_storage_holds_the_same_after_the_same_writes(writer, tmp_path):
    # A first write larger than the storage wraps around like a ring buffer:
    # ListStorage used to refuse it ("slot 50 would leave a gap").
    writes = [150, 30, 1, 250, 7, 99]
    held = {}
    for kind, make in STORAGES.items():
        rank = MaxValueWriter(("next", "agents", "reward"), reduction="max")
        rb = ReplayBuffer(
            make(100, tmp_path / kind), writer=rank if writer == "max_value" else None
        )
        start, indices = 0, []
        for n in writes:
            data = marl_batch(n, start=start)
            data["next", "agents", "reward"] = torch.randn(
                n, 3, 1, generator=torch.Generator().manual_seed(start)
            )
            indices.append(rb.add(data[0]) if n == 1 else rb.extend(data))
            start += n
        held[kind] = (len(rb), _contents(rb.storage), indices)
    n_list, list_data, list_index = held["list"]
    for kind in ("tensor", "memmap"):
        n, data, index = held[kind]
        assert n == n_list == 100
        assert [torch.as_tensor(i).tolist() for i in index] == [
            torch.as_tensor(i).tolist() for i in list_index
        ]
        assert (data == list_data).all(), kind
    # the ring buffer kept the last 100 items written
    if writer == "round_robin":
        kept = sorted(list_data["state"][:, 0].long().tolist())
        assert kept == list(range(sum(writes) - 100, sum(writes)))


def test_list_storage_holes_survive_a_state_dict_round_trip(tmp_path):
    storage = ListStorage(5)
    storage.set(torch.tensor([3, 1]), ["d", "b"])
    storage.dumps(tmp_path / "s")
    other = ListStorage(5)
    other.loads(tmp_path / "s")
    assert len(other) == 4 and other.get(slice(1, 4, 2)) == ["b", "d"]
    with pytest.raises(IndexError, match=r"slot 2 .* never written"):
        other.get(2)


def test_empty_and_state_dict(tmp_path):
    rb = ReplayBuffer(TensorStorage(6))
    rb.extend(marl_batch(4))
    state = rb.state_dict()
    rb2 = ReplayBuffer(TensorStorage(6))
    rb2.load_state_dict(state)
    assert len(rb2) == 4 and rb2.extend(marl_batch(1)).tolist() == [4]
    assert (rb2.storage.get(torch.arange(4)) == rb.storage.get(torch.arange(4))).all()
    rb.empty()
    assert len(rb) == 0 and rb.extend(marl_batch(1)).tolist() == [0]
    rb.dumps(tmp_path / "rb")
    with pytest.raises(ValueError, match="components"):
        ReplayBuffer(ListStorage(6)).loads(tmp_path / "rb")
    list_rb = ReplayBuffer(ListStorage(6))
    list_rb.extend(["x", "y"])
    list_rb.dumps(tmp_path / "list")
    other = ReplayBuffer(ListStorage(6))
    other.loads(tmp_path / "list")
    assert other.storage.get(slice(0, 2)) == ["x", "y"] and other.extend(["z"]).tolist() == [2]


def test_memmap_buffer_saved_by_one_process_loads_identically_in_another(tmp_path):
    writer = textwrap.dedent(
        f"""
        import torch
        from tensordict import TensorDict
        from marl.data import MemmapStorage, ReplayBuffer, PrioritizedSampler
        g = torch.Generator().manual_seed(0)
        rb = ReplayBuffer(MemmapStorage(100, path={str(tmp_path / "live")!r}),
                          sampler=PrioritizedSampler(100, alpha=0.7, beta=0.5))
        for _ in range(3):
            rb.extend(TensorDict({{"obs": torch.randn(40, 3, 2, generator=g),
                                   ("agents", "r"): torch.rand(40, 2, 1, generator=g)}}, [40]))
        rb.update_priority(torch.arange(100), torch.rand(100, generator=g))
        rb.dumps({str(tmp_path / "saved")!r})
        """
    )
    subprocess.run([sys.executable, "-c", writer], check=True, timeout=120)
    g = torch.Generator().manual_seed(0)
    chunks = [
        TensorDict(
            {
                "obs": torch.randn(40, 3, 2, generator=g),
                ("agents", "r"): torch.rand(40, 2, 1, generator=g),
            },
            [40],
        )
        for _ in range(3)
    ]
    expected = torch.cat(chunks)
    expected = torch.cat([expected[100:], expected[20:100]])  # 120 items wrapped over 100 slots
    from marl.data import PrioritizedSampler

    rb = ReplayBuffer(
        MemmapStorage(100, path=tmp_path / "fresh"), sampler=PrioritizedSampler(100, 0.7, 0.5)
    )
    rb.loads(tmp_path / "saved")
    assert len(rb) == 100
    got = rb.storage.get(torch.arange(100))
    assert (got == expected).all()
    assert rb.storage.storage.is_memmap()
    assert rb.extend(expected[:1]).tolist() == [20]  # the writer's cursor came back too
    # and the same in a second fresh process, compared through a checksum
    reader = textwrap.dedent(
        f"""
        import torch
        from marl.data import MemmapStorage, ReplayBuffer, PrioritizedSampler
        rb = ReplayBuffer(MemmapStorage(100), sampler=PrioritizedSampler(100, 0.7, 0.5))
        rb.loads({str(tmp_path / "saved")!r})
        td = rb.storage.get(torch.arange(100))
        print(repr(td["obs"].double().sum().item()), repr(td["agents", "r"].double().sum().item()))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", reader], check=True, timeout=120, capture_output=True, text=True
    ).stdout.split()
    assert float(out[0]) == expected["obs"].double().sum().item()
    assert float(out[1]) == expected["agents", "r"].double().sum().item()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_tensor_storage():
    rb = ReplayBuffer(TensorStorage(10, device="cuda"))
    rb.extend(marl_batch(5))
    batch = rb.sample(3)
    assert batch["state"].is_cuda


def test_a_storage_larger_than_the_memory_is_refused_before_it_is_made(monkeypatch):
    """masac's default buffer (1M items) on a MAgent2 task got the process killed by the OS
    (exit 137) when the zero-filled storage was made: now a MemoryError says why."""
    from marl.data import storages

    item = TensorDict({"agents": {"observation": torch.zeros(4, 10, 10, 5)}, "r": torch.zeros(1)})
    row = (4 * 10 * 10 * 5 + 1) * 4  # float32 bytes an item
    monkeypatch.setattr(storages, "_available_memory", lambda device: 100 * row - 1)
    storage = TensorStorage(100)
    with pytest.raises(MemoryError) as err:
        storage.set(0, item)
    message = str(err.value)
    assert "100 items" in message and f"{row:,} bytes an item" in message
    assert "('agents', 'observation')" in message and "(4, 10, 10, 5)" in message
    assert "buffer_size" in message and "MemmapStorage" in message
    assert storage.storage is None  # nothing allocated, nothing half-made
    monkeypatch.setattr(storages, "_available_memory", lambda device: 100 * row)
    storage.set(0, item)  # exactly enough: made
    assert storage.storage.batch_size == (100,)


def test_the_available_memory_is_read_on_this_machine():
    from marl.data import storages

    available = storages._available_memory(torch.device("cpu"))
    if sys.platform.startswith("linux"):
        assert available is not None and available > 2**20
