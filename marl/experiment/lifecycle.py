"""How a run ends: ``status.json``, interrupts, and folders that already hold a run.

``status.json`` says where a run stands:

- ``running``: started (or resumed) and not ended; also what a run killed with SIGKILL
  leaves behind (nothing can write after SIGKILL: resume it);
- ``complete``: trained to ``total_frames``;
- ``failed``: an exception stopped it; ``error`` and ``traceback`` (its last lines) say which;
- ``interrupted``: SIGINT or SIGTERM stopped it at the end of an iteration, after a
  final checkpoint, or at once when the iteration did not end within
  :data:`STOP_TIMEOUT_S` (its last checkpoint resumes it); ``signal`` says which;
- ``stopped``: the process ended it with ``sys.exit(0)`` (Ray Tune does so with a member
  its scheduler stops: ASHA's cuts, PBT's pauses); its last checkpoint resumes it.
"""

from __future__ import annotations

import logging
import signal
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Protocol

__all__ = [
    "RUNS_FILE",
    "STATUSES",
    "STOP_TIMEOUT_S",
    "InterruptGuard",
    "RunInterrupted",
    "StatusOnExit",
    "StopSignal",
    "held_run",
    "traceback_tail",
]

log = logging.getLogger("marl.experiment")

STATUSES = ("running", "complete", "failed", "interrupted", "stopped")

STOP_TIMEOUT_S = 20.0
"""Seconds a run waits after SIGINT or SIGTERM for its iteration to end (and then writes its
final checkpoint) before it stops at once, without one: an iteration can last minutes (a
pixel task's update), and SLURM and Kubernetes send SIGKILL 30 s after SIGTERM by default,
after which nothing can write ``status.json`` or release the run folder."""

# the files whose presence means that a folder holds a run (a fresh hydra run folder
# already holds .hydra/ and marl-run.log, which do not count)
RUN_FILES = ("status.json", "scalars.csv", "results.json")

RUNS_FILE = "runs.json"
"""The file that marks a folder of runs trained together (``experiment.runs``) and lists
them (:mod:`marl.experiment.runs`)."""


class RunInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped a run (after its final checkpoint).

    A ``KeyboardInterrupt``, so that ``except Exception`` blocks let it through as they
    do Ctrl-C. ``marl-run`` exits with :attr:`exit_code` (130 for SIGINT, 143 for SIGTERM).

    Examples:
        >>> import signal
        >>> err = RunInterrupted(signal.SIGTERM)
        >>> str(err), err.exit_code
        ('interrupted by SIGTERM', 143)
    """

    def __init__(self, signum: int) -> None:
        self.signum = int(signum)
        super().__init__(f"interrupted by {signal.Signals(self.signum).name}")

    @property
    def exit_code(self) -> int:
        """``128 + signal number``, the shell's convention for a process ended by a signal."""
        return 128 + self.signum


class StopSignal(Protocol):
    """What a run reads between iterations to know whether to stop: :class:`InterruptGuard`,
    or one guard's view shared by several runs of one process (``marl.experiment.runs``).

    Examples:
        >>> guard: StopSignal = InterruptGuard()
        >>> guard.signum is None
        True
    """

    signum: int | None
    """The signal that asked the run to stop (``None``: go on)."""

    def disarm(self) -> None:
        """The run reached its stop point; its final checkpoint follows."""


class InterruptGuard:
    """While active, the first SIGINT or SIGTERM only asks the run to stop; a second stops it now.

    The run checks :attr:`signum` between iterations, so that its final checkpoint
    holds a consistent state (never half an update), and calls :meth:`disarm` once it
    has reached that point. When it does not within ``timeout_s`` of the first signal,
    the guard raises :class:`RunInterrupted` itself, as a second signal would: the run
    stops without a final checkpoint, its last one kept. Handlers are installed only in
    the main thread (Python's rule) and restored on exit.

    Args:
        timeout_s: the bound on the wait for the iteration (``None``: as long as it
            takes).
        setting: the config key ``timeout_s`` came from, which an error names.

    Raises:
        ValueError: when ``timeout_s`` is not ``None`` or a number > 0.

    Examples:
        >>> import os, signal
        >>> with InterruptGuard() as guard:
        ...     os.kill(os.getpid(), signal.SIGTERM)
        ...     guard.signum == signal.SIGTERM
        True
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(
        self, timeout_s: float | None = STOP_TIMEOUT_S, setting: str = "timeout_s"
    ) -> None:
        if timeout_s is not None and not (
            isinstance(timeout_s, (int, float))
            and not isinstance(timeout_s, bool)
            and timeout_s > 0
        ):
            raise ValueError(
                f"{setting}: expected None or a number of seconds > 0, got {timeout_s!r}"
            )
        self.timeout_s = timeout_s
        self.signum: int | None = None
        self.expired = False
        self._previous: dict[int, Any] = {}
        self._timer: threading.Timer | None = None
        # reentrant: a signal's handler can run in the main thread while it holds the lock
        self._lock = threading.RLock()
        self._armed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            if self.expired:
                log.warning(
                    "the iteration did not end within %g s of %s: stopping now, without a "
                    "final checkpoint (the last one is kept)",
                    self.timeout_s,
                    signal.Signals(self.signum).name,
                )
                raise RunInterrupted(self.signum)
            raise RunInterrupted(signum)
        self.signum = signum
        bound = f"within {self.timeout_s:g} s, " if self.timeout_s is not None else ""
        log.warning(
            "%s received: stopping after this iteration with a checkpoint (%sor at once, "
            "without one, when it is sent again)",
            signal.Signals(signum).name,
            bound,
        )
        if self.timeout_s is not None:
            with self._lock:
                self._armed = True
                self._timer = threading.Timer(self.timeout_s, self._expire)
                self._timer.daemon = True
                self._timer.start()

    def _expire(self) -> None:
        with self._lock:
            if not self._armed or self.signum is None:
                return
            self.expired = True
            self._armed = False
            # a real signal to the main thread: it also breaks a blocking wait there
            signal.pthread_kill(threading.main_thread().ident or 0, self.signum)

    def disarm(self) -> None:
        """The run reached its stop point: what follows (the final checkpoint) is not cut
        short by the timeout. A second signal still stops it at once."""
        with self._lock:
            self._armed = False
            if self._timer is not None:
                self._timer.cancel()

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                try:
                    self._previous[sig] = signal.signal(sig, self._handle)
                except (ValueError, OSError):  # e.g. an embedded interpreter
                    continue
        return self

    def __exit__(self, *exc: Any) -> None:
        self.disarm()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


class StatusOnExit:
    """Writes to ``status.json`` how an exception ended a run, and lets the exception through.

    ``interrupted`` (with ``signal``) after SIGINT, SIGTERM or Ctrl-C; ``stopped`` after
    ``sys.exit(0)``; ``failed`` (with ``error`` and ``traceback``) after anything else.
    A run that returns writes its own ``complete``.

    Args:
        write_status: ``(status, **fields) -> None``: writes ``status.json``.
        frames: the frames trained so far, for the warning after an interrupt.
        folder: the run folder, which the warning tells how to resume.

    Examples:
        >>> seen = []
        >>> try:
        ...     with StatusOnExit(lambda s, **f: seen.append((s, sorted(f))), lambda: 0, Path()):
        ...         raise ValueError("bad value")
        ... except ValueError:
        ...     pass
        >>> seen
        [('failed', ['error', 'traceback'])]
    """

    def __init__(
        self, write_status: Callable[..., None], frames: Callable[[], int], folder: Path
    ) -> None:
        self.write_status = write_status
        self.frames = frames
        self.folder = folder

    def __enter__(self) -> StatusOnExit:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        err: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if err is None:
            return False
        if isinstance(err, KeyboardInterrupt):  # RunInterrupted too
            name = signal.Signals(getattr(err, "signum", signal.SIGINT)).name
            self.write_status("interrupted", signal=name)
            log.warning(
                "interrupted by %s at %d frames; continue with: marl-run --resume %s",
                name,
                self.frames(),
                self.folder,
            )
        elif isinstance(err, SystemExit):
            if err.code in (0, None):
                # the process's owner ended it on purpose (Ray Tune ends a trial it stops
                # with sys.exit(0)): not a failure, and the last checkpoint resumes it
                self.write_status("stopped")
            else:
                self.write_status(
                    "failed", error=f"SystemExit: {err.code}", traceback=traceback_tail(err)
                )
        else:
            self.write_status(
                "failed", error=f"{type(err).__name__}: {err}", traceback=traceback_tail(err)
            )
        return False  # never swallowed


def held_run(folder: Path) -> str | None:
    """A description of the run that ``folder`` holds, or ``None`` when it holds none.

    Examples:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> held_run(folder) is None
        True
        >>> _ = (folder / "scalars.csv").write_text("frames,key,value\\n")
        >>> held_run(folder)
        'a run (scalars.csv)'
    """
    import json

    found = [name for name in RUN_FILES if (folder / name).exists()]
    checkpoints = folder / "checkpoints"
    if checkpoints.is_dir() and any(checkpoints.glob("*.pt")):
        found.append("checkpoints/")
    if not found:
        return None
    try:
        status = json.loads((folder / "status.json").read_text())
        return (
            f"a run of {status.get('algorithm')} on {status.get('task')} (seed "
            f"{status.get('seed')}), status {status.get('status')!r} at "
            f"{status.get('frames')}/{status.get('total_frames')} frames"
        )
    except (OSError, ValueError, AttributeError):
        return f"a run ({', '.join(found)})"


def traceback_tail(err: BaseException, lines: int = 12) -> str:
    """The last ``lines`` lines of ``err``'s formatted traceback."""
    text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    return "\n".join(text.rstrip().splitlines()[-lines:])
