"""The update loops shared by the algorithms, and the pieces every builder needs.

- :class:`OnPolicyUpdater`: advantages on the ``[*B, T]`` batch, then ``epochs``
  passes over it in minibatches, the buffer emptied each batch.
- :class:`OffPolicyUpdater`: the batch goes into a replay buffer; each batch is
  followed by ``utd_ratio * frames`` sampled updates, target-network updates and,
  with a prioritized sampler, priority updates.

One optimizer per learner, one param group per role (actor, critic, alpha...):
the losses detach whatever a term must not train (SAC's and DDPG's actor terms
see frozen critics), so stepping the sum of the ``loss_*`` terms is the same as
stepping one optimizer per term, with less bookkeeping.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from marl.algorithms._turns import turn_transitions
from marl.algorithms.base import GroupInfo, GroupLearner
from marl.data import (
    PrioritizedSampler,
    RandomSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    TensorStorage,
)

__all__ = [
    "OffPolicyConfig",
    "OffPolicyUpdater",
    "OnPolicyUpdater",
    "apply_agent_mask",
    "make_optimizer",
    "off_policy_buffer",
    "off_policy_learner",
    "on_policy_buffer",
]


def make_optimizer(
    groups: Mapping[str, tuple[Iterable[nn.Parameter], float]], weight_decay: float = 0.0
) -> torch.optim.Adam:
    """One Adam with a named param group per role: ``{role: (params, lr)}``.

    Parameters listed under two roles (a shared trunk) are kept in the first only.
    """
    seen: set[int] = set()
    param_groups = []
    for role, (params, lr) in groups.items():
        unique = []
        for p in params:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                unique.append(p)
        if unique:
            param_groups.append({"params": unique, "lr": lr, "name": role})
    devices = {p.device.type for group in param_groups for p in group["params"]}
    # the fused kernel (CPU and CUDA) saves ~10% of a small-network update step
    fused = bool(devices) and devices <= {"cpu", "cuda"}
    return torch.optim.Adam(param_groups, weight_decay=weight_decay, fused=fused)


def on_policy_buffer(
    size: int, minibatch_size: int, device: torch.device | str = "cpu"
) -> ReplayBuffer:
    """A buffer for one batch of ``size`` transitions, iterated in shuffled minibatches.

    An incomplete last minibatch is dropped: a handful of samples gives a noisy step.
    """
    return ReplayBuffer(
        TensorStorage(size, device=device),
        sampler=SamplerWithoutReplacement(drop_last=True),
        batch_size=min(minibatch_size, size),
    )


def off_policy_buffer(
    size: int,
    batch_size: int,
    *,
    prioritized: bool = False,
    alpha: float = 0.6,
    beta: float = 0.4,
    device: torch.device | str = "cpu",
) -> ReplayBuffer:
    """A uniform or prioritized replay buffer of ``size`` transitions."""
    sampler = PrioritizedSampler(size, alpha=alpha, beta=beta) if prioritized else RandomSampler()
    return ReplayBuffer(TensorStorage(size, device=device), sampler=sampler, batch_size=batch_size)


class _Stats:
    """Running means of detached loss outputs; converted to floats once per batch."""

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.count = 0

    def add(self, out: TensorDictBase) -> None:
        self.count += 1
        for key, value in out.items():
            value = value.detach()
            if value.numel() != 1:
                continue
            value = value.reshape(()).float()
            prev = self.sums.get(key)
            self.sums[key] = value if prev is None else prev + value

    def means(self) -> dict[str, float]:
        if not self.count:
            return {}
        return {k: float(v) / self.count for k, v in self.sums.items()}


def apply_agent_mask(learner: nn.Module, td: TensorDictBase) -> TensorDictBase:
    """Exclude masked-out agents (the group's ``"mask"``) from a minibatch's loss.

    Writes ``(group, "loss_weight")``: the mask divided by its mean (times the
    prioritized-replay ``priority_weight``, if any), so that the loss's weighted
    mean is the mean over unmasked agents only. With ``masked_advantage_key``, the
    advantage is standardized over unmasked agents (and zeroed for the others).
    """
    key = getattr(learner, "agent_mask_key", None)
    if key is None:
        return td
    mask = td.get(key).bool()
    weight_key = getattr(learner, "loss_weight_key", None)
    if weight_key is not None:
        weight = mask.to(torch.get_default_dtype())
        weight = weight / weight.mean().clamp_min(1e-8)
        priority = td.get("priority_weight", None)
        if priority is not None:
            shape = priority.shape + (1,) * (weight.ndim - priority.ndim)
            weight = weight * priority.reshape(shape)
        td.set(weight_key, weight)
    adv_key = getattr(learner, "masked_advantage_key", None)
    if adv_key is not None:
        adv = td.get(adv_key)
        m = mask.reshape(mask.shape + (1,) * (adv.ndim - mask.ndim)).to(adv.dtype)
        count = m.sum().clamp_min(1.0)
        mean = (adv * m).sum() / count
        var = ((adv - mean).pow(2) * m).sum() / (count - 1).clamp_min(1.0)
        td.set(adv_key, (adv - mean) / var.sqrt().clamp_min(1e-6) * m)
    return td


def optimizer_step(learner: nn.Module, td: TensorDictBase, max_grad_norm: float | None):
    """Loss forward, backward of the sum of ``loss_*`` terms, per-role clipping, step."""
    out = learner.loss(apply_agent_mask(learner, td))
    total = None
    for key, value in out.items():
        if key.startswith("loss_") and value.requires_grad:
            total = value if total is None else total + value
    opt = learner.optimizer
    opt.zero_grad(set_to_none=True)
    if total is not None:
        total.backward()
        if max_grad_norm is not None:
            for group in opt.param_groups:
                # per role, so a large critic gradient does not shrink the actor's
                torch.nn.utils.clip_grad_norm_(group["params"], max_grad_norm, foreach=True)
        opt.step()
    return out


class OnPolicyUpdater:
    """Advantage estimation, then ``epochs`` x minibatches over the latest batch.

    Args:
        epochs: passes over each batch.
        minibatch_size: transitions per optimizer step (the whole batch when larger).
        max_grad_norm: per-role gradient clipping (``None``: off).
    """

    on_policy = True

    def __init__(self, *, epochs: int, minibatch_size: int, max_grad_norm: float | None) -> None:
        if epochs < 1 or minibatch_size < 1:
            raise ValueError(
                f"epochs and minibatch_size must be >= 1, got {epochs}, {minibatch_size}"
            )
        self.epochs = epochs
        self.minibatch_size = minibatch_size
        self.max_grad_norm = max_grad_norm

    def process(self, learner: nn.Module, batch: TensorDictBase) -> TensorDictBase:
        """Write the group's advantage and value target on the ``[*B, T]`` batch."""
        with torch.no_grad():
            learner.loss.value_estimator(batch)
        return batch

    def update(self, learner: nn.Module, batch: TensorDictBase) -> dict[str, float]:
        flat = batch.reshape(-1)
        buffer: ReplayBuffer = learner.buffer
        if buffer.storage.max_size != flat.numel():
            # sized on the first batch (a storage is not resizable)
            buffer = on_policy_buffer(flat.numel(), self.minibatch_size, buffer.storage.device)
            learner.buffer = buffer
        buffer.empty()
        buffer.extend(flat)
        stats = _Stats()
        for _ in range(self.epochs):
            for minibatch in buffer:
                stats.add(optimizer_step(learner, minibatch, self.max_grad_norm))
        return stats.means()


class OffPolicyUpdater:
    """Replay-buffer updates: ``utd_ratio`` optimizer steps per collected frame.

    Args:
        utd_ratio: optimizer steps per collected frame (at least one per batch).
        max_grad_norm: per-role gradient clipping (``None``: off).
        learning_starts: no update until the buffer holds this many transitions
            (and at least one sampled batch).
    """

    on_policy = False

    def __init__(
        self, *, utd_ratio: float, max_grad_norm: float | None = None, learning_starts: int = 0
    ) -> None:
        if utd_ratio <= 0:
            raise ValueError(f"utd_ratio must be > 0, got {utd_ratio}")
        self.utd_ratio = utd_ratio
        self.max_grad_norm = max_grad_norm
        self.learning_starts = learning_starts
        self._debt = 0.0  # fractional updates carried over between batches

    def process(self, learner: nn.Module, batch: TensorDictBase) -> TensorDictBase:
        """Turn-based envs: rebuild the group's transitions from turn to turn."""
        if learner.info.turn_based and learner.info.has_agent_mask:
            turn_transitions(batch, learner.info)
        return batch

    def update(self, learner: nn.Module, batch: TensorDictBase) -> dict[str, float]:
        buffer: ReplayBuffer = learner.buffer
        buffer.extend(batch.reshape(-1).exclude("collector"))
        if len(buffer) < max(self.learning_starts, buffer.batch_size or 1):
            return {}
        self._debt += self.utd_ratio * batch.numel()
        steps = int(self._debt)
        self._debt -= steps
        prioritized = isinstance(buffer.sampler, PrioritizedSampler)
        stats = _Stats()
        for _ in range(steps):
            minibatch = buffer.sample()
            stats.add(optimizer_step(learner, minibatch, self.max_grad_norm))
            if learner.target_updater is not None:
                learner.target_updater.step()
            if prioritized:
                buffer.update_tensordict_priority(minibatch)
        return stats.means()


@dataclass
class OffPolicyConfig:
    """Replay and update settings shared by the off-policy algorithms."""

    gamma: float = 0.99
    """Discount factor."""
    buffer_size: int = 1_000_000
    """Replay buffer capacity, in transitions (env steps x env batch)."""
    batch_size: int = 256
    """Transitions per optimizer step."""
    utd_ratio: float = 1.0
    """Optimizer steps per collected frame (update-to-data ratio)."""
    learning_starts: int = 1000
    """No update before the buffer holds this many transitions."""
    prioritized: bool = False
    """Prioritized replay (Schaul et al., 2016) on the loss's TD errors."""
    priority_alpha: float = 0.6
    """Priority exponent of the prioritized buffer."""
    priority_beta: float = 0.4
    """Importance-weight exponent of the prioritized buffer."""
    tau: float = 0.005
    """Polyak factor of the soft target updates."""
    max_grad_norm: float | None = None
    """Gradient clipping, per role; ``None`` disables it."""
    buffer_device: str = "cpu"
    """Where the replay buffer lives."""


def off_policy_learner(
    info: GroupInfo,
    config: OffPolicyConfig,
    *,
    policy: nn.Module,
    loss: nn.Module,
    optimizer: torch.optim.Optimizer,
    target_updater: Any,
    exploration: list[nn.Module] | None = None,
    algorithm: str,
    mask_agents: bool = True,
) -> GroupLearner:
    """Assemble an off-policy learner: replay buffer, target updates, ``utd_ratio`` steps."""
    c = config
    buffer = off_policy_buffer(
        c.buffer_size,
        c.batch_size,
        prioritized=c.prioritized,
        alpha=c.priority_alpha,
        beta=c.priority_beta,
        device=c.buffer_device,
    )
    return GroupLearner(
        info,
        policy=policy,
        loss=loss,
        optimizer=optimizer,
        buffer=buffer,
        updater=OffPolicyUpdater(
            utd_ratio=c.utd_ratio, max_grad_norm=c.max_grad_norm, learning_starts=c.learning_starts
        ),
        exploration=exploration,
        target_updater=target_updater,
        config=c,
        algorithm=algorithm,
        mask_agents=mask_agents,
    )
