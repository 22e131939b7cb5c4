"""Exploration wrappers: ``EGreedy``, ``AdditiveGaussian`` and ``OrnsteinUhlenbeck``.

Each is a ``tensordict.nn.TensorDictModuleBase`` placed after a policy (e.g. in a
``TensorDictSequential``). It perturbs the action key in place, but only when the
interaction type is ``RANDOM`` or unset; under
``set_interaction_type(InteractionType.DETERMINISTIC)`` (evaluation) it is a no-op.
``step(frames)`` anneals the exploration level linearly.

Action specs are duck-typed: only ``.shape``, ``.low``/``.high`` (bounded) and ``.n``
(categorical) are read, so plain numbers work as well.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, TensorDictModuleBase, interaction_type
from tensordict.utils import NestedKey

__all__ = ["AdditiveGaussian", "EGreedy", "OrnsteinUhlenbeck"]


def _exploring() -> bool:
    return interaction_type() in (None, InteractionType.RANDOM)


def _bounds(spec: Any, low: Any, high: Any) -> tuple[Any, Any]:
    if spec is not None:
        low = getattr(spec, "low", low)
        high = getattr(spec, "high", high)
    return low, high


class _Annealed(TensorDictModuleBase):
    """Linear annealing of one scalar from ``init`` to ``end`` over ``num_steps`` frames."""

    def __init__(self, init: float, end: float, num_steps: int) -> None:
        super().__init__()
        if num_steps < 0:
            raise ValueError(f"annealing_num_steps must be >= 0, got {num_steps}")
        self._init, self._end, self._num_steps = float(init), float(end), int(num_steps)
        self.register_buffer("_level", torch.tensor(float(init)))
        self.register_buffer("_frames", torch.tensor(0, dtype=torch.long))

    def step(self, frames: int = 1) -> None:
        """Advance the annealing schedule by ``frames`` frames."""
        self._frames += frames
        if self._num_steps == 0:
            self._level.fill_(self._end)
            return
        frac = min(1.0, self._frames.item() / self._num_steps)
        self._level.fill_(self._init + frac * (self._end - self._init))


class EGreedy(_Annealed):
    """Epsilon-greedy over discrete actions, annealed, and legal under action masks.

    With probability ``eps`` (independently per element, e.g. per agent) the action
    is replaced by a uniformly random *legal* action: the mask at
    ``action_mask_key`` is used when present. Works with index actions (``[..., ]``
    or ``[..., 1]``) and one-hot actions (``[..., n]``, ``one_hot=True``).

    Args:
        action_spec: optional spec with ``.n`` (or ``.space.n``); or pass ``n_actions``.
        n_actions: number of discrete actions.
        eps_init: initial epsilon.
        eps_end: final epsilon.
        annealing_num_steps: frames over which epsilon decays linearly.
        action_key: the action to perturb.
        action_mask_key: where to read the legal-action mask, if any.
        one_hot: whether actions are one-hot encoded (default: inferred from a
            ``OneHot`` spec, else index actions).

    Examples:
        >>> from tensordict import TensorDict
        >>> eg = EGreedy(n_actions=3, eps_init=1.0)
        >>> td = TensorDict(action=torch.zeros(100, dtype=torch.long),
        ...                 action_mask=torch.tensor([False, True, False]).expand(100, 3),
        ...                 batch_size=[100])
        >>> bool((eg(td)["action"] == 1).all())
        True
    """

    def __init__(
        self,
        action_spec: Any = None,
        *,
        n_actions: int | None = None,
        eps_init: float = 1.0,
        eps_end: float = 0.1,
        annealing_num_steps: int = 1000,
        action_key: NestedKey = "action",
        action_mask_key: NestedKey | None = "action_mask",
        one_hot: bool | None = None,
    ) -> None:
        super().__init__(eps_init, eps_end, annealing_num_steps)
        if one_hot is None:  # a OneHot spec implies one-hot actions
            one_hot = type(action_spec).__name__ == "OneHot"
        if n_actions is None and action_spec is not None:
            n_actions = getattr(action_spec, "n", None)
            if n_actions is None and hasattr(action_spec, "space"):
                n_actions = getattr(action_spec.space, "n", None)
        self.n_actions = n_actions
        self.action_key = action_key
        self.action_mask_key = action_mask_key
        self.one_hot = one_hot
        self.in_keys = [action_key] + ([action_mask_key] if action_mask_key else [])
        self.out_keys = [action_key]

    @property
    def eps(self) -> float:
        """The current epsilon."""
        return float(self._level)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not _exploring():
            return tensordict
        action = tensordict.get(self.action_key)
        mask = tensordict.get(self.action_mask_key, None) if self.action_mask_key else None
        n = mask.shape[-1] if mask is not None else self.n_actions
        if self.one_hot:
            n = action.shape[-1]
        if n is None:
            raise ValueError("EGreedy needs n_actions (or an action spec with .n) when no mask")
        index_shape = action.shape[:-1] if self.one_hot else action.shape
        # a trailing 1 is an index action's own dim ([..., 1]) unless the mask, one row of
        # n per action, says it is a batch dim (a group of one agent: [*B, 1])
        squeeze = (
            not self.one_hot
            and action.ndim > 0
            and action.shape[-1] == 1
            and n != 1
            and (mask is None or mask.shape[:-1] != action.shape)
        )
        if squeeze:
            index_shape = action.shape[:-1]
        # uniform over legal actions: argmax of uniform noise with illegal entries at -1
        noise = torch.rand(*index_shape, n, device=action.device)
        if mask is not None:
            noise = noise.masked_fill(~mask.expand_as(noise), -1.0)
        random_index = noise.argmax(-1)
        explore = torch.rand(index_shape, device=action.device) < self._level
        if self.one_hot:
            random_action = torch.nn.functional.one_hot(random_index, n).to(action.dtype)
            action = torch.where(explore.unsqueeze(-1), random_action, action)
        else:
            if squeeze:
                random_index, explore = random_index.unsqueeze(-1), explore.unsqueeze(-1)
            action = torch.where(explore, random_index.to(action.dtype), action)
        tensordict.set(self.action_key, action)
        return tensordict


class AdditiveGaussian(_Annealed):
    """Adds annealed Gaussian noise to a continuous action, then clips it to its bounds.

    Args:
        action_spec: optional spec with ``.low``/``.high`` (else pass ``low``/``high``).
        sigma_init: initial noise standard deviation.
        sigma_end: final noise standard deviation.
        annealing_num_steps: frames over which sigma decays linearly.
        low: lower action bound (number or tensor), if no spec.
        high: upper action bound.
        action_key: the action to perturb.

    Examples:
        >>> from tensordict import TensorDict
        >>> ag = AdditiveGaussian(low=-1.0, high=1.0, sigma_init=10.0)
        >>> td = ag(TensorDict(action=torch.zeros(50, 2), batch_size=[50]))
        >>> bool((td["action"].abs() <= 1).all())
        True
    """

    def __init__(
        self,
        action_spec: Any = None,
        *,
        sigma_init: float = 1.0,
        sigma_end: float = 0.1,
        annealing_num_steps: int = 1000,
        low: float | torch.Tensor | None = None,
        high: float | torch.Tensor | None = None,
        action_key: NestedKey = "action",
    ) -> None:
        super().__init__(sigma_init, sigma_end, annealing_num_steps)
        self.low, self.high = _bounds(action_spec, low, high)
        self.action_key = action_key
        self.in_keys = [action_key]
        self.out_keys = [action_key]

    @property
    def sigma(self) -> float:
        """The current noise standard deviation."""
        return float(self._level)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not _exploring():
            return tensordict
        action = tensordict.get(self.action_key)
        action = action + torch.randn_like(action) * self._level
        if self.low is not None or self.high is not None:
            action = action.clamp(_t(self.low, action), _t(self.high, action))
        tensordict.set(self.action_key, action)
        return tensordict


def _t(x: Any, like: torch.Tensor) -> torch.Tensor | None:
    return None if x is None else torch.as_tensor(x, dtype=like.dtype, device=like.device)


class OrnsteinUhlenbeck(_Annealed):
    """Temporally correlated Ornstein-Uhlenbeck noise (DDPG), kept in the TensorDict.

    ``n_{t+1} = n_t + theta * (mu - n_t) * dt + sigma * sqrt(dt) * N(0, 1)``. The previous
    noise is read from ``noise_key`` (reset to ``x0`` where ``is_init`` is True or the
    key is absent); the new noise is written to both ``noise_key`` and
    ``("next", noise_key)`` so it follows the trajectory when the env step is taken.

    Args:
        action_spec: optional spec with ``.low``/``.high``.
        theta: mean-reversion rate.
        mu: long-run mean.
        sigma: noise scale at the start (annealed to ``sigma_min``).
        dt: time step.
        x0: initial noise.
        sigma_min: final noise scale.
        annealing_num_steps: frames over which sigma decays.
        low: lower bound (if no spec).
        high: upper bound.
        action_key: the action to perturb.
        noise_key: where the noise state lives.
        is_init_key: the reset flag written by an ``InitTracker`` transform.

    Examples:
        >>> from tensordict import TensorDict
        >>> ou = OrnsteinUhlenbeck(low=-1.0, high=1.0)
        >>> td = ou(TensorDict(action=torch.zeros(4, 2), batch_size=[4]))
        >>> td["_ou_noise"].shape, td["next", "_ou_noise"].shape
        (torch.Size([4, 2]), torch.Size([4, 2]))
    """

    def __init__(
        self,
        action_spec: Any = None,
        *,
        theta: float = 0.15,
        mu: float = 0.0,
        sigma: float = 0.2,
        dt: float = 1e-2,
        x0: float = 0.0,
        sigma_min: float | None = None,
        annealing_num_steps: int = 1000,
        low: float | torch.Tensor | None = None,
        high: float | torch.Tensor | None = None,
        action_key: NestedKey = "action",
        noise_key: NestedKey = "_ou_noise",
        is_init_key: NestedKey = "is_init",
    ) -> None:
        super().__init__(sigma, sigma if sigma_min is None else sigma_min, annealing_num_steps)
        self.theta, self.mu, self.dt, self.x0 = theta, mu, dt, x0
        self.low, self.high = _bounds(action_spec, low, high)
        self.action_key, self.noise_key, self.is_init_key = action_key, noise_key, is_init_key
        self.in_keys = [action_key, noise_key, is_init_key]
        nk = noise_key if isinstance(noise_key, tuple) else (noise_key,)
        self.out_keys = [action_key, noise_key, ("next", *nk)]

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not _exploring():
            return tensordict
        action = tensordict.get(self.action_key)
        prev = tensordict.get(self.noise_key, None)
        if prev is None:
            prev = torch.full_like(action, self.x0)
        is_init = tensordict.get(self.is_init_key, None)
        if is_init is not None:
            while is_init.ndim < prev.ndim:
                is_init = is_init.unsqueeze(-1)
            prev = torch.where(is_init, torch.full_like(prev, self.x0), prev)
        noise = (
            prev
            + self.theta * (self.mu - prev) * self.dt
            + self._level * self.dt**0.5 * torch.randn_like(prev)
        )
        action = action + noise
        if self.low is not None or self.high is not None:
            action = action.clamp(_t(self.low, action), _t(self.high, action))
        tensordict.set(self.action_key, action)
        tensordict.set(self.noise_key, noise)
        tensordict.set(self.out_keys[2], noise)
        return tensordict
