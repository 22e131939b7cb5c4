"""Data-parallel training: ``GradientSync`` over 2 gloo ranks equals one process on the union.

One module-scoped fixture spawns the 2 ranks once (each a fresh interpreter: the cost
is the imports) and runs every check in them; the tests read what the ranks saved.
Each family's check: the same seeded ``Algorithm`` in each rank, built with a
``GradientSync``; rank ``r`` gets half ``r`` of one fixed minibatch (made here, from a
seeded rollout) and runs ONE optimizer step of the tested group's learner on it
(its ``GradientStep`` directly: no replay sampling, no minibatch shuffling); the
parameters, target networks included, must equal those of one process stepping on
the whole minibatch. Every loss is a mean over equally sized halves, so the average
of the halves' gradients is the union's gradient. PPO's and MAPPO's minibatch (and
HAPPO's batch) advantage standardization stays on: its statistics are summed over the
ranks, and the same step with per-rank statistics must leave the union.

Sampling losses would draw other noise in each half than on the union, so the
stochastic families train the discrete group, whose losses are exact expectations
(PPO's entropy, SAC's soft values); MADDPG's deterministic actor trains the
continuous group.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from marl.algorithms import Algorithm
from marl.algorithms.updates import GradientSync, UpdateStats
from marl.envs import RewardSum, TransformedEnv
from marl.objectives import standardize
from marl.testing import MultiAgentFakeEnv

WORLD = 2
SAMPLES = 32  # 4 envs x 8 steps; each rank gets 16
ON = {"actor_cells": (16,), "critic_cells": (16,), "lr": 1e-3, "epochs": 1}
# PPO standardizes the advantage over each minibatch (HAPPO over each batch): with a
# GradientSync the statistics are summed over the ranks (the loss's
# share_advantage_statistics), so the halves standardize as the union does
PPO = {**ON, "minibatch_size": SAMPLES}
OFF = {"actor_cells": (16,), "critic_cells": (16,), "learning_starts": 0, "batch_size": 16}
# {family: (trained group, config)}; the learning rates make one Adam step move the
# parameters by ~1e-3, so that the unsynced mutation is far from the 1e-6 tolerance
FAMILIES = {
    "ppo": ("picker", PPO),
    "mappo": ("picker", PPO),
    "happo": ("picker", PPO),
    "masac": ("picker", {**OFF, "actor_lr": 1e-3, "critic_lr": 1e-3, "alpha_lr": 1e-3}),
    "maddpg": ("walker", OFF),
    "qmix": ("picker", {"cells": (16,), "learning_starts": 0, "batch_size": 16, "lr": 1e-3}),
    "pqn_vdn": ("picker", {"cells": (16,), "minibatch_size": SAMPLES, "epochs": 1, "lr": 1e-3}),
}
# the families whose loss standardizes the advantage
STANDARDIZING = ("ppo", "mappo", "happo")


def _env() -> TransformedEnv:
    return TransformedEnv(MultiAgentFakeEnv(num_envs=4, seed=0), RewardSum())


def _build(name: str, sync: GradientSync | None, seed: int = 0) -> Algorithm:
    group, config = FAMILIES[name]
    other = "walker" if group == "picker" else "picker"
    algorithm = {group: name, other: "ippo"}
    configs = {group: config, other: {"actor_cells": (8,), "critic_cells": (8,)}}
    return Algorithm(algorithm, config=configs).build(_env(), seed=seed, gradient_sync=sync)


def _minibatch(name: str):
    algo = _build(name, None)
    torch.manual_seed(1)
    with torch.no_grad():
        td = _env().rollout(8, algo.policy, break_when_any_done=False)
    return algo.process_batch(td).reshape(-1)[:SAMPLES]


def _one_step(algo: Algorithm, name: str, minibatch) -> dict[str, torch.Tensor]:
    """One optimizer step of the family's learner; its state after (targets included)."""
    group = FAMILIES[name][0]
    learner = algo.learners[group]
    torch.manual_seed(2)  # HAPPO's turn shuffles its (one) minibatch: a mean ignores order
    if name == "happo":
        updater = learner.updater
        data = updater.prepare(minibatch)  # standardizes the advantage over the batch
        updater.agent_turn(data, 0, torch.ones(data.numel()), UpdateStats())
        updater.critic_update(data, UpdateStats())
    else:
        learner.updater.gradient_step(minibatch)
        if learner.target_updater is not None:
            learner.target_updater.step()
    return {k: v.detach().clone() for k, v in learner.state_dict().items()}


def _sync_unit_checks(sync: GradientSync) -> dict[str, object]:
    """GradientSync alone: None gradients, two dtypes, the average; broadcast_."""
    r = sync.rank
    a = torch.nn.Parameter(torch.zeros(3))  # float32, a gradient on both ranks
    b = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))  # on rank 1 only
    c = torch.nn.Parameter(torch.zeros(2))  # on no rank
    a.grad = torch.full((3,), float(r + 1))
    if r == 1:
        b.grad = torch.tensor([4.0, 8.0], dtype=torch.float64)
    sync([a, b, c])
    torch.manual_seed(10 + r)  # each rank draws another network
    net = torch.nn.BatchNorm1d(3)
    with torch.no_grad():
        net.weight.normal_()
        net.running_mean.normal_()
    net.num_batches_tracked += r
    sync.broadcast_(net)
    return {
        "a": a.grad.clone(),
        "b": b.grad.clone(),
        "b_dtype": b.grad.dtype,
        "c": c.grad,
        "net": {k: v.clone() for k, v in net.state_dict().items()},
    }


def _advantages() -> tuple[torch.Tensor, torch.Tensor]:
    """Per-agent advantages ``[32, 3, 1]`` and a mask ``[32, 3]`` (some agents out)."""
    generator = torch.Generator().manual_seed(3)
    adv = torch.randn(SAMPLES, 3, 1, generator=generator) * 2 + 0.5
    return adv, torch.rand(SAMPLES, 3, generator=generator) > 0.3


def _standardize_checks(sync: GradientSync | None, rank: int | None) -> dict[str, torch.Tensor]:
    """``standardize`` on rank ``rank``'s half (with ``sync``) or on the union (``None``):
    over every entry, per agent (``exclude_dims``), and over a mask's entries."""
    adv, mask = _advantages()
    if rank is not None:
        half = SAMPLES // WORLD
        adv, mask = adv[rank * half : (rank + 1) * half], mask[rank * half : (rank + 1) * half]
    return {
        "all": standardize(adv, sync=sync),
        "per_agent": standardize(adv, exclude_dims=(-2,), sync=sync),
        "masked": standardize(adv, mask, sync=sync),
    }


def _rank(rank: int, store: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        sync = GradientSync()
        minibatches = torch.load(os.path.join(out, "minibatches.pt"), weights_only=False)
        half = SAMPLES // WORLD
        results: dict[str, object] = {"unit": _sync_unit_checks(sync)}
        # seeded per rank: broadcast_ must make the ranks' networks equal anyway
        results["build"] = {
            k: v.clone() for k, v in _build("maddpg", sync, seed=rank).state_dict().items()
        }
        for name, mb in minibatches.items():
            mine = mb[rank * half : (rank + 1) * half]
            results[name] = _one_step(_build(name, sync), name, mine)
            # the mutation: each rank steps on its half alone
            results[f"{name}/nosync"] = _one_step(_build(name, sync=None), name, mine)
            if name in STANDARDIZING:
                # the other mutation: gradients averaged, but each rank standardizes its
                # advantages with its own statistics
                algo = _build(name, sync)
                # (the built loss refuses the setter: the mutation writes its attribute)
                algo.learners[FAMILIES[name][0]].loss.statistics_sync = None
                results[f"{name}/rank_statistics"] = _one_step(algo, name, mine)
        results["standardize"] = _standardize_checks(sync, rank)
        torch.save(results, os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("gradient_sync")
    minibatches = {name: _minibatch(name) for name in FAMILIES}
    torch.save(minibatches, out / "minibatches.pt")
    union = {name: _one_step(_build(name, None), name, mb) for name, mb in minibatches.items()}
    union["standardize"] = _standardize_checks(None, None)
    mp.spawn(_rank, args=(str(out / "store"), str(out)), nprocs=WORLD, join=True)
    results = [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]
    return union, results


def _max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(
        (a[k].double() - b[k].double()).abs().max().item()
        for k in a
        if a[k].is_floating_point() and a[k].numel()
    )


@pytest.mark.parametrize("name", list(FAMILIES))
def test_synced_step_equals_one_process_on_the_union(ranks, name):
    union, results = ranks
    for r in range(WORLD):
        diff = _max_diff(results[r][name], union[name])
        print(f"{name} rank {r}: max |synced - union| = {diff:.3g}")
        assert diff <= 1e-6, (name, r, diff)
    # and the step moved the parameters: the comparison is not of untouched networks
    untouched = _build(name, None).learners[FAMILIES[name][0]].state_dict()
    assert _max_diff(union[name], dict(untouched)) > 1e-4


@pytest.mark.parametrize("name", list(FAMILIES))
def test_without_the_sync_the_ranks_leave_the_union(ranks, name):
    # the mutation: the same step on each rank's half alone must be caught
    union, results = ranks
    for r in range(WORLD):
        diff = _max_diff(results[r][f"{name}/nosync"], union[name])
        print(f"{name} rank {r}: max |unsynced - union| = {diff:.3g}")
        assert diff > 1e-4, (name, r, diff)


@pytest.mark.parametrize("name", STANDARDIZING)
def test_per_rank_advantage_statistics_leave_the_union(ranks, name):
    # the mutation: the gradients averaged, each rank's advantages standardized alone
    union, results = ranks
    for r in range(WORLD):
        diff = _max_diff(results[r][f"{name}/rank_statistics"], union[name])
        print(f"{name} rank {r}: max |rank statistics - union| = {diff:.3g}")
        assert diff > 1e-4, (name, r, diff)


def test_standardize_over_ranks_equals_the_union(ranks):
    union, results = ranks
    half = SAMPLES // WORLD
    for r in range(WORLD):
        for kind, value in results[r]["standardize"].items():
            expected = union["standardize"][kind][r * half : (r + 1) * half]
            torch.testing.assert_close(value, expected, rtol=0, atol=1e-6, msg=kind)
    # the union's own statistics: what a rank alone gets is something else
    adv, _ = _advantages()
    alone = standardize(adv[:half])
    assert (alone - union["standardize"]["all"][:half]).abs().max() > 1e-2


def test_gradient_sync_averages_and_keeps_untrained_parameters_none(ranks):
    _, results = ranks
    for r in range(WORLD):
        unit = results[r]["unit"]
        torch.testing.assert_close(unit["a"], torch.full((3,), 1.5))  # (1 + 2) / 2
        # rank 0 had no gradient: it counts as zeros, and the average comes back
        torch.testing.assert_close(unit["b"], torch.tensor([2.0, 4.0], dtype=torch.float64))
        assert unit["b_dtype"] == torch.float64
        assert unit["c"] is None  # no rank trained it: the optimizer still skips it
    for key, value in results[0]["unit"]["net"].items():  # parameters and buffers
        assert torch.equal(value, results[1]["unit"]["net"][key]), key


def test_build_broadcasts_rank_zeros_networks(ranks):
    _, results = ranks
    assert _max_diff(results[0]["build"], results[1]["build"]) == 0.0
    reference = _build("maddpg", None, seed=0).state_dict()
    assert _max_diff(results[0]["build"], dict(reference)) == 0.0


def test_gradient_sync_needs_torch_distributed():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match=r"initialized torch\.distributed"):
        GradientSync()
    with pytest.raises(TypeError, match="gradient_sync must be a GradientSync"):
        Algorithm("mappo").build(_env(), gradient_sync=object())
