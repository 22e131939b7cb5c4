"""Transforms: a list of data-and-spec changes applied on top of an env.

A :class:`TransformedEnv` wraps a base env and a :class:`Compose` of
transforms. Each transform changes the data the env returns (``step``,
``reset``), the actions it is given (``inv``), and the specs that describe
them (``transform_specs``), so ``check_env_specs`` holds for the whole stack.

Registration runs both ways: the env owns its transforms, and each transform
reaches the env as it stands *before* it through ``transform.parent`` (useful
to read the reward spec, or to roll out for statistics).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from marl.envs.common import EnvBase
from marl.specs import Composite, NestedKey

__all__ = ["Compose", "EnvSpecs", "Transform", "TransformedEnv"]


@dataclass
class EnvSpecs:
    """The five specs of an env, handed to :meth:`Transform.transform_specs`."""

    observation: Composite
    action: Composite
    reward: Composite
    done: Composite
    state: Composite

    def clone(self) -> EnvSpecs:
        return EnvSpecs(
            self.observation.clone(),
            self.action.clone(),
            self.reward.clone(),
            self.done.clone(),
            self.state.clone(),
        )


class Transform(nn.Module):
    """Base class of transforms.

    Override what the transform needs:

    - ``call(td)``: change one TensorDict of env outputs. By default both
      ``step`` and ``reset`` use it, and so does ``forward`` (replay buffers).
    - ``step(td, next_td)``: change the outputs of a step; ``td`` is the input
      (the previous root, with the actions).
    - ``reset(td, reset_td)``: change the outputs of a reset; ``td`` is the input
      (``None`` or with a ``"_reset"`` mask).
    - ``inv(td)``: change the inputs (actions) before the base env reads them.
      It must not modify ``td`` in place: the policy's actions are data.
    - ``transform_specs(specs)`` or the per-spec hooks
      ``transform_observation_spec`` & co.

    Examples:
        >>> from marl.envs import TransformedEnv, StepCounter
        >>> from marl.testing import SingleAgentFakeEnv
        >>> env = TransformedEnv(SingleAgentFakeEnv(num_envs=2), StepCounter(max_steps=5))
        >>> env.transform[0].parent is not None
        True
    """

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "_owner_ref", None)

    # --------------------------------------------------------- data hooks
    def call(self, td: TensorDictBase) -> TensorDictBase:
        return td

    def step(self, td: TensorDictBase, next_td: TensorDictBase) -> TensorDictBase:
        return self.call(next_td)

    def reset(self, td: TensorDictBase | None, reset_td: TensorDictBase) -> TensorDictBase:
        return self.call(reset_td)

    def inv(self, td: TensorDictBase) -> TensorDictBase:
        return td

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        """Apply ``call`` to ``td`` and to ``td["next"]`` when present (offline data)."""
        nxt = td.get("next", None)
        td = self.call(td)
        if nxt is not None:
            td.set("next", self.call(nxt))
        return td

    # --------------------------------------------------------- spec hooks
    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        specs.observation = self.transform_observation_spec(specs.observation)
        specs.action = self.transform_action_spec(specs.action)
        specs.reward = self.transform_reward_spec(specs.reward)
        specs.done = self.transform_done_spec(specs.done)
        specs.state = self.transform_state_spec(specs.state)
        return specs

    def transform_observation_spec(self, spec: Composite) -> Composite:
        return spec

    def transform_action_spec(self, spec: Composite) -> Composite:
        return spec

    def transform_reward_spec(self, spec: Composite) -> Composite:
        return spec

    def transform_done_spec(self, spec: Composite) -> Composite:
        return spec

    def transform_state_spec(self, spec: Composite) -> Composite:
        return spec

    # --------------------------------------------------------- registration
    def _set_owner(self, owner: TransformedEnv | None) -> None:
        if owner is not None:
            current = self._owner_ref() if self._owner_ref is not None else None
            if current is not None and current is not owner:
                raise RuntimeError(
                    f"{type(self).__name__} already belongs to another env; use a fresh instance"
                )
        object.__setattr__(self, "_owner_ref", None if owner is None else weakref.ref(owner))

    @property
    def parent(self) -> EnvBase | None:
        """The env as it stands before this transform (base env + earlier transforms)."""
        owner = self._owner_ref() if self._owner_ref is not None else None
        if owner is None:
            return None
        return owner._env_before(self)

    @property
    def container(self) -> TransformedEnv | None:
        """The :class:`TransformedEnv` that holds this transform."""
        return self._owner_ref() if self._owner_ref is not None else None

    def _specs_changed(self) -> None:
        owner = self.container
        if owner is not None:
            owner._invalidate()

    def extra_repr(self) -> str:
        return ""


class Compose(Transform):
    """A list of transforms applied in order (``inv`` in reverse order).

    Examples:
        >>> from marl.envs import Compose, InitTracker, StepCounter
        >>> t = Compose(StepCounter(10), InitTracker())
        >>> len(t)
        2
    """

    def __init__(self, *transforms: Transform) -> None:
        super().__init__()
        for t in transforms:
            if not isinstance(t, Transform):
                raise TypeError(f"Compose takes Transform instances, got {type(t).__name__}")
        self.transforms = nn.ModuleList(transforms)

    def call(self, td: TensorDictBase) -> TensorDictBase:
        for t in self.transforms:
            td = t.call(td)
        return td

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        for t in self.transforms:
            td = t(td)
        return td

    def step(self, td: TensorDictBase, next_td: TensorDictBase) -> TensorDictBase:
        for t in self.transforms:
            next_td = t.step(td, next_td)
        return next_td

    def reset(self, td: TensorDictBase | None, reset_td: TensorDictBase) -> TensorDictBase:
        for t in self.transforms:
            reset_td = t.reset(td, reset_td)
        return reset_td

    def inv(self, td: TensorDictBase) -> TensorDictBase:
        for t in reversed(self.transforms):
            td = t.inv(td)
        return td

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        for t in self.transforms:
            specs = t.transform_specs(specs)
        return specs

    def __getitem__(self, index: int) -> Transform:
        return self.transforms[index]

    def __len__(self) -> int:
        return len(self.transforms)

    def __iter__(self) -> Iterator[Transform]:
        return iter(self.transforms)


class TransformedEnv(EnvBase):
    """An env with a list of transforms on top.

    Args:
        env: the base env.
        transform: a transform, a :class:`Compose`, a list of transforms, or None.

    Examples:
        >>> from marl.envs import TransformedEnv, RewardSum, StepCounter, check_env_specs
        >>> from marl.testing import MultiAgentFakeEnv
        >>> env = TransformedEnv(MultiAgentFakeEnv(num_envs=4), [RewardSum(), StepCounter(20)])
        >>> td = env.rollout(3)
        >>> td["walker", "episode_reward"].shape
        torch.Size([4, 3, 2, 1])
        >>> check_env_specs(env)
    """

    def __init__(
        self,
        env: EnvBase,
        transform: Transform | Sequence[Transform] | None = None,
        *,
        _owned: bool = True,
    ) -> None:
        if not isinstance(env, EnvBase):
            raise TypeError(f"TransformedEnv wraps an EnvBase, got {type(env).__name__}")
        self.base_env = env
        self.batch_size = env.batch_size
        self.device = env.device
        self.group_map = env.group_map
        self.is_closed = False
        if transform is None:
            transform = Compose()
        elif isinstance(transform, Sequence):
            transform = Compose(*transform)
        elif not isinstance(transform, Compose):
            transform = Compose(transform)
        self.transform = transform
        self._owned = _owned
        if _owned:
            for t in self.transform:
                t._set_owner(self)
        self._specs: EnvSpecs | None = None

    @property
    def check_actions(self) -> bool:  # type: ignore[override]
        """The base env's switch: actions are checked once, against this env's specs."""
        return self.base_env.check_actions

    @check_actions.setter
    def check_actions(self, value: bool) -> None:
        self.base_env.check_actions = bool(value)

    @property
    def partial_resets_on_device(self) -> bool:  # type: ignore[override]
        """The base env's: the built-in transforms reset with tensor operations only."""
        return self.base_env.partial_resets_on_device

    # --------------------------------------------------------- specs
    def _invalidate(self) -> None:
        self._specs = None
        self._done_groups_cache = None

    def _all_specs(self) -> EnvSpecs:
        if self._specs is None:
            base = self.base_env
            specs = EnvSpecs(
                base.observation_spec,
                base.action_spec,
                base.reward_spec,
                base.done_spec,
                base.state_spec,
            ).clone()
            self._specs = self.transform.transform_specs(specs)
        return self._specs

    @property
    def observation_spec(self) -> Composite:  # type: ignore[override]
        return self._all_specs().observation

    @property
    def action_spec(self) -> Composite:  # type: ignore[override]
        return self._all_specs().action

    @property
    def reward_spec(self) -> Composite:  # type: ignore[override]
        return self._all_specs().reward

    @property
    def done_spec(self) -> Composite:  # type: ignore[override]
        return self._all_specs().done

    @property
    def state_spec(self) -> Composite:  # type: ignore[override]
        return self._all_specs().state

    # --------------------------------------------------------- transforms
    def append_transform(self, transform: Transform) -> TransformedEnv:
        """Add a transform at the end. Returns ``self``."""
        return self.insert_transform(len(self.transform), transform)

    def insert_transform(self, index: int, transform: Transform) -> TransformedEnv:
        """Insert a transform at ``index`` (negative indices count from the end)."""
        if not isinstance(transform, Transform):
            raise TypeError(f"expected a Transform, got {type(transform).__name__}")
        n = len(self.transform)
        if not -n - 1 <= index <= n:
            raise IndexError(f"insert index {index} out of range for {n} transforms")
        transform._set_owner(self)
        items = list(self.transform.transforms)
        items.insert(index if index >= 0 else n + 1 + index, transform)
        self.transform.transforms = nn.ModuleList(items)
        self._invalidate()
        return self

    def _env_before(self, transform: Transform) -> EnvBase:
        items = list(self.transform.transforms)
        for i, t in enumerate(items):
            if t is transform:
                if i == 0:
                    return self.base_env
                return TransformedEnv(self.base_env, Compose(*items[:i]), _owned=False)
        raise RuntimeError("transform is not registered in this env")

    # --------------------------------------------------------- env API
    def _reset_proc(self, td: TensorDictBase | None) -> TensorDictBase:
        if self._specs is None:
            self._all_specs()  # transforms resolve their keys from the specs
        out = self.base_env._reset_proc(td)
        return self.transform.reset(td, out)

    def _step_proc(self, td: TensorDictBase) -> TensorDictBase:
        if self._specs is None:
            self._all_specs()
        base_td = self.transform.inv(td)
        out = self.base_env._step_proc(base_td)
        return self.transform.step(td, out)

    def set_seed(self, seed: int | None) -> int | None:
        """Seed the base env, whose generator also draws this env's random actions."""
        return self.base_env.set_seed(seed)

    def _set_seed(self, seed: int | None) -> None:
        self.base_env.set_seed(seed)

    @property
    def _rng(self) -> torch.Generator | None:
        # Random actions come from the base env's generator, which the task's seed
        # seeded when the base env was built; a generator of our own would be
        # unseeded (torch's global stream) unless set_seed were called on this object.
        return getattr(self.base_env, "_rng", None)

    def close(self) -> None:
        if self._owned:
            self.base_env.close()
        self.is_closed = True

    @property
    def episode_metrics(self) -> Mapping[str, NestedKey]:  # type: ignore[override]
        """The base env's (transforms keep its root entries)."""
        return self.base_env.episode_metrics

    @property
    def turn_based(self) -> bool:  # type: ignore[override]
        """The base env's (a class attribute of EnvBase, so not reached by __getattr__)."""
        return self.base_env.turn_based

    def __getattr__(self, name: str) -> Any:
        # Reached only for attributes TransformedEnv lacks: forward to the base
        # env, so wrapper-specific helpers (render, scenario, ...) stay usable.
        if name.startswith("_") or name == "base_env":
            raise AttributeError(name)
        return getattr(self.base_env, name)

    def __repr__(self) -> str:
        names = ", ".join(type(t).__name__ for t in self.transform)
        return f"TransformedEnv({self.base_env!r}, [{names}])"
