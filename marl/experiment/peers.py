"""Heartbeats between the ranks of a data-parallel run: a lost rank stops the others.

Without them, a rank whose peer died or hung can wait in a collective for the process
group's timeout (30 minutes with gloo; NCCL may wait forever). :class:`PeerMonitor`
runs a daemon thread in every rank that exchanges one small message with every other
rank each ``interval_s``, on a gloo group of its own (so it also runs beside NCCL and
while the main thread evaluates or writes a checkpoint). A peer is **lost** when its
connection closes (its process died: SIGKILL, out of memory, a crash), when it sends
nothing for ``timeout_s`` (hung, or its machine is unreachable), or when it says that
it stopped with an error. Then:

- :attr:`PeerMonitor.lost` says so, naming the rank;
- the main thread's next error (the collective that fails or is aborted) becomes a
  :class:`PeerLost` with that message (:func:`peers_checked`), which ``status.json``
  records as ``failed`` and ``marl-run`` prints;
- a main thread still blocked ``grace_s`` later (in a collective with a hung peer,
  which nothing can interrupt) is ended by the monitor itself: it runs the
  ``on_abandon`` hook (rank 0 writes ``status.json``), prints the message and exits the
  process with status 1. Checkpoints are written atomically, so the last one resumes
  the run.

A rank that ends its run says so (:meth:`PeerMonitor.close`), and its peers stop
watching it: a rank that finishes first is not lost.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator

import torch

__all__ = ["PeerLost", "PeerMonitor", "peers_checked"]

log = logging.getLogger("marl.experiment")

ALIVE, FINISHED, FAILED = 1.0, 2.0, 3.0
"""What a heartbeat says: running, ended its run, stopped with an error."""


class PeerLost(RuntimeError):
    """A data-parallel rank lost a peer (it died, hung or failed); the message names it.

    Examples:
        >>> str(PeerLost("data-parallel rank 1 of 2 is lost: ..."))
        'data-parallel rank 1 of 2 is lost: ...'
    """


class PeerMonitor:
    """Heartbeats with every other rank, in a daemon thread (see the module's docstring).

    Every rank of the default process group must create it (it makes a gloo group:
    a collective), then :meth:`start` it, and :meth:`close` it when its run ends.

    Args:
        timeout_s: seconds without a heartbeat after which a peer is lost.
        interval_s: seconds between heartbeats (``None``: ``min(1, timeout_s / 4)``).
        grace_s: seconds the main thread gets, once a peer is lost, to stop by itself
            before the monitor ends the process.

    Raises:
        ValueError: when ``timeout_s`` is not a number > 0.
        RuntimeError: when ``torch.distributed`` is not initialized.

    Examples:
        In each rank, after ``torch.distributed.init_process_group(...)``::

            monitor = PeerMonitor(timeout_s=30.0)
            monitor.start()
            with peers_checked(monitor):
                train()  # a lost peer raises PeerLost here, naming its rank
            monitor.close(ok=True)
    """

    def __init__(
        self, timeout_s: float, interval_s: float | None = None, grace_s: float = 5.0
    ) -> None:
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
            raise ValueError(f"timeout_s: expected a number of seconds > 0, got {timeout_s!r}")
        dist = torch.distributed
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("PeerMonitor needs an initialized torch.distributed process group")
        self.timeout_s = float(timeout_s)
        self.interval_s = min(1.0, self.timeout_s / 4) if interval_s is None else interval_s
        self.grace_s = grace_s
        self.rank: int = dist.get_rank()
        self.world_size: int = dist.get_world_size()
        # the heartbeats' own group: the main thread's collectives never wait behind them
        self.group = dist.new_group(backend="gloo")
        self.on_abandon: Callable[[str], None] | None = None
        self.lost: str | None = None
        self._final: float | None = None
        self._acknowledged = False
        self._rounds = 0
        self._changed = threading.Condition()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="marl-peer-monitor", daemon=True)

    def __repr__(self) -> str:
        return f"PeerMonitor(rank={self.rank}, world_size={self.world_size}, timeout_s={self.timeout_s:g})"

    def start(self) -> PeerMonitor:
        """Start the heartbeats; returns ``self``."""
        self._thread.start()
        return self

    def close(self, ok: bool) -> None:
        """Tell the peers that this rank's run ended (``ok``: finished, else with an error),
        and stop the heartbeats."""
        with self._changed:
            self._final = FINISHED if ok else FAILED
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(self.timeout_s + self.interval_s)

    def verdict(self, wait_s: float | None = None) -> str | None:
        """:attr:`lost`, after waiting for the next heartbeat round to end (at most
        ``wait_s``; ``None``: ``timeout_s + interval_s``): whether an error of the main
        thread came from a lost peer, which the next round tells."""
        wait_s = self.timeout_s + self.interval_s if wait_s is None else wait_s
        with self._changed:
            start = self._rounds
            self._changed.wait_for(
                lambda: (
                    self.lost is not None or self._rounds > start or not self._thread.is_alive()
                ),
                timeout=wait_s,
            )
            return self.lost

    def acknowledge(self) -> None:
        """The main thread took the loss over (it raised :class:`PeerLost`): the monitor
        does not end the process."""
        with self._changed:
            self._acknowledged = True

    # ------------------------------------------------------------------ thread
    def _run(self) -> None:
        watched = [r for r in range(self.world_size) if r != self.rank]
        while watched:
            with self._changed:
                final = self._final
            try:
                lost, watched = self._round(watched, ALIVE if final is None else final)
            except Exception:  # a bug here must not end a healthy run: stop watching
                log.exception("the data-parallel heartbeats stopped")
                return
            if lost is not None:
                self._lose(lost)
                return
            with self._changed:
                self._rounds += 1
                self._changed.notify_all()
            if final is not None:
                return
            self._wake.wait(self.interval_s)

    def _round(self, watched: list[int], status: float) -> tuple[str | None, list[int]]:
        """One heartbeat with every watched peer: ``(why one is lost, or None; the peers
        still watched)``."""
        dist = torch.distributed
        mine = torch.tensor([status])
        theirs = {p: torch.zeros(1) for p in watched}
        timeout = datetime.timedelta(seconds=self.timeout_s)
        recvs, sends = {}, []
        for peer in watched:
            try:  # posting fails at once on a connection that gloo already saw close
                recvs[peer] = dist.irecv(theirs[peer], src=peer, group=self.group)
                sends.append(dist.isend(mine, dst=peer, group=self.group))
            except RuntimeError as err:
                return self._message(peer, self._how(err)), watched
        for peer, work in recvs.items():
            try:
                work.wait(timeout=timeout)
            except RuntimeError as err:
                return self._message(peer, self._how(err)), watched
        for work in sends:
            with contextlib.suppress(RuntimeError):  # a send's peer is judged by its recv
                work.wait(timeout=timeout)
        for peer, value in theirs.items():
            if value.item() == FAILED:
                return self._message(peer, "it stopped with an error (see its output)"), watched
        return None, [p for p in watched if theirs[p].item() == ALIVE]

    def _how(self, err: BaseException) -> str:
        """How a peer was lost, from the error of its heartbeat."""
        if "timed out" in str(err).lower():
            return (
                f"no heartbeat for {self.timeout_s:g} s (hung, stopped, or its machine is "
                "unreachable)"
            )
        return (
            "its connection closed (the process died: killed, out of memory or crashed; see "
            "its output)"
        )

    def _message(self, peer: int, how: str) -> str:
        return (
            f"data-parallel rank {peer} of {self.world_size} is lost: {how}; rank "
            f"{self.rank} stops too (the run's last checkpoint resumes it: marl-run --resume "
            "<run folder>, with the same number of processes)"
        )

    def _lose(self, message: str) -> None:
        with self._changed:
            self.lost = message
            self._changed.notify_all()
        log.error("%s", message)
        # the main thread raises PeerLost when its collective fails; one blocked in a
        # collective with a hung peer never returns: end the process for it
        threading.Event().wait(self.grace_s)
        with self._changed:
            if self._acknowledged:
                return
        if self.on_abandon is not None:
            with contextlib.suppress(Exception):
                self.on_abandon(message)
        sys.stderr.write(f"marl-run: {message}\n")
        sys.stderr.flush()
        os._exit(1)


@contextlib.contextmanager
def peers_checked(
    monitor: PeerMonitor | None, on_abandon: Callable[[str], None] | None = None
) -> Iterator[None]:
    """Turn an error of the block into :class:`PeerLost` when it came from a lost peer.

    An error while :attr:`PeerMonitor.lost` says (or, after the next heartbeat round,
    says) that a peer is lost: the failed collective's own error is gloo's ("Connection
    closed by peer [address]"), which names no rank. Other errors pass as they are.

    Args:
        monitor: this rank's monitor (``None``: nothing is checked).
        on_abandon: what the monitor runs before it ends a process whose main thread
            stays blocked with a lost peer (rank 0 writes ``status.json``), with the
            message; ``None``: the monitor's own hook.

    Raises:
        PeerLost: naming the lost rank, from the block's error.
    """
    if monitor is not None and on_abandon is not None:
        monitor.on_abandon = on_abandon
    try:
        yield
    except Exception as err:
        if monitor is None or isinstance(err, PeerLost):
            raise
        message = monitor.verdict()
        if message is None:
            raise
        monitor.acknowledge()
        raise PeerLost(message) from err
