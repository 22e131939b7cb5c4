"""The off-policy update: a replay buffer, ``utd_ratio`` sampled steps per frame, target
updates; and the assembly of an off-policy learner from its parts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms._turns import turn_transitions
from marl.algorithms.contracts import Exploration, Loss, TargetUpdater
from marl.algorithms.learner import GroupLearner
from marl.algorithms.settings import ReplaySettings
from marl.algorithms.updates.gradient import GradientStepUpdater, UpdateStats
from marl.algorithms.updates.sync import GradientSync
from marl.data import (
    PrioritizedSampler,
    RandomSampler,
    ReplayBuffer,
    SliceSampler,
    TensorStorage,
)

__all__ = ["OffPolicyUpdater", "off_policy_buffer", "off_policy_learner"]


def off_policy_buffer(
    size: int,
    batch_size: int,
    *,
    prioritized: bool = False,
    alpha: float = 0.6,
    beta: float = 0.4,
    device: torch.device | str = "cpu",
    slice_len: int | None = None,
) -> ReplayBuffer:
    """A uniform or prioritized replay buffer of ``size`` transitions.

    With ``slice_len`` (recurrent Q-networks), a sample is ``[batch_size // slice_len,
    slice_len]`` contiguous steps of one trajectory (:class:`~marl.data.SliceSampler`
    over the collector's trajectory ids).
    """
    if slice_len is not None:
        if prioritized:
            raise ValueError(
                "prioritized replay samples single transitions; a recurrent Q-network trains "
                "on slices of steps: set prioritized=False"
            )
        slices = max(1, batch_size // slice_len)
        return ReplayBuffer(
            TensorStorage(size, device=device),
            sampler=SliceSampler(slice_len=slice_len),
            batch_size=slices * slice_len,
        )
    sampler = PrioritizedSampler(size, alpha=alpha, beta=beta) if prioritized else RandomSampler()
    return ReplayBuffer(TensorStorage(size, device=device), sampler=sampler, batch_size=batch_size)


class OffPolicyUpdater(GradientStepUpdater[Loss]):
    """Replay-buffer updates: ``utd_ratio`` optimizer steps per collected frame.

    Each batch's entries that the loss reads (``loss.in_keys``) go into the replay
    buffer; then come ``utd_ratio * frames`` steps, each a sample, a
    :class:`GradientStep`, a target update and, with a prioritized sampler, a priority
    update from the loss's TD errors.

    Args:
        info: the group (turn-based groups get their transitions relinked in
            :meth:`process`).
        loss: the loss.
        optimizer: the optimizer over its trained parameters.
        buffer: the replay buffer (this updater's own).
        target_updater: stepped after every optimizer step (``None``: no targets).
        utd_ratio: optimizer steps per collected frame (at least one per batch).
        max_grad_norm: per-role gradient clipping (``None``: off).
        learning_starts: no update until the buffer holds this many transitions
            (and at least one sampled batch).
        compile: compile the loss and its backward (:class:`GradientStep`).
        sync: average the gradients over data-parallel ranks before each step
            (:class:`~marl.algorithms.updates.GradientSync`; ``None``: off).
    """

    on_policy = False

    def __init__(
        self,
        info: GroupInfo,
        *,
        loss: Loss,
        optimizer: torch.optim.Optimizer,
        buffer: ReplayBuffer,
        target_updater: TargetUpdater | None,
        utd_ratio: float,
        max_grad_norm: float | None = None,
        learning_starts: int = 0,
        compile: bool = False,
        sync: GradientSync | None = None,
    ) -> None:
        if utd_ratio <= 0:
            raise ValueError(f"utd_ratio must be > 0, got {utd_ratio}")
        super().__init__(loss, optimizer, Loss, max_grad_norm, compile, sync)
        self._info = info
        if isinstance(buffer.sampler, SliceSampler):
            # slices are runs of one trajectory id: store the ids with the transitions
            self._keys.append(buffer.sampler.traj_key)
        self._buffer = buffer
        self._target_updater = target_updater
        self._prioritized = isinstance(buffer.sampler, PrioritizedSampler)
        self._utd_ratio = utd_ratio
        self._learning_starts = learning_starts
        self._debt = 0.0  # fractional updates carried over between batches

    @property
    def buffer(self) -> ReplayBuffer:
        return self._buffer

    @property
    def target_updater(self) -> TargetUpdater | None:
        return self._target_updater

    @property
    def utd_ratio(self) -> float:
        return self._utd_ratio

    @property
    def learning_starts(self) -> int:
        """No update until the buffer holds this many transitions."""
        return self._learning_starts

    def process(self, batch: TensorDictBase) -> TensorDictBase:
        """Turn-based envs: rebuild the group's transitions from turn to turn."""
        if self._info.turn_based and self._info.has_agent_mask:
            turn_transitions(batch, self._info)
        return batch

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        """Store the loss's entries of ``batch``, then run the due optimizer steps."""
        buffer = self._buffer
        buffer.extend(batch.select(*self._keys, strict=False).reshape(-1))
        if len(buffer) < max(self._learning_starts, buffer.batch_size or 1):
            return {}
        self._debt += self._utd_ratio * batch.numel()
        steps = int(self._debt)
        self._debt -= steps
        stats = UpdateStats()
        for _ in range(steps):
            minibatch = self._sample()
            stats.add(self._step(minibatch))
            if self._target_updater is not None:
                self._target_updater.step()
            if self._prioritized:
                buffer.update_tensordict_priority(minibatch)
        return stats.means()

    def _sample(self) -> TensorDictBase:
        try:
            return self._buffer.sample()
        except RuntimeError as err:
            sampler = self._buffer.sampler
            if not isinstance(sampler, SliceSampler):
                raise
            raise ValueError(
                f"{err}: a recurrent Q-network replays slices of sequence_length="
                f"{sampler.slice_len} steps of one episode, and no stored episode is that "
                "long; set the algorithm's sequence_length to at most the episode length"
            ) from err

    def state_dict(self) -> dict[str, Any]:
        """The fractional update carried over to the next batch."""
        return {"debt": self._debt}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self._debt = float(state["debt"])


def off_policy_learner(
    info: GroupInfo,
    config: ReplaySettings,
    *,
    policy: nn.Module,
    loss: Loss,
    optimizer: torch.optim.Optimizer,
    target_updater: TargetUpdater | None,
    exploration: list[Exploration] | None = None,
    algorithm: str,
    slice_len: int | None = None,
) -> GroupLearner:
    """Assemble an off-policy learner: replay buffer, target updates, ``utd_ratio`` steps.

    The loss is used as configured: point it at the group's keys first (agent mask
    included, for losses with per-agent terms). ``slice_len``: replay slices of that
    many steps (recurrent Q-networks) instead of single transitions.
    """
    c = config
    buffer = off_policy_buffer(
        c.buffer_size,
        c.batch_size,
        prioritized=c.prioritized,
        alpha=c.priority_alpha,
        beta=c.priority_beta,
        device=c.buffer_device,
        slice_len=slice_len,
    )
    updater = OffPolicyUpdater(
        info,
        loss=loss,
        optimizer=optimizer,
        buffer=buffer,
        target_updater=target_updater,
        utd_ratio=c.utd_ratio,
        max_grad_norm=c.max_grad_norm,
        learning_starts=c.learning_starts,
        compile=info.compile,
        sync=info.gradient_sync,
    )
    return GroupLearner(
        info,
        algorithm=algorithm,
        policy=policy,
        loss=loss,
        optimizer=optimizer,
        updater=updater,
        exploration=exploration,
        target_updater=target_updater,
        config=c,
    )
