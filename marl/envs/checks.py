"""The public checkers: `check_env_specs` (every env and transform must pass it) and
`check_serial_arrays` (every :class:`~marl.envs.HostArrayEnv`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from marl.envs.common import EnvBase
from marl.specs import Composite, NestedKey, TensorSpec

__all__ = ["EnvSpecError", "check_env_specs", "check_serial_arrays"]


class EnvSpecError(AssertionError):
    """Raised by :func:`check_env_specs`; the message lists every mismatch."""


def _fmt(key: Any) -> str:
    return repr(key if isinstance(key, str) or len(key) > 1 else key[0])


def _check_leaves(
    problems: list[str],
    where: str,
    td: TensorDictBase,
    spec: Composite,
    prefix: tuple[str, ...],
    extra_dims: tuple[int, ...],
    check_domain: bool,
) -> None:
    for key, leaf in spec.items(include_nested=True, leaves_only=True):
        full = (*prefix, *((key,) if isinstance(key, str) else key))
        value = td.get(full, None)
        if value is None:
            problems.append(f"{where}: key {_fmt(full)} is in the spec but missing from the data")
            continue
        _check_value(problems, where, full, value, leaf, extra_dims, check_domain)


def _check_value(
    problems: list[str],
    where: str,
    key: NestedKey,
    value: torch.Tensor,
    spec: TensorSpec,
    extra_dims: tuple[int, ...],
    check_domain: bool,
) -> None:
    expected_shape = torch.Size(_insert_time(spec.shape, extra_dims))
    what = []
    if value.shape != expected_shape:
        what.append(f"shape {tuple(value.shape)} != spec {tuple(expected_shape)}")
    if value.dtype != spec.dtype:
        what.append(f"dtype {value.dtype} != spec {spec.dtype}")
    if value.device != spec.device:
        what.append(f"device {value.device} != spec {spec.device}")
    if not what and check_domain and not extra_dims and not spec.is_in(value):
        what.append("values outside the spec's domain")
    if what:
        problems.append(f"{where}: key {_fmt(key)}: " + "; ".join(what))


def _insert_time(shape: torch.Size, extra_dims: tuple[int, ...]) -> tuple[int, ...]:
    # extra_dims = (n_batch, T): the rollout's time dim sits right after the env batch dims.
    if not extra_dims:
        return tuple(shape)
    n_batch, t = extra_dims
    return (*shape[:n_batch], t, *shape[n_batch:])


def check_env_specs(
    env: EnvBase, steps: int = 3, seed: int | None = 0, check_actions: bool = True
) -> None:
    """Roll the env out and check every key, shape, dtype and device against its specs.

    It checks the reset output, then a random-action rollout of ``steps``
    steps (sub-envs that end are reset): observations and done flags at the
    root and under ``"next"``, actions at the root, rewards under ``"next"``,
    and that no undeclared key appears.

    Args:
        env: the env to check.
        steps: rollout length.
        seed: seed applied first (``None`` to leave the env's seed alone).
        check_actions: turn the env's action checks on during the check (see
            :mod:`marl.envs.action_checks`); the env's own setting is restored after.

    Raises:
        EnvSpecError: listing every mismatch, one per line.

    Examples:
        >>> from marl.testing import MultiAgentFakeEnv
        >>> check_env_specs(MultiAgentFakeEnv(num_envs=2))
    """
    previous = env.check_actions
    env.check_actions = check_actions
    try:
        _check_env_specs(env, steps, seed)
    finally:
        env.check_actions = previous


def _check_env_specs(env: EnvBase, steps: int, seed: int | None) -> None:
    if seed is not None:
        env.set_seed(seed)
    problems: list[str] = []
    obs_done = Composite(shape=env.batch_size)
    obs_done.update(env.observation_spec.clone())
    obs_done.update(env.done_spec.clone())
    obs_done.update(env.state_spec.clone())

    reset_td = env.reset()
    if reset_td.batch_size != env.batch_size:
        problems.append(
            f"reset: batch size {tuple(reset_td.batch_size)} != env batch size "
            f"{tuple(env.batch_size)}"
        )
    _check_leaves(problems, "reset", reset_td, obs_done, (), (), True)
    for flag in env.done_keys:
        value = reset_td.get(flag, None)
        if value is not None and value.dtype == torch.bool and bool(value.any()):
            problems.append(f"reset: done flag {_fmt(flag)} is True right after reset")

    data = env.rollout(steps, break_when_any_done=False)
    n_b = len(env.batch_size)
    t = data.shape[n_b] if data.ndim > n_b else 0
    if tuple(data.batch_size) != (*env.batch_size, t) or t != steps:
        problems.append(
            f"rollout: batch size {tuple(data.batch_size)} != expected {(*env.batch_size, steps)}"
        )
    else:
        dims = (n_b, t)
        _check_leaves(problems, "rollout root", data, obs_done, (), dims, False)
        _check_leaves(problems, "rollout root", data, env.action_spec, (), dims, False)
        _check_leaves(problems, "rollout next", data, obs_done, ("next",), dims, False)
        _check_leaves(problems, "rollout next", data, env.reward_spec, ("next",), dims, False)
        known_root = set(_norm_keys(obs_done)) | set(_norm_keys(env.action_spec))
        known_next = set(_norm_keys(obs_done)) | set(_norm_keys(env.reward_spec))
        for key in data.keys(include_nested=True, leaves_only=True):
            key_t = (key,) if isinstance(key, str) else tuple(key)
            if key_t[0] == "next":
                if key_t[1:] not in known_next:
                    problems.append(f"rollout next: key {_fmt(key_t)} is not declared in any spec")
            elif key_t not in known_root:
                problems.append(f"rollout root: key {_fmt(key_t)} is not declared in any spec")
        # Actions must lie in their spec's domain (bounds, legal masks) at every step.
        for i in range(t):
            step_td = data[(slice(None),) * n_b + (i,)]
            for key, leaf in env.action_spec.items(include_nested=True, leaves_only=True):
                if not leaf.is_in(step_td.get(key)):
                    problems.append(f"rollout: action {_fmt(key)} outside its spec at step {i}")
    if problems:
        raise EnvSpecError(
            f"{type(env).__name__} does not match its specs:\n  - " + "\n  - ".join(problems)
        )


def _norm_keys(spec: Composite) -> list[tuple[str, ...]]:
    return [
        (k,) if isinstance(k, str) else tuple(k)
        for k in spec.keys(include_nested=True, leaves_only=True)
    ]


def check_serial_arrays(
    create_env_fn: Callable[..., EnvBase],
    create_env_kwargs: dict[str, Any] | None = None,
    num_envs: int = 3,
    steps: int = 60,
    seed: int = 0,
) -> None:
    """Check a :class:`~marl.envs.HostArrayEnv`: its arrays give its own outputs.

    Builds two :class:`~marl.envs.SerialEnv` of ``num_envs`` copies, one stepping
    through the copies' numpy arrays and one through their TensorDicts, seeds both
    alike and compares a random-action rollout of ``steps`` steps (ended episodes
    reset), then a partial reset of the first copy and 10 steps after it: every key,
    dtype, shape and value must match. Then runs :func:`check_env_specs` on the
    arrays path.

    Args:
        create_env_fn: builds one (unbatched) env.
        create_env_kwargs: keyword arguments for ``create_env_fn``.
        num_envs: copies in each ``SerialEnv`` (at least 2, for the partial reset).
        steps: rollout length; long enough for some episodes to end checks the resets.
        seed: the seed of both.

    Raises:
        TypeError: when the env does not follow ``HostArrayEnv``.
        EnvSpecError: listing every difference, one per line.

    Examples:
        >>> from marl.envs import PettingZooEnv
        >>> check_serial_arrays(PettingZooEnv, {"task": "simple_spread_v3", "max_cycles": 5})
    """
    from marl.envs.batched import SerialEnv

    if num_envs < 2:
        raise ValueError(f"num_envs must be >= 2 (for the partial reset), got {num_envs}")
    arrays = SerialEnv(num_envs, create_env_fn, create_env_kwargs, use_arrays=True)
    tds = SerialEnv(num_envs, create_env_fn, create_env_kwargs, use_arrays=False)
    try:
        if not arrays.use_arrays:
            meta = arrays.envs[0]
            raise TypeError(
                f"{type(meta).__name__} is not a HostArrayEnv: it needs reset_arrays, "
                "step_arrays and arrays_to_tensordict, and batch size [] "
                f"(got {tuple(meta.batch_size)})"
            )
        problems: list[str] = []
        outs = []
        for env in (arrays, tds):
            env.set_seed(seed)
            rollout = env.rollout(steps, break_when_any_done=False)
            mask = torch.zeros(num_envs, 1, dtype=torch.bool)
            mask[0] = True
            root = rollout[:, -1].get("next").exclude(*env.reward_keys)
            root.set("_reset", mask)
            reset = env.reset(root)
            # a few steps on: a copy reset that should not have been shows only later
            after = env.rollout(
                10, auto_reset=False, tensordict=reset.clone(), break_when_any_done=False
            )
            outs.append((rollout, reset, after))
        for i, where in enumerate(("rollout", "partial reset", "steps after the partial reset")):
            _compare(problems, where, outs[0][i], outs[1][i])
        if problems:
            raise EnvSpecError(
                f"{type(arrays.envs[0]).__name__}: the arrays path (SerialEnv use_arrays=True) "
                "differs from the TensorDict path:\n" + "\n".join(problems)
            )
        check_env_specs(arrays, steps=3, seed=seed)
    finally:
        arrays.close()
        tds.close()


def _compare(problems: list[str], where: str, a: TensorDictBase, b: TensorDictBase) -> None:
    keys_a, keys_b = set(a.keys(True, True)), set(b.keys(True, True))
    for key in sorted(keys_a ^ keys_b, key=str):
        side = "arrays" if key in keys_a else "TensorDicts"
        problems.append(f"{where}: key {_fmt(key)} only in the {side} path")
    for key in sorted(keys_a & keys_b, key=str):
        x, y = a.get(key), b.get(key)
        if x.dtype != y.dtype or x.shape != y.shape:
            problems.append(
                f"{where}: key {_fmt(key)}: {x.dtype} {tuple(x.shape)} (arrays) vs "
                f"{y.dtype} {tuple(y.shape)} (TensorDicts)"
            )
        elif not torch.equal(x, y):
            problems.append(f"{where}: key {_fmt(key)}: values differ")
