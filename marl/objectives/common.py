"""``LossModule``: the key-agnostic base of every loss and value estimator.

A loss names every entry it reads or writes through ``self.tensor_keys``, filled
from the class's ``default_keys`` and changed with ``set_keys(**keys)``. That is
how a single-agent loss is pointed at a group: ``loss.set_keys(action=("agents",
"action"), reward=("next", "agents", "reward"), ...)``. Shapes are left to
broadcasting: any number of leading batch dims, including an agent dim.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from marl.objectives.settings import QRegression

__all__ = [
    "PER_AGENT_KEYS",
    "TRANSITION_KEYS",
    "ActorCritic",
    "KeyedModule",
    "LossModule",
    "distance_loss",
    "expand_after_batch",
    "next_keys",
    "q_ensemble",
    "reinit_",
    "td_target",
    "unique_keys",
]


@runtime_checkable
class ActorCritic(Protocol):
    """An actor that computes the value in the same pass as its distribution.

    MAT's transformer is one network: its encoder gives each agent both the
    representation its action decoder reads and the value ``V(o_i)``. Called
    through ``get_dist`` and a separate critic, the encoder would run twice per
    minibatch; ``PPOLoss(..., value_from_actor=True)`` and ``A2CLoss`` call
    ``get_dist_and_value`` once instead (about 30% less time per MAT minibatch).

    ``get_dist_and_value(td)`` returns what ``get_dist(td)`` returns (the
    distribution at ``td``'s actions) and the value tensor the critic would write,
    with the critic's shape, computed from the same forward pass.
    """

    def get_dist(self, tensordict: TensorDictBase) -> torch.distributions.Distribution: ...

    def get_dist_and_value(
        self, tensordict: TensorDictBase
    ) -> tuple[torch.distributions.Distribution, torch.Tensor]: ...


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

    def get(self, name: str, default: NestedKey | None = None) -> NestedKey | None:
        """The key named ``name``, or ``default`` when the module has no such name."""
        return self._keys.get(name, default)

    def __repr__(self) -> str:
        return f"TensorKeys({self._keys})"


class KeyedModule(nn.Module):
    """An ``nn.Module`` whose TensorDict keys are configurable through ``set_keys``."""

    default_keys: ClassVar[dict[str, NestedKey]] = {}

    def __init__(self) -> None:
        super().__init__()
        self.tensor_keys = _Keys(self.default_keys)
        self._fixed = False

    def fix(self) -> KeyedModule:
        """Fix the module's configuration: :meth:`set_keys` (and, on a loss, a new value
        estimator) raise from now on. A :class:`~marl.algorithms.GroupLearner` fixes the
        keyed modules of its loss when it is built, so that nothing rewires a learner's
        loss behind its back.

        Returns:
            ``self``.

        Examples:
            >>> from marl.objectives import GAE
            >>> est = GAE().fix()
            >>> est.set_keys(value="v")
            Traceback (most recent call last):
            ...
            RuntimeError: GAE is part of a built learner: its keys are fixed (build a new learner to change them)
        """
        self._fixed = True
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("tensor_keys", "value_estimator") and self.__dict__.get("_fixed", False):
            self._check_not_fixed("keys and value estimator")
        super().__setattr__(name, value)

    @property
    def fixed(self) -> bool:
        """Whether :meth:`fix` was called."""
        return self.__dict__.get("_fixed", False)

    def _check_not_fixed(self, what: str) -> None:
        if self.fixed:
            raise RuntimeError(
                f"{type(self).__name__} is part of a built learner: its {what} are fixed "
                "(build a new learner to change them)"
            )

    def set_keys(self, **keys: NestedKey) -> KeyedModule:
        """Point the module at other TensorDict entries.

        Args:
            **keys: ``name=key`` pairs; ``name`` must be one of ``default_keys``.

        Returns:
            ``self``, for chaining.

        Raises:
            KeyError: when a name is unknown; the message lists the valid names.
            RuntimeError: after :meth:`fix`.

        Examples:
            >>> from marl.objectives import GAE
            >>> est = GAE().set_keys(value=("agents", "state_value"))
            >>> est.tensor_keys.value
            ('agents', 'state_value')
        """
        self._check_not_fixed("keys")
        unknown = sorted(set(keys) - set(self.default_keys))
        if unknown:
            raise KeyError(
                f"{type(self).__name__}.set_keys got unknown key name(s) {unknown}; "
                f"valid names are {sorted(self.default_keys)}"
            )
        new = self.tensor_keys.as_dict()
        for name, key in keys.items():
            # an optional entry (default None, e.g. ``agent_mask``) may be switched off again
            optional = self.default_keys[name] is None and key is None
            new[name] = None if optional else _check_key(name, key)
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


TRANSITION_KEYS: dict[str, NestedKey] = {
    "reward": ("next", "reward"),
    "done": ("next", "done"),
    "terminated": ("next", "terminated"),
    "priority_weight": "priority_weight",
    "priority": "td_error",
}
"""The keys every loss reads from a transition and writes back: the reward and done flags
of the next step, and the prioritized-replay weight and the TD error it writes."""

PER_AGENT_KEYS: dict[str, NestedKey] = {**TRANSITION_KEYS, "agent_mask": None}
""":data:`TRANSITION_KEYS` plus the agent mask of a loss with per-agent terms (off until
``set_keys(agent_mask=(group, "mask"))``)."""


class LossModule(KeyedModule):
    """Base class of the losses.

    Subclasses implement ``forward(tensordict) -> TensorDict`` of ``loss_*`` terms and
    diagnostics, and :attr:`in_keys`, the entries ``forward`` reads (an updater stores
    only those). Helpers here handle target networks, the loss weights (prioritized-replay
    ``"priority_weight"`` and, for per-agent losses, the ``agent_mask``) and writing
    ``"td_error"`` back for priority updates.

    Agent masks: a loss whose ``default_keys`` has ``"agent_mask"`` (default ``None``,
    off) weights every per-agent term by the group's mask, set with
    ``set_keys(agent_mask=(group, "mask"))``: masked-out agents (dead, or not acting in
    a turn) weigh 0 and the others ``1 / mean(mask)``, so that a weighted mean is the
    mean over the unmasked agents.

    Per-run hyperparameters: :attr:`per_run_scalars` names the float attributes that
    ``forward`` reads only in tensor arithmetic, so that a 0-dim tensor may stand in for
    each. The stacked updates of many runs (``marl.algorithms.updates``) give each run
    its own value of those, as a per-run tensor inside their ``vmap``;
    :meth:`per_run_refusal` says why another attribute cannot differ between runs.
    """

    per_run_scalars: ClassVar[tuple[str, ...]] = ()
    """The float attributes ``forward`` may take as 0-dim tensors (each run's own value in a
    stacked update); the losses list theirs (``gamma``, ``entropy_coef``, ...)."""

    def __init__(self) -> None:
        super().__init__()
        self._target_pairs: list[tuple[str, str]] = []

    def per_run_refusal(self, name: str, values: list[Any]) -> str | None:
        """Why the runs of a stacked update cannot each hold their own ``values`` of the
        attribute ``name`` (``None``: they can, as a per-run tensor).

        Only the attributes of :attr:`per_run_scalars` can, with numbers for values: a
        bool, a string or a ``None`` decides which terms ``forward`` computes, which one
        call for every run cannot do per run.

        Args:
            name: an attribute of this loss.
            values: each run's value of it (they differ).

        Returns:
            The reason, for an error message, or ``None``.

        Examples:
            >>> from marl.objectives import DQNLoss
            >>> loss = DQNLoss(torch.nn.Identity())
            >>> loss.per_run_refusal("gamma", [0.99, 0.9]) is None
            True
            >>> print(loss.per_run_refusal("double_dqn", [True, False]))
            DQNLoss reads double_dqn as a Python value (it is not one of its per_run_scalars: ['gamma'])
        """
        if name not in self.per_run_scalars:
            return (
                f"{type(self).__name__} reads {name} as a Python value (it is not one of its "
                f"per_run_scalars: {sorted(self.per_run_scalars)})"
            )
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            return f"{name} must be a number in every run to differ per run"
        return None

    # -- target networks -------------------------------------------------------------
    def _with_targets(self, **modules: nn.Module) -> None:
        """Hold each module as ``<name>`` and a frozen copy of it as ``target_<name>``."""
        for name, module in modules.items():
            setattr(self, name, module)
            self._make_target(name, module)

    def _q_regression(self, settings: QRegression) -> None:
        """Take a Q regression's settings: the discount and the regression loss."""
        self.gamma = settings.gamma
        self.loss_function = check_loss_kind(settings.loss_function)

    def _make_target(self, name: str, module: nn.Module) -> nn.Module:
        """Register a frozen deep copy of ``module`` as ``target_<name>``."""
        target = copy.deepcopy(module).requires_grad_(False)
        setattr(self, f"target_{name}", target)
        self._target_pairs.append((name, f"target_{name}"))
        return target

    def _q_now_and_next(
        self,
        online: nn.Module,
        target: nn.Module,
        td: TensorDictBase,
        double_dqn: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Q-learning's values: online now (with grad), target next, online next (or None).

        A network with ``now_and_next(td)`` (a recurrent Q-network on sequences) gives
        the values now and next from one unroll; any other reads ``td`` and ``td["next"]``
        with the loss's ``_q``.
        """
        if hasattr(online, "now_and_next"):
            now, online_next = online.now_and_next(td)
            with torch.no_grad():
                target_next = target.now_and_next(td)[1]
            return now, target_next, online_next.detach() if double_dqn else None
        now = self._q(online, td)
        next_td = td.get("next")
        with torch.no_grad():
            target_next = self._q(target, next_td)
            select = self._q(online, next_td) if double_dqn else None
        return now, target_next, select

    def target_pairs(self) -> Iterator[tuple[nn.Module, nn.Module]]:
        """Yield ``(online, target)`` module pairs, for ``SoftUpdate``/``HardUpdate``."""
        for online, target in self._target_pairs:
            yield getattr(self, online), getattr(self, target)

    # -- the entries read ------------------------------------------------------------
    @property
    def in_keys(self) -> list[NestedKey]:
        """Every entry :meth:`forward` may read from a batch (optional ones included).

        An updater stores only these (``td.select(*loss.in_keys, strict=False)``), so a
        key missing here is missing from the loss's minibatches.
        """
        raise NotImplementedError(f"{type(self).__name__} does not declare its in_keys")

    def _weight_keys(self) -> list[NestedKey]:
        """The optional weight entries: ``priority_weight`` and the ``agent_mask``."""
        keys = [self.tensor_keys.priority_weight]
        mask = self.tensor_keys.get("agent_mask")
        return keys if mask is None else [*keys, mask]

    # -- reductions ------------------------------------------------------------------
    def _agent_mask(self, td: TensorDictBase) -> torch.Tensor | None:
        """The ``agent_mask`` entry as a bool tensor, or ``None`` when not configured."""
        key = self.tensor_keys.get("agent_mask")
        return None if key is None else td.get(key).bool()

    def loss_weight(self, td: TensorDictBase) -> torch.Tensor | None:
        """The weights of the loss's per-element terms on ``td``.

        The ``agent_mask`` (when configured) divided by its mean, times the
        prioritized-replay ``priority_weight`` (when present), so that a weighted mean
        is the mean over the unmasked agents.

        Args:
            td: the minibatch.

        Returns:
            ``[*B(, n_agents)]`` weights, or ``None`` when there are neither (a plain mean).

        Examples:
            >>> from tensordict import TensorDict
            >>> from marl.objectives import DQNLoss
            >>> loss = DQNLoss(torch.nn.Identity()).set_keys(agent_mask=("agents", "mask"))
            >>> td = TensorDict({"agents": {"mask": torch.tensor([[True, False]])},
            ...                  "priority_weight": torch.tensor([0.5])}, batch_size=[1])
            >>> loss.loss_weight(td).tolist()
            [[1.0, 0.0]]
        """
        priority = td.get(self.tensor_keys.priority_weight, None)
        mask = self._agent_mask(td)
        if mask is None:
            return priority
        weight = mask.to(torch.get_default_dtype())
        weight = weight / weight.mean().clamp_min(1e-8)
        if priority is not None:
            weight = weight * priority.reshape(
                priority.shape + (1,) * (weight.ndim - priority.ndim)
            )
        return weight

    @staticmethod
    def _weighted_mean(x: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
        """Mean of an element-wise loss, weighted by :meth:`loss_weight` when not ``None``."""
        if weight is None:
            return x.mean()
        weight = weight.reshape(weight.shape + (1,) * (x.ndim - weight.ndim))
        return (x * weight).mean()

    def _terminated(self, td: TensorDictBase) -> torch.Tensor:
        """The ``terminated`` flags, or ``done`` when the data has no termination info."""
        term = td.get(self.tensor_keys.terminated, None)
        return td.get(self.tensor_keys.done) if term is None else term

    def _td_target(self, td: TensorDictBase, next_value: torch.Tensor) -> torch.Tensor:
        """:func:`td_target` on ``td``'s reward and termination flags with ``self.gamma``."""
        return td_target(
            self.gamma,
            td.get(self.tensor_keys.reward),
            self._terminated(td),
            next_value,
            td.batch_dims,
        )

    def _write_td_error(self, td: TensorDictBase, error: torch.Tensor) -> None:
        """Store ``|error|`` (trailing singleton dropped) at the ``priority`` key."""
        err = error.detach().abs()
        if err.ndim > td.batch_dims and err.shape[-1] == 1:
            err = err.squeeze(-1)
        td.set(self.tensor_keys.priority, err)


def next_keys(keys: Iterable[NestedKey]) -> list[tuple[str, ...]]:
    """The same entries under ``"next"``: ``"obs"`` -> ``("next", "obs")``."""
    return [("next", *(k if isinstance(k, tuple) else (k,))) for k in keys]


def unique_keys(keys: Iterable[NestedKey | None]) -> list[NestedKey]:
    """``keys`` in order, without repeats and ``None``s."""
    out: list[NestedKey] = []
    for key in keys:
        if key is not None and key not in out:
            out.append(key)
    return out


def reinit_(module: nn.Module) -> nn.Module:
    """Re-draw the parameters of every submodule that has ``reset_parameters``."""
    for m in module.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()
    return module


def q_ensemble(qvalue_network: nn.Module, n: int) -> nn.ModuleList:
    """``qvalue_network`` and ``n - 1`` independently re-initialised copies of it (twin Q).

    Raises:
        ValueError: for ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"num_qvalue_nets must be >= 1, got {n}")
    copies = [reinit_(copy.deepcopy(qvalue_network)) for _ in range(n - 1)]
    return nn.ModuleList([qvalue_network, *copies])
