"""Scalar loggers: CSV (default), wandb (works offline) and TensorBoard.

Every logger takes ``{name: value}`` dicts stamped with the frame count, so
curves from different loggers line up. Metric names are ``train/...``,
``eval/...``, ``time/...``; per-group metrics are ``train/<group>/episode_reward``.

After a resume, each logger continues from the checkpoint's frame count:
rows logged after that checkpoint by the killed run are dropped (CSV), purged
(TensorBoard) or overwritten (wandb resumes the same run id), so the curves do
not hold a duplicated stretch.
"""

from __future__ import annotations

import csv
import math
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from marl.atomic import atomic_write
from marl.extras import require

__all__ = [
    "CSVLogger",
    "Logger",
    "TensorboardLogger",
    "WandbLogger",
    "check_logger",
    "make_loggers",
    "read_scalars",
]

CSV_FIELDS = ("frames", "key", "value")


@runtime_checkable
class Logger(Protocol):
    """What the experiment runner needs from a logger."""

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Record the run's resolved config once."""

    def log_scalars(self, scalars: Mapping[str, float], frames: int) -> None:
        """Record scalars at ``frames`` collected frames."""

    def log_video(self, name: str, path: Path, frames: int) -> None:
        """Record a video file written by the runner."""

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps to resume this logger."""

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from a checkpoint whose frame count is ``state["frames"]``."""

    def close(self) -> None:
        """Flush and release files."""


def _finite(scalars: Mapping[str, float]) -> dict[str, float]:
    out = {}
    for key, value in scalars.items():
        value = float(value)
        if math.isfinite(value):
            out[key] = value
    return out


class CSVLogger:
    """Appends ``frames,key,value`` rows to ``<folder>/scalars.csv`` (long format).

    Long format keeps every metric in one file even though evaluation metrics
    appear only every few iterations; :func:`read_scalars` pivots it back.

    Args:
        folder: the run's output folder.

    Examples:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> log = CSVLogger(folder)
        >>> log.log_scalars({"train/episode_reward": 1.5, "fps": 900.0}, frames=6000)
        >>> log.close()
        >>> read_scalars(Path(folder) / "scalars.csv")["train/episode_reward"]
        [(6000, 1.5)]
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.path = Path(folder) / "scalars.csv"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: Any = None
        self._writer: Any = None
        self._frames = 0

    def _open(self) -> None:
        if self._file is None:
            new = not self.path.exists() or self.path.stat().st_size == 0
            self._file = open(self.path, "a", newline="")  # noqa: SIM115 - kept open on purpose
            self._writer = csv.writer(self._file)
            if new:
                self._writer.writerow(CSV_FIELDS)

    def log_config(self, config: Mapping[str, Any]) -> None:
        """The resolved config is written by the runner (``config.yaml``); nothing to do."""

    def log_scalars(self, scalars: Mapping[str, float], frames: int) -> None:
        """Append one row per scalar and flush (a killed run loses at most the last line)."""
        self._open()
        for key, value in _finite(scalars).items():
            self._writer.writerow((int(frames), key, repr(value)))
        self._file.flush()
        self._frames = int(frames)

    def log_video(self, name: str, path: Path, frames: int) -> None:
        """Videos stay as files in ``videos/``; nothing to record in the CSV."""

    def state_dict(self) -> dict[str, Any]:
        """The frame count of the last row."""
        return {"frames": self._frames}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Drop rows logged after the checkpoint (by the run that was killed)."""
        self.close()
        frames = int(state["frames"])
        if self.path.exists():
            with open(self.path, newline="") as f:
                rows = list(csv.reader(f))
            kept = [rows[0]] + [r for r in rows[1:] if len(r) == 3 and int(r[0]) <= frames]
            with atomic_write(self.path, "w", newline="", fsync=False) as f:
                csv.writer(f).writerows(kept)
        self._frames = frames

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = self._writer = None


def read_scalars(path: str | os.PathLike[str]) -> dict[str, list[tuple[int, float]]]:
    """Read a ``scalars.csv`` back as ``{key: [(frames, value), ...]}``.

    A truncated last line (a run killed mid-write) is skipped.
    """
    out: dict[str, list[tuple[int, float]]] = {}
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return out
        if tuple(header) != CSV_FIELDS:
            raise ValueError(f"{path}: expected header {CSV_FIELDS}, got {header}")
        for row in reader:
            if len(row) != 3:
                continue
            try:
                out.setdefault(row[1], []).append((int(row[0]), float(row[2])))
            except ValueError:
                continue
    return out


class TensorboardLogger:
    """Writes TensorBoard event files to ``<folder>/tensorboard``.

    Args:
        folder: the run's output folder.

    Raises:
        ImportError: naming ``pip install "marl[tensorboard]"`` when tensorboard is missing.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        tensorboard = require(
            "torch.utils.tensorboard",
            "the tensorboard logger",
            "tensorboard",
            what='the "tensorboard" package',
        )
        self._cls = tensorboard.SummaryWriter
        self.log_dir = Path(folder) / "tensorboard"
        self._writer = self._cls(log_dir=str(self.log_dir))
        self._frames = 0

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Store the config as a text summary."""
        import yaml

        text = yaml.safe_dump(dict(config), sort_keys=False)
        self._writer.add_text("config", f"```\n{text}\n```", 0)

    def log_scalars(self, scalars: Mapping[str, float], frames: int) -> None:
        """One ``add_scalar`` per metric at ``global_step=frames``."""
        for key, value in _finite(scalars).items():
            self._writer.add_scalar(key, value, int(frames))
        self._writer.flush()
        self._frames = int(frames)

    def log_video(self, name: str, path: Path, frames: int) -> None:
        """Videos stay as mp4 files (TensorBoard's video summary needs moviepy)."""
        self._writer.add_text(f"video/{name}", str(path), int(frames))

    def state_dict(self) -> dict[str, Any]:
        """The last step."""
        return {"frames": self._frames}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Reopen with ``purge_step`` so events after the checkpoint are dropped."""
        self._writer.close()
        self._frames = int(state["frames"])
        self._writer = self._cls(log_dir=str(self.log_dir), purge_step=self._frames + 1)

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()


class WandbLogger:
    """Logs to Weights & Biases; set ``WANDB_MODE=offline`` to run with no network.

    The run id is kept in the checkpoint, so a resumed experiment continues the
    same wandb run.

    Args:
        folder: the run's output folder (wandb writes to ``<folder>/wandb``).
        project: the wandb project.
        name: the run name.
        config: the resolved config, stored with the run.

    Raises:
        ImportError: naming ``pip install "marl[wandb]"`` when wandb is missing.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        project: str,
        name: str,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self._wandb = require("wandb", "the wandb logger", "wandb")
        self._folder = Path(folder)
        self._project, self._name, self._config = project, name, dict(config or {})
        self._run: Any = None
        self._id = uuid.uuid4().hex[:8]
        self._frames = 0

    def _start(self) -> None:
        if self._run is None:
            self._run = self._wandb.init(
                project=self._project,
                name=self._name,
                id=self._id,
                resume="allow",
                dir=str(self._folder),
                config=self._config,
                reinit="create_new",
            )

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Store the config in the run."""
        self._config = dict(config)
        self._start()
        self._run.config.update(self._config, allow_val_change=True)

    def log_scalars(self, scalars: Mapping[str, float], frames: int) -> None:
        """Log with ``frames`` as the x axis (a ``frames`` metric, not wandb's own step)."""
        self._start()
        values = _finite(scalars)
        values["frames"] = int(frames)
        self._run.log(values)
        self._frames = int(frames)

    def log_video(self, name: str, path: Path, frames: int) -> None:
        """Upload the mp4 (stored locally in offline mode)."""
        self._start()
        self._run.log({name: self._wandb.Video(str(path), format="mp4"), "frames": int(frames)})

    def state_dict(self) -> dict[str, Any]:
        """The run id and last frame count."""
        return {"frames": self._frames, "id": self._id}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume the same wandb run id."""
        if self._run is not None:
            self._run.finish()
            self._run = None
        self._id = state.get("id", self._id)
        self._frames = int(state["frames"])

    def close(self) -> None:
        """Finish the run (syncs later with ``wandb sync`` in offline mode)."""
        if self._run is not None:
            self._run.finish()
            self._run = None


def make_loggers(
    names: Sequence[str],
    folder: str | os.PathLike[str],
    project: str = "marl",
    run_name: str = "run",
    config: Mapping[str, Any] | None = None,
) -> dict[str, Logger]:
    """Build the named loggers (``csv``, ``wandb``, ``tensorboard``) for one run folder.

    Examples:
        >>> import tempfile
        >>> sorted(make_loggers(["csv"], tempfile.mkdtemp()))
        ['csv']
    """
    out: dict[str, Logger] = {}
    for name in names:
        if name == "csv":
            out[name] = CSVLogger(folder)
        elif name == "tensorboard":
            out[name] = TensorboardLogger(folder)
        elif name == "wandb":
            out[name] = WandbLogger(folder, project, run_name, config)
        else:
            raise ValueError(f"unknown logger {name!r}; available: ['csv', 'wandb', 'tensorboard']")
    return out


def check_logger(logger: Any, folder: str | os.PathLike[str] | None = None) -> None:
    """Check that ``logger`` implements :class:`Logger` and survives a log/resume cycle.

    Args:
        logger: the logger to check (it receives a few test scalars).
        folder: unused; kept for symmetry with the other checkers.

    Raises:
        TypeError: when a method is missing.
        ValueError: when ``state_dict`` does not carry the frame count.

    Examples:
        >>> import tempfile
        >>> check_logger(CSVLogger(tempfile.mkdtemp()))
    """
    missing = [
        m
        for m in (
            "log_config",
            "log_scalars",
            "log_video",
            "state_dict",
            "load_state_dict",
            "close",
        )
        if not callable(getattr(logger, m, None))
    ]
    if missing:
        raise TypeError(f"{type(logger).__name__} is not a Logger: missing {missing}")
    logger.log_config({"check": True})
    logger.log_scalars({"check/value": 1.0}, frames=10)
    state = logger.state_dict()
    if int(state.get("frames", -1)) != 10:
        raise ValueError(
            f"{type(logger).__name__}.state_dict() must hold the last frames (10), got {state}"
        )
    logger.load_state_dict(state)
    logger.log_scalars({"check/value": 2.0}, frames=20)
    logger.close()
