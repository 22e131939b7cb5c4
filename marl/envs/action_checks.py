"""Action checks at the env boundary: NaN/inf, non-integer, out-of-range and illegal actions.

A bad action otherwise fails far from its cause, or not at all: VMAS raises an
empty ``AssertionError`` on NaN, Gymnasium's Pendulum returns NaN
observations, PettingZoo casts the discrete action ``1.7`` to ``1``. With
``env.check_actions = True`` (a wrapper's ``check_actions=True``,
``make_task(..., check_actions=True)``, and always inside
:func:`~marl.envs.check_env_specs`), :meth:`EnvBase.step` checks every action
against its spec first and raises :class:`InvalidActionError` naming the key,
the expected domain and a few offending values (with how many there are).

The check costs a few tensor reductions per action key and step, so it is off
on the hot path by default (``docs/basic/envs_and_groups.md`` gives measured costs).

What is checked, by spec:

- every floating action: finite (no NaN, no inf). Bounds of continuous
  actions are not enforced: most envs clip, and exploration noise may
  overshoot on purpose;
- ``Categorical`` and ``MultiCategorical``: integers (a float dtype must hold
  whole numbers) in ``[0, n)``;
- ``OneHot``: rows of 0/1 with exactly one 1;
- ``Binary``: 0 or 1;
- discrete actions under a legal-action mask (the spec's own mask, or the
  group's ``"action_mask"`` beside the action in the TensorDict): legal.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import torch
from tensordict import TensorDictBase

from marl.specs import Binary, Categorical, Composite, MultiCategorical, NestedKey, OneHot

__all__ = ["InvalidActionError", "check_action", "check_actions"]

_EXAMPLES = 5


class InvalidActionError(ValueError):
    """An action outside its spec's domain (raised when action checks are on)."""


def _fmt_key(key: NestedKey) -> str:
    return repr(key if isinstance(key, str) or len(key) > 1 else key[0])


def _value(x: torch.Tensor) -> Any:
    v = x.item()
    return round(v, 6) if isinstance(v, float) else v


# names of an action's leading dims while check_actions checks it, e.g. ("env", "agent"):
# the message then says "nan at (env 0, agent 1, 0)", naming the agent
_DIMS: ContextVar[tuple[str, ...]] = ContextVar("_DIMS", default=())


def _where(idx: list[int]) -> str:
    names = _DIMS.get()
    if not names:
        return str(tuple(idx))
    parts = [f"{names[d]} {i}" if d < len(names) else str(i) for d, i in enumerate(idx)]
    return f"({', '.join(parts)})"


def _examples(values: torch.Tensor, bad: torch.Tensor, rows: bool = False) -> str:
    """``"1.7 at (0, 2), nan at (1, 0)"`` for the first few offending entries."""
    where = bad.nonzero()[:_EXAMPLES].tolist()
    parts = []
    for idx in where:
        v = values[tuple(idx)]
        shown = v.tolist() if rows else _value(v)
        parts.append(f"{shown} at {_where(idx)}")
    more = int(bad.sum()) - len(where)
    return ", ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _fail(
    key: NestedKey,
    expected: str,
    what: str,
    values: torch.Tensor,
    bad: torch.Tensor,
    rows: bool = False,
) -> InvalidActionError:
    n_bad, total = int(bad.sum()), bad.numel()
    return InvalidActionError(
        f"action {_fmt_key(key)}: expected {expected}; got {n_bad} {what} of {total}: "
        f"{_examples(values, bad, rows)}"
    )


def check_action(
    key: NestedKey, value: torch.Tensor, spec: Any, mask: torch.Tensor | None = None
) -> None:
    """Check one action tensor against its spec (and a legal-action mask).

    Args:
        key: the action key (for the message).
        value: the action, of the spec's shape.
        spec: its leaf spec.
        mask: optional boolean legal-action mask ``[*shape, n]`` (``Categorical``)
            or ``[*shape]`` (``OneHot``, same shape as the action).

    Raises:
        InvalidActionError: naming the key, the expected domain and the first
            offending values, with their count.

    Examples:
        >>> from marl.specs import Categorical
        >>> check_action("action", torch.tensor([0, 4]), Categorical(5, shape=(2,)))
        >>> check_action("action", torch.tensor([1.7, 2.0]), Categorical(5, shape=(2,)))
        Traceback (most recent call last):
        ...
        marl.envs.action_checks.InvalidActionError: action 'action': expected integers in [0, 5); got 1 non-integer value(s) of 2: 1.7 at (0,)
    """
    floating = value.is_floating_point()
    if floating and not bool(torch.isfinite(value).all()):
        expected = f"finite values ({type(spec).__name__})"
        raise _fail(key, expected, "NaN/inf value(s)", value, ~torch.isfinite(value))
    if isinstance(spec, Categorical):
        domain = f"integers in [0, {spec.n})"
        if floating and not bool((value == value.round()).all()):
            raise _fail(key, domain, "non-integer value(s)", value, value != value.round())
        if value.numel():
            low, high = value.aminmax()  # one pass, cheaper than two comparisons
            if low < 0 or high >= spec.n:
                raise _fail(
                    key, domain, "out-of-range value(s)", value, (value < 0) | (value >= spec.n)
                )
        if spec.mask is not None or mask is not None:
            _check_legal(key, value.long(), spec.mask, mask, spec.n)
    elif isinstance(spec, MultiCategorical):
        domain = f"integers in [0, nvec) with nvec={spec.nvec.tolist()}"
        if floating and not bool((value == value.round()).all()):
            raise _fail(key, domain, "non-integer value(s)", value, value != value.round())
        inside = (value >= 0) & (value < spec.nvec)
        if not bool(inside.all()):
            raise _fail(key, domain, "out-of-range value(s)", value, ~inside)
    elif isinstance(spec, OneHot):
        ok = ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)
        if not bool(ok.all()):
            expected = f"one-hot rows over {spec.n} choices"
            raise _fail(key, expected, "bad row(s)", value, ~ok, rows=True)
        if spec.mask is not None or mask is not None:
            _check_legal(key, value.argmax(-1), spec.mask, mask, spec.n)
    elif isinstance(spec, Binary):
        ok = (value == 0) | (value == 1)
        if not bool(ok.all()):
            raise _fail(key, "0 or 1", "other value(s)", value, ~ok)


def _check_legal(
    key: NestedKey,
    index: torch.Tensor,
    spec_mask: torch.Tensor | None,
    td_mask: torch.Tensor | None,
    n: int,
) -> None:
    for mask, where in ((spec_mask, "the spec's mask"), (td_mask, "the action_mask")):
        if mask is None:
            continue
        if mask.shape != (*index.shape, n):
            raise InvalidActionError(
                f"action {_fmt_key(key)}: its action_mask has shape {tuple(mask.shape)}, "
                f"expected {(*index.shape, n)}"
            )
        legal = mask.gather(-1, index.unsqueeze(-1)).squeeze(-1)
        if not bool(legal.all()):
            raise _fail(key, f"legal choices under {where}", "illegal action(s)", index, ~legal)


def check_actions(td: TensorDictBase, action_spec: Composite) -> None:
    """Check every action of ``td`` against ``action_spec`` (see :func:`check_action`).

    A discrete action whose group holds an ``"action_mask"`` (``(group,
    "action_mask")`` beside ``(group, "action")``) must be legal under it.

    Raises:
        InvalidActionError: on the first bad action key.

    Examples:
        >>> from tensordict import TensorDict
        >>> from marl.specs import Bounded
        >>> spec = Composite({"action": Bounded(-1.0, 1.0, (2,))}, shape=())
        >>> check_actions(TensorDict({"action": torch.tensor([0.5, float("nan")])}), spec)
        Traceback (most recent call last):
        ...
        marl.envs.action_checks.InvalidActionError: action 'action': expected finite values (Bounded); got 1 NaN/inf value(s) of 2: nan at (1,)
    """
    for key, spec, mask_key, dims in _plan(action_spec):
        mask = None if mask_key is None else td.get(mask_key, None)
        if mask is not None and mask.dtype != torch.bool:
            mask = None
        token = _DIMS.set(dims)
        try:
            check_action(key, td.get(key), spec, mask)
        finally:
            _DIMS.reset(token)


# id(action_spec) -> (the spec, kept alive so that its id stays unique; the plan)
_PLANS: dict[
    int, tuple[Composite, list[tuple[NestedKey, Any, NestedKey | None, tuple[str, ...]]]]
] = {}


def _plan(
    action_spec: Composite,
) -> list[tuple[NestedKey, Any, NestedKey | None, tuple[str, ...]]]:
    """The action leaves and where their masks live, computed once per spec object."""
    cached = _PLANS.get(id(action_spec))
    if cached is not None and cached[0] is action_spec:
        return cached[1]
    plan = []
    batch = len(action_spec.shape)
    for key, spec in action_spec.items(include_nested=True, leaves_only=True):
        key_t = (key,) if isinstance(key, str) else tuple(key)
        mask_key = (*key_t[:-1], "action_mask") if isinstance(spec, (Categorical, OneHot)) else None
        # a group's Composite has the agent dim(s) after the env batch dims
        group_ndim = len(action_spec[key_t[:-1]].shape) if len(key_t) > 1 else batch
        dims = ("env",) * batch + ("agent",) * (group_ndim - batch) if batch or group_ndim else ()
        plan.append((key, spec, mask_key, dims))
    if len(_PLANS) >= 16:  # a few envs check at once (training, evaluation); keep it small
        _PLANS.pop(next(iter(_PLANS)))
    _PLANS[id(action_spec)] = (action_spec, plan)
    return plan
