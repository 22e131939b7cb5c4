"""One live writer per run folder: a POSIX record lock on ``<folder>/.lock``.

Every way of writing a run folder (:meth:`Experiment.run
<marl.experiment.Experiment.run>`, ``marl-run`` and ``marl-league`` before hydra starts,
:func:`~marl.experiment.run_league`, ``marl-tune``'s members, ``marl-bench``) holds the
folder's lock while it writes, so that a second run or a resume into a live run's folder
is refused (:class:`RunFolderInUse`, naming the holder's PID) instead of mixing its rows
and checkpoints with the live run's.

Why ``fcntl.lockf`` (POSIX record locks), not ``flock`` or a PID file: the kernel drops
the lock when its process ends, however it ends (a run killed with SIGKILL leaves a
``.lock`` file that the next run simply takes over), and forked children (the collectors'
worker processes, which may outlive a killed parent) do not inherit it. The catch: a
process loses its POSIX lock when it closes *any* descriptor of the file, so a process
keeps exactly one descriptor per held folder (the registry below) and never opens the
file otherwise. POSIX locks belong to a process, so the registry also arbitrates between
writers of one process: a second :class:`~marl.experiment.Experiment` into a folder held
by a live one is refused, while ``marl-run``, which takes the lock before hydra starts,
hands the folder on to the Experiment it then runs (a lock without an ``owner`` is
shared; the first ``owner`` to join becomes the folder's writer).

Examples:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with lock_run_folder(folder, owner="run 1"):
    ...     lock_run_folder(folder, owner="run 2")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    marl.experiment.runlock.RunFolderInUse: ... is in use by a live run in this process (pid ...
    >>> with lock_run_folder(folder, owner="run 2") as lock:  # run 1 let go: free again
    ...     lock.owner
    'run 2'
    >>> check_run_folder(folder)  # nobody holds it now
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import logging
import os
import socket
import threading
from pathlib import Path
from typing import Any

__all__ = ["LOCK_FILE", "RunFolderInUse", "RunLock", "check_run_folder", "lock_run_folder"]

log = logging.getLogger("marl.experiment")

LOCK_FILE = ".lock"
"""The lock file in a run folder; it holds the holder's ``pid``, ``host`` and ``started``."""


class RunFolderInUse(FileExistsError):
    """A live run holds the folder.

    Attributes:
        folder: the run folder.
        pid: the holder's process id (``None`` when it has not written it yet).
        started: when the holder took the folder (``None`` when unknown).
    """

    def __init__(self, folder: Path, holder: dict[str, Any], here: bool = False) -> None:
        self._args = (folder, holder, here)
        self.folder = folder
        self.pid = holder.get("pid")
        self.started = holder.get("started")
        where = " in this process" if here else ""
        host = holder.get("host")
        on = f" on {host}" if host and host != socket.gethostname() else ""
        super().__init__(
            f"{folder} is in use by a live run{where} (pid {self.pid or 'unknown'}{on}, "
            f"started {self.started or 'at an unknown time'}): wait for it to end or stop "
            "it (SIGINT or SIGTERM stop a run with a checkpoint), then try again"
        )

    def __reduce__(self) -> tuple[Any, ...]:  # pickled whole (Ray sends errors on)
        return type(self), self._args


class _Held:
    """This process's hold on one folder: its one descriptor and the handles sharing it."""

    def __init__(self, fd: int, holder: dict[str, Any], created: bool) -> None:
        self.fd = fd
        self.holder = holder
        self.created = created  # the folder: removed again if nothing was written into it
        self.pid = os.getpid()
        self.handles: list[RunLock] = []

    @property
    def writer(self) -> Any:
        return next((h.owner for h in self.handles if h.owner is not None), None)


# realpath of the folder -> this process's hold; the guard serializes threads
_HELD: dict[str, _Held] = {}
_GUARD = threading.Lock()


class RunLock:
    """A handle on a held run folder: :meth:`release` it (or use it as a context manager).

    Attributes:
        folder: the run folder (resolved).
        owner: the writer it was taken for (``None``: shared, e.g. by ``marl-run``).
    """

    def __init__(self, folder: Path, owner: Any) -> None:
        self.folder = folder
        self.owner = owner
        self.released = False

    def release(self) -> None:
        """Let go (idempotent); the last handle of the process drops the lock."""
        with _GUARD:
            held = _HELD.get(str(self.folder))
            if self.released or held is None or held.pid != os.getpid():
                self.released = True  # a forked child never releases its parent's lock
                return
            self.released = True
            held.handles.remove(self)
            if held.handles:
                return
            del _HELD[str(self.folder)]
            # unlink before close: whoever opened the old file in between sees that it is
            # no longer the folder's lock file (see _take) and takes the new one
            with contextlib.suppress(OSError):
                os.unlink(self.folder / LOCK_FILE)
            os.close(held.fd)  # drops the lock
            if held.created:  # e.g. marl-run's hold of a run that failed before it started
                with contextlib.suppress(OSError):  # not empty: a run's folder, kept
                    os.rmdir(self.folder)

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _resolved(folder: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(Path(folder).expanduser()))


def _read(fd: int) -> dict[str, Any]:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):  # being written, or not ours
        return {}
    return data if isinstance(data, dict) else {}


def _busy(err: OSError) -> bool:
    return err.errno in (errno.EACCES, errno.EAGAIN)


def _take(folder: Path) -> tuple[int, dict[str, Any], bool]:
    """Lock ``folder``'s lock file (created, with the folder, when missing)."""
    created = not folder.exists()
    path = folder / LOCK_FILE
    while True:
        folder.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the folder's last holder removed it just now: again
            continue
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = _read(fd)
            os.close(fd)  # this process holds no lock on it: closing loses nothing
            if _busy(err):
                raise RunFolderInUse(folder, holder) from None
            raise
        try:
            current = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)  # a holder released (and unlinked) it between open and lockf: again
    stale = _read(fd)
    if stale.get("pid") not in (None, os.getpid()):
        log.info("%s: taking over the lock of pid %s, which ended", folder, stale["pid"])
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.datetime.now().isoformat(sep=" ", timespec="seconds"),
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(holder).encode(), 0)
    return fd, holder, created


def lock_run_folder(folder: str | os.PathLike[str], owner: Any = None) -> RunLock:
    """Hold ``folder`` (creating it) for writing a run; release the returned handle at the end.

    Args:
        folder: the run folder.
        owner: the writer (an :class:`~marl.experiment.Experiment`): a second owner in
            this process is refused too. ``None``: a hold that a writer of this process
            may join (``marl-run`` takes the folder before hydra starts and hands it on
            to its Experiment).

    Raises:
        RunFolderInUse: when a live run holds it (another process, or another owner here).
    """
    path = _resolved(folder)
    with _GUARD:
        held = _HELD.get(str(path))
        if held is not None and held.pid != os.getpid():
            held = None  # a forked child's copy of its parent's registry: not its lock
            del _HELD[str(path)]
        if held is None:
            held = _Held(*_take(path))
            _HELD[str(path)] = held
        elif held.writer is not None and held.writer is not owner:
            raise RunFolderInUse(path, held.holder, here=True)
        handle = RunLock(path, owner)
        held.handles.append(handle)
        return handle


def check_run_folder(folder: str | os.PathLike[str]) -> None:
    """Raise :class:`RunFolderInUse` when a live run holds ``folder``; takes nothing.

    A folder held in this process without a writer (by ``marl-run`` for its run) is free.
    """
    path = _resolved(folder)
    with _GUARD:
        held = _HELD.get(str(path))
        if held is not None and held.pid == os.getpid():
            if held.writer is not None:
                raise RunFolderInUse(path, held.holder, here=True)
            return
        try:
            fd = os.open(path / LOCK_FILE, os.O_RDWR)
        except (FileNotFoundError, NotADirectoryError):
            return  # a live holder always has its lock file
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if _busy(err):
                raise RunFolderInUse(path, _read(fd)) from None
            raise
        finally:
            os.close(fd)  # a stale lock file: the lock just taken goes with the descriptor
