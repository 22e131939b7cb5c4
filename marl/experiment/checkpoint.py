"""Atomic checkpoints: a run killed at any moment leaves a loadable ``latest.pt``.

Each checkpoint is written to a temporary file in the same folder, flushed to
disk, then renamed over its final name (:mod:`marl.atomic`; the rename is atomic on
POSIX).
``latest.pt`` is a hard link to the newest ``checkpoint_<frames>.pt``, made the
same way, so it costs no extra disk space and always names a complete file. It is a
convenience name only: resuming a run folder reads the numbered checkpoints, newest
first, and falls back to an older one when the newest is damaged
(:func:`marl.experiment.resume.load_resumable`).

Checkpoints are data: they are read with ``torch.load(weights_only=True)`` (see
:mod:`marl.serialization`), so loading one cannot run code; ``trusted=True`` (or
``MARL_TRUST_CHECKPOINTS=1``) unpickles a trusted file in full. A save that runs out of
disk space raises an ``OSError`` (``ENOSPC``) naming the file, and leaves no temp file.

Fault injection (for tests): with ``MARL_TEST_FAULT=<point>@<frames>[:<SIGNAL>]`` in the
environment, the run sends itself ``SIGKILL`` (or the named signal) at that point:
``checkpoint@N`` between writing checkpoint N's temporary file and renaming it,
``latest@N`` after renaming it but before ``latest.pt`` points at it, and
``iteration@N`` after the scalars of the iteration that ends at N frames are logged,
before its checkpoint.
"""

from __future__ import annotations

import errno
import os
import random
import re
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from marl.atomic import atomic_path, atomic_write, is_temp_name
from marl.data.list_storage import LEGACY_GLOBALS as LIST_STORAGE_GLOBALS
from marl.serialization import CheckpointError, UntrustedCheckpointError, load

__all__ = [
    "FAULT_ENV",
    "CheckpointError",
    "CheckpointManager",
    "UntrustedCheckpointError",
    "atomic_save",
    "fault_point",
    "load_checkpoint",
    "rng_state",
    "set_rng_state",
]

_NAME = re.compile(r"^checkpoint_(\d+)\.pt$")

FAULT_ENV = "MARL_TEST_FAULT"
_FIRED: set[str] = set()


def fault_point(point: str, frames: int) -> None:
    """Send this process the signal that ``MARL_TEST_FAULT`` asks for at ``point@frames``.

    A test hook (see the module docstring); it does nothing when the variable is unset,
    and fires at most once per process.
    """
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    where, _, name = spec.partition(":")
    # once per process: several runs trained together (experiment.runs) pass the same
    # point at the same frames, and a second signal would stop them at once
    if where == f"{point}@{int(frames)}" and where not in _FIRED:
        _FIRED.add(where)
        os.kill(os.getpid(), getattr(signal, f"SIG{name or 'KILL'}"))


_DISK_FULL = ("unexpected pos", "file write failed", "No space left")


def _disk_full(err: BaseException) -> bool:
    """Whether ``err`` is a write failing for lack of space (torch reports it as a
    ``RuntimeError`` such as ``unexpected pos 105216 vs 105104``)."""
    if isinstance(err, OSError):
        return err.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(err, RuntimeError) and any(t in str(err) for t in _DISK_FULL)


def _save(obj: Any, path: Path, before_replace: Callable[[], Any] | None = None) -> None:
    """``torch.save`` to a temp file next to ``path``, flushed to disk, then renamed over
    ``path`` (:func:`marl.atomic.atomic_write`); ``before_replace`` runs in between.

    Raises:
        OSError: ``ENOSPC``, naming ``path``, when the disk is full (the temp file removed).
    """
    try:
        with atomic_write(path, "wb", before_replace=before_replace) as f:
            torch.save(obj, f)
    except BaseException as err:
        if _disk_full(err):
            raise OSError(
                errno.ENOSPC,
                f"cannot save {path}: the disk is full ({type(err).__name__}: "
                f"{str(err).splitlines()[0] if str(err) else err!r}); free space and "
                "resume, the previous checkpoints are intact",
                str(path),
            ) from err
        raise


def atomic_save(obj: Any, path: str | os.PathLike[str]) -> Path:
    """``torch.save`` to ``path`` through a temp file and a rename.

    Examples:
        >>> import tempfile
        >>> path = atomic_save({"a": 1}, Path(tempfile.mkdtemp()) / "x.pt")
        >>> torch.load(path)["a"]
        1
    """
    path = Path(path)
    _save(obj, path)
    return path


def load_checkpoint(path: str | os.PathLike[str], *, trusted: bool = False) -> dict[str, Any]:
    """Load a checkpoint written by :class:`CheckpointManager`, as data only.

    Args:
        path: the file.
        trusted: unpickle it in full (a file you trust only: it can run code; see
            :mod:`marl.serialization`). ``MARL_TRUST_CHECKPOINTS=1`` does the same.

    Raises:
        FileNotFoundError: naming the path.
        UntrustedCheckpointError: when its pickle names globals that are not data.
        CheckpointError: when it is damaged (empty, truncated, not a torch file); in a run
            folder's ``checkpoints/``, the message names the intact older checkpoints.
        ValueError: when the file is not a marl checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"experiment.restore_file: no checkpoint at {path}")
    try:
        # a replay buffer's ListStorage of an earlier version pickled its unset marker
        state = load(path, trusted=trusted, extra_globals=LIST_STORAGE_GLOBALS)
    except UntrustedCheckpointError:
        raise
    except CheckpointError as err:
        intact = [p.name for p in intact_checkpoints(path.parent) if p.name != path.name]
        if path.parent.name == "checkpoints" and path.parent.is_dir():
            err.args = (
                f"{err}. Intact checkpoints in {path.parent}: {', '.join(intact)} (resuming "
                "the run folder falls back to the newest of them)"
                if intact
                else f"{err}. No other intact checkpoint in {path.parent}",
            )
        raise
    if not isinstance(state, dict) or "trainer" not in state:
        raise ValueError(
            f"{path} is not a marl experiment checkpoint (expected a dict with 'trainer', "
            f"got {type(state).__name__} with keys {list(state)[:5] if isinstance(state, dict) else '-'})"
        )
    return state


def intact_checkpoints(folder: str | os.PathLike[str]) -> list[Path]:
    """The numbered checkpoints of ``folder`` that look whole, oldest first.

    A quick check (a regular file, a zip archive whose ``data.pkl`` reads with the right
    CRC), not a load.
    """
    import zipfile

    folder = Path(folder)
    if not folder.is_dir():
        return []
    out = []
    found = sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name)))
    for _, p in found:
        if p.is_symlink() or not p.is_file():
            continue
        try:
            with zipfile.ZipFile(p) as archive:
                names = [n for n in archive.namelist() if n.endswith("data.pkl")]
                if names:
                    archive.read(min(names, key=len))
                    out.append(p)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError):
            continue
    return out


def rng_state() -> dict[str, Any]:
    """The states of Python's, NumPy's and torch's (CPU and CUDA) generators, as data that
    ``torch.load(weights_only=True)`` reads (NumPy's as a tensor and numbers)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore :func:`rng_state` (also the tuple of NumPy arrays older checkpoints hold)."""
    random.setstate(state["python"])
    numpy = state["numpy"]
    if isinstance(numpy, dict):
        numpy = (
            numpy["kind"],
            np.asarray(numpy["keys"].numpy(), dtype=np.uint32),
            int(numpy["pos"]),
            int(numpy["has_gauss"]),
            float(numpy["cached_gaussian"]),
        )
    np.random.set_state(numpy)
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class CheckpointManager:
    """Writes ``checkpoint_<frames>.pt`` files and ``latest.pt`` in one folder.

    Args:
        folder: where checkpoints go (created).
        keep: how many numbered checkpoints to keep (the oldest are removed).

    Examples:
        >>> import tempfile
        >>> manager = CheckpointManager(tempfile.mkdtemp(), keep=2)
        >>> for frames in (100, 200, 300):
        ...     _ = manager.save({"trainer": {"frames": frames}}, frames)
        >>> [p.name for p in manager.checkpoints()]
        ['checkpoint_200.pt', 'checkpoint_300.pt']
        >>> load_checkpoint(manager.latest)["trainer"]["frames"]
        300
    """

    def __init__(self, folder: str | os.PathLike[str], keep: int = 3) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.keep = keep
        for stale in self.folder.iterdir():  # temp files of a run killed while saving
            if is_temp_name(stale.name):
                stale.unlink(missing_ok=True)

    @property
    def latest(self) -> Path:
        """``<folder>/latest.pt``."""
        return self.folder / "latest.pt"

    def checkpoints(self) -> list[Path]:
        """Numbered checkpoints, oldest first."""
        found = [(int(m.group(1)), p) for p in self.folder.iterdir() if (m := _NAME.match(p.name))]
        return [p for _, p in sorted(found)]

    def discard_after(self, frames: int) -> list[Path]:
        """Remove the numbered checkpoints after ``frames``; returns the removed files.

        A resume from an earlier checkpoint abandons them, as it drops the logs after
        it. ``latest.pt`` then names ``checkpoint_<frames>.pt`` when that file is here.
        """
        found = [(int(m.group(1)), p) for p in self.folder.iterdir() if (m := _NAME.match(p.name))]
        removed = [p for f, p in sorted(found) if f > frames]
        kept = self.folder / f"checkpoint_{int(frames)}.pt"
        latest_removed = any(
            self.latest.exists() and os.path.samefile(self.latest, p) for p in removed
        )
        for p in removed:
            p.unlink()
        if kept.exists():
            self._link_latest(kept)
        elif latest_removed:
            self.latest.unlink()
        return removed

    def _link_latest(self, path: Path) -> None:
        with atomic_path(self.latest, keep_suffix=False, fsync=False) as tmp:
            tmp.unlink()  # the name is ours; the link takes it
            try:
                os.link(path, tmp)
            except OSError:  # file systems without hard links: a copy, made atomically
                shutil.copyfile(path, tmp)

    def save(self, state: dict[str, Any], frames: int) -> Path:
        """Write ``checkpoint_<frames>.pt`` atomically, point ``latest.pt`` at it, prune."""
        path = self.folder / f"checkpoint_{int(frames)}.pt"
        _save(state, path, before_replace=lambda: fault_point("checkpoint", frames))
        fault_point("latest", frames)
        self._link_latest(path)
        for old in self.checkpoints()[: -self.keep]:
            old.unlink()
        return path
