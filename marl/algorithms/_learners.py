"""The update loops shared by the algorithms, and the pieces every builder needs.

- :func:`loss_and_backward`: the loss of one minibatch and its backward;
  :func:`loss_terms`, its forward part, is a plain function of the loss and the
  minibatch, what ``torch.compile`` wraps (``compile=True``, see
  :mod:`marl.algorithms._compile`). :class:`GradientStep` adds the gradient clipping
  and the optimizer step.
- :class:`OnPolicyUpdater`: advantages on the ``[*B, T]`` batch, then ``epochs``
  passes over it in shuffled minibatches.
- :class:`OffPolicyUpdater`: the batch goes into a replay buffer; each batch is
  followed by ``utd_ratio * frames`` sampled updates, target-network updates and,
  with a prioritized sampler, priority updates.

Both updaters follow :mod:`marl.algorithms.contracts`: they get the learner's loss
and optimizer in their constructor and store only the entries the loss reads.

One optimizer per learner, one param group per role (actor, critic, alpha...):
the losses detach whatever a term must not train (SAC's and DDPG's actor terms
see frozen critics), so stepping the sum of the ``loss_*`` terms is the same as
stepping one optimizer per term, with less bookkeeping.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from marl.algorithms._compile import compile_counts, compiled_loss_terms
from marl.algorithms._turns import turn_transitions
from marl.algorithms.base import Algorithm, GroupInfo, GroupLearner
from marl.algorithms.contracts import AdvantageLoss, Exploration, Loss, TargetUpdater
from marl.data import (
    PrioritizedSampler,
    RandomSampler,
    ReplayBuffer,
    SliceSampler,
    TensorStorage,
)

__all__ = [
    "GradientStep",
    "OffPolicyConfig",
    "OffPolicyUpdater",
    "OnPolicyUpdater",
    "compile_report",
    "loss_and_backward",
    "loss_terms",
    "make_optimizer",
    "off_policy_buffer",
    "off_policy_learner",
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


class _Stats:
    """Means of the scalar loss outputs over a batch's steps, as floats at the end.

    Each step costs one stack and one add (a loss returns the same outputs every
    step); the floats are read once per batch, the batch's one host sync.
    """

    def __init__(self) -> None:
        self._sums: dict[tuple[str, ...], tuple[torch.Tensor, int]] = {}

    def add(self, out: TensorDictBase) -> None:
        items = [(k, v) for k, v in out.items() if v.numel() == 1]
        if not items:
            return
        names = tuple(k for k, _ in items)
        values = torch.stack([v.reshape(()).float() for _, v in items])
        prev = self._sums.get(names)
        self._sums[names] = (values, 1) if prev is None else (prev[0] + values, prev[1] + 1)

    def means(self) -> dict[str, float]:
        totals: dict[str, tuple[float, int]] = {}
        for names, (sums, count) in self._sums.items():
            for name, value in zip(names, sums.tolist()):
                total, n = totals.get(name, (0.0, 0))
                totals[name] = (total + value, n + count)
        return {name: total / n for name, (total, n) in totals.items()}


LossTerms = Callable[[Loss, TensorDictBase], tuple[TensorDictBase, torch.Tensor | None]]
"""``(loss, minibatch) -> (outputs, sum of the loss_* terms or None)``: :func:`loss_terms`
or its compiled version."""


def loss_terms(loss: Loss, minibatch: TensorDictBase) -> tuple[TensorDictBase, torch.Tensor | None]:
    """The loss's outputs on one minibatch and the sum of its ``loss_*`` terms.

    A plain function of a loss module and a TensorDict, with no other state: the unit
    that ``torch.compile`` wraps. Terms that do not require grad (e.g. TD3's actor
    term on a delayed step) are left out of the sum (``None`` when no term requires it).
    """
    out = loss(minibatch)
    total = None
    for key, value in out.items():
        if key.startswith("loss_") and value.requires_grad:
            total = value if total is None else total + value
    return out, total


def loss_and_backward(
    loss: Loss, minibatch: TensorDictBase, terms: LossTerms = loss_terms
) -> tuple[TensorDictBase, bool]:
    """The loss of one minibatch and the backward of the sum of its ``loss_*`` terms.

    Args:
        loss: the loss module.
        minibatch: the data it reads.
        terms: :func:`loss_terms`, or its compiled version (whose backward is compiled
            with it).

    Returns:
        The loss's outputs, detached, and whether a backward ran (False when no term
        requires grad).
    """
    out, total = terms(loss, minibatch)
    if total is not None:
        total.backward()
    return out.detach(), total is not None


def clip_grad_norm_per_group_(param_groups: list[dict[str, Any]], max_norm: float) -> None:
    """``torch.nn.utils.clip_grad_norm_`` applied to each param group separately.

    The same scaling (each group's gradients times ``min(1, max_norm / (norm + 1e-6))``,
    ``norm`` the group's total 2-norm), with one ``_foreach_norm`` over every gradient
    instead of one per group: a step of small networks is dominated by such calls.
    """
    groups = [[p.grad for p in g["params"] if p.grad is not None] for g in param_groups]
    grads = [g for group in groups for g in group]
    if not grads:
        return
    norms = torch._foreach_norm(grads)
    start = 0
    for group in groups:
        if group:
            total = torch.linalg.vector_norm(torch.stack(norms[start : start + len(group)]))
            torch._foreach_mul_(group, (max_norm / (total + 1e-6)).clamp(max=1.0))
            start += len(group)


class GradientStep:
    """One optimizer step on one minibatch.

    Zero the gradients, :func:`loss_and_backward`, clip each param group's gradient
    norm (one group per role: a large critic gradient must not shrink the actor's),
    step the optimizer.

    Args:
        loss: the loss module.
        optimizer: the optimizer over the loss's trained parameters.
        max_grad_norm: per-role gradient clipping (``None``: off).
        compile: run the loss through ``torch.compile`` (the forward and its
            backward; see :mod:`marl.algorithms._compile`).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> class Square(TensorDictModule):
        ...     def forward(self, td):
        ...         return TensorDict(loss_sq=self.module(td["x"]).pow(2).mean())
        >>> loss = Square(torch.nn.Linear(2, 1), ["x"], ["loss_sq"])
        >>> step = GradientStep(loss, torch.optim.SGD(loss.parameters(), lr=0.1), None)
        >>> out = step(TensorDict(x=torch.ones(4, 2), batch_size=[4]))
        >>> step.compiled, step.steps, out["loss_sq"].requires_grad
        (False, 1, False)
    """

    def __init__(
        self,
        loss: Loss,
        optimizer: torch.optim.Optimizer,
        max_grad_norm: float | None,
        *,
        compile: bool = False,
    ) -> None:
        self.loss = loss
        self.optimizer = optimizer
        self.max_grad_norm = max_grad_norm
        self._terms: LossTerms = compiled_loss_terms(loss_terms) if compile else loss_terms
        self._steps = 0

    @property
    def compiled(self) -> bool:
        """Whether the steps run the compiled loss."""
        return self._terms is not loss_terms

    @property
    def steps(self) -> int:
        """Steps run so far (all of them compiled when :attr:`compiled`)."""
        return self._steps

    def __call__(self, minibatch: TensorDictBase) -> TensorDictBase:
        opt = self.optimizer
        opt.zero_grad(set_to_none=True)
        out, stepped = loss_and_backward(self.loss, minibatch, self._terms)
        self._steps += 1
        if stepped:
            if self.max_grad_norm is not None:
                clip_grad_norm_per_group_(opt.param_groups, self.max_grad_norm)
            opt.step()
        return out


def _check_parts(loss: Any, optimizer: Any, protocol: type) -> None:
    if not isinstance(loss, protocol):
        raise TypeError(
            f"the loss must be a {protocol.__name__} (forward on a TensorDict and in_keys), "
            f"got {type(loss).__name__}"
        )
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}"
        )


class OnPolicyUpdater:
    """Advantages on the whole ``[*B, T]`` batch, then ``epochs`` x minibatches over it.

    MAPPO's and IPPO's whole update, in call order:

    1. :meth:`process`: the loss's value estimator (GAE; ``V(s)`` and ``V(s')`` in one
       critic call) writes the advantages and value targets on the batch.
    2. :meth:`update`: the entries the loss reads (``loss.in_keys``) are selected once,
       flattened, and each epoch gathers them in one shuffled order; minibatches are
       contiguous slices of it (views). Each goes through :class:`GradientStep`:
       :func:`loss_and_backward` runs ``PPOLoss.forward`` (advantage standardization
       over the unmasked agents, the clipped objective, the critic loss), then the
       per-role clipping and the optimizer step. An incomplete last minibatch is
       dropped: a handful of samples gives a noisy step.

    Args:
        loss: the loss, with the value estimator that writes its advantages.
        optimizer: the optimizer over its trained parameters.
        epochs: passes over each batch.
        minibatch_size: transitions per optimizer step (the whole batch when larger).
        max_grad_norm: per-role gradient clipping (``None``: off).
        compile: compile the loss and its backward (:class:`GradientStep`).
        sequence_length: train on sequences (a recurrent policy): each env's ``T`` steps
            are cut into chunks of this many steps (``T`` at most; the last ``T % length``
            steps are left out), and a minibatch is ``minibatch_size // length`` whole
            chunks, shuffled as chunks, time kept in order: a ``[chunks, length]``
            TensorDict whose first step holds the hidden state stored at collection.
            ``None``: single steps.
    """

    on_policy = True

    def __init__(
        self,
        *,
        loss: AdvantageLoss,
        optimizer: torch.optim.Optimizer,
        epochs: int,
        minibatch_size: int,
        max_grad_norm: float | None,
        compile: bool = False,
        sequence_length: int | None = None,
    ) -> None:
        if epochs < 1 or minibatch_size < 1:
            raise ValueError(
                f"epochs and minibatch_size must be >= 1, got {epochs}, {minibatch_size}"
            )
        if sequence_length is not None and sequence_length < 1:
            raise ValueError(f"sequence_length must be >= 1 or None, got {sequence_length}")
        self._sequence_length = sequence_length
        _check_parts(loss, optimizer, AdvantageLoss)
        if loss.value_estimator is None:
            raise ValueError(
                f"{type(loss).__name__} has no value estimator (no critic): the on-policy "
                "updater writes the advantages with it"
            )
        self._step = GradientStep(loss, optimizer, max_grad_norm, compile=compile)
        self._keys = list(loss.in_keys)
        self._epochs = epochs
        self._minibatch_size = minibatch_size

    @property
    def loss(self) -> AdvantageLoss:
        return self._step.loss

    @property
    def gradient_step(self) -> GradientStep:
        """The step run on each minibatch (whether it is compiled, steps so far)."""
        return self._step

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self._step.optimizer

    @property
    def buffer(self) -> None:
        """No buffer: each batch is used once, straight from the collector."""
        return None

    @property
    def epochs(self) -> int:
        return self._epochs

    @property
    def minibatch_size(self) -> int:
        return self._minibatch_size

    def process(self, batch: TensorDictBase) -> TensorDictBase:
        """Write the group's advantage and value target on the ``[*B, T]`` batch."""
        with torch.no_grad():
            self.loss.value_estimator(batch)
        return batch

    @property
    def sequence_length(self) -> int | None:
        """Steps per training sequence (``None``: single steps)."""
        return self._sequence_length

    def sequences(self, batch: TensorDictBase) -> TensorDictBase:
        """The loss's entries of a ``[*B, T]`` batch as ``[chunks, length]`` sequences."""
        data = batch.select(*self._keys, strict=False)
        if data.batch_dims < 1:
            raise ValueError("sequence training needs a [*B, T] batch with a time dim")
        steps = data.batch_size[-1]
        length = min(self._sequence_length or steps, steps)
        data = data.reshape(-1, steps)[:, : steps - steps % length]
        return data.reshape(-1, length)

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        """``epochs`` passes of shuffled minibatches over the loss's entries of ``batch``."""
        if self._sequence_length is not None:
            data = self.sequences(batch)
            n = data.shape[0]
            size = min(max(1, self._minibatch_size // data.shape[1]), n)
        else:
            data = batch.select(*self._keys, strict=False).reshape(-1)
            n = data.numel()
            size = min(self._minibatch_size, n)
        stats = _Stats()
        for _ in range(self._epochs):
            # one gather per entry and epoch; the minibatches are views of it
            shuffled = data[torch.randperm(n, device=data.device)]
            for start in range(0, n - size + 1, size):
                stats.add(self._step(shuffled[start : start + size]))
        return stats.means()

    def state_dict(self) -> dict[str, Any]:
        """No state between batches: ``{}``."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Nothing to restore (see :meth:`state_dict`)."""


class OffPolicyUpdater:
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
    ) -> None:
        if utd_ratio <= 0:
            raise ValueError(f"utd_ratio must be > 0, got {utd_ratio}")
        _check_parts(loss, optimizer, Loss)
        self._info = info
        self._step = GradientStep(loss, optimizer, max_grad_norm, compile=compile)
        self._keys = list(loss.in_keys)
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
    def loss(self) -> Loss:
        return self._step.loss

    @property
    def gradient_step(self) -> GradientStep:
        """The step run on each sampled batch (whether it is compiled, steps so far)."""
        return self._step

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self._step.optimizer

    @property
    def buffer(self) -> ReplayBuffer:
        return self._buffer

    @property
    def target_updater(self) -> TargetUpdater | None:
        return self._target_updater

    @property
    def utd_ratio(self) -> float:
        return self._utd_ratio

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
        stats = _Stats()
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


def compile_report(algorithm: Algorithm) -> dict[str, Any]:
    """How much of ``algorithm``'s training ran compiled, and what compiling cost.

    Returns:
        ``{"steps": {group: optimizer steps run by a compiled GradientStep},
        "eager_steps": {group: steps run eagerly}}`` (learners of the updaters of this
        module) and :func:`~marl.algorithms._compile.compile_counts` (frames, graphs and
        graph breaks compiled so far in this process).

    Examples:
        >>> from marl.algorithms import Algorithm
        >>> from marl.testing import MultiAgentFakeEnv
        >>> report = compile_report(Algorithm("mappo").build(MultiAgentFakeEnv(num_envs=2)))
        >>> report["steps"], report["eager_steps"]
        ({'walker': 0, 'picker': 0}, {'walker': 0, 'picker': 0})
    """
    steps, eager = {}, {}
    for label, learner in algorithm.group_learners():
        updater = learner.updater
        if isinstance(updater, (OnPolicyUpdater, OffPolicyUpdater)):
            step = updater.gradient_step
            steps[label] = step.steps if step.compiled else 0
            eager[label] = 0 if step.compiled else step.steps
    return {"steps": steps, "eager_steps": eager, **compile_counts()}


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
