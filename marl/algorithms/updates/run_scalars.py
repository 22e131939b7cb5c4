"""Each run's own loss hyperparameters inside one stacked update.

A stacked update (:class:`~marl.algorithms.updates.StackedOnPolicy`,
:class:`~marl.algorithms.updates.StackedOffPolicy`) calls one template loss, a copy of
run 0's, for every run: the runs' parameters are stacked tensors, but the loss's plain
Python attributes (``PPOLoss.entropy_coef``, ``clip_epsilon``, the off-policy losses'
``gamma``, ...) are the template's, so runs whose losses differ in them (a population's
members) would all train with run 0's values. :class:`RunScalars` finds those
differences when the stack is built:

- an attribute equal in every run stays a Python constant of the template (the usual
  case, seeds: nothing changes in the call);
- one that differs and that the loss lists in its
  :attr:`~marl.objectives.LossModule.per_run_scalars` (numbers it reads only in tensor
  arithmetic) becomes a ``[R]`` tensor, passed into the ``vmap`` as one more mapped
  argument and set on the template for the duration of the call (:meth:`RunScalars.bound`),
  so that each run's slice of the call sees its own 0-dim value;
- any other difference (a bool or a string that decides which terms are computed, a
  ``None`` against a number, a network's setting, a parameter frozen in some runs only)
  is refused, naming the attribute and the runs' values.

Private attributes (a leading underscore: state such as TD3's delayed-actor counter, which
the stacks check on their own) are not compared, and neither is whatever lies under a
submodule a stack leaves to each run's own loss (``skip``: the on-policy value
estimator, which each run's loss runs on its own batch).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from marl.objectives import LossModule

__all__ = ["RunScalars"]

_SCALARS = (bool, int, float, str, type(None))


def _settings(module: nn.Module) -> dict[str, Any]:
    """The public plain-value attributes of ``module`` itself (not its submodules')."""
    out = {}
    for name, value in vars(module).items():
        if name.startswith("_") or name == "training":
            continue
        if isinstance(value, _SCALARS) or (
            isinstance(value, tuple) and all(isinstance(v, _SCALARS) for v in value)
        ):
            out[name] = value
    return out


def _same(values: Sequence[Any]) -> bool:
    # 0.1 and 0.1 are the same setting; a bool against a number (True == 1) is not
    return all(type(v) is type(values[0]) and v == values[0] for v in values)


class RunScalars:
    """The loss attributes in which the runs differ, as per-run tensors.

    Args:
        losses: each run's loss, of one class and structure.
        skip: names of submodules (of the losses) left out of the comparison.

    Raises:
        ValueError: naming each attribute that differs between the runs and cannot be
            per run (with the runs' values and the reason), or a parameter trained in some
            runs and frozen in others.

    Examples:
        >>> from marl.objectives import DQNLoss, DQNSettings
        >>> losses = [DQNLoss(nn.Linear(2, 2), DQNSettings(gamma=g)) for g in (0.9, 0.99)]
        >>> scalars = RunScalars(losses)
        >>> scalars.values
        {'gamma': tensor([0.9000, 0.9900])}
        >>> template = losses[0]
        >>> with scalars.bound(template, {"gamma": torch.tensor(0.5)}):
        ...     float(template.gamma)
        0.5
        >>> template.gamma
        0.9
        >>> RunScalars([DQNLoss(nn.Linear(2, 2), DQNSettings(double_dqn=d)) for d in (True, False)])
        Traceback (most recent call last):
        ...
        ValueError: the runs' losses differ in double_dqn ([True, False]): DQNLoss reads double_dqn as a Python value (it is not one of its per_run_scalars: ['gamma'])
    """

    def __init__(self, losses: Sequence[nn.Module], skip: Sequence[str] = ()) -> None:
        first = losses[0]
        # the parameters' dtype and device: a value computes as the Python float it
        # stands for would (cast to the operands' dtype), on the device of the call
        param = next((p for p in first.parameters() if p.is_floating_point()), None)
        dtype = torch.get_default_dtype() if param is None else param.dtype
        device = None if param is None else param.device
        self.values: dict[str, torch.Tensor] = {}
        errors: list[str] = []
        modules = [dict(loss.named_modules()) for loss in losses]
        for path in modules[0]:
            if any(path == s or path.startswith(f"{s}.") for s in skip):
                continue
            settings = [_settings(m[path]) for m in modules]
            for name in sorted(set().union(*settings)):
                values = [s.get(name) for s in settings]
                if _same(values):
                    continue
                full = f"{path}.{name}" if path else name
                refusal = (
                    first.per_run_refusal(name, values)
                    if not path and isinstance(first, LossModule)
                    else f"{full} is a setting of a network, which the runs share"
                )
                if refusal is not None:
                    errors.append(f"{full} ({values}): {refusal}")
                else:
                    self.values[name] = torch.tensor(
                        [float(v) for v in values], dtype=dtype, device=device
                    )
        for name, _ in first.named_parameters():
            flags = [loss.get_parameter(name).requires_grad for loss in losses]
            if len(set(flags)) > 1:
                errors.append(
                    f"parameter {name} is trained in some runs and frozen in others ({flags}): "
                    "a setting that freezes it (SAC's fixed_alpha) must be the same in every run"
                )
        if errors:
            raise ValueError("the runs' losses differ in " + "; ".join(errors))

    @staticmethod
    @contextmanager
    def bound(template: nn.Module, values: dict[str, torch.Tensor]) -> Iterator[None]:
        """Set ``values`` (one run's 0-dim values inside a ``vmap``) as ``template``'s
        attributes for the duration of the block, then restore the template's own."""
        saved = {name: getattr(template, name) for name in values}
        try:
            for name, value in values.items():
                setattr(template, name, value)
            yield
        finally:
            for name, value in saved.items():
                setattr(template, name, value)
