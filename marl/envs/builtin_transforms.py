"""The built-in transforms: episode returns, step counting, dtype casts, normalization,
init tracking, and key exclusion/renaming. All are group-aware where it matters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from marl.envs.transforms import EnvSpecs, Transform
from marl.specs import Composite, NestedKey, TensorSpec, Unbounded

__all__ = [
    "DoubleToFloat",
    "ExcludeTransform",
    "InitTracker",
    "ObservationNorm",
    "RenameTransform",
    "RewardSum",
    "StepCounter",
]


def _as_key_list(keys: Any) -> list[NestedKey]:
    if keys is None:
        return []
    if isinstance(keys, (str, tuple)):
        return [keys]
    return list(keys)


def _t(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def _prefixes_with(spec: Composite, leaf: str) -> list[tuple[str, ...]]:
    """Prefixes (``()`` for the root) under which ``spec`` holds a leaf named ``leaf``."""
    return [
        _t(k)[:-1] for k in spec.keys(include_nested=True, leaves_only=True) if _t(k)[-1] == leaf
    ]


def _sibling(key: NestedKey, leaf: str) -> NestedKey:
    """``key`` with its last part replaced by ``leaf`` (a plain string at the root)."""
    prefix = _t(key)[:-1]
    return (*prefix, leaf) if prefix else leaf


def _broadcast(flag: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Broadcast an env-level ``[*B, 1]`` flag to a group's ``[*B, n_g, 1]``."""
    if flag.shape == shape:
        return flag
    while flag.dim() < len(shape):
        flag = flag.unsqueeze(-2)
    return flag.expand(shape)


def _with_dtype(spec: TensorSpec, dtype: torch.dtype) -> TensorSpec:
    meta = {
        k: (v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
        for k, v in spec._meta().items()
    }
    return type(spec)(shape=spec.shape, dtype=dtype, device=spec.device, **meta)


class RewardSum(Transform):
    """Sum rewards over the episode: ``(group, "episode_reward")`` beside each reward.

    One running sum per group and agent (shape of the reward, ``[*B, n_g, 1]``),
    reset to zero when the sub-env resets.

    Args:
        in_keys: reward keys to sum; all the env's reward keys by default.
        out_keys: where the sums go; ``episode_reward`` beside each reward by default.

    Examples:
        >>> from marl.envs import TransformedEnv
        >>> from marl.testing import MultiAgentFakeEnv
        >>> env = TransformedEnv(MultiAgentFakeEnv(num_envs=2), RewardSum())
        >>> td = env.rollout(4)
        >>> torch.allclose(td["next", "picker", "episode_reward"][:, -1],
        ...                td["next", "picker", "reward"].sum(1))
        True
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__()
        self._in_keys = _as_key_list(in_keys)
        self._out_keys = _as_key_list(out_keys)
        if self._out_keys and len(self._out_keys) != len(self._in_keys):
            raise ValueError(
                f"RewardSum got {len(self._in_keys)} in_keys but {len(self._out_keys)} out_keys"
            )
        self._pairs: list[tuple[NestedKey, NestedKey]] | None = None

    def _resolve(self, reward_spec: Composite) -> list[tuple[NestedKey, NestedKey]]:
        in_keys = self._in_keys or reward_spec.keys(include_nested=True, leaves_only=True)
        for k in in_keys:
            if k not in reward_spec:
                raise KeyError(f"RewardSum: {k!r} is not a reward key of the env")
        out_keys = self._out_keys or [_sibling(k, "episode_" + _t(k)[-1]) for k in in_keys]
        self._pairs = list(zip(in_keys, out_keys))
        self._shapes = {o: (reward_spec[i].shape, reward_spec[i].dtype) for i, o in self._pairs}
        return self._pairs

    def _get_pairs(self) -> list[tuple[NestedKey, NestedKey]]:
        if self._pairs is None:
            parent = self.parent
            if parent is None:
                raise RuntimeError("RewardSum needs in_keys when used outside an env")
            self._resolve(parent.reward_spec)
        return self._pairs  # type: ignore[return-value]

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        for in_key, out_key in self._resolve(specs.reward):
            r = specs.reward[in_key]
            specs.observation[out_key] = Unbounded(r.shape, dtype=r.dtype, device=r.device)
        return specs

    def step(self, td: TensorDictBase, next_td: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in self._get_pairs():
            reward = next_td.get(in_key)
            prev = td.get(out_key, None)
            next_td.set(out_key, reward + prev if prev is not None else reward.clone())
        return next_td

    def reset(self, td: TensorDictBase | None, reset_td: TensorDictBase) -> TensorDictBase:
        self._get_pairs()
        for out_key, (shape, dtype) in self._shapes.items():
            reset_td.set(out_key, torch.zeros(shape, dtype=dtype, device=reset_td.device))
        return reset_td

    def call(self, td: TensorDictBase) -> TensorDictBase:
        return td


class StepCounter(Transform):
    """Count steps per sub-env and truncate episodes at ``max_steps``.

    Writes ``"step_count"`` (``[*B, 1]`` int64). When the count reaches
    ``max_steps``, ``truncated`` and ``done`` are set at the root and in every
    group that has its own flags (broadcast over the agents).

    Args:
        max_steps: truncation horizon; ``None`` only counts.
        step_count_key: where the count goes.

    Examples:
        >>> from marl.envs import TransformedEnv
        >>> from marl.testing import SingleAgentFakeEnv
        >>> env = TransformedEnv(SingleAgentFakeEnv(3, max_steps=1000, p_terminate=0.0), StepCounter(4))
        >>> td = env.rollout(10)
        >>> td.shape, bool(td["next", "truncated"][:, -1].all())
        (torch.Size([3, 4]), True)
    """

    def __init__(
        self, max_steps: int | None = None, step_count_key: NestedKey = "step_count"
    ) -> None:
        super().__init__()
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be >= 1 or None, got {max_steps}")
        self.max_steps = max_steps
        self.step_count_key = step_count_key
        self._prefixes: list[tuple[str, ...]] | None = None

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        batch = specs.done.shape
        device = specs.done.device
        specs.observation[self.step_count_key] = Unbounded(
            (*batch, 1), dtype=torch.int64, device=device
        )
        self._prefixes = _prefixes_with(specs.done, "done")
        for prefix in self._prefixes:
            done = specs.done[(*prefix, "done")]
            if (*prefix, "truncated") not in specs.done:
                specs.done[(*prefix, "truncated")] = done.clone()
        return specs

    def reset(self, td: TensorDictBase | None, reset_td: TensorDictBase) -> TensorDictBase:
        batch = reset_td.batch_size
        reset_td.set(
            self.step_count_key, torch.zeros((*batch, 1), dtype=torch.int64, device=reset_td.device)
        )
        for prefix in self._get_prefixes():
            key = (*prefix, "truncated")
            if key not in reset_td.keys(True):
                reset_td.set(key, torch.zeros_like(reset_td.get((*prefix, "done"))))
        return reset_td

    def _get_prefixes(self) -> list[tuple[str, ...]]:
        if self._prefixes is None:
            owner = self.container
            if owner is None:
                raise RuntimeError("StepCounter must be registered in a TransformedEnv")
            owner.done_spec  # noqa: B018 -- computing the specs resolves the prefixes
        return self._prefixes  # type: ignore[return-value]

    def step(self, td: TensorDictBase, next_td: TensorDictBase) -> TensorDictBase:
        prev = td.get(self.step_count_key, None)
        if prev is None:
            raise KeyError(
                f"StepCounter: {self.step_count_key!r} is missing from the step input; "
                "reset the env through the TransformedEnv before stepping"
            )
        count = prev + 1
        next_td.set(self.step_count_key, count)
        prefixes = self._get_prefixes()
        if self.max_steps is None:
            for prefix in prefixes:
                key = (*prefix, "truncated")
                if next_td.get(key, None) is None:
                    next_td.set(key, torch.zeros_like(next_td.get((*prefix, "done"))))
            return next_td
        limit = count >= self.max_steps
        for prefix in prefixes:
            done = next_td.get((*prefix, "done"))
            hit = _broadcast(limit, done.shape)
            trunc = next_td.get((*prefix, "truncated"), None)
            next_td.set((*prefix, "truncated"), hit if trunc is None else trunc | hit)
            next_td.set((*prefix, "done"), done | hit)
        return next_td


class DoubleToFloat(Transform):
    """Cast float64 observations and rewards to float32, and float32 actions back.

    Args:
        in_keys: keys to cast; every float64 observation/reward leaf by default.

    Examples:
        >>> from marl.envs import TransformedEnv
        >>> from marl.testing import SingleAgentFakeEnv
        >>> env = TransformedEnv(SingleAgentFakeEnv(dtype=torch.float64), DoubleToFloat())
        >>> env.rollout(2)["observation"].dtype
        torch.float32
    """

    def __init__(self, in_keys: Sequence[NestedKey] | None = None) -> None:
        super().__init__()
        self._in_keys = _as_key_list(in_keys)
        self._keys: list[NestedKey] = list(self._in_keys)
        self._action_keys: list[NestedKey] = []

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        keys = []
        for comp in (specs.observation, specs.reward):
            for k, s in comp.items(include_nested=True, leaves_only=True):
                if s.dtype == torch.float64 and (not self._in_keys or k in self._in_keys):
                    comp[k] = _with_dtype(s, torch.float32)
                    keys.append(k)
        self._keys = keys
        self._action_keys = []
        for k, s in specs.action.items(include_nested=True, leaves_only=True):
            if s.dtype == torch.float64:
                specs.action[k] = _with_dtype(s, torch.float32)
                self._action_keys.append(k)
        return specs

    def call(self, td: TensorDictBase) -> TensorDictBase:
        for k in self._keys:
            v = td.get(k, None)
            if v is not None and v.dtype == torch.float64:
                td.set(k, v.float())
        return td

    def inv(self, td: TensorDictBase) -> TensorDictBase:
        if not self._action_keys:
            return td
        td = td.copy()
        for k in self._action_keys:
            td.set(k, td.get(k).double())
        return td


class _Stats(nn.Module):
    """``loc`` and ``scale`` of one key, as buffers (``None`` until known)."""

    def __init__(self, loc: torch.Tensor | None, scale: torch.Tensor | None) -> None:
        super().__init__()
        self.register_buffer("loc", loc)
        self.register_buffer("scale", scale)

    def _load_from_state_dict(self, state_dict: Any, prefix: str, *args: Any) -> None:
        # Buffers still None are skipped by nn.Module's loader: give them a tensor
        # to copy into, so a fresh transform loads saved stats.
        for name in ("loc", "scale"):
            saved = state_dict.get(prefix + name)
            if saved is not None and getattr(self, name) is None:
                setattr(self, name, torch.empty_like(saved))
        super()._load_from_state_dict(state_dict, prefix, *args)


def _as_stat(value: Any) -> torch.Tensor | None:
    return None if value is None else torch.as_tensor(value, dtype=torch.float32)


class ObservationNorm(Transform):
    """Affine observation normalization: ``(obs - loc) / scale``, per key.

    Each key in ``in_keys`` has its own ``loc``/``scale``, so one transform
    can normalize several groups whose observations differ in shape. The
    statistics are buffers (``stats.<i>.loc``/``stats.<i>.scale``, ``i`` the
    key's position in ``in_keys``): they travel with ``state_dict()``.

    :meth:`init_stats` floors the scale at ``min_scale`` (default ``1e-2``).
    A feature that is constant in the sample (a LIDAR reading with nothing in
    range, a velocity that is zero at reset) has a standard deviation of 0;
    dividing by a tiny epsilon would turn its first change into a huge input
    (VMAS navigation reached 2.6e5 with a floor of 1e-6). Observations are
    usually of order 1, so the floor caps the amplification of such features at
    100x while leaving every feature that does vary above 1e-2 untouched.

    Args:
        loc: the offset: a float or tensor shared by every key, or a mapping
            ``{key: value}``. Each must broadcast to the key's observation
            shape (``[*B, n_g, *obs]``) without changing it.
        scale: the scale, the same way.
        in_keys: observation keys; ``["observation"]`` by default.
        standard_normal: ``(obs - loc) / scale`` when True, ``obs * scale + loc`` otherwise.
        min_scale: lower bound of the scale set by :meth:`init_stats` (> 0).

    Examples:
        >>> from marl.envs import TransformedEnv
        >>> from marl.testing import MultiAgentFakeEnv
        >>> keys = [("walker", "observation"), ("picker", "observation")]
        >>> env = TransformedEnv(MultiAgentFakeEnv(num_envs=8), ObservationNorm(in_keys=keys))
        >>> env.transform[0].init_stats(num_iter=50)
        >>> [tuple(env.transform[0].stats_of(k)[1].shape) for k in keys]
        [(2, 6), (3, 4)]
        >>> obs = env.rollout(50, break_when_any_done=False)["picker", "observation"]
        >>> bool(obs.mean().abs() < 0.5)
        True
    """

    def __init__(
        self,
        loc: float | torch.Tensor | Mapping[NestedKey, Any] | None = None,
        scale: float | torch.Tensor | Mapping[NestedKey, Any] | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        standard_normal: bool = True,
        min_scale: float = 1e-2,
    ) -> None:
        super().__init__()
        self.in_keys = _as_key_list(in_keys) or ["observation"]
        if not min_scale > 0:
            raise ValueError(f"min_scale must be > 0, got {min_scale}")
        self.standard_normal = standard_normal
        self.min_scale = float(min_scale)
        locs, scales = self._per_key("loc", loc), self._per_key("scale", scale)
        self.stats = nn.ModuleList([_Stats(loc_k, scale_k) for loc_k, scale_k in zip(locs, scales)])

    def _per_key(self, name: str, value: Any) -> list[torch.Tensor | None]:
        if not isinstance(value, Mapping):
            return [_as_stat(value)] * len(self.in_keys)
        given = {_t(k): v for k, v in value.items()}
        unknown = sorted(set(given) - {_t(k) for k in self.in_keys})
        if unknown:
            raise ValueError(
                f"ObservationNorm: {name} has keys not in in_keys: {unknown}; "
                f"in_keys: {self.in_keys}"
            )
        return [_as_stat(given.get(_t(k))) for k in self.in_keys]

    def _index(self, key: NestedKey) -> int:
        for i, k in enumerate(self.in_keys):
            if _t(k) == _t(key):
                return i
        raise KeyError(f"ObservationNorm: {key!r} is not one of its in_keys {self.in_keys}")

    def stats_of(self, key: NestedKey) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """``(loc, scale)`` of one of the ``in_keys``."""
        module = self.stats[self._index(key)]
        return module.loc, module.scale

    def _only(self, name: str) -> torch.Tensor | None:
        if len(self.in_keys) != 1:
            raise AttributeError(
                f"ObservationNorm has {len(self.in_keys)} in_keys, each with its own {name}: "
                "use stats_of(key)"
            )
        return getattr(self.stats[0], name)

    @property
    def loc(self) -> torch.Tensor | None:
        """The offset, when there is a single key (else use :meth:`stats_of`)."""
        return self._only("loc")

    @property
    def scale(self) -> torch.Tensor | None:
        """The scale, when there is a single key (else use :meth:`stats_of`)."""
        return self._only("scale")

    @property
    def initialized(self) -> bool:
        return all(m.loc is not None and m.scale is not None for m in self.stats)

    def init_stats(self, num_iter: int = 1000, reduce_dim: Sequence[int] | None = None) -> None:
        """Set each key's ``loc``/``scale`` to the mean/std of a random-action rollout.

        The scale is floored at ``min_scale`` (see the class docstring).

        Args:
            num_iter: rollout length (sub-envs reset as they end).
            reduce_dim: dims of the rolled-out ``[*B, T, ...]`` tensors to reduce;
                all batch and time dims by default (one statistic per agent and feature).
        """
        parent = self.parent
        if parent is None:
            raise RuntimeError("ObservationNorm.init_stats needs the transform to be in an env")
        data = parent.rollout(num_iter, break_when_any_done=False)
        dims = tuple(reduce_dim) if reduce_dim is not None else tuple(range(data.ndim))
        for key, module in zip(self.in_keys, self.stats):
            obs = data.get(key).float()
            module.loc = obs.mean(dims).to(parent.device)
            module.scale = obs.std(dims).clamp_min(self.min_scale).to(parent.device)
        self._specs_changed()

    def call(self, td: TensorDictBase) -> TensorDictBase:
        if not self.initialized:
            raise RuntimeError(
                "ObservationNorm has no loc/scale: pass them or call init_stats() first"
            )
        for k, module in zip(self.in_keys, self.stats):
            v = td.get(k, None)
            if v is not None:
                loc, scale = module.loc, module.scale
                td.set(k, (v - loc) / scale if self.standard_normal else v * scale + loc)
        return td

    def transform_observation_spec(self, spec: Composite) -> Composite:
        for k, module in zip(self.in_keys, self.stats):
            if k not in spec:
                raise KeyError(f"ObservationNorm: {k!r} is not an observation key")
            s = spec[k]
            for name in ("loc", "scale"):
                stat = getattr(module, name)
                if stat is None:
                    continue
                try:
                    fits = torch.broadcast_shapes(stat.shape, s.shape) == s.shape
                except RuntimeError:
                    fits = False
                if not fits:
                    raise ValueError(
                        f"ObservationNorm: {name} of shape {tuple(stat.shape)} does not broadcast "
                        f"to the observation {k!r} of shape {tuple(s.shape)}; give each key its "
                        f"own value ({name}={{key: value}}) or call init_stats()"
                    )
            dtype = s.dtype if s.dtype.is_floating_point else torch.float32
            spec[k] = Unbounded(s.shape, dtype=dtype, device=s.device)
        return spec


class InitTracker(Transform):
    """Flag the first step of each episode: ``"is_init"`` (``[*B, 1]`` bool).

    Recurrent modules read it to reset their hidden state.

    Examples:
        >>> from marl.envs import TransformedEnv
        >>> from marl.testing import SingleAgentFakeEnv
        >>> env = TransformedEnv(SingleAgentFakeEnv(2, p_terminate=0.0), InitTracker())
        >>> env.rollout(3)["is_init"][:, :, 0].tolist()
        [[True, False, False], [True, False, False]]
    """

    def __init__(self, init_key: NestedKey = "is_init") -> None:
        super().__init__()
        self.init_key = init_key

    def transform_observation_spec(self, spec: Composite) -> Composite:
        spec[self.init_key] = Unbounded((*spec.shape, 1), dtype=torch.bool, device=spec.device)
        return spec

    def reset(self, td: TensorDictBase | None, reset_td: TensorDictBase) -> TensorDictBase:
        shape = (*reset_td.batch_size, 1)
        reset_td.set(self.init_key, torch.ones(shape, dtype=torch.bool, device=reset_td.device))
        return reset_td

    def step(self, td: TensorDictBase, next_td: TensorDictBase) -> TensorDictBase:
        shape = (*next_td.batch_size, 1)
        next_td.set(self.init_key, torch.zeros(shape, dtype=torch.bool, device=next_td.device))
        return next_td


class ExcludeTransform(Transform):
    """Drop observation/reward/state keys from the env's outputs and specs.

    Examples:
        >>> from marl.envs import TransformedEnv
        >>> from marl.testing import MultiAgentFakeEnv
        >>> env = TransformedEnv(MultiAgentFakeEnv(), ExcludeTransform("state"))
        >>> "state" in env.observation_spec
        False
    """

    def __init__(self, *keys: NestedKey) -> None:
        super().__init__()
        if not keys:
            raise ValueError("ExcludeTransform needs at least one key")
        self.keys = list(keys)

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        for k in self.keys:
            if k in specs.done or k in specs.action:
                raise ValueError(
                    f"ExcludeTransform cannot drop {k!r}: done and action keys are needed"
                )
            for comp in (specs.observation, specs.reward, specs.state):
                if k in comp:
                    del comp[k]
        return specs

    def call(self, td: TensorDictBase) -> TensorDictBase:
        return td.exclude(*self.keys)


class RenameTransform(Transform):
    """Rename output keys (observations, rewards) and, optionally, action keys.

    Args:
        in_keys: keys the env writes.
        out_keys: their new names.
        in_keys_inv: action keys the env reads.
        out_keys_inv: the names the policy writes them under.

    Examples:
        >>> from marl.envs import TransformedEnv
        >>> from marl.testing import SingleAgentFakeEnv
        >>> env = TransformedEnv(SingleAgentFakeEnv(), RenameTransform(["observation"], ["obs"]))
        >>> "obs" in env.rollout(2).keys()
        True
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey],
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__()
        self.in_keys, self.out_keys = _as_key_list(in_keys), _as_key_list(out_keys)
        self.in_keys_inv = _as_key_list(in_keys_inv)
        self.out_keys_inv = _as_key_list(out_keys_inv)
        if len(self.in_keys) != len(self.out_keys):
            raise ValueError(
                f"RenameTransform got {len(self.in_keys)} in_keys but {len(self.out_keys)} out_keys"
            )
        if len(self.in_keys_inv) != len(self.out_keys_inv):
            raise ValueError(
                f"RenameTransform got {len(self.in_keys_inv)} in_keys_inv but "
                f"{len(self.out_keys_inv)} out_keys_inv"
            )

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        for old, new in zip(self.in_keys, self.out_keys):
            for comp in (specs.observation, specs.reward):
                if old in comp:
                    comp[new] = comp[old]
                    del comp[old]
                    break
            else:
                raise KeyError(f"RenameTransform: {old!r} is not an observation or reward key")
        for old, new in zip(self.in_keys_inv, self.out_keys_inv):
            if old not in specs.action:
                raise KeyError(f"RenameTransform: {old!r} is not an action key")
            specs.action[new] = specs.action[old]
            del specs.action[old]
        return specs

    def call(self, td: TensorDictBase) -> TensorDictBase:
        for old, new in zip(self.in_keys, self.out_keys):
            if old in td.keys(True):
                td.rename_key_(old, new)
        return td

    def inv(self, td: TensorDictBase) -> TensorDictBase:
        if not self.in_keys_inv:
            return td
        td = td.copy()
        for old, new in zip(self.in_keys_inv, self.out_keys_inv):
            td.set(old, td.get(new))
        return td
