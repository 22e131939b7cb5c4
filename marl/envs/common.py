"""`EnvBase`: the environment API every wrapper, transform and batched env shares.

Data follows the layout of DESIGN.md. ``reset`` returns the first observations;
``step`` reads the actions from a TensorDict and writes the outcome under
``"next"``; ``step_and_maybe_reset`` also moves ``"next"`` to the root and
resets the sub-envs that ended, which is what collectors need.

Partial resets and host syncs: an env whose reset is host code (VMAS,
Gymnasium, PettingZoo) must know on the host which sub-envs ended, so the base
class reads ``done.any()`` once per step (on CUDA, one device sync) and skips
the reset when nothing ended. An env that sets ``partial_resets_on_device``
resets with tensor operations under any mask, and its steps read nothing on
the host. (VMAS itself reads every action on the host at each step, an
``assert not action.isnan().any()`` per agent in ``vmas``'s ``_set_action``,
so a VMAS step syncs on CUDA whatever the wrapper does.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from marl.envs.action_checks import InvalidActionError
from marl.envs.action_checks import check_actions as _check_action_values
from marl.groups import GroupMap
from marl.specs import (
    Categorical,
    Composite,
    NestedKey,
    OneHot,
    TensorSpec,
    Unbounded,
    structure_version,
)

__all__ = [
    "DONE_KEYS",
    "EnvBase",
    "make_done_spec",
    "reset_where",
    "seed_generator",
    "set_done_flags",
    "step_mdp",
]

DONE_KEYS = ("done", "terminated", "truncated")


def make_done_spec(batch_size: Sequence[int], device: Any = None) -> Composite:
    """The env-level ``done``/``terminated``/``truncated`` flags, ``[*B, 1]`` bool."""
    shape = (*batch_size, 1)
    return Composite(
        {k: Unbounded(shape, dtype=torch.bool, device=device) for k in DONE_KEYS},
        shape=batch_size,
        device=device,
    )


def seed_generator(generator: torch.Generator, seed: int | None) -> None:
    """Seeds an env's own generator, as its ``_set_seed`` does.

    Args:
        generator: the env's generator.
        seed: the seed (``None``: a fresh nondeterministic one).
    """
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(int(seed))


def reset_where(td: TensorDictBase | None, batch_size: Sequence[int]) -> torch.Tensor:
    """The envs a ``_reset`` call resets, as a CPU bool tensor of ``batch_size``.

    Args:
        td: the reset input; its ``_reset`` flags (``None``, or none: reset all).
        batch_size: the env's batch size.

    Returns:
        True where the env resets.
    """
    mask = td.get("_reset", None) if td is not None else None
    return (
        torch.ones(batch_size, dtype=torch.bool)
        if mask is None
        else mask.reshape(batch_size).to("cpu")
    )


def set_done_flags(out: TensorDictBase, done: torch.Tensor, prefix: tuple[str, ...] = ()) -> None:
    """Writes ``done`` as the done and terminated flags (never truncated) of ``out``.

    Args:
        out: the step's output.
        done: the flags.
        prefix: the sub-tensordict they go to (``()``: the root).
    """
    out.set((*prefix, "done"), done)
    out.set((*prefix, "terminated"), done.clone())
    out.set((*prefix, "truncated"), torch.zeros_like(done))


def _prefix(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def step_mdp(td: TensorDictBase, reward_keys: Sequence[NestedKey] = ()) -> TensorDictBase:
    """Move ``td["next"]`` to the root of a new TensorDict, without the rewards.

    What stays is what the next step reads: observations, done flags and any
    carried state (step counters, recurrent hidden states).
    """
    nxt = td.get("next")
    return nxt.exclude(*reward_keys) if reward_keys else nxt.copy()


def _any_true(flags: torch.Tensor) -> bool:
    """Whether any flag is set, read on the host.

    ``bool()`` of a one-element tensor (an unbatched env's ``done``) skips the
    ``any()`` kernel, about half of this read's cost on the CPU.
    """
    return bool(flags) if flags.numel() == 1 else bool(flags.any())


class EnvBase:
    """Base class of every environment.

    Subclasses set the specs in ``__init__`` and implement:

    - ``_reset(td) -> TensorDict``: the first observations. ``td`` is ``None``
      or holds a ``"_reset"`` mask ``[*B, 1]``: only those sub-envs must be reset
      (the base class keeps the others' values from ``td``). It returns values
      for the whole batch; those of the sub-envs not reset are discarded.
    - ``_step(td) -> TensorDict``: the next observations, rewards and flags
      (not nested under ``"next"``). Missing ``done``/``terminated``/``truncated``
      entries are filled in from the others.
    - ``_set_seed(seed)``.

    Args:
        batch_size: env batch dims (``[]`` for one env, ``[num_envs]`` for VMAS).
        device: the device of the env's tensors.
        group_map: the agent groups (``None`` for a single-agent env).

    Attributes:
        observation_spec: ``Composite`` of observations (and the global ``"state"``).
        action_spec: ``Composite`` of the actions the env reads.
        reward_spec: ``Composite`` of rewards.
        done_spec: ``Composite`` of the done/terminated/truncated flags,
            env-level at the root and per group where the env has them.
        state_spec: ``Composite`` of the inputs other than actions that
            ``step`` reads (empty for most envs).
        check_actions: when True, ``step`` checks every action's values
            against its spec first (NaN/inf, non-integer or out-of-range
            discrete actions, illegal actions under an ``action_mask``) and
            raises :class:`~marl.envs.InvalidActionError`. Off by default
            (it costs a few tensor reductions per step); on inside
            :func:`~marl.envs.check_env_specs`.
        partial_resets_on_device: a class attribute. ``True`` declares that
            ``_reset`` handles any ``"_reset"`` mask, all False included, with
            tensor operations, never reading it on the host (and that the
            transforms above it do too), and that a reset under an all-False
            mask changes nothing (no random draws, no counters moved), so that
            results are those of host-decided resets. ``reset`` and
            ``step_and_maybe_reset`` then hand it the mask at every step
            without looking at it, so a step makes no host sync (none on
            CUDA). ``False`` (the default, for envs whose reset is host code
            such as VMAS, Gymnasium or PettingZoo, or draws random numbers
            for every sub-env): the base class reads ``mask.any()`` once per
            step and only calls ``_reset`` when some sub-env ended.
        complete_done_flags: a class attribute. ``True`` declares that
            ``_reset`` and ``_step`` always return ``done``, ``terminated`` and
            ``truncated`` at the root and under every group of ``done_spec``,
            so the base class skips looking for missing ones (a step's worth
            of lookups). ``False`` (the default): missing flags are filled in.
        episode_metrics: ``{name: key}``, the per-episode outcomes the env reports
            besides its return, e.g. ``{"win_rate": ("info", "battle_won")}``:
            ``key`` is a root ``[*B, 1]`` entry of ``observation_spec`` whose value at
            the step an episode ends is that episode's outcome (read under
            ``"next"``). Training logs its mean over the episodes that ended as
            ``train/<name>``, evaluation as ``eval/<name>``, and ``results.json``
            holds it per episode, so ``marl-report`` can rank by it (``metric=<name>``).
            Empty by default.
        turn_based: ``True`` declares that one ``step`` plays one agent's move
            (PettingZoo's AEC games): the agents not moving are masked out by their
            group's ``"mask"``, and the rewards of a move can go to every agent. Off-policy
            learners then relink each agent's transitions from one of its turns to its
            next one. Batched envs and transforms report their base env's. ``False`` by
            default.
    """

    check_actions: bool = False
    partial_resets_on_device: bool = False
    complete_done_flags: bool = False
    episode_metrics: Mapping[str, NestedKey] = MappingProxyType({})
    turn_based: bool = False

    def __init__(
        self,
        *,
        batch_size: Sequence[int] = (),
        device: Any = None,
        group_map: GroupMap | None = None,
    ) -> None:
        self.batch_size = torch.Size(batch_size)
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self.group_map = group_map
        self.observation_spec = Composite(shape=self.batch_size, device=self.device)
        self.action_spec = Composite(shape=self.batch_size, device=self.device)
        self.reward_spec = Composite(shape=self.batch_size, device=self.device)
        self.done_spec = make_done_spec(self.batch_size, self.device)
        self.state_spec = Composite(shape=self.batch_size, device=self.device)
        self.is_closed = False

    # ------------------------------------------------------------ subclass API
    def _reset(self, td: TensorDictBase | None) -> TensorDictBase:
        raise NotImplementedError

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError

    def _set_seed(self, seed: int | None) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------ keys
    def _spec_leaves(self, name: str) -> list[tuple[NestedKey, TensorSpec]]:
        """``(key, leaf spec)`` pairs of the composite ``self.<name>``, cached.

        ``step``, ``rand_action`` and ``rollout`` need them at every step; the
        cache holds while the same composite is in place and no composite
        anywhere had an entry set or deleted (``structure_version``).
        """
        spec = getattr(self, name)
        cache = self.__dict__.setdefault("_spec_leaves_cache", {})
        hit = cache.get(name)
        version = structure_version()
        if hit is not None and hit[0] is spec and hit[1] == version:
            return hit[2]
        leaves = [(k, spec[k]) for k in spec.keys(include_nested=True, leaves_only=True)]
        cache[name] = (spec, version, leaves)
        return leaves

    @property
    def action_keys(self) -> list[NestedKey]:
        """Leaf keys of ``action_spec``."""
        return [k for k, _ in self._spec_leaves("action_spec")]

    @property
    def reward_keys(self) -> list[NestedKey]:
        """Leaf keys of ``reward_spec``."""
        return [k for k, _ in self._spec_leaves("reward_spec")]

    @property
    def done_keys(self) -> list[NestedKey]:
        """Leaf keys of ``done_spec``."""
        return self.done_spec.keys(include_nested=True, leaves_only=True)

    @property
    def observation_keys(self) -> list[NestedKey]:
        """Leaf keys of ``observation_spec``."""
        return self.observation_spec.keys(include_nested=True, leaves_only=True)

    @property
    def action_key(self) -> NestedKey:
        """The only action key; raises when there are several (use ``action_keys``)."""
        keys = self.action_keys
        if len(keys) != 1:
            raise KeyError(f"this env has {len(keys)} action keys {keys}; use env.action_keys")
        return keys[0]

    @property
    def reward_key(self) -> NestedKey:
        """The only reward key; raises when there are several (use ``reward_keys``)."""
        keys = self.reward_keys
        if len(keys) != 1:
            raise KeyError(f"this env has {len(keys)} reward keys {keys}; use env.reward_keys")
        return keys[0]

    def _done_groups(self) -> list[tuple[str, ...]]:
        """Prefixes (``()`` for the root) that hold a ``done`` flag."""
        prefixes: list[tuple[str, ...]] = []
        for key in self.done_keys:
            key = _prefix(key)
            if key[-1] == "done":
                prefixes.append(key[:-1])
        return prefixes

    # ------------------------------------------------------------ public API
    def set_seed(self, seed: int | None) -> int | None:
        """Seed the env (and its random actions). Returns the seed used."""
        # On the env's device, so that random actions are drawn where they are used.
        self._rng = torch.Generator(device=self.device)
        if seed is not None:
            self._rng.manual_seed(int(seed))
        else:
            self._rng.seed()  # a fresh random seed, not torch's fixed default
        self._set_seed(seed)
        return seed

    def reset(self, td: TensorDictBase | None = None) -> TensorDictBase:
        """Reset the env, or the sub-envs flagged by ``td["_reset"]`` (``[*B, 1]`` bool).

        Args:
            td: optional input. With a ``"_reset"`` mask, only the flagged
                sub-envs restart: the others keep the values in ``td``, and the
                entries of ``td`` that a reset does not write (a recurrent
                policy's state, for instance) are kept for every sub-env.

        Returns:
            A TensorDict of batch size ``batch_size`` with the observations and
            the done flags (False for every sub-env just reset), without ``"_reset"``.
        """
        self._check_open()
        mask = None if td is None else td.get("_reset", None)
        if mask is None:
            return self._reset_proc(td)
        return self._reset_masked(td, self._check_reset_mask(mask))

    def step(self, td: TensorDictBase) -> TensorDictBase:
        """Apply the actions in ``td`` and write the outcome under ``td["next"]``.

        Entries already under ``td["next"]`` that the env does not write (a recurrent
        policy's next hidden state) are kept, so ``step_mdp`` carries them to the next step.

        Raises:
            KeyError: when an action is missing.
            ValueError: when an action's shape differs from ``action_spec``.
            InvalidActionError: with ``check_actions``, when an action's values
                lie outside its spec (see :mod:`marl.envs.action_checks`).
        """
        self._check_open()
        self._check_actions(td)
        if self.check_actions:
            _check_action_values(td, self.action_spec)
            nxt = self._step_proc(td)
        else:
            try:
                nxt = self._step_proc(td)
            except Exception as err:
                # the env's own error for a bad action is often bare (VMAS: an empty
                # AssertionError on NaN); checking only after a failure keeps the hot
                # path free and still names the group, the key and the bad values
                try:
                    _check_action_values(td, self.action_spec)
                except InvalidActionError as bad:
                    raise bad from err
                raise
        preset = td.get("next", None)
        if preset is not None:
            # entries the policy wrote for the next step (a recurrent module's new hidden
            # state): kept beside the env's outputs, which win on a shared key
            nxt.update(preset.exclude(*nxt.keys(True, True)))
        td.set("next", nxt)
        return td

    def step_and_maybe_reset(self, td: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase]:
        """Step, then build the next root TensorDict, resetting sub-envs that ended.

        The same as :meth:`step` followed by :meth:`maybe_reset`.

        Returns:
            ``(td, td_root)``: ``td`` holds the transition (with ``"next"``),
            ``td_root`` is what the policy reads at the next step.
        """
        td = self.step(td)
        return td, self.maybe_reset(td)

    def maybe_reset(self, td: TensorDictBase) -> TensorDictBase:
        """Build the root TensorDict of the next step from a transition, resetting the
        sub-envs that ended.

        The sub-envs to reset are those whose root ``done`` is True. Only an env
        without ``partial_resets_on_device`` reads that on the host (once). Between
        :meth:`step` and this call the env still holds the state the transition
        ended in (what a renderer wants to draw).

        Args:
            td: a transition returned by :meth:`step` (with ``"next"``).

        Returns:
            What the policy reads at the next step.
        """
        root = step_mdp(td, self.reward_keys)
        done = root.get("done")
        if self.partial_resets_on_device or _any_true(done):
            root.set("_reset", done.clone())
            root = _merge_partial(self._reset_proc(root), root, done, len(self.batch_size))
        return root

    def rand_action(self, td: TensorDictBase | None = None) -> TensorDictBase:
        """Write uniformly random actions into ``td``, honouring action masks.

        A discrete action whose group holds an ``"action_mask"`` (e.g.
        ``(group, "action_mask")`` beside ``(group, "action")``) only gets
        legal values.
        """
        if td is None:
            td = TensorDict({}, batch_size=self.batch_size, device=self.device)
        rng = getattr(self, "_rng", None)
        for key, spec in self._spec_leaves("action_spec"):
            key_t = _prefix(key)
            if isinstance(spec, (Categorical, OneHot)):
                mask = td.get((*key_t[:-1], "action_mask"), None)
                td.set(key, spec.rand(generator=rng, mask=mask))
            else:
                td.set(key, spec.rand(generator=rng))
        return td

    def rollout(
        self,
        max_steps: int,
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        *,
        auto_reset: bool = True,
        break_when_any_done: bool = True,
        tensordict: TensorDictBase | None = None,
    ) -> TensorDictBase:
        """Run up to ``max_steps`` steps and stack them along a new last batch dim.

        Args:
            max_steps: the number of steps.
            policy: ``td -> td`` writing the actions; random actions when None.
            auto_reset: reset before starting (otherwise start from ``tensordict``).
            break_when_any_done: stop after the first step where any sub-env
                is done. With False, ended sub-envs are reset and go on.
            tensordict: the starting TensorDict when ``auto_reset=False``.

        Returns:
            A TensorDict of batch size ``[*batch_size, T]``.
        """
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        if auto_reset:
            td = self.reset()
        elif tensordict is None:
            raise ValueError("rollout(auto_reset=False) needs a starting tensordict")
        else:
            td = tensordict
        act = policy if policy is not None else self.rand_action
        reward_keys = self.reward_keys  # resolved once, not at every step
        steps = []
        for _ in range(max_steps):
            td = act(td)
            if break_when_any_done:
                td = self.step(td)
                steps.append(td)
                if _any_true(td.get(("next", "done"))):
                    break
                td = step_mdp(td, reward_keys)
            else:
                td, root = self.step_and_maybe_reset(td)
                steps.append(td)
                td = root
        return torch.stack(steps, dim=len(self.batch_size))

    def close(self) -> None:
        """Release the env's resources (processes, simulators)."""
        self.is_closed = True

    def __enter__(self) -> EnvBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ internals
    def _reset_proc(self, td: TensorDictBase | None) -> TensorDictBase:
        """Reset without the partial-reset merge; transformed envs override it."""
        out = self._reset(td)
        self._fill_done(out, reset=True)
        return out

    def _reset_masked(self, td: TensorDictBase, mask: torch.Tensor) -> TensorDictBase:
        """Reset where ``mask`` (``[*B, 1]``, the ``"_reset"`` entry of ``td``) is True."""
        if not self.partial_resets_on_device and not _any_true(mask):
            return td.exclude("_reset")
        out = self._reset_proc(td)
        return _merge_partial(out, td, mask, len(self.batch_size))

    def _step_proc(self, td: TensorDictBase) -> TensorDictBase:
        """Step without the action checks; transformed envs override it."""
        out = self._step(td)
        self._fill_done(out, reset=False)
        return out

    def _fill_done(self, out: TensorDictBase, reset: bool) -> None:
        """Complete missing done/terminated/truncated entries for every group."""
        if self.complete_done_flags:
            return
        groups = getattr(self, "_done_groups_cache", None)
        if groups is None:
            groups = self._done_groups()
            self._done_groups_cache = groups
        for prefix in groups:
            done_key = (*prefix, "done")
            done = out.get(done_key, None)
            term = out.get((*prefix, "terminated"), None)
            trunc = out.get((*prefix, "truncated"), None)
            if done is not None and term is not None and trunc is not None:
                continue  # complete (every VMAS step): skip the spec lookups
            spec = self.done_spec[done_key]
            if done is None:
                if term is None and trunc is None:
                    if not reset:
                        raise KeyError(
                            f"_step returned no {done_key!r}, 'terminated' or 'truncated' flag"
                        )
                    done = torch.zeros(spec.shape, dtype=torch.bool, device=self.device)
                elif term is None:
                    done = trunc.clone()
                elif trunc is None:
                    done = term.clone()
                else:
                    done = term | trunc
                out.set(done_key, done)
            if term is None and (*prefix, "terminated") in self.done_spec:
                out.set((*prefix, "terminated"), done.clone() if trunc is None else done & ~trunc)
            if trunc is None and (*prefix, "truncated") in self.done_spec:
                out.set((*prefix, "truncated"), torch.zeros_like(done))

    def _check_actions(self, td: TensorDictBase) -> None:
        for key, spec in self._spec_leaves("action_spec"):
            value = td.get(key, None)
            expected = spec.shape
            if value is None:
                raise KeyError(
                    f"step() needs the action {key!r} (expected shape {tuple(expected)}); "
                    f"the tensordict has keys {td.keys(True, True)}"
                )
            if value.shape != expected:
                raise ValueError(
                    f"action {key!r} has shape {tuple(value.shape)}, expected {tuple(expected)} "
                    "(from action_spec)"
                )

    def _check_reset_mask(self, mask: torch.Tensor) -> torch.Tensor:
        expected = (*self.batch_size, 1)
        if mask.dtype != torch.bool:
            raise ValueError(f'"_reset" must be a bool tensor, got dtype {mask.dtype}')
        if tuple(mask.shape) == tuple(self.batch_size):
            mask = mask.unsqueeze(-1)
        if tuple(mask.shape) != expected:
            raise ValueError(f'"_reset" has shape {tuple(mask.shape)}, expected {expected}')
        return mask

    def _check_open(self) -> None:
        if self.is_closed:
            raise RuntimeError(f"{type(self).__name__} is closed")

    def __repr__(self) -> str:
        groups = f", group_map={self.group_map.to_dict()}" if self.group_map else ""
        return (
            f"{type(self).__name__}(batch_size={tuple(self.batch_size)}, "
            f"device={self.device}{groups})"
        )


def _merge_partial(
    new: TensorDictBase, old: TensorDictBase, mask: torch.Tensor, n_batch: int
) -> TensorDictBase:
    """``old`` (without ``"_reset"``) updated with the reset values ``new`` where ``mask``.

    Entries of ``new`` that ``old`` also holds, with the same shape, keep the
    ``old`` values where ``mask`` is False; the others are taken from ``new``.
    Entries only ``old`` holds are kept. No host read: ``torch.where`` only.
    """
    flat_mask = mask.reshape(mask.shape[:n_batch])
    # copy(): new nested TensorDicts over the same tensors. ``exclude`` alone would share
    # the sub-TensorDicts it does not touch (an ``"info"`` entry, a group without a
    # reward) with ``old``, which shares them with the transition's ``"next"``: the
    # ``set`` below would then put the reset's values into the transition just collected.
    out = old.exclude("_reset").copy()
    if n_batch == 0 and flat_mask.device.type == "cpu" and bool(flat_mask):
        # one env (on the host), reset: every entry of new wins, as the where below
        # would give, without its copies
        for key in new.keys(include_nested=True, leaves_only=True):
            out.set(key, new.get(key))
        return out
    for key in new.keys(include_nested=True, leaves_only=True):
        value = new.get(key)
        prev = old.get(key, None)
        if prev is not None and prev.shape == value.shape:
            m = flat_mask.reshape(flat_mask.shape + (1,) * (value.dim() - n_batch))
            value = torch.where(m, value, prev.to(value.dtype))
        out.set(key, value)
    return out
