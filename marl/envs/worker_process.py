"""What every worker process of marl does first: die with its parent, and only then.

A forked worker inherits three things that can keep it alive after its parent is
gone, however the parent dies (``SIGKILL`` included):

- the parent's ends of the pipes: with its own end of the parent's pipe still open
  in the worker, ``conn.recv()`` never sees end-of-file when the parent dies;
- the parent's signal handlers: ``marl-run`` turns ``SIGTERM`` into "stop after this
  iteration", so a plain ``kill`` of a worker would do nothing;
- nothing tells an orphan that it is one: Linux re-parents it (to PID 1 or a
  subreaper) and it waits on its pipe forever.

:func:`prepare_worker` undoes all three: it closes the inherited descriptors it is
given, restores ``SIGTERM``'s default action, ignores ``SIGINT`` (Ctrl-C reaches the
whole process group; the parent stops its workers itself after its final
checkpoint), and starts a watcher thread that ends the worker when its parent
changes. :class:`~marl.envs.ParallelEnv` and the multi-process collectors call it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterable

__all__ = ["ORPHAN_EXIT_CODE", "prepare_worker"]

ORPHAN_EXIT_CODE = 70
"""Exit code of a worker that ended because its parent died."""


def _watch_parent(parent_pid: int, interval: float) -> None:
    # os.getppid() changes the moment the parent dies (the worker is re-parented),
    # which works for fork and spawn alike, unlike prctl(PR_SET_PDEATHSIG), which
    # fires when the *thread* that started the worker exits
    while True:
        if os.getppid() != parent_pid:
            os._exit(ORPHAN_EXIT_CODE)  # no cleanup: nobody is left to read anything
        threading.Event().wait(interval)


def prepare_worker(
    parent_pid: int | None, inherited_fds: Iterable[int] = (), interval: float = 0.5
) -> None:
    """Make this worker process end when its parent dies, and obey ``SIGTERM``.

    Call it first thing in a worker's target function.

    Args:
        parent_pid: the PID of the process that started the worker (``os.getpid()``
            there, passed as an argument: by the time the worker runs its parent may
            already be gone), or ``None`` to watch whichever process is the parent
            now (``forkserver`` workers are the fork server's children).
        inherited_fds: descriptors the worker inherited by ``fork`` but must not hold:
            the parent's ends of its pipes. Closed here; ignored when already closed
            (under ``spawn`` nothing is inherited, so pass none).
        interval: seconds between two checks of the parent.

    Examples:
        >>> import multiprocessing as mp, os
        >>> def work(parent):
        ...     prepare_worker(parent)
        >>> proc = mp.get_context("fork").Process(target=work, args=(os.getpid(),))
        >>> proc.start(); proc.join(); proc.exitcode
        0
    """
    for fd in inherited_fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent_pid is None:
        parent_pid = os.getppid()
    elif os.getppid() != parent_pid:  # the parent died before the worker got here
        os._exit(ORPHAN_EXIT_CODE)
    threading.Thread(
        target=_watch_parent, args=(parent_pid, interval), name="marl-parent-watch", daemon=True
    ).start()
