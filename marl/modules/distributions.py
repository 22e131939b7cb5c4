"""Action distributions: ``TanhNormal``, ``MaskedCategorical`` and ``OneHotCategorical``.

They are plain ``torch.distributions`` objects, meant to be built by
``tensordict.nn.ProbabilisticTensorDictModule`` (pass ``distribution_class=``;
a mask is read from the TensorDict with ``in_keys={"logits": ..., "mask": ...}``).
Each exposes ``mode`` and ``deterministic_sample``, which tensordict uses under
``set_interaction_type(InteractionType.DETERMINISTIC)``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import distributions as D

__all__ = ["MaskedCategorical", "OneHotCategorical", "TanhNormal"]

_EMPTY = torch.Size()


def _as_tensor(x: float | torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(x, dtype=like.dtype, device=like.device)


class TanhNormal(D.Distribution):
    """A diagonal Normal squashed by ``tanh`` and rescaled to ``[low, high]``.

    ``log_prob`` sums over the last (action) dim and uses the stable
    ``log(1 - tanh(x)^2) = 2 * (log 2 - x - softplus(-2x))``. The pre-tanh value of the
    latest ``rsample``/``sample`` is cached, so the log-probability of a fresh sample
    never goes through ``atanh``; other values are clamped just inside the bounds.

    Args:
        loc: mean of the Normal, ``[..., action_dim]``.
        scale: standard deviation (positive), same shape.
        low: lower action bound (number or tensor broadcastable to ``loc``).
        high: upper action bound.
        eps: margin used to clamp values before ``atanh``.

    Examples:
        >>> d = TanhNormal(torch.zeros(3, 2), torch.ones(3, 2), low=-2.0, high=2.0)
        >>> a = d.rsample()
        >>> bool(((a > -2) & (a < 2)).all()), d.log_prob(a).shape, d.mode.abs().max().item()
        (True, torch.Size([3]), 0.0)
    """

    arg_constraints = {"loc": D.constraints.real, "scale": D.constraints.positive}
    has_rsample = True

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor,
        low: float | torch.Tensor = -1.0,
        high: float | torch.Tensor = 1.0,
        eps: float = 1e-6,
    ) -> None:
        self.loc, self.scale = torch.broadcast_tensors(loc, scale)
        # checked on numbers only: a tensor check would sync the device on every forward
        if isinstance(low, (int, float)) and isinstance(high, (int, float)) and high <= low:
            raise ValueError(f"TanhNormal needs high > low, got low={low}, high={high}")
        low, high = _as_tensor(low, self.loc), _as_tensor(high, self.loc)
        self._mid = (high + low) / 2
        self._half = (high - low) / 2
        self.low, self.high = low, high
        self.eps = eps
        self.base = D.Normal(self.loc, self.scale, validate_args=False)
        self._cache: tuple[torch.Tensor, torch.Tensor] | None = None
        super().__init__(self.loc.shape[:-1], self.loc.shape[-1:], validate_args=False)

    @D.constraints.dependent_property(is_discrete=False, event_dim=1)
    def support(self) -> D.constraints.Constraint:
        return D.constraints.independent(D.constraints.interval(self.low, self.high), 1)

    def _squash(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * self._half + self._mid

    def rsample(self, sample_shape: torch.Size = _EMPTY) -> torch.Tensor:
        # Normal.rsample's draw and math, but out of place (torch.randn, the same numbers
        # as Normal's in-place normal_): inside vmap(randomness="different") an in-place
        # draw on an unbatched tensor is refused, and the stacked updates of several runs
        # give each run its own draw that way
        shape = torch.Size(sample_shape) + self.loc.shape
        noise = torch.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        x = self.loc + noise * self.scale
        y = self._squash(x)
        self._cache = (y, x)
        return y

    def sample(self, sample_shape: torch.Size = _EMPTY) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        if self._cache is not None and value is self._cache[0]:
            x = self._cache[1]
        else:
            u = ((value - self._mid) / self._half).clamp(-1 + self.eps, 1 - self.eps)
            x = torch.atanh(u)
        log_det = 2 * (math.log(2) - x - F.softplus(-2 * x)) + torch.log(self._half)
        return (self.base.log_prob(x) - log_det).sum(-1)

    @property
    def mode(self) -> torch.Tensor:
        """``tanh(loc)`` rescaled: the deterministic action (the mode of the pre-tanh Normal)."""
        return self._squash(self.loc)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode

    @property
    def mean(self) -> torch.Tensor:
        # No closed form; tanh(loc) is the usual deterministic stand-in.
        return self.mode

    def entropy(self) -> torch.Tensor:
        raise NotImplementedError(
            "TanhNormal has no closed-form entropy; estimate it with -log_prob(rsample())"
        )


_ALL_MASKED = "every mask row must allow at least one action; got an all-False row"


def _masked_logits(
    logits: torch.Tensor | None, probs: torch.Tensor | None, mask: torch.Tensor | None
) -> torch.Tensor:
    if (logits is None) == (probs is None):
        raise ValueError("pass exactly one of logits or probs")
    if logits is None:
        logits = torch.log(probs)
    if mask is None:
        return logits
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor, got {mask.dtype}")
    if mask.shape[-1] != logits.shape[-1]:
        raise ValueError(
            f"mask last dim ({mask.shape[-1]}) must equal the number of actions "
            f"({logits.shape[-1]}); mask {tuple(mask.shape)}, logits {tuple(logits.shape)}"
        )
    if torch.compiler.is_compiling():
        # a host check would break the compiled graph: the same check, kept in the graph
        torch._assert_async(mask.any(-1).all(), _ALL_MASKED)
    elif torch._C._functorch.is_functorch_wrapped_tensor(mask):
        # inside vmap/grad (the stacked runs' update) no value can be read on the host;
        # these masks were stored at collection, where this check ran on them
        pass
    elif not bool(mask.any(-1).all()):
        raise ValueError(_ALL_MASKED)
    # a finite minimum keeps log-probs and entropies finite (0 * min = 0, not nan)
    return logits.masked_fill(~mask, torch.finfo(logits.dtype).min)


class _MaskedLogits:
    """The constructor the masked categoricals share: keeps ``mask`` and hands the
    torch distribution (next in the MRO) logits with the illegal actions masked out."""

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        probs: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        self.mask = mask
        super().__init__(logits=_masked_logits(logits, probs, mask), validate_args=validate_args)


class MaskedCategorical(_MaskedLogits, D.Categorical):
    """A categorical over action indices whose illegal actions have probability zero.

    Samples and the mode always satisfy ``mask``.

    Args:
        logits: unnormalized log-probabilities ``[..., n]``.
        probs: probabilities ``[..., n]`` (instead of logits).
        mask: bool ``[..., n]`` (broadcastable), True where the action is legal.

    Examples:
        >>> mask = torch.tensor([[False, True, True], [True, False, False]])
        >>> d = MaskedCategorical(logits=torch.tensor([[9.0, 0, 1], [0, 9, 9]]), mask=mask)
        >>> d.mode.tolist()
        [2, 0]
        >>> bool(mask.gather(-1, d.sample((100,)).T).all())
        True
    """

    @property
    def mode(self) -> torch.Tensor:
        return self.logits.argmax(-1)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode


class OneHotCategorical(_MaskedLogits, D.OneHotCategorical):
    """A one-hot categorical with an optional legal-action mask.

    ``rsample`` gives a straight-through sample (one-hot forward, softmax gradient).

    Args:
        logits: unnormalized log-probabilities ``[..., n]``.
        probs: probabilities (instead of logits).
        mask: bool ``[..., n]``, True where the action is legal.

    Examples:
        >>> d = OneHotCategorical(logits=torch.tensor([0.0, 5.0, 1.0]),
        ...                       mask=torch.tensor([True, False, True]))
        >>> d.mode.tolist()
        [0.0, 0.0, 1.0]
    """

    has_rsample = True

    @property
    def mode(self) -> torch.Tensor:
        idx = self.logits.argmax(-1)
        return F.one_hot(idx, self.logits.shape[-1]).to(self.logits.dtype)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode

    def rsample(self, sample_shape: torch.Size = _EMPTY) -> torch.Tensor:
        hard = self.sample(sample_shape)
        soft = self.probs.expand_as(hard)
        return hard + soft - soft.detach()
