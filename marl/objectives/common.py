"""``LossModule``: the key-agnostic base of every loss and value estimator.

A loss names every entry it reads or writes through ``self.tensor_keys``, filled
from the class's ``default_keys`` and changed with ``set_keys(**keys)``. That is
how a single-agent loss is pointed at a group: ``loss.set_keys(action=("agents",
"action"), reward=("next", "agents", "reward"), ...)``. Shapes are left to
broadcasting: any number of leading batch dims, including an agent dim.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

__all__ = [
    "KeyedModule",
    "LossModule",
    "distance_loss",
    "expand_after_batch",
    "reinit_",
    "td_target",
]


def _check_key(name: str, key: Any) -> NestedKey:
    if isinstance(key, str):
        return key
    if isinstance(key, tuple) and key and all(isinstance(k, str) for k in key):
        return key[0] if len(key) == 1 else key
    raise TypeError(f"key {name!r} must be a str or a non-empty tuple of str, got {key!r}")


class _Keys:
    """Attribute access to a module's tensor keys (``self.tensor_keys.action``)."""

    def __init__(self, keys: dict[str, NestedKey]) -> None:
        object.__setattr__(self, "_keys", dict(keys))

    def __getattr__(self, name: str) -> NestedKey:
        if name.startswith("_"):  # copy/pickle probe dunders before _keys exists
            raise AttributeError(name)
        try:
            return self._keys[name]
        except KeyError:
            raise AttributeError(f"no tensor key named {name!r}") from None

    def __setattr__(self, name: str, value: NestedKey) -> None:
        raise AttributeError("use set_keys(...) to change tensor keys")

    def as_dict(self) -> dict[str, NestedKey]:
        return dict(self._keys)

    def __repr__(self) -> str:
        return f"TensorKeys({self._keys})"


class KeyedModule(nn.Module):
    """An ``nn.Module`` whose TensorDict keys are configurable through ``set_keys``."""

    default_keys: ClassVar[dict[str, NestedKey]] = {}

    def __init__(self) -> None:
        super().__init__()
        self.tensor_keys = _Keys(self.default_keys)

    def set_keys(self, **keys: NestedKey) -> KeyedModule:
        """Point the module at other TensorDict entries.

        Args:
            **keys: ``name=key`` pairs; ``name`` must be one of ``default_keys``.

        Returns:
            ``self``, for chaining.

        Raises:
            KeyError: when a name is unknown; the message lists the valid names.

        Examples:
            >>> from marl.objectives import GAE
            >>> est = GAE().set_keys(value=("agents", "state_value"))
            >>> est.tensor_keys.value
            ('agents', 'state_value')
        """
        unknown = sorted(set(keys) - set(self.default_keys))
        if unknown:
            raise KeyError(
                f"{type(self).__name__}.set_keys got unknown key name(s) {unknown}; "
                f"valid names are {sorted(self.default_keys)}"
            )
        new = self.tensor_keys.as_dict()
        new.update({name: _check_key(name, key) for name, key in keys.items()})
        self.tensor_keys = _Keys(new)
        self._keys_changed(keys)
        return self

    def _keys_changed(self, keys: dict[str, NestedKey]) -> None:
        """Hook for subclasses (e.g. forwarding keys to a value estimator)."""


LOSS_KINDS = ("l2", "l1", "smooth_l1")


def check_loss_kind(kind: str) -> str:
    """Validate a regression-loss name at construction time (not at the first forward)."""
    if kind not in LOSS_KINDS:
        raise ValueError(f"unknown loss kind {kind!r}; expected one of {LOSS_KINDS}")
    return kind


def distance_loss(pred: torch.Tensor, target: torch.Tensor, kind: str) -> torch.Tensor:
    """Element-wise regression loss.

    Args:
        pred: predictions.
        target: targets (broadcast to ``pred``).
        kind: ``"l2"`` (squared error), ``"l1"`` or ``"smooth_l1"``.

    Returns:
        The element-wise loss (no reduction).
    """
    if kind == "l2":
        return (pred - target).pow(2)
    if kind == "l1":
        return (pred - target).abs()
    if kind == "smooth_l1":
        return F.smooth_l1_loss(pred, target.expand_as(pred), reduction="none")
    raise ValueError(f"unknown loss kind {kind!r}; expected 'l2', 'l1' or 'smooth_l1'")


def expand_after_batch(x: torch.Tensor, ndim: int, batch_dims: int) -> torch.Tensor:
    """Insert dims right after the batch dims until ``x`` has ``ndim`` dims.

    That broadcasts an env-level ``[*B, 1]`` flag or a team reward against per-agent
    ``[*B, n_agents, 1]`` tensors (right-aligned broadcasting would misalign them).
    """
    while x.ndim < ndim:
        x = x.unsqueeze(batch_dims)
    return x


def match_log_prob(log_prob: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Give a log-prob ``[*B]`` the trailing singleton of values/advantages ``[*B, 1]``."""
    if log_prob.ndim == like.ndim - 1:
        return log_prob.unsqueeze(-1)
    return log_prob


def td_target(
    gamma: float,
    reward: torch.Tensor,
    terminated: torch.Tensor,
    next_value: torch.Tensor,
    batch_dims: int,
) -> torch.Tensor:
    """``r + gamma * (1 - terminated) * next_value``, with env-level tensors aligned.

    Truncated (but not terminated) steps are bootstrapped. Tensors of lower rank
    (an env-level ``[*B, 1]`` flag next to ``[*B, n_agents, 1]`` values) get their
    missing dims inserted right after the ``batch_dims`` leading dims.
    """
    ndim = max(reward.ndim, terminated.ndim, next_value.ndim)
    reward = expand_after_batch(reward, ndim, batch_dims)
    not_term = (~expand_after_batch(terminated.bool(), ndim, batch_dims)).to(next_value.dtype)
    return reward + gamma * not_term * expand_after_batch(next_value, ndim, batch_dims)


class LossModule(KeyedModule):
    """Base class of the losses.

    Subclasses implement ``forward(tensordict) -> TensorDict`` of ``loss_*`` terms and
    diagnostics. Helpers here handle target networks, prioritized-replay weights
    (``"priority_weight"``) and writing ``"td_error"`` back for priority updates.
    """

    def __init__(self) -> None:
        super().__init__()
        self._target_pairs: list[tuple[str, str]] = []

    # -- target networks -------------------------------------------------------------
    def _make_target(self, name: str, module: nn.Module) -> nn.Module:
        """Register a frozen deep copy of ``module`` as ``target_<name>``."""
        target = copy.deepcopy(module).requires_grad_(False)
        setattr(self, f"target_{name}", target)
        self._target_pairs.append((name, f"target_{name}"))
        return target

    def target_pairs(self) -> Iterator[tuple[nn.Module, nn.Module]]:
        """Yield ``(online, target)`` module pairs, for ``SoftUpdate``/``HardUpdate``."""
        for online, target in self._target_pairs:
            yield getattr(self, online), getattr(self, target)

    # -- reductions ------------------------------------------------------------------
    def _weighted_mean(self, x: torch.Tensor, td: TensorDictBase) -> torch.Tensor:
        """Mean of an element-wise loss, weighted by ``priority_weight`` when present."""
        weight = td.get(self.tensor_keys.priority_weight, None)
        if weight is None:
            return x.mean()
        weight = weight.reshape(weight.shape + (1,) * (x.ndim - weight.ndim))
        return (x * weight).mean()

    def _terminated(self, td: TensorDictBase) -> torch.Tensor:
        """The ``terminated`` flags, or ``done`` when the data has no termination info."""
        term = td.get(self.tensor_keys.terminated, None)
        return td.get(self.tensor_keys.done) if term is None else term

    def _write_td_error(self, td: TensorDictBase, error: torch.Tensor) -> None:
        """Store ``|error|`` (trailing singleton dropped) at the ``priority`` key."""
        err = error.detach().abs()
        if err.ndim > td.batch_dims and err.shape[-1] == 1:
            err = err.squeeze(-1)
        td.set(self.tensor_keys.priority, err)


def reinit_(module: nn.Module) -> nn.Module:
    """Re-draw the parameters of every submodule that has ``reset_parameters``."""
    for m in module.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()
    return module
