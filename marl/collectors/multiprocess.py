"""Multi-process collectors: one :class:`Collector` per worker process.

Each worker builds its env, runs a ``Collector`` whose output buffer lives in
shared memory, and hands that buffer to the parent once. From then on the
pipes only carry short commands (``collect``, ``update_weights``, ``close``)
and the parent reads every batch straight from shared memory: no per-step (or
per-batch) pickling of data. Policy weights travel the same way: the parent
writes them into a shared-memory copy and tells the workers to load it.

A worker that raises sends its traceback and exits; a worker that dies is
noticed through its process sentinel. Either way the parent shuts every worker
down and raises :class:`CollectorWorkerError` naming the worker, instead of
hanging.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import wait
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from marl.collectors._worker import worker_main
from marl.collectors.collector import Policy
from marl.collectors.utils import (
    WORKER_ID_KEY,
    CollectorLifetime,
    CollectorWorkerError,
    check_replay_buffer,
    plan_worker_frames,
    round_total_frames,
)
from marl.envs.batched import stop_workers
from marl.envs.common import EnvBase

__all__ = ["MultiAsyncCollector", "MultiSyncCollector"]

EnvFn = Callable[[], EnvBase]


class _MultiCollector(CollectorLifetime):
    """Worker pool, messaging and frame accounting shared by the sync and async collectors."""

    _sync = True

    def __init__(
        self,
        create_env_fns: EnvFn | Sequence[EnvFn],
        policy: Policy | None = None,
        *,
        num_workers: int | None = None,
        frames_per_batch: int,
        total_frames: int = -1,
        init_random_frames: int = 0,
        max_frames_per_traj: int | None = None,
        reset_at_each_iter: bool = False,
        split_trajs: bool = False,
        exploration: Any = "random",
        device: Any = None,
        policy_device: Any = None,
        storing_device: Any = None,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        replay_buffer: Any = None,
        seed: int | None = None,
        num_threads: int = 1,
        mp_start_method: str = "fork",
        timeout: float | None = None,
    ) -> None:
        who = type(self).__name__
        fns = self._env_fns(create_env_fns, num_workers, who)
        self.num_workers = len(fns)
        if not isinstance(frames_per_batch, int) or frames_per_batch < 1:
            raise ValueError(
                f"{who}: frames_per_batch must be a positive int, got {frames_per_batch!r}"
            )
        if policy is not None and not callable(policy):
            raise TypeError(
                f"{who}: policy must be callable (td -> td), got {type(policy).__name__}"
            )
        check_replay_buffer(replay_buffer, who)
        self.policy = policy
        self.split_trajs = split_trajs
        self.postproc = postproc
        self.replay_buffer = replay_buffer
        self.storing_device = None if storing_device is None else torch.device(storing_device)
        if self.storing_device is None and device is not None:
            self.storing_device = torch.device(device)
        self.timeout = timeout
        self._frames = 0
        self._iter = 0
        self._closed = False
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._buffers: list[TensorDictBase | None] = [None] * self.num_workers
        self._in_flight: set[int] = set()
        self._asked_at = [0.0] * self.num_workers  # time.monotonic() of each worker's ask
        kwargs = {
            "init_random_frames": math.ceil(init_random_frames / self.num_workers),
            "max_frames_per_traj": max_frames_per_traj,
            "reset_at_each_iter": reset_at_each_iter,
            "exploration": exploration,
            "device": device,
            "policy_device": policy_device,
            "storing_device": "cpu",
        }
        self._shared_weights: TensorDictBase | None = None
        if isinstance(policy, nn.Module) and any(True for _ in policy.parameters()):
            self._shared_weights = TensorDict.from_module(policy).data.cpu().clone().share_memory_()
        ctx = mp.get_context(mp_start_method)
        self._weights_lock = ctx.Lock()
        # a forked worker closes the parent's pipe ends it inherited, so that it sees
        # end-of-file (and exits) when the parent dies; see marl.envs.worker_process
        forked = mp_start_method == "fork"
        parent_pid = None if mp_start_method == "forkserver" else os.getpid()
        try:
            for i, fn in enumerate(fns):
                parent, child = ctx.Pipe()
                inherited = [c.fileno() for c in (*self._conns, parent)] if forked else []
                proc = ctx.Process(
                    target=worker_main,
                    args=(
                        i,
                        self.num_workers,
                        (parent_pid, inherited),
                        child,
                        fn,
                        policy,
                        kwargs,
                        self._shared_weights,
                        self._weights_lock,
                        seed,
                        num_threads,
                    ),
                    daemon=True,
                    name=f"{who}-worker-{i}",
                )
                proc.start()
                child.close()
                self._procs.append(proc)
                self._conns.append(parent)
            batch_sizes = [self._recv(i, "env") for i in range(self.num_workers)]
            plan = plan_worker_frames(frames_per_batch, batch_sizes, self._sync, who)
            self.frames_per_batch, steps, self._worker_frames = plan
            self.steps_per_batch = steps
            self.env_batch_sizes = [torch.Size(b) for b in batch_sizes]
            for i in range(self.num_workers):
                self._send(i, "init", steps)
            for i in range(self.num_workers):
                self._recv(i, "ready")
        except BaseException:
            self.shutdown()
            raise
        self.total_frames = round_total_frames(total_frames, self.frames_per_batch, who)

    # ------------------------------------------------------------ set-up
    @staticmethod
    def _env_fns(fns: EnvFn | Sequence[EnvFn], num_workers: int | None, who: str) -> list[EnvFn]:
        if callable(fns):
            if num_workers is None:
                raise ValueError(f"{who}: pass num_workers= with a single create_env_fn")
            fns = [fns] * num_workers
        fns = list(fns)
        if not fns or not all(callable(f) for f in fns):
            raise TypeError(
                f"{who}: create_env_fns must be a callable or a non-empty list of callables"
            )
        if num_workers is not None and num_workers != len(fns):
            raise ValueError(
                f"{who}: num_workers={num_workers} but {len(fns)} create_env_fns were given"
            )
        return fns

    # ------------------------------------------------------------ messaging
    def _send(self, i: int, cmd: str, arg: Any = None) -> None:
        try:
            self._conns[i].send((cmd, arg))
        except (BrokenPipeError, OSError) as err:
            self._fail(i, f"is gone (exit code {self._procs[i].exitcode})", err)

    def _recv(self, i: int, expect: str) -> Any:
        """Wait for worker ``i``'s answer, noticing errors and deaths."""
        conn, proc = self._conns[i], self._procs[i]
        ready = wait([conn, proc.sentinel], timeout=self.timeout)
        if not ready:
            self._fail(i, f"did not answer within {self.timeout}s (stopped or stuck?)")
        return self._read(i, expect)

    def _recv_any(self) -> int:
        """Wait until one of the workers in flight delivers a batch; return its index.

        Each worker has its own deadline (``timeout`` after its batch was asked for):
        one silent worker fails the collector even while the others keep answering.
        """
        if not self._in_flight:
            raise RuntimeError(f"{type(self).__name__}: no worker is collecting")
        waiting = sorted(self._in_flight)
        objects = [self._conns[i] for i in waiting] + [self._procs[i].sentinel for i in waiting]
        timeout = None
        if self.timeout is not None:
            timeout = max(
                0.0, min(self._asked_at[i] for i in waiting) + self.timeout - time.monotonic()
            )
        ready = wait(objects, timeout=timeout)
        if self.timeout is not None:
            now = time.monotonic()
            for i in waiting:
                silent = self._conns[i] not in ready and self._procs[i].sentinel not in ready
                if silent and now - self._asked_at[i] >= self.timeout:
                    self._fail(
                        i, f"did not deliver a batch within {self.timeout}s (stopped or stuck?)"
                    )
        for i in waiting:
            if self._conns[i] in ready:
                self._read(i, "batch")
                return i
        for i in waiting:
            if self._procs[i].sentinel in ready:
                self._read(i, "batch")
        raise RuntimeError(
            f"{type(self).__name__}: woke up with no worker ready"
        )  # pragma: no cover

    def _read(self, i: int, expect: str) -> Any:
        conn, proc = self._conns[i], self._procs[i]
        if not conn.poll():
            proc.join(timeout=1)
            self._fail(i, f"died (exit code {proc.exitcode}) without answering")
        try:
            status, payload = conn.recv()
        except (EOFError, OSError) as err:
            proc.join(timeout=1)
            self._fail(i, f"died (exit code {proc.exitcode}) without answering", err)
        if status == "error":
            name, msg, tb = payload
            self._fail(i, f"raised {name}: {msg}\n\nWorker traceback:\n{tb}")
        if status != expect:
            self._fail(i, f"answered {status!r}, expected {expect!r}")
        if status == "batch":
            self._in_flight.discard(i)
            if payload is not None:
                self._buffers[i] = payload
        return payload

    def _fail(self, i: int, what: str, cause: BaseException | None = None) -> None:
        if self._procs[i].is_alive():  # stuck or stopped (SIGSTOP): it cannot obey "close"
            self._procs[i].kill()
        self.shutdown()
        raise CollectorWorkerError(f"{type(self).__name__} worker {i} {what}") from cause

    def _dispatch(self, i: int) -> None:
        self._send(i, "collect")
        self._asked_at[i] = time.monotonic()
        self._in_flight.add(i)

    # ------------------------------------------------------------ public API
    @property
    def frames(self) -> int:
        """Frames yielded so far."""
        return self._frames

    def update_policy_weights_(self, weights: TensorDictBase | dict | None = None) -> None:
        """Broadcast new policy weights to every worker.

        The weights are written once into shared memory; each worker loads them
        before its next batch (an async worker that is collecting finishes its
        current batch with the old weights).

        Args:
            weights: a ``TensorDict`` of parameters, a ``state_dict``, or
                ``None`` to send the current weights of the policy given at
                construction.
        """
        self._check_open()
        if self._shared_weights is None:
            if weights is None:
                return
            raise TypeError(f"{type(self).__name__}: the policy has no parameters to update")
        if weights is None:
            weights = TensorDict.from_module(self.policy).data
        elif isinstance(weights, dict):  # a state_dict: dotted names -> nested keys
            weights = TensorDict(dict(weights), batch_size=[]).unflatten_keys(".")
        elif not isinstance(weights, TensorDictBase):
            raise TypeError(
                f"weights must be a TensorDict, a state_dict or None, got {type(weights).__name__}"
            )
        with self._weights_lock:
            self._shared_weights.update_(weights.to("cpu"))
        for i in range(self.num_workers):
            self._send(i, "update_weights")

    def state_dict(self) -> dict[str, Any]:
        """Frames and batches counted so far, and the policy's state dict when it has one.

        The envs' states stay in the workers and are not included.
        """
        state: dict[str, Any] = {"frames": self._frames, "iter": self._iter}
        if isinstance(self.policy, nn.Module):
            state["policy"] = self.policy.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the counters (and the policy, broadcast to the workers) from :meth:`state_dict`."""
        self._frames = int(state["frames"])
        self._iter = int(state.get("iter", 0))
        if "policy" in state and isinstance(self.policy, nn.Module):
            self.update_policy_weights_(state["policy"])

    def __iter__(self) -> Iterator[TensorDictBase | None]:
        """Yield :meth:`next_batch` until ``total_frames``: stacked ``[num_workers,
        *env_batch, T]`` batches (sync), or one worker's ``[*env_batch, T]`` at a time
        (async)."""
        while not self._done():
            yield self.next_batch()

    def next_batch(self) -> TensorDictBase | None:
        raise NotImplementedError  # the sync and async collectors each have their own

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is shut down")

    def _done(self) -> bool:
        return 0 <= self.total_frames <= self._frames

    def shutdown(self) -> None:
        """Stop every worker and reap it: no process is left running or as a zombie."""
        if self._closed:
            return
        self._closed = True
        stop_workers(self._procs, self._conns)
        self._buffers = [None] * self.num_workers
        self._in_flight.clear()

    def __del__(self) -> None:
        try:
            if not self._closed and threading.main_thread().is_alive():
                self.shutdown()
        except Exception:
            pass

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_workers={self.num_workers}, "
            f"frames_per_batch={self.frames_per_batch}, total_frames={self.total_frames})"
        )


class MultiSyncCollector(_MultiCollector):
    """Collect in worker processes and yield the batches of all workers together.

    Each of the ``num_workers`` processes runs a :class:`Collector` on its own
    env. Every iteration, all workers collect one batch at once; the parent
    stacks them along a new leading worker dim, so a batch has shape
    ``[num_workers, *env_batch, T]`` (the layout of a
    :class:`~marl.envs.ParallelEnv`). ``frames_per_batch`` counts the frames of
    all workers together, and is rounded up to whole steps of every worker.
    Trajectory ids are unique across workers.

    Data travels through shared memory, not per-step pickling. Weights are
    broadcast by :meth:`update_policy_weights_`, and workers never start a
    batch before the previous one has been yielded, so a sync collector stays
    on-policy.

    Args:
        create_env_fns: a callable building an env (used in every worker), or a
            list of them, one per worker. With the default ``"fork"`` start
            method lambdas work; with ``"spawn"`` they must pickle.
        policy: ``td -> td`` (``None``: random actions). It is copied into each
            worker (by fork, or by pickling).
        num_workers: the number of worker processes (default: ``len(create_env_fns)``).
        frames_per_batch: frames per yielded batch, all workers together.
        total_frames: frames to collect in all (rounded up to whole batches
            with a warning); ``-1`` never stops.
        init_random_frames: random-action frames, split evenly among the workers.
        max_frames_per_traj: see :class:`Collector`.
        reset_at_each_iter: see :class:`Collector`.
        split_trajs: yield padded trajectories (see :func:`split_trajectories`).
        exploration: see :class:`Collector`.
        device: the workers' policy device and the default ``storing_device``.
        policy_device: where the workers run the policy.
        storing_device: where yielded batches are put (default: CPU, where the
            shared buffers are).
        postproc: ``td -> td`` applied to each yielded batch.
        replay_buffer: any object with ``.extend(td)``; batches go there and
            the iterator yields ``None``.
        seed: worker ``i`` seeds its env and torch with ``seed + i``
            (``None``: fresh random seeds per worker).
        num_threads: torch threads per worker.
        mp_start_method: ``"fork"`` (default) or ``"spawn"``/``"forkserver"``.
        timeout: seconds to wait for a worker's batch before raising
            (``None``: no limit; crashes are still detected at once).

    Examples:
        >>> from marl.collectors import MultiSyncCollector
        >>> from marl.testing import SingleAgentFakeEnv
        >>> with MultiSyncCollector(lambda: SingleAgentFakeEnv(num_envs=2), None, num_workers=2,
        ...                         frames_per_batch=16, total_frames=32) as collector:
        ...     [tuple(batch.batch_size) for batch in collector]
        [(2, 2, 4), (2, 2, 4)]
    """

    _sync = True

    def next_batch(self) -> TensorDictBase | None:
        """Collect one batch from every worker and return them stacked."""
        self._check_open()
        for i in range(self.num_workers):
            self._dispatch(i)
        for i in range(self.num_workers):
            self._recv(i, "batch")
        out = torch.stack(self._buffers, 0)
        self._frames += self.frames_per_batch
        self._iter += 1
        return self._finish(out)


class MultiAsyncCollector(_MultiCollector):
    """Collect in worker processes and yield each worker's batch as soon as it is ready.

    Every worker collects continuously: as soon as the parent has copied a
    worker's batch out of shared memory, that worker starts the next one. Each
    yielded batch is one worker's ``[*env_batch, T]`` batch with a
    ``("collector", "worker_id")`` entry (``[*env_batch, T]``, constant).
    ``frames_per_batch`` is per yielded batch (per worker). Batches may have
    been collected with weights one update old: this collector is for
    off-policy algorithms.

    Args:
        create_env_fns: see :class:`MultiSyncCollector`.
        policy: see :class:`MultiSyncCollector`.
        num_workers: see :class:`MultiSyncCollector`.
        frames_per_batch: frames per yielded batch (one worker's batch).
        total_frames: frames to yield in all (rounded up to whole batches with
            a warning); ``-1`` never stops. Batches still in flight at the end
            are discarded.

    The other arguments are those of :class:`MultiSyncCollector`.

    Examples:
        >>> from marl.collectors import MultiAsyncCollector
        >>> from marl.testing import SingleAgentFakeEnv
        >>> with MultiAsyncCollector(lambda: SingleAgentFakeEnv(num_envs=2), None, num_workers=2,
        ...                          frames_per_batch=8, total_frames=32) as collector:
        ...     batches = list(collector)
        >>> len(batches), tuple(batches[0].batch_size)
        (4, (2, 4))
        >>> sorted(set(int(b["collector", "worker_id"][0, 0]) for b in batches))
        [0, 1]
    """

    _sync = False

    def next_batch(self) -> TensorDictBase | None:
        """Wait for the next worker batch and return it (with its worker id)."""
        self._check_open()
        for i in range(self.num_workers):
            if i not in self._in_flight and self._needs_more(extra=len(self._in_flight)):
                self._dispatch(i)
        if not self._in_flight:  # called past total_frames: collect one more batch
            self._dispatch(0)
        i = self._recv_any()
        out = self._buffers[i].clone()
        if self._needs_more(extra=len(self._in_flight) + 1):
            self._dispatch(i)
        out.set(WORKER_ID_KEY, torch.full(out.batch_size, i, dtype=torch.long))
        self._frames += self._worker_frames[i]
        self._iter += 1
        return self._finish(out)

    def _needs_more(self, extra: int) -> bool:
        """Whether yielding ``extra`` more batches still leaves frames to collect."""
        if self.total_frames < 0:
            return True
        return self._frames + extra * max(self._worker_frames) < self.total_frames
