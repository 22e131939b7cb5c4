"""Batched envs: run several copies of a non-vectorized env as one env.

- :class:`SerialEnv` steps the copies one after the other in this process. Copies
  that follow :class:`HostArrayEnv` (every PettingZoo-based wrapper) hand it numpy
  arrays, which it stacks into one TensorDict a step instead of building and
  stacking one TensorDict per copy.
- :class:`ParallelEnv` runs each copy in a worker process. Actions and results
  travel through shared-memory TensorDicts preallocated once; the pipes only
  carry short commands, never per-step pickled data.

The batch size is ``[num_workers, *env.batch_size]`` and both support partial
resets through ``"_reset"``.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import traceback
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from marl.envs.common import EnvBase
from marl.envs.worker_process import prepare_worker
from marl.specs import Composite

__all__ = [
    "HostArrayEnv",
    "ParallelEnv",
    "SerialEnv",
    "WorkerError",
    "arrays_to_td",
    "env_flag_arrays",
    "stop_workers",
]


@runtime_checkable
class HostArrayEnv(Protocol):
    """An unbatched env whose outputs start as numpy arrays on the host.

    Such an env builds its outputs as a nested dict of numpy arrays (the
    TensorDict's layout: a dict per sub-TensorDict, an array per leaf) and only
    then turns them into a TensorDict. :class:`SerialEnv` uses the arrays
    directly: it stacks its copies' arrays leaf by leaf and builds one TensorDict
    a step, instead of one per copy and a TensorDict stack (most of a batched
    host env's overhead). The outputs must equal ``_reset``'s and ``_step``'s:
    :func:`~marl.envs.check_serial_arrays` compares the two paths.

    Examples:
        >>> from marl.envs import PettingZooEnv
        >>> isinstance(PettingZooEnv("simple_spread_v3"), HostArrayEnv)
        True
        >>> SerialEnv(4, PettingZooEnv, {"task": "simple_spread_v3"}).use_arrays
        True
    """

    def reset_arrays(self) -> dict[str, Any]:
        """Reset the whole env; ``_reset(None)``'s outputs as nested numpy arrays."""
        ...

    def step_arrays(self, inputs: Any) -> dict[str, Any]:
        """Step with ``inputs`` (key of the action and state specs -> this env's
        tensor); ``_step``'s outputs as nested numpy arrays, all fresh."""
        ...

    def arrays_to_tensordict(self, arrays: dict[str, Any], batch_size: torch.Size) -> Any:
        """The TensorDict of the arrays, ``batch_size`` the dims stacked in front."""
        ...


def arrays_to_td(
    arrays: dict[str, Any],
    batch_size: torch.Size,
    group_sizes: dict[str, torch.Size],
    device: torch.device,
) -> TensorDict:
    """The TensorDict of a wrapper's nested numpy outputs (the per-step hot path).

    ``arrays`` holds root arrays (the env-level flags, a state) and a dict per group
    (``group_sizes[g]`` its agent dims), whose entries are arrays or dicts of arrays
    (dict observations). ``batch_size`` holds the dims stacked in front of every
    array (``[]`` for one env, ``[num_envs]`` for :class:`~marl.envs.SerialEnv`).
    The tensors share the arrays' memory; the result moves to ``device``.

    Examples:
        >>> import numpy as np
        >>> arrays = {"agents": {"observation": np.zeros((2, 3), np.float32)},
        ...           "done": np.zeros(1, bool)}
        >>> td = arrays_to_td(arrays, torch.Size([]), {"agents": torch.Size([2])},
        ...                   torch.device("cpu"))
        >>> td["agents", "observation"].shape, td["agents"].batch_size
        (torch.Size([2, 3]), torch.Size([2]))
    """
    from_numpy = torch.from_numpy
    root: dict[str, Any] = {}
    for g, group in arrays.items():
        if not isinstance(group, dict):
            root[g] = from_numpy(group)
            continue
        size = torch.Size([*batch_size, *group_sizes[g]])
        entries = {}
        for k, v in group.items():
            if isinstance(v, dict):
                entries[k] = new_td({kk: from_numpy(vv) for kk, vv in v.items()}, size)
            else:
                entries[k] = from_numpy(v)
        root[g] = new_td(entries, size)
    out = new_td(root, batch_size)
    return out if device.type == "cpu" else out.to(device)


def env_flag_arrays(done: bool, truncated: bool) -> dict[str, np.ndarray]:
    """The env-level ``done``/``terminated``/``truncated`` ``[1]`` flags as fresh arrays.

    ``terminated`` is ``done and not truncated``. Three views of one array: one
    allocation a step instead of three.

    Examples:
        >>> {k: v.tolist() for k, v in env_flag_arrays(True, True).items()}
        {'done': [True], 'terminated': [False], 'truncated': [True]}
    """
    flags = np.array([done, done and not truncated, truncated and done])
    return {"done": flags[0:1], "terminated": flags[1:2], "truncated": flags[2:3]}


def new_td(
    entries: dict[str, Any], batch_size: torch.Size, device: torch.device | None = None
) -> TensorDict:
    """A TensorDict from entries already known to be valid (the per-step hot path).

    ``TensorDict._new_unsafe`` skips the per-entry checks (shapes, devices) of
    the public constructor; callers guarantee every tensor already has the
    batch dims and lives on ``device``. Falls back to the public constructor
    on tensordict versions without it.
    """
    new = getattr(TensorDict, "_new_unsafe", None)
    if new is None:  # pragma: no cover - other tensordict versions
        return TensorDict(entries, batch_size=batch_size, device=device)
    return new(entries, batch_size=batch_size, device=device)


def _kill_workers(procs: Sequence[Any]) -> None:
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5)


def stop_workers(procs: Sequence[Any], conns: Sequence[Any]) -> None:
    """Ask each live worker process to close, give each 5 s to exit, terminate (then
    kill) the ones still alive, and close the pipes: no worker is left running.

    Args:
        procs: the worker processes.
        conns: the parent's end of each worker's pipe (same order).
    """
    for proc, conn in zip(procs, conns):
        if proc.is_alive():
            with contextlib.suppress(BrokenPipeError, OSError):
                conn.send(("close", None))
    for proc in procs:
        proc.join(timeout=5)
    _kill_workers(procs)
    for conn in conns:
        conn.close()


class WorkerError(RuntimeError):
    """A worker of a :class:`ParallelEnv` raised or died."""


class _BatchedEnv(EnvBase):
    """Shared set-up: one meta env gives the specs, expanded over the workers."""

    def __init__(
        self,
        num_workers: int,
        create_env_fn: Callable[..., EnvBase],
        create_env_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
        if not callable(create_env_fn):
            raise TypeError(f"create_env_fn must be callable, got {type(create_env_fn).__name__}")
        self.num_workers = num_workers
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = dict(create_env_kwargs or {})

    def _setup_specs(self, meta: EnvBase) -> None:
        super().__init__(
            batch_size=(self.num_workers, *meta.batch_size),
            device=meta.device,
            group_map=meta.group_map,
        )
        n = self.num_workers
        self.episode_metrics = meta.episode_metrics  # the copies report the same outcomes
        # a batch of turn-based games is still played one move per step in each copy
        self.turn_based = meta.turn_based
        self.observation_spec = meta.observation_spec.expand(n, *meta.observation_spec.shape)
        self.action_spec = meta.action_spec.expand(n, *meta.action_spec.shape)
        self.reward_spec = meta.reward_spec.expand(n, *meta.reward_spec.shape)
        self.done_spec = meta.done_spec.expand(n, *meta.done_spec.shape)
        self.state_spec = meta.state_spec.expand(n, *meta.state_spec.shape)
        self._input_keys = [
            *self.action_spec.keys(True, True),
            *self.state_spec.keys(True, True),
        ]

    def _worker_mask(self, td: TensorDictBase | None) -> torch.Tensor | None:
        """The ``"_reset"`` mask as ``[num_workers, *sub_batch, 1]``, or None for all."""
        if td is None:
            return None
        return td.get("_reset", None)


class SerialEnv(_BatchedEnv):
    """Several copies of an env, stepped in turn in this process.

    Copies that follow :class:`HostArrayEnv` are stepped through their numpy
    arrays (one TensorDict a step for the whole batch); others through their own
    TensorDicts, stacked. Both give the same outputs.

    Args:
        num_workers: number of copies.
        create_env_fn: builds one env (called ``num_workers`` times).
        create_env_kwargs: keyword arguments for ``create_env_fn``.
        use_arrays: step :class:`HostArrayEnv` copies through their arrays (the
            default); False builds a TensorDict per copy (for comparisons).

    Examples:
        >>> from marl.testing import SingleAgentFakeEnv
        >>> env = SerialEnv(3, SingleAgentFakeEnv, {"p_terminate": 0.0})
        >>> env.rollout(4)["observation"].shape
        torch.Size([3, 4, 4])
    """

    def __init__(
        self,
        num_workers: int,
        create_env_fn: Callable[..., EnvBase],
        create_env_kwargs: dict[str, Any] | None = None,
        *,
        use_arrays: bool = True,
    ) -> None:
        super().__init__(num_workers, create_env_fn, create_env_kwargs)
        self.envs = [create_env_fn(**self.create_env_kwargs) for _ in range(num_workers)]
        for e in self.envs:
            if not isinstance(e, EnvBase):
                raise TypeError(f"create_env_fn must return an EnvBase, got {type(e).__name__}")
        self._setup_specs(self.envs[0])
        meta = self.envs[0]
        # batch-free copies only: arrays stack along one new leading dim
        self.use_arrays = bool(
            use_arrays and isinstance(meta, HostArrayEnv) and meta.batch_size == torch.Size([])
        )
        if self.use_arrays:
            # the copies' outputs are whole (see EnvBase.complete_done_flags)
            self.complete_done_flags = meta.complete_done_flags

    def _reset(self, td: TensorDictBase | None) -> TensorDictBase:
        mask = self._worker_mask(td)
        if self.use_arrays:
            return self._reset_arrays(mask)
        outs = []
        for i, env in enumerate(self.envs):
            if mask is None:
                outs.append(env.reset())
            elif bool(mask[i].any()):
                sub = td[i].copy()
                outs.append(env.reset(sub))
            else:
                outs.append(None)
        template = next(o for o in outs if o is not None)
        outs = [o if o is not None else torch.zeros_like(template) for o in outs]
        return torch.stack(outs, 0)

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        if self.use_arrays:
            # each input's rows, one unbind per key (cheaper than td.unbind over every key)
            rows = {k: td.get(k).unbind(0) for k in self._input_keys}
            arrays = [
                env.step_arrays({k: v[i] for k, v in rows.items()})
                for i, env in enumerate(self.envs)
            ]
            return self.envs[0].arrays_to_tensordict(_stack_arrays(arrays), self.batch_size)
        # one unbind gives every env's view (td[i] per env walks every key each time)
        subs = td.unbind(0)
        return torch.stack([env._step_proc(sub) for sub, env in zip(subs, self.envs)], 0)

    def _reset_arrays(self, mask: torch.Tensor | None) -> TensorDictBase:
        """Reset the copies under ``mask`` (all with None) through their arrays.

        The copies not reset get zeros, which the base class replaces with their
        current values (as in the TensorDict path).
        """
        flags = [True] * self.num_workers if mask is None else mask.reshape(-1).tolist()
        arrays: list[dict[str, Any] | None] = [
            env.reset_arrays() if flag else None for env, flag in zip(self.envs, flags)
        ]
        if not all(flags):
            zeros = _zeros_like_arrays(next(a for a in arrays if a is not None))
            arrays = [zeros if a is None else a for a in arrays]
        return self.envs[0].arrays_to_tensordict(_stack_arrays(arrays), self.batch_size)

    def _set_seed(self, seed: int | None) -> None:
        for i, env in enumerate(self.envs):
            env.set_seed(None if seed is None else seed + i)

    def close(self) -> None:
        for env in self.envs:
            env.close()
        super().close()


def _stack_arrays(items: list[Any]) -> Any:
    """Stack nested dicts of numpy arrays leaf by leaf along a new first dim."""
    first = items[0]
    if isinstance(first, dict):
        return {k: _stack_arrays([item[k] for item in items]) for k in first}
    # np.array stacks same-shape arrays as np.stack does (a fresh array, the common
    # dtype, an error on differing shapes) in one C call: 3x faster on small leaves
    return np.array(items)


def _zeros_like_arrays(arrays: Any) -> Any:
    if isinstance(arrays, dict):
        return {k: _zeros_like_arrays(v) for k, v in arrays.items()}
    return np.zeros_like(arrays)


def _worker(
    idx: int,
    parent: tuple[int | None, list[int]],
    conn: Any,
    create_env_fn: Callable[..., EnvBase],
    kwargs: dict[str, Any],
    shared_in: TensorDictBase,
    shared_step: TensorDictBase,
    shared_reset: TensorDictBase,
    input_keys: list[Any],
    reward_keys: list[Any],
) -> None:
    prepare_worker(*parent)
    torch.set_num_threads(1)
    try:
        env = create_env_fn(**kwargs)
        my_in, my_step, my_reset = shared_in[idx], shared_step[idx], shared_reset[idx]
        root: TensorDictBase | None = None
    except Exception:
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ready", None))
    while True:
        try:
            cmd, arg = conn.recv()
        except EOFError:
            return
        try:
            if cmd == "reset":
                if arg and root is not None:
                    # Partial reset: the env merges the sub-envs not being reset.
                    root.set("_reset", my_in.get("_reset").clone())
                    root = env.reset(root)
                else:
                    root = env.reset()
                my_reset.update_(root.select(*my_reset.keys(True, True)))
            elif cmd == "step":
                if root is None:
                    raise RuntimeError("step() called before reset()")
                td = root.copy()
                for key in input_keys:
                    td.set(key, my_in.get(key).clone())
                out = env._step_proc(td)
                my_step.update_(out.select(*my_step.keys(True, True)))
                root = out.exclude(*reward_keys)
            elif cmd == "seed":
                env.set_seed(arg)
            elif cmd == "close":
                env.close()
                conn.send(("ok", None))
                return
            else:
                raise ValueError(f"unknown command {cmd!r}")
            conn.send(("ok", None))
        except Exception:
            conn.send(("error", traceback.format_exc()))


class ParallelEnv(_BatchedEnv):
    """Several copies of an env, each in its own worker process.

    Data goes through shared-memory TensorDicts: the parent writes actions,
    the workers write observations, rewards and flags in place. A worker that
    raises or dies makes the parent raise :class:`WorkerError` with the
    worker's index and original traceback, instead of hanging.

    Args:
        num_workers: number of worker processes.
        create_env_fn: builds one env in each worker. With the default
            ``"fork"`` start method lambdas work; with ``"spawn"`` it must pickle.
        create_env_kwargs: keyword arguments for ``create_env_fn``.
        mp_start_method: multiprocessing start method.
        timeout: seconds to wait for a worker's answer before raising.

    Examples:
        >>> from marl.testing import SingleAgentFakeEnv
        >>> with ParallelEnv(2, SingleAgentFakeEnv, {"p_terminate": 0.0}) as env:
        ...     env.rollout(3)["next", "reward"].shape
        torch.Size([2, 3, 1])
    """

    def __init__(
        self,
        num_workers: int,
        create_env_fn: Callable[..., EnvBase],
        create_env_kwargs: dict[str, Any] | None = None,
        mp_start_method: str = "fork",
        timeout: float = 60.0,
    ) -> None:
        super().__init__(num_workers, create_env_fn, create_env_kwargs)
        meta = create_env_fn(**self.create_env_kwargs)
        if not isinstance(meta, EnvBase):
            raise TypeError(f"create_env_fn must return an EnvBase, got {type(meta).__name__}")
        if meta.device.type != "cpu":
            raise ValueError(
                f"ParallelEnv shares CPU memory between processes; got an env on {meta.device}"
            )
        self._setup_specs(meta)
        meta.close()
        self.timeout = timeout
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        n = self.num_workers
        in_spec = Composite(shape=self.batch_size)
        in_spec.update(self.action_spec.clone())
        in_spec.update(self.state_spec.clone())
        self._shared_in = in_spec.zero()
        self._shared_in.set("_reset", torch.zeros((*self.batch_size, 1), dtype=torch.bool))
        reset_spec = Composite(shape=self.batch_size)
        reset_spec.update(self.observation_spec.clone())
        reset_spec.update(self.done_spec.clone())
        self._shared_reset = reset_spec.zero()
        step_spec = reset_spec.clone()
        step_spec.update(self.reward_spec.clone())
        self._shared_step = step_spec.zero()
        for buf in (self._shared_in, self._shared_reset, self._shared_step):
            buf.share_memory_()
        ctx = mp.get_context(mp_start_method)
        # see marl.envs.worker_process: forked workers drop the parent's pipe ends
        forked = mp_start_method == "fork"
        parent_pid = None if mp_start_method == "forkserver" else os.getpid()
        for i in range(n):
            parent, child = ctx.Pipe()
            inherited = [c.fileno() for c in (*self._conns, parent)] if forked else []
            proc = ctx.Process(
                target=_worker,
                args=(
                    i,
                    (parent_pid, inherited),
                    child,
                    create_env_fn,
                    self.create_env_kwargs,
                    self._shared_in,
                    self._shared_step,
                    self._shared_reset,
                    self._input_keys,
                    self.reward_spec.keys(True, True),
                ),
                daemon=True,
            )
            proc.start()
            child.close()
            self._procs.append(proc)
            self._conns.append(parent)
        try:
            self._wait(range(n), expect="ready")
        except WorkerError:
            self._kill()
            raise

    # ---------------------------------------------------------------- IPC
    def _wait(self, workers: Any, expect: str = "ok") -> None:
        for i in workers:
            conn, proc = self._conns[i], self._procs[i]
            waited = 0.0
            while not conn.poll(0.05):
                waited += 0.05
                if not proc.is_alive():
                    raise WorkerError(
                        f"ParallelEnv worker {i} died (exit code {proc.exitcode}) without answering"
                    )
                if waited > self.timeout:
                    raise WorkerError(
                        f"ParallelEnv worker {i} did not answer within {self.timeout}s"
                    )
            try:
                status, payload = conn.recv()
            except EOFError as err:
                proc.join(timeout=1.0)
                raise WorkerError(
                    f"ParallelEnv worker {i} died (exit code {proc.exitcode}) without answering"
                ) from err
            if status == "error":
                raise WorkerError(f"ParallelEnv worker {i} raised:\n{payload}")
            if status != expect:
                raise WorkerError(
                    f"ParallelEnv worker {i} answered {status!r}, expected {expect!r}"
                )

    def _send(self, workers: Any, cmd: str, arg: Any = None) -> list[int]:
        sent = []
        for i in workers:
            try:
                self._conns[i].send((cmd, arg))
            except (BrokenPipeError, OSError) as err:
                raise WorkerError(
                    f"ParallelEnv worker {i} is gone (exit code {self._procs[i].exitcode})"
                ) from err
            sent.append(i)
        return sent

    # ---------------------------------------------------------------- env API
    def _reset(self, td: TensorDictBase | None) -> TensorDictBase:
        mask = self._worker_mask(td)
        if mask is None:
            workers = self._send(range(self.num_workers), "reset", False)
        else:
            self._shared_in.get("_reset").copy_(mask)
            flat = mask.reshape(self.num_workers, -1).any(-1)
            workers = self._send([i for i in range(self.num_workers) if flat[i]], "reset", True)
        self._wait(workers)
        return self._shared_reset.clone()

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        for key in self._input_keys:
            self._shared_in.get(key).copy_(td.get(key))
        self._wait(self._send(range(self.num_workers), "step"))
        return self._shared_step.clone()

    def _set_seed(self, seed: int | None) -> None:
        if not self._procs:
            return
        for i in range(self.num_workers):
            self._send([i], "seed", None if seed is None else seed + i)
        self._wait(range(self.num_workers))

    def _kill(self) -> None:
        _kill_workers(self._procs)

    def close(self) -> None:
        if self.is_closed:
            return
        stop_workers(self._procs, self._conns)
        super().close()

    def __del__(self) -> None:
        try:
            if not self.is_closed:
                self.close()
        except Exception:  # never raise from a finalizer
            pass
