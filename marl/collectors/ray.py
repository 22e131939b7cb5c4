"""`RayCollector`: run collectors as Ray actors, on one machine or a cluster.

Each actor runs a :class:`Collector` on its own env. Batches come back through
the Ray object store; policy weights go out through it too (``ray.put`` once,
then every actor reads the same object). Ray is imported lazily: install it
with ``pip install "marl[ray]"``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from marl.collectors.collector import Collector, Policy
from marl.collectors.utils import (
    WORKER_ID_KEY,
    CollectorLifetime,
    CollectorWorkerError,
    check_replay_buffer,
    make_env,
    plan_worker_frames,
    round_total_frames,
)
from marl.envs.common import EnvBase
from marl.extras import require

__all__ = ["RayCollector"]


class _CollectorActor:
    """The body of a Ray actor: one env and one :class:`Collector`."""

    def __init__(
        self,
        idx: int,
        num_workers: int,
        create_env_fn: Callable[[], EnvBase],
        policy: Policy | None,
        kwargs: dict[str, Any],
        seed: int | None,
        num_threads: int | None,
    ) -> None:
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        if seed is None:
            torch.seed()  # fresh interpreters all start from torch's fixed default seed
        else:
            torch.manual_seed(seed + idx)
        self.env = make_env(create_env_fn, f"RayCollector actor {idx}")
        if seed is not None:
            self.env.set_seed(seed + idx)
        self.idx, self.num_workers = idx, num_workers
        self.policy, self.kwargs = policy, kwargs
        self.collector: Collector | None = None

    def batch_size(self) -> tuple[int, ...]:
        return tuple(self.env.batch_size)

    def init(self, steps: int) -> None:
        numel = max(1, self.env.batch_size.numel())
        self.collector = Collector(
            self.env,
            self.policy,
            frames_per_batch=steps * numel,
            close_env=True,
            traj_id_stride=self.num_workers,
            traj_id_offset=self.idx,
            **self.kwargs,
        )

    def collect(self) -> TensorDictBase:
        # Ray serializes the return value before the actor runs its next task,
        # so the reused buffer can be returned without a copy.
        return self.collector.collect()

    def update_weights(self, weights: TensorDictBase | dict) -> None:
        self.collector.update_policy_weights_(weights)

    def state_dict(self) -> dict[str, Any]:
        return self.collector.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.collector.load_state_dict(state)

    def shutdown(self) -> None:
        if self.collector is not None:
            self.collector.shutdown()
        elif not self.env.is_closed:
            self.env.close()


class RayCollector(CollectorLifetime):
    """Collect with :class:`Collector` s running as Ray actors.

    Connects to an existing Ray cluster (``address=``, or one already
    initialized in this process), or starts a local Ray instance when none is
    given. With ``sync=True`` every iteration gathers one batch from every
    actor and stacks them: ``[num_collectors, *env_batch, T]``, with
    ``frames_per_batch`` counting all actors. With ``sync=False`` each actor's
    ``[*env_batch, T]`` batch is yielded as soon as it is ready, with a
    ``("collector", "worker_id")`` entry, and ``frames_per_batch`` is per actor.
    Trajectory ids are unique across actors.

    Args:
        create_env_fn: builds one env in each actor (pickled with cloudpickle,
            so lambdas work), or a list of them, one per actor.
        policy: ``td -> td`` sent to each actor (``None``: random actions).
        num_collectors: the number of actors.
        frames_per_batch: frames per yielded batch (see above).
        total_frames: frames to collect in all (rounded up to whole batches,
            with a warning); ``-1`` never stops.
        ray_init_config: keyword arguments for ``ray.init`` when this collector
            starts Ray (e.g. ``{"num_cpus": 2}``).
        sync: gather all actors' batches each iteration, or yield them as they come.
        address: the address of an existing Ray cluster (``"auto"`` finds a
            local one); ``None`` starts a local instance unless Ray is
            already initialized.
        remote_config: Ray actor options (default ``{"num_cpus": 1}``).
        split_trajs: yield padded trajectories (see :func:`split_trajectories`).
        postproc: ``td -> td`` applied to each yielded batch.
        replay_buffer: any object with ``.extend(td)``; batches go there and
            the iterator yields ``None``.
        seed: actor ``i`` seeds its env and torch with ``seed + i``.
        num_threads: torch threads per actor (``None``: Ray's default).
        storing_device: where yielded batches are put (default: as received, CPU).
        **collector_kwargs: other :class:`Collector` arguments
            (``init_random_frames`` is split evenly among the actors).

    Examples:
        Starting Ray takes seconds, so this example is not run as a doctest:

        >>> from marl.collectors import RayCollector
        >>> from marl.testing import MultiAgentFakeEnv
        >>> collector = RayCollector(  # doctest: +SKIP
        ...     lambda: MultiAgentFakeEnv(num_envs=4), None, num_collectors=2,
        ...     frames_per_batch=64, total_frames=128, ray_init_config={"num_cpus": 2})
        >>> [tuple(b.batch_size) for b in collector]  # doctest: +SKIP
        [(2, 4, 8), (2, 4, 8)]
        >>> collector.shutdown()  # doctest: +SKIP
    """

    def __init__(
        self,
        create_env_fn: Callable[[], EnvBase] | list[Callable[[], EnvBase]],
        policy: Policy | None = None,
        *,
        num_collectors: int,
        frames_per_batch: int,
        total_frames: int = -1,
        ray_init_config: dict[str, Any] | None = None,
        sync: bool = True,
        address: str | None = None,
        remote_config: dict[str, Any] | None = None,
        split_trajs: bool = False,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        replay_buffer: Any = None,
        seed: int | None = None,
        num_threads: int | None = None,
        storing_device: Any = None,
        **collector_kwargs: Any,
    ) -> None:
        ray = require("ray", "RayCollector", "ray")
        who = type(self).__name__
        if not isinstance(num_collectors, int) or num_collectors < 1:
            raise ValueError(
                f"{who}: num_collectors must be a positive int, got {num_collectors!r}"
            )
        fns = (
            create_env_fn
            if isinstance(create_env_fn, (list, tuple))
            else [create_env_fn] * num_collectors
        )
        if len(fns) != num_collectors or not all(callable(f) for f in fns):
            raise ValueError(f"{who}: need one callable create_env_fn, or {num_collectors} of them")
        if policy is not None and not callable(policy):
            raise TypeError(
                f"{who}: policy must be callable (td -> td), got {type(policy).__name__}"
            )
        unknown = set(collector_kwargs) - _COLLECTOR_KWARGS
        if unknown:
            raise TypeError(f"{who}: unexpected arguments {sorted(unknown)}")
        check_replay_buffer(replay_buffer, who)
        self._ray = ray
        self._started_ray = False
        if not ray.is_initialized():
            ray.init(address=address, **(ray_init_config or {}))
            self._started_ray = True
        self.num_collectors = num_collectors
        self.sync = sync
        self.policy = policy
        self.split_trajs, self.postproc, self.replay_buffer = split_trajs, postproc, replay_buffer
        self.storing_device = None if storing_device is None else torch.device(storing_device)
        kwargs = dict(collector_kwargs)
        init_random = kwargs.pop("init_random_frames", 0)
        kwargs["init_random_frames"] = -(-init_random // num_collectors)
        kwargs["storing_device"] = "cpu"
        actor_cls = ray.remote(**(remote_config or {"num_cpus": 1}))(_CollectorActor)
        self._actors = [
            actor_cls.remote(i, num_collectors, fn, policy, kwargs, seed, num_threads)
            for i, fn in enumerate(fns)
        ]
        self._closed = False
        self._pending: dict[Any, int] = {}
        self._weight_refs: list[tuple[Any, int]] = []
        self._frames = 0
        self._iter = 0
        try:
            sizes = self._get([a.batch_size.remote() for a in self._actors])
            plan = plan_worker_frames(frames_per_batch, sizes, sync, who)
            self.frames_per_batch, self.steps_per_batch, self._worker_frames = plan
            self._get([a.init.remote(self.steps_per_batch) for a in self._actors])
        except BaseException:
            self.shutdown()
            raise
        self.total_frames = round_total_frames(total_frames, self.frames_per_batch, who)

    # ------------------------------------------------------------ ray calls
    def _get(self, refs: list[Any]) -> list[Any]:
        """``ray.get`` each ref, turning a failure into a CollectorWorkerError naming the actor."""
        out = []
        for i, ref in enumerate(refs):
            try:
                out.append(self._ray.get(ref))
            except self._ray.exceptions.RayError as err:
                self._fail(i, err)
        return out

    def _fail(self, i: int, err: BaseException) -> None:
        cause = getattr(err, "cause", None)
        what = f"{type(cause).__name__}: {cause}" if cause is not None else f"{type(err).__name__}"
        self.shutdown()
        raise CollectorWorkerError(
            f"RayCollector actor {i} failed with {what}\n\nRay error:\n{err}"
        ) from err

    # ------------------------------------------------------------ iteration
    def __iter__(self) -> Iterator[TensorDictBase | None]:
        """Yield batches until ``total_frames`` frames are collected."""
        while self.total_frames < 0 or self._frames < self.total_frames:
            yield self.next_batch()

    def next_batch(self) -> TensorDictBase | None:
        """Collect the next batch (all actors when sync, the first ready one otherwise)."""
        if self._closed:
            raise RuntimeError("RayCollector is shut down")
        if self.sync:
            batches = self._get([a.collect.remote() for a in self._actors])
            out = torch.stack(batches, 0)
            self._frames += self.frames_per_batch
        else:
            busy = set(self._pending.values())
            for i, actor in enumerate(self._actors):
                if i not in busy and self._needs_more(len(self._pending)):
                    self._pending[actor.collect.remote()] = i
            if not self._pending:  # called past total_frames: collect one more batch
                self._pending[self._actors[0].collect.remote()] = 0
            self._check_updates()
            ready, _ = self._ray.wait(list(self._pending), num_returns=1)
            i = self._pending.pop(ready[0])
            try:
                out = self._ray.get(ready[0])
            except self._ray.exceptions.RayError as err:
                self._fail(i, err)
            if self._needs_more(len(self._pending) + 1):
                self._pending[self._actors[i].collect.remote()] = i
            out.set(WORKER_ID_KEY, torch.full(out.batch_size, i, dtype=torch.long))
            self._frames += self._worker_frames[i]
        self._iter += 1
        return self._finish(out)

    def _check_updates(self) -> None:
        """Raise if a weight update that has finished failed; forget the ones that succeeded."""
        if not self._weight_refs:
            return
        done, _ = self._ray.wait(
            [r for r, _ in self._weight_refs], num_returns=len(self._weight_refs), timeout=0
        )
        done_set = set(done)
        for ref, i in [(r, i) for r, i in self._weight_refs if r in done_set]:
            try:
                self._ray.get(ref)
            except self._ray.exceptions.RayError as err:
                self._fail(i, err)
        self._weight_refs = [(r, i) for r, i in self._weight_refs if r not in done_set]

    def _needs_more(self, extra: int) -> bool:
        if self.total_frames < 0:
            return True
        return self._frames + extra * max(self._worker_frames) < self.total_frames

    # ------------------------------------------------------------ weights & state
    @property
    def frames(self) -> int:
        """Frames yielded so far."""
        return self._frames

    def update_policy_weights_(self, weights: TensorDictBase | dict | None = None) -> None:
        """Send new policy weights to every actor through the object store.

        The weights are put in the object store once and every actor loads
        them before its next batch. Sync: this waits until every actor has
        them. Async: it returns at once, and busy actors load them after their
        current batch.

        Args:
            weights: a ``TensorDict`` of parameters, a ``state_dict``, or
                ``None`` for the current weights of the policy given at
                construction.
        """
        if self._closed:
            raise RuntimeError("RayCollector is shut down")
        if weights is None:
            if not isinstance(self.policy, nn.Module):
                return
            weights = TensorDict.from_module(self.policy).data
        if isinstance(weights, TensorDictBase):
            weights = weights.detach().cpu()
        ref = self._ray.put(weights)
        refs = [a.update_weights.remote(ref) for a in self._actors]
        if self.sync:
            self._get(refs)
        else:
            # Busy actors load the weights after their current batch: do not wait
            # for that here. Errors surface at the next batch (see _check_updates).
            self._weight_refs.extend((r, i) for i, r in enumerate(refs))

    def state_dict(self) -> dict[str, Any]:
        """Counters, and each actor's collector state (policy, env where possible)."""
        return {
            "frames": self._frames,
            "iter": self._iter,
            "collectors": self._get([a.state_dict.remote() for a in self._actors]),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self._frames = int(state["frames"])
        self._iter = int(state.get("iter", 0))
        subs = state.get("collectors")
        if subs is not None:
            self._get([a.load_state_dict.remote(s) for a, s in zip(self._actors, subs)])

    # ------------------------------------------------------------ lifetime
    def shutdown(self) -> None:
        """Stop the actors (and Ray itself, when this collector started it)."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        ray = self._ray
        for actor in self._actors:
            with contextlib.suppress(Exception):
                ray.get(actor.shutdown.remote(), timeout=10)
            with contextlib.suppress(Exception):
                ray.kill(actor)
        self._actors = []
        self._pending.clear()
        self._weight_refs.clear()
        if self._started_ray:
            ray.shutdown()

    def __repr__(self) -> str:
        return (
            f"RayCollector(num_collectors={self.num_collectors}, sync={self.sync}, "
            f"frames_per_batch={self.frames_per_batch}, total_frames={self.total_frames})"
        )


_COLLECTOR_KWARGS = {
    "init_random_frames",
    "max_frames_per_traj",
    "reset_at_each_iter",
    "exploration",
    "device",
    "policy_device",
}
