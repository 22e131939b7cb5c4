"""The body of a multi-process collector's worker process.

The worker builds its env and a :class:`~marl.collectors.Collector` whose
buffer is in shared memory, hands that buffer to the parent once, and then
serves short commands: ``collect``, ``update_weights`` and ``close``. Errors
are sent back with their traceback before the worker exits.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from marl.collectors.collector import Collector, Policy
from marl.collectors.utils import make_env
from marl.envs.common import EnvBase
from marl.envs.worker_process import prepare_worker

__all__ = ["worker_main"]


def worker_main(
    idx: int,
    num_workers: int,
    parent: tuple[int | None, list[int]],
    conn: Any,
    create_env_fn: Callable[[], EnvBase],
    policy: Policy | None,
    kwargs: dict[str, Any],
    shared_weights: TensorDictBase | None,
    weights_lock: Any,
    seed: int | None,
    num_threads: int,
) -> None:
    """Worker process: build the env, then serve ``collect``/``update_weights``/``close``.

    ``parent`` is ``(parent_pid, inherited_fds)`` for :func:`~marl.envs.worker_process.prepare_worker`.
    """
    prepare_worker(*parent)
    try:
        torch.set_num_threads(num_threads)
        if seed is None:
            torch.seed()  # forked workers must not share the parent's RNG state
        else:
            torch.manual_seed(seed + idx)
        env = make_env(create_env_fn, f"worker {idx}")
        if seed is not None:
            env.set_seed(seed + idx)
        conn.send(("env", tuple(env.batch_size)))
        cmd, steps = conn.recv()
        if cmd != "init":
            return
        numel = max(1, env.batch_size.numel())
        collector = Collector(
            env,
            policy,
            frames_per_batch=steps * numel,
            close_env=True,
            share_buffer=True,  # the parent reads the batches in place
            traj_id_stride=num_workers,
            traj_id_offset=idx,
            **kwargs,
        )
        conn.send(("ready", None))
    except Exception as err:
        _send_error(conn, err)
        return
    sent_buffer = False
    while True:
        try:
            cmd, _arg = conn.recv()
        except (EOFError, OSError):
            collector.shutdown()
            return
        try:
            if cmd == "collect":
                buffer = collector.collect()
                conn.send(("batch", None if sent_buffer else buffer))
                sent_buffer = True
            elif cmd == "update_weights":
                with weights_lock:
                    collector.update_policy_weights_(shared_weights)
            elif cmd == "close":
                collector.shutdown()
                conn.send(("closed", None))
                return
            else:
                raise ValueError(f"unknown command {cmd!r}")
        except Exception as err:
            _send_error(conn, err)
            collector.shutdown()
            return


def _send_error(conn: Any, err: BaseException) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):
        conn.send(("error", (type(err).__name__, str(err), traceback.format_exc())))
