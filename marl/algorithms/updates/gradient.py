"""One optimizer step: the loss of a minibatch, its backward, clipping, the step.

- :func:`loss_and_backward`: the loss of one minibatch and its backward;
  :func:`loss_terms`, its forward part, is a plain function of the loss and the
  minibatch, what ``torch.compile`` wraps (``compile=True``, see
  :mod:`marl.algorithms._compile`). :class:`GradientStep` adds the gradient clipping
  and the optimizer step.
- :func:`make_optimizer`: one optimizer per learner, one param group per role (actor,
  critic, alpha...): the losses detach whatever a term must not train (SAC's and DDPG's
  actor terms see frozen critics), so stepping the sum of the ``loss_*`` terms is the
  same as stepping one optimizer per term, with less bookkeeping.
- :class:`UpdateStats`: the means of a batch's loss outputs, read once per batch.
- :class:`GradientStepUpdater`: what the on- and off-policy updaters share, their loss
  and optimizer checked and run through one :class:`GradientStep`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import torch
from tensordict import TensorDictBase
from torch import nn

from marl.algorithms._compile import compiled_loss_terms
from marl.algorithms.contracts import Loss
from marl.algorithms.updates.sync import GradientSync

__all__ = [
    "GradientStep",
    "GradientStepUpdater",
    "LossTerms",
    "UpdateStats",
    "check_update_parts",
    "clip_grad_norm_per_group_",
    "loss_and_backward",
    "loss_terms",
    "make_optimizer",
    "sum_loss_terms",
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


class UpdateStats:
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
    return out, sum_loss_terms(out)


def sum_loss_terms(out: TensorDictBase) -> torch.Tensor | None:
    """The sum of the ``loss_*`` entries of ``out`` that require grad (``None``: none does).

    What :func:`loss_terms` adds to a loss's outputs; a loss called otherwise (HAPPO's
    per-agent terms) sums its outputs with it too.

    Examples:
        >>> from tensordict import TensorDict
        >>> w = torch.ones(2, requires_grad=True)
        >>> out = TensorDict(loss_a=w.sum(), loss_b=w.sum().detach(), kl=w.mean())
        >>> sum_loss_terms(out)
        tensor(2., grad_fn=<SumBackward0>)
        >>> print(sum_loss_terms(out.detach()))
        None
    """
    total = None
    for key, value in out.items():
        if key.startswith("loss_") and value.requires_grad:
            total = value if total is None else total + value
    return total


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

    Zero the gradients, :func:`loss_and_backward`, average the gradients over the
    data-parallel ranks (with ``sync``), clip each param group's gradient norm (one
    group per role: a large critic gradient must not shrink the actor's), step the
    optimizer.

    Args:
        loss: the loss module.
        optimizer: the optimizer over the loss's trained parameters.
        max_grad_norm: per-role gradient clipping (``None``: off).
        compile: run the loss through ``torch.compile`` (the forward and its
            backward; see :mod:`marl.algorithms._compile`).
        sync: average every optimized parameter's gradient over the ranks of a
            data-parallel run before the clipping (which then sees the gradient one
            process would get on the union of the ranks' minibatches); ``None``: off.

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
        sync: GradientSync | None = None,
    ) -> None:
        self.loss = loss
        self.optimizer = optimizer
        self.max_grad_norm = max_grad_norm
        self.sync = sync
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
            if self.sync is not None:
                self.sync([p for group in opt.param_groups for p in group["params"]])
            if self.max_grad_norm is not None:
                clip_grad_norm_per_group_(opt.param_groups, self.max_grad_norm)
            opt.step()
        return out


LossT = TypeVar("LossT", bound=Loss)


class GradientStepUpdater(Generic[LossT]):
    """The base of the on- and off-policy updaters: a loss and its optimizer, checked
    (:func:`check_update_parts`), stepped by one :class:`GradientStep`, and the entries
    the loss reads (``loss.in_keys``), which an update selects from each batch.

    Args:
        loss: the loss module.
        optimizer: the optimizer over its trained parameters.
        protocol: what the loss must be (:class:`~marl.algorithms.contracts.Loss`, or
            :class:`~marl.algorithms.contracts.AdvantageLoss` on-policy).
        max_grad_norm: per-role gradient clipping (``None``: off).
        compile: compile the loss and its backward (:class:`GradientStep`).
        sync: average the gradients over data-parallel ranks (:class:`GradientStep`).
    """

    def __init__(
        self,
        loss: LossT,
        optimizer: torch.optim.Optimizer,
        protocol: type,
        max_grad_norm: float | None,
        compile: bool,
        sync: GradientSync | None = None,
    ) -> None:
        check_update_parts(loss, optimizer, protocol)
        self._step = GradientStep(loss, optimizer, max_grad_norm, compile=compile, sync=sync)
        self._keys = list(loss.in_keys)

    @property
    def loss(self) -> LossT:
        return self._step.loss  # type: ignore[return-value]  # the loss given above

    @property
    def gradient_step(self) -> GradientStep:
        """The step run on each minibatch, or each sampled batch off-policy (whether it is
        compiled, steps so far)."""
        return self._step

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self._step.optimizer


def check_update_parts(loss: object, optimizer: object, protocol: type) -> None:
    """Refuse a loss that is not a ``protocol`` or an optimizer that is not torch's."""
    if not isinstance(loss, protocol):
        raise TypeError(
            f"the loss must be a {protocol.__name__} (forward on a TensorDict and in_keys), "
            f"got {type(loss).__name__}"
        )
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}"
        )
