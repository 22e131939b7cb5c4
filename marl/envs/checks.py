"""`check_env_specs`: the public checker every env and transform must pass."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from marl.envs.common import EnvBase
from marl.specs import Composite, NestedKey, TensorSpec

__all__ = ["EnvSpecError", "check_env_specs"]


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
