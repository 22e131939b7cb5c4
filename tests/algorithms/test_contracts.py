"""The learner contract (marl/algorithms/contracts.py): fixed parts, state, lean minibatches."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from marl.algorithms import Algorithm, GroupLearner, Trainer, check_learner, list_algorithms
from marl.algorithms.updates import OnPolicyUpdater, clip_grad_norm_per_group_, make_optimizer
from marl.collectors import Collector
from marl.objectives import GAE, HardUpdate
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv

SMALL = {"actor_cells": (8,), "critic_cells": (8,), "cells": (8,), "embed_dim": 8}
MARL = [
    "happo",
    "iddpg",
    "ippo",
    "iql",
    "isac",
    "maddpg",
    "mappo",
    "masac",
    "mat",
    "pqn",
    "pqn_vdn",
    "qmix",
    "vdn",
]


def _small(name: str, **extra) -> dict:
    from marl.algorithms import get_algorithm

    fields = get_algorithm(name).config_cls.__dataclass_fields__
    base = {k: v for k, v in SMALL.items() if k in fields}
    if "learning_starts" in fields:
        base.update(learning_starts=0, batch_size=8)
    if "minibatch_size" in fields:
        base.update(minibatch_size=8, epochs=2)
    return {**base, **extra}


def _algo(name: str) -> tuple[Algorithm, object]:
    from marl.algorithms import get_algorithm

    spec = get_algorithm(name)
    if name in MARL:
        env = MultiAgentFakeEnv(num_envs=4, seed=0)
        groups = {"walker": "continuous", "picker": "discrete"}
        choice = {
            g: (name if space in spec.action_spaces else "ippo") for g, space in groups.items()
        }
        config = {g: _small(a) for g, a in choice.items()}
        return Algorithm(choice, config=config).build(env, seed=0), env
    env = SingleAgentFakeEnv(num_envs=4, discrete="discrete" in spec.action_spaces, seed=0)
    return Algorithm(name, config=_small(name)).build(env, seed=0), env


@pytest.mark.parametrize("name", list_algorithms())
def test_every_learner_follows_the_protocols(name):
    algo, _ = _algo(name)
    for label, learner in algo.group_learners():
        check_learner(learner, label)


def test_learner_parts_are_fixed_after_build():
    algo, _ = _algo("mappo")
    learner = algo.learners["walker"]
    for part in ("loss", "optimizer", "updater", "policy", "algorithm", "target_updater"):
        with pytest.raises(AttributeError, match=rf"GroupLearner\.{part} is fixed"):
            setattr(learner, part, None)
    with pytest.raises(AttributeError):
        learner.updater.loss = None  # read-only: the updater's collaborators are fixed too
    learner.train(False)  # nn.Module's own switches still work
    assert not learner.training


def test_a_learner_refuses_an_updater_of_another_loss_or_optimizer():
    algo, _ = _algo("ppo")
    learner = algo.learners["root"]
    other = torch.optim.Adam(learner.loss.parameters())
    parts = dict(policy=learner.policy, loss=learner.loss, updater=learner.updater)
    with pytest.raises(ValueError, match="this learner's loss with this learner's optimizer"):
        GroupLearner(learner.info, algorithm="ppo", optimizer=other, **parts)
    with pytest.raises(TypeError, match=r"contracts\.Updater"):
        GroupLearner(
            learner.info,
            algorithm="ppo",
            policy=learner.policy,
            loss=learner.loss,
            optimizer=learner.optimizer,
            updater=object(),
        )


def test_builders_name_the_learner_at_construction():
    algo, _ = _algo("mappo")
    assert algo.learners["walker"].algorithm == "mappo"
    assert algo.layout()["walker"]["algorithm"] == "mappo"


def test_state_is_saved_through_each_parts_state_dict():
    config = {"walker": _small("maddpg", utd_ratio=0.3), "picker": _small("iql", utd_ratio=0.3)}
    config["picker"]["target_update_period"] = 7
    choice = {"walker": "maddpg", "picker": "iql"}

    def make():
        env = MultiAgentFakeEnv(num_envs=4, seed=0)
        return Algorithm(choice, config=config).build(env, seed=0), env

    algo, env = make()
    list(Trainer(algo, env, frames_per_batch=12, total_frames=36, seed=0).train())
    picker = algo.learners["picker"]
    assert isinstance(picker.target_updater, HardUpdate)
    extra = algo.state_dict_full()["extra"]["picker"]
    assert set(extra) == {"optimizer", "updater", "target_updater"}
    # 3 batches of 12 frames at 0.3 updates per frame: 10 steps, 0.8 carried over
    assert extra["target_updater"] == {"counter": picker.target_updater.counter}
    assert picker.target_updater.counter == 10
    assert extra["updater"]["debt"] == pytest.approx(0.8)
    fresh, _ = make()
    fresh.load_state_dict_full(algo.state_dict_full())
    assert fresh.learners["picker"].target_updater.counter == 10
    assert fresh.learners["picker"].updater.state_dict()["debt"] == pytest.approx(0.8)


# ------------------------------------------------------------------ lean minibatches
def _leaves(td: TensorDictBase) -> set:
    return set(td.keys(include_nested=True, leaves_only=True))


@pytest.mark.parametrize("name", ["mappo", "ippo", "masac", "qmix", "maddpg"])
def test_learners_store_only_what_their_loss_reads(name):
    algo, env = _algo(name)
    seen: dict[str, set] = {}
    for label, learner in algo.group_learners():
        learner.loss.register_forward_pre_hook(
            lambda _, args, label=label: seen.setdefault(label, set()).update(_leaves(args[0]))
        )
    batch = algo.process_batch(Collector(env, algo.policy, frames_per_batch=40).rollout())
    full = _leaves(batch)
    algo.update(batch)
    for label, learner in algo.group_learners():
        other = "picker" if label == "walker" else "walker"
        stored = seen[label]
        if learner.buffer is not None:  # off-policy: what the replay buffer holds
            stored = _leaves(learner.buffer.storage.get(torch.arange(len(learner.buffer))))
        assert stored, label
        assert not any(other in key for key in stored), (label, sorted(stored))
        # only the loss's entries (+ what the sampler and the loss itself add)
        added = {"index", "priority_weight", "td_error", (label, "td_error")}
        assert stored - set(learner.loss.in_keys) - added == set(), label
        assert len(stored) < len(full) / 3, (label, len(stored), len(full))
        if learner.buffer is None:  # on-policy: the estimator's inputs are not carried
            assert not any(isinstance(k, tuple) and k[0] == "next" for k in stored)


class _RecordingLoss(nn.Module):
    """A stub on-policy loss recording the minibatches it gets."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(()))
        self.value_estimator = GAE()
        self.seen: list[TensorDictBase] = []

    @property
    def in_keys(self) -> list:
        return ["x", "advantage"]

    def forward(self, td: TensorDictBase) -> TensorDict:
        self.seen.append(td)
        return TensorDict(loss_x=(self.weight * td["x"]).mean(), mean_x=td["x"].mean())


def test_on_policy_epochs_are_one_shuffle_sliced_into_views():
    loss = _RecordingLoss()
    optimizer = make_optimizer({"all": (loss.parameters(), 0.0)})
    updater = OnPolicyUpdater(
        loss=loss, optimizer=optimizer, epochs=3, minibatch_size=16, max_grad_norm=None
    )
    batch = TensorDict(
        x=torch.arange(100.0).reshape(2, 50),
        advantage=torch.zeros(2, 50),
        other=torch.zeros(2, 50),  # not read by the loss: never copied
        batch_size=[2, 50],
    )
    logs = updater.update(batch)
    assert len(loss.seen) == 3 * 6  # 100 // 16 minibatches per epoch, the last 4 dropped
    assert logs["mean_x"] == pytest.approx(torch.stack([t["x"].mean() for t in loss.seen]).mean())
    for epoch in range(3):
        minibatches = loss.seen[epoch * 6 : (epoch + 1) * 6]
        xs = torch.cat([mb["x"] for mb in minibatches])
        assert xs.unique().numel() == 96  # without replacement within an epoch
        assert all(set(mb.keys()) == {"x", "advantage"} for mb in minibatches)
        # slices of one gathered tensor: consecutive views of the same storage
        base = minibatches[0]["x"].untyped_storage().data_ptr()
        assert all(mb["x"].untyped_storage().data_ptr() == base for mb in minibatches)
    first, second = (torch.cat([mb["x"] for mb in loss.seen[e * 6 : e * 6 + 6]]) for e in (0, 1))
    assert not torch.equal(first, second)  # a new order every epoch


def test_per_group_clipping_is_torchs_clip_grad_norm_on_each_group():
    torch.manual_seed(0)
    shapes = [[(5, 3), (3,), (7, 2)], [(4,), (2, 2)]]
    grads = [[torch.randn(s) * 3 for s in group] for group in shapes]
    mine = [[nn.Parameter(torch.zeros(g.shape)) for g in group] for group in grads]
    ref = [[nn.Parameter(torch.zeros(g.shape)) for g in group] for group in grads]
    for params in (mine, ref):
        for group, gs in zip(params, grads):
            for p, g in zip(group, gs):
                p.grad = g.clone()
    clip_grad_norm_per_group_([{"params": group} for group in mine], 0.5)
    for group in ref:
        torch.nn.utils.clip_grad_norm_(group, 0.5, foreach=True)
    for a, b in zip([p for g in mine for p in g], [p for g in ref for p in g]):
        assert torch.equal(a.grad, b.grad)
    norms = [torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in g])) for g in mine]
    assert all(n == pytest.approx(0.5, rel=1e-5) for n in norms)  # both groups were clipped
