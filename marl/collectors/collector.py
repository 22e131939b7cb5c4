"""`Collector`: turn an env and a policy into batches of experience, in this process.

The loop is ``policy -> env.step_and_maybe_reset -> write step t`` into an
output buffer ``[*env_batch, T]`` that is allocated once, from the structure of
the first step, and then written in place. Episodes continue across batches;
sub-envs that end are reset individually by the env.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import InteractionType, set_interaction_type
from torch import nn

from marl.collectors.utils import (
    TRAJ_IDS_KEY,
    CollectorLifetime,
    as_device,
    assign_traj_ids,
    env_state_owner,
    interaction_type,
    key_plan,
    make_env,
    policy_device_of,
    round_frames_per_batch,
    round_total_frames,
    split_trajectories,
)
from marl.envs.common import EnvBase

__all__ = ["Collector"]

Policy = Callable[[TensorDictBase], TensorDictBase]


class Collector(CollectorLifetime):
    """Collect ``[*env_batch, T]`` batches from an env with a policy, in this process.

    Frames are env steps times the env batch numel: one step of a VMAS env with
    512 sub-envs is 512 frames. Each batch has ``T = frames_per_batch / numel``
    steps.

    - ``frames_per_batch`` that is not divisible by the env batch numel is
      rounded up, with a warning.
    - ``total_frames`` that is not a multiple of ``frames_per_batch`` is rounded
      up to whole batches, with a warning: the last batch is never cut short.
    - Steps are collected with ``env.step_and_maybe_reset``: episodes continue
      across batches, and sub-envs that end are reset individually.
    - Every step carries ``("collector", "traj_ids")`` (``[*env_batch]`` per
      step): the id of the episode the transition belongs to. Ids are unique
      within a collector and grow as episodes start.
    - ``split_trajs=True`` yields padded ``[num_trajs, max_len]`` trajectories
      with a ``("collector", "mask")`` (see :func:`split_trajectories`).

    The output buffer is preallocated once on ``storing_device`` and written in
    place at every step; each yielded batch is a fresh copy of it, safe to keep.
    With ``replay_buffer=`` the buffer is passed to ``replay_buffer.extend``
    instead (which must copy it) and the iterator yields ``None``.

    Args:
        env: an :class:`~marl.envs.EnvBase`, or a callable with no argument that
            builds one.
        policy: ``td -> td`` writing the env's action keys; a ``tensordict.nn``
            module or a plain callable. ``None`` samples random actions from the
            action spec (``env.rand_action``, which honours action masks).
        frames_per_batch: frames per yielded batch.
        total_frames: frames to collect in all; ``-1`` never stops.
        init_random_frames: the first frames use random actions instead of the
            policy (checked at every step). The policy's other outputs
            (log-probs, values...) are stored as zeros on those steps.
        max_frames_per_traj: truncate episodes after this many steps per sub-env
            (the step is stored with ``truncated``/``done`` set and the sub-env
            is reset). ``None`` leaves episode ends to the env.
        reset_at_each_iter: reset every sub-env at the start of each batch.
        split_trajs: yield padded trajectories instead of ``[*env_batch, T]``.
        exploration: ``"random"`` samples the policy's distribution; ``"mode"``,
            ``"deterministic"``, ``"mean"`` take its mode or mean (through
            ``tensordict.nn.set_interaction_type``). An ``InteractionType`` works too.
        device: default for ``policy_device`` and ``storing_device``.
        env_device: the env's device; must match ``env.device`` (an env is not
            moved), it is accepted for symmetry with the other devices.
        policy_device: where the policy runs. A policy whose parameters live
            elsewhere is copied there; :meth:`update_policy_weights_` syncs the copy.
        storing_device: where batches are stored (default: ``device`` or the
            env's device).
        postproc: ``td -> td`` applied to each batch before it is yielded.
        replay_buffer: any object with ``.extend(td)``; batches go there instead
            of being yielded.
        close_env: close the env at :meth:`shutdown`. Default: only when the
            collector built it (``env`` given as a callable).
        share_buffer: allocate the output buffer in shared memory, so that
            another process can read the batches in place (the workers of a
            :class:`~marl.collectors.MultiSyncCollector` hand it to the parent once).
        traj_id_stride: trajectory ids are ``local_id * traj_id_stride +
            traj_id_offset``, where local ids count ``0, 1, 2...`` in this
            collector. Collectors working side by side (one per worker
            process or Ray actor) use ``traj_id_stride=num_workers`` and
            ``traj_id_offset=worker_index``, so that their ids never collide.
        traj_id_offset: see ``traj_id_stride``; ``0 <= traj_id_offset < traj_id_stride``.

    The step loop makes no host sync: whether sub-envs ended is never read
    on the host by the collector (trajectory ids are computed from the
    stored ``done`` flags once per batch), and the env decides partial resets
    (see :attr:`~marl.envs.EnvBase.partial_resets_on_device`).

    Examples:
        >>> from marl.collectors import Collector
        >>> from marl.testing import MultiAgentFakeEnv
        >>> collector = Collector(MultiAgentFakeEnv(num_envs=4), None, frames_per_batch=32,
        ...                       total_frames=64)
        >>> [tuple(batch.batch_size) for batch in collector]
        [(4, 8), (4, 8)]
        >>> batch = collector.rollout()
        >>> batch["next", "walker", "reward"].shape, batch["collector", "traj_ids"].shape
        (torch.Size([4, 8, 2, 1]), torch.Size([4, 8]))
    """

    def __init__(
        self,
        env: EnvBase | Callable[[], EnvBase],
        policy: Policy | None = None,
        *,
        frames_per_batch: int,
        total_frames: int = -1,
        init_random_frames: int = 0,
        max_frames_per_traj: int | None = None,
        reset_at_each_iter: bool = False,
        split_trajs: bool = False,
        exploration: str | InteractionType = "random",
        device: Any = None,
        env_device: Any = None,
        policy_device: Any = None,
        storing_device: Any = None,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        replay_buffer: Any = None,
        close_env: bool | None = None,
        share_buffer: bool = False,
        traj_id_stride: int = 1,
        traj_id_offset: int = 0,
    ) -> None:
        who = type(self).__name__
        for name, value in (("traj_id_stride", traj_id_stride), ("traj_id_offset", traj_id_offset)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{who}: {name} must be an int, got {type(value).__name__}")
        if traj_id_stride < 1 or not 0 <= traj_id_offset < traj_id_stride:
            raise ValueError(
                f"{who}: need traj_id_stride >= 1 and 0 <= traj_id_offset < traj_id_stride, got "
                f"traj_id_stride={traj_id_stride}, traj_id_offset={traj_id_offset}"
            )
        self.env = make_env(env, who)
        self._owns_env = not isinstance(env, EnvBase) if close_env is None else bool(close_env)
        if policy is not None and not callable(policy):
            raise TypeError(
                f"{who}: policy must be callable (td -> td), got {type(policy).__name__}"
            )
        if replay_buffer is not None and not callable(getattr(replay_buffer, "extend", None)):
            raise TypeError(f"{who}: replay_buffer must have an .extend(td) method")
        if max_frames_per_traj is not None and max_frames_per_traj < 1:
            raise ValueError(
                f"{who}: max_frames_per_traj must be >= 1 or None, got {max_frames_per_traj}"
            )
        if init_random_frames < 0:
            raise ValueError(f"{who}: init_random_frames must be >= 0, got {init_random_frames}")

        env_dev = self.env.device
        if env_device is not None and torch.device(env_device) != env_dev:
            raise ValueError(
                f"{who}: env_device={env_device} but the env lives on {env_dev}; build the env on "
                "the device you want (collectors do not move envs)"
            )
        self.env_device = env_dev
        self.policy_device = (
            as_device(policy_device) or as_device(device) or policy_device_of(policy) or env_dev
        )
        self.storing_device = as_device(storing_device) or as_device(device) or env_dev

        self.batch_dims = len(self.env.batch_size)
        self.env_numel = max(1, self.env.batch_size.numel())
        self.frames_per_batch = round_frames_per_batch(frames_per_batch, self.env_numel, who)
        self.steps_per_batch = self.frames_per_batch // self.env_numel
        self.total_frames = round_total_frames(total_frames, self.frames_per_batch, who)
        self.init_random_frames = init_random_frames
        self.max_frames_per_traj = max_frames_per_traj
        self.reset_at_each_iter = reset_at_each_iter
        self.split_trajs = split_trajs
        self.exploration = exploration
        self._interaction = interaction_type(exploration)
        self.postproc = postproc
        self.replay_buffer = replay_buffer

        self._orig_policy = policy
        self.policy = self._place_policy(policy)
        self._policy_weights: TensorDictBase | None = None

        self._frames = 0
        self._iter = 0
        self._td: TensorDictBase | None = None
        self._buffer: TensorDictBase | None = None
        self._keys: list[Any] = []
        self._prefix_plan: list[tuple[int, str]] = []
        self._leaf_plan: list[tuple[int, str]] = []
        self._dests: list[list[torch.Tensor]] = []
        self._fill: dict[int, torch.Tensor] = {}
        # The trajectory ids of the sub-envs' current episodes ([*env_batch]), and the
        # number of local ids handed out: a tensor, so that it is never read on the host.
        self._traj_ids: torch.Tensor | None = None
        self._traj_counter = torch.zeros((), dtype=torch.long, device=self.storing_device)
        self._traj_steps: torch.Tensor | None = None
        self._truncate_keys: list[Any] | None = None
        self._policy_out_keys: list[Any] | None = None
        self._traj_id_stride = traj_id_stride
        self._traj_id_offset = traj_id_offset
        self._share_buffer = share_buffer
        self._closed = False

    # ------------------------------------------------------------ policy
    def _place_policy(self, policy: Policy | None) -> Policy | None:
        if policy is None:
            return None
        current = policy_device_of(policy)
        if current is not None and current != self.policy_device:
            return copy.deepcopy(policy).to(self.policy_device)
        return policy

    def _weights(self) -> TensorDictBase | None:
        if self._policy_weights is None and isinstance(self.policy, nn.Module):
            self._policy_weights = TensorDict.from_module(self.policy)
        return self._policy_weights

    def update_policy_weights_(self, weights: TensorDictBase | dict | None = None) -> None:
        """Update the weights of the policy the collector runs.

        Args:
            weights: a ``TensorDict`` of parameters (``TensorDict.from_module``)
                or a ``state_dict``. ``None`` copies the weights of the policy
                given at construction into the collector's copy (a no-op when
                the collector runs that policy itself).

        Examples:
            >>> import torch
            >>> from tensordict.nn import TensorDictModule
            >>> from marl.testing import SingleAgentFakeEnv
            >>> net = TensorDictModule(torch.nn.Linear(4, 2), ["observation"], ["action"])
            >>> collector = Collector(SingleAgentFakeEnv(num_envs=2), net, frames_per_batch=4)
            >>> collector.update_policy_weights_(net.state_dict())
        """
        if weights is None:
            if self.policy is self._orig_policy or not isinstance(self._orig_policy, nn.Module):
                return
            weights = TensorDict.from_module(self._orig_policy).data
        if not isinstance(self.policy, nn.Module):
            raise TypeError(
                f"{type(self).__name__}: the policy is a {type(self.policy).__name__}, not an "
                "nn.Module, so it has no weights to update"
            )
        if isinstance(weights, TensorDictBase):
            with torch.no_grad():
                self._weights().update_(weights.to(self.policy_device))
        elif isinstance(weights, dict):
            self.policy.load_state_dict(weights)
        else:
            raise TypeError(
                f"weights must be a TensorDict, a state_dict or None, got {type(weights).__name__}"
            )

    # ------------------------------------------------------------ iteration
    def __iter__(self) -> Iterator[TensorDictBase | None]:
        """Yield batches until ``total_frames`` frames are collected (forever for -1)."""
        while self.total_frames < 0 or self._frames < self.total_frames:
            yield self.rollout()

    def rollout(self) -> TensorDictBase | None:
        """Collect one batch and return it (or extend the replay buffer and return ``None``).

        Returns:
            A fresh ``[*env_batch, T]`` TensorDict (or padded trajectories with
            ``split_trajs=True``), post-processed by ``postproc``; ``None`` when a
            ``replay_buffer`` was given.
        """
        buffer = self.collect()
        if self.replay_buffer is not None and not self.split_trajs and self.postproc is None:
            self.replay_buffer.extend(buffer)
            return None
        out = split_trajectories(buffer) if self.split_trajs else buffer.clone()
        if self.postproc is not None:
            out = self.postproc(out)
        if self.replay_buffer is not None:
            self.replay_buffer.extend(out)
            return None
        return out

    def collect(self) -> TensorDictBase:
        """Collect one batch into the collector's output buffer and return that buffer.

        This is the raw step behind :meth:`rollout` and iteration: it advances
        :attr:`frames` by ``frames_per_batch`` like them, but applies neither
        ``split_trajs`` nor ``postproc`` nor ``replay_buffer``, and copies
        nothing.

        The returned TensorDict is the buffer itself, not a copy: the next call
        writes over it in place (and it lives in shared memory with
        ``share_buffer=True``). Clone it to keep it past the next call; the
        workers of the multi-process and Ray collectors hand it on as it is.

        Returns:
            The ``[*env_batch, T]`` buffer, with ``("collector", "traj_ids")``.

        Raises:
            RuntimeError: after :meth:`shutdown`.

        Examples:
            >>> from marl.testing import SingleAgentFakeEnv
            >>> collector = Collector(SingleAgentFakeEnv(num_envs=2), frames_per_batch=8)
            >>> first = collector.collect()
            >>> collector.collect() is first, collector.frames
            (True, 16)
        """
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is shut down")
        if self._td is None or self.reset_at_each_iter:
            self._reset_all()
        with torch.no_grad(), set_interaction_type(self._interaction):
            self._run(self.steps_per_batch)
            self._write_traj_ids()
        self._frames += self.frames_per_batch
        self._iter += 1
        return self._buffer

    def _reset_all(self) -> None:
        self._td = self.env.reset()
        shape = self.env.batch_size
        n = self.env_numel
        ids = self._traj_counter + torch.arange(n, device=self.storing_device)
        self._traj_ids = (ids * self._traj_id_stride + self._traj_id_offset).reshape(shape)
        self._traj_counter = self._traj_counter + n
        if self.max_frames_per_traj is not None:
            self._traj_steps = torch.zeros(shape, dtype=torch.long, device=self.env_device)

    def _act(self, td: TensorDictBase, random: bool) -> TensorDictBase:
        if random:
            return self.env.rand_action(td)
        if self.policy_device == self.env_device:
            out = self.policy(td)
            return td if out is None else out
        out = self.policy(td.to(self.policy_device, non_blocking=True))
        if self._policy_out_keys is None:
            known = set(td.keys(True, True))
            self._policy_out_keys = [
                k for k in out.keys(True, True) if k not in known or k in self.env.action_keys
            ]
        # Blocking: a non-blocking device-to-host copy could be read before it lands.
        return td.update(out.select(*self._policy_out_keys).to(self.env_device))

    def _run(self, steps: int) -> None:
        env, td = self.env, self._td
        policy_none = self.policy is None
        frames0, numel = self._frames, self.env_numel
        for t in range(steps):
            random = policy_none or frames0 + t * numel < self.init_random_frames
            td = self._act(td, random)
            td, root = env.step_and_maybe_reset(td)
            if self._traj_steps is not None:
                root = self._truncate(td.get("next"), root)
            if not self._dests:
                self._allocate(td, random)
            srcs = self._sources(td, t)
            try:
                torch._foreach_copy_(self._dests[t], srcs)
            except RuntimeError as err:
                self._bad_shape(srcs, t, err)
            td = root
        self._td = td

    def _truncate(self, nxt: TensorDictBase, root: TensorDictBase) -> TensorDictBase:
        """Apply ``max_frames_per_traj``: flag and reset sub-envs that ran too long.

        Only tensor operations: the flags are or-ed with the (often all False)
        mask and the env decides whether there is anything to reset.
        """
        steps = self._traj_steps + 1
        flat_done = nxt.get("done").reshape(self.env.batch_size)
        force = (steps >= self.max_frames_per_traj) & ~flat_done
        self._traj_steps = torch.where(flat_done | force, torch.zeros_like(steps), steps)
        if self._truncate_keys is None:
            leaf = lambda k: k if isinstance(k, str) else k[-1]  # noqa: E731
            self._truncate_keys = [
                k for k in self.env.done_keys if leaf(k) in ("done", "truncated")
            ]
        for key in self._truncate_keys:
            value = nxt.get(key)
            mask = force.reshape(*force.shape, *([1] * (value.dim() - self.batch_dims)))
            nxt.set(key, value | mask)
        root.set("_reset", force.unsqueeze(-1))
        return self.env.reset(root)

    def _allocate(self, td: TensorDictBase, random: bool) -> None:
        """Allocate the ``[*env_batch, T]`` buffer from the structure of the first step."""
        source = td
        if random and self.policy is not None:
            # The first steps use random actions (init_random_frames): run the
            # policy once on a copy, so that the batch also has room for its
            # other outputs (log-probs, values...), stored as zeros on random steps.
            source = self._act(td.clone(), random=False)
        keys = [k for k in source.keys(True, True) if isinstance(source.get(k), torch.Tensor)]
        keys = [k for k in keys if k != "_reset"]
        present = set(td.keys(True, True))
        self._fill = {
            i: torch.zeros_like(source.get(k)) for i, k in enumerate(keys) if k not in present
        }
        template = source.select(*keys).to(self.storing_device)
        steps = self.steps_per_batch
        buf = template.unsqueeze(self.batch_dims)
        buf = buf.expand(*self.env.batch_size, steps, *buf.batch_size[self.batch_dims + 1 :])
        buf = buf.clone()
        buf.set(
            TRAJ_IDS_KEY,
            torch.zeros(
                (*self.env.batch_size, steps), dtype=torch.long, device=self.storing_device
            ),
        )
        if self._share_buffer:
            buf.share_memory_()
        self._buffer = buf
        self._keys = keys
        self._prefix_plan, self._leaf_plan = key_plan(keys)
        d = self.batch_dims
        leaves = [buf.get(k) for k in keys]
        self._dests = [[leaf.select(d, t) for leaf in leaves] for t in range(steps)]

    def _sources(self, td: TensorDictBase, t: int) -> list[torch.Tensor]:
        # ``_get_str`` skips the key parsing and checks of ``get``: this runs at
        # every step for every leaf, and is 5-8x faster than ``td.get(key)``.
        subs = [td]
        for parent, name in self._prefix_plan:
            sub = subs[parent]
            subs.append(None if sub is None else sub._get_str(name, None))
        srcs = []
        for i, (parent, name) in enumerate(self._leaf_plan):
            sub = subs[parent]
            value = None if sub is None else sub._get_str(name, None)
            if value is None:
                value = self._fill.get(i)
                if value is None:
                    self._missing(td, t)
            srcs.append(value)
        return srcs

    def _missing(self, td: TensorDictBase, t: int) -> None:
        present = set(td.keys(True, True))
        missing = [k for k in self._keys if k not in present]
        raise KeyError(
            f"{type(self).__name__}: step {t} of batch {self._iter} lacks {missing}, present "
            "at the first step; the env and the policy must write the same keys at every step"
        )

    def _bad_shape(self, srcs: list[torch.Tensor], t: int, err: RuntimeError) -> None:
        for key, src, dest in zip(self._keys, srcs, self._dests[t]):
            if src.shape != dest.shape:
                raise ValueError(
                    f"{type(self).__name__}: at step {t} of batch {self._iter}, {key!r} has shape "
                    f"{tuple(src.shape)}, but {tuple(dest.shape)} at the first step; the env "
                    "and the policy must write the same shapes at every step"
                ) from err
        raise err

    def _write_traj_ids(self) -> None:
        """Fill the batch's trajectory ids from its stored ``("next", "done")`` flags."""
        buf = self._buffer
        shape = buf.batch_size  # [*env_batch, T]
        done = buf.get(("next", "done")).reshape(self.env_numel, shape[-1])
        ids, self._traj_ids, self._traj_counter = assign_traj_ids(
            done,
            self._traj_ids.reshape(self.env_numel),
            self._traj_counter,
            self._traj_id_stride,
            self._traj_id_offset,
        )
        buf.get(TRAJ_IDS_KEY).copy_(ids.reshape(shape))
        self._traj_ids = self._traj_ids.reshape(self.env.batch_size)

    # ------------------------------------------------------------ state
    @property
    def frames(self) -> int:
        """Frames collected so far."""
        return self._frames

    def state_dict(self) -> dict[str, Any]:
        """The collector's counters, the policy's and (where it has one) the env's state.

        Returns:
            A dict with ``"frames"``, ``"iter"``, ``"traj_counter"`` and, where
            available, ``"policy"`` and ``"env"`` state dicts.
        """
        state: dict[str, Any] = {
            "frames": self._frames,
            "iter": self._iter,
            "traj_counter": int(self._traj_counter),
        }
        if isinstance(self.policy, nn.Module):
            state["policy"] = self.policy.state_dict()
        env_state = env_state_owner(self.env)
        if env_state is not None:
            state["env"] = env_state.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved.

        Args:
            state: a dict from :meth:`state_dict`.
        """
        self._frames = int(state["frames"])
        self._iter = int(state.get("iter", 0))
        counter = max(int(self._traj_counter), int(state.get("traj_counter", 0)))
        self._traj_counter = torch.tensor(counter, dtype=torch.long, device=self.storing_device)
        if "policy" in state and isinstance(self.policy, nn.Module):
            self.policy.load_state_dict(state["policy"])
        env_state = env_state_owner(self.env)
        if "env" in state and env_state is not None:
            env_state.load_state_dict(state["env"])

    # ------------------------------------------------------------ lifetime
    def shutdown(self) -> None:
        """Release the collector; closes the env when the collector built it."""
        if self._closed:
            return
        self._closed = True
        if self._owns_env and not self.env.is_closed:
            self.env.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env={self.env!r}, frames_per_batch={self.frames_per_batch}, "
            f"total_frames={self.total_frames}, steps_per_batch={self.steps_per_batch}, "
            f"storing_device={self.storing_device})"
        )
