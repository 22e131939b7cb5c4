"""Progress display: a tqdm bar on a terminal, timed status lines otherwise.

Both show frames, frames per second, the last training (and evaluation)
episode reward and the time left. Without a bar (turned off, or not a terminal)
a status line is logged every ``log_interval_s`` seconds. Status lines go
through the ``marl.experiment`` logger, so under ``marl-run`` they also land in
hydra's run log.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from typing import Any

from marl.algorithms.trainer import Trainer, TrainerCallback

__all__ = ["ProgressCallback", "format_duration", "log_to_stderr"]

log = logging.getLogger("marl.experiment")


def log_to_stderr(log: logging.Logger) -> None:
    """Send ``log``'s INFO messages to stderr, timestamped, unless logging is set up already."""
    if not logging.getLogger().handlers and not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(asctime)s] %(message)s", "%H:%M:%S"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def format_duration(seconds: float) -> str:
    """``"1h02m"``, ``"3m05s"`` or ``"42s"``.

    Examples:
        >>> format_duration(3725), format_duration(185), format_duration(42.4)
        ('1h02m', '3m05s', '42s')
    """
    if not math.isfinite(seconds):
        return "?"
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def _number(value: float) -> str:
    """``-0.123``, or ``-`` before there is a value (no episode ended, no evaluation yet).

    Examples:
        >>> _number(-0.12345), _number(math.nan)
        ('-0.123', '-')
    """
    return "-" if math.isnan(value) else f"{value:.3f}"


class ProgressCallback(TrainerCallback):
    """Show training progress: a bar on a terminal, else status lines.

    Args:
        bar: show a tqdm bar when ``stream`` is a terminal (``experiment.progress``).
        log_interval_s: seconds between status lines when there is no bar (``None``:
            no status lines). With neither, nothing is shown.
        stream: where the bar goes (default ``sys.stderr``).

    Examples:
        >>> from marl.algorithms import Algorithm, Trainer
        >>> from marl.testing import SingleAgentFakeEnv
        >>> env = SingleAgentFakeEnv(num_envs=4, discrete=True, seed=0)
        >>> quiet = ProgressCallback(bar=False, log_interval_s=None)  # shows nothing
        >>> trainer = Trainer(Algorithm("ppo"), env, frames_per_batch=64, total_frames=64,
        ...                   callbacks=[quiet])
        >>> [logs["frames"] for logs in trainer.train()]
        [64]
    """

    def __init__(
        self, bar: bool = True, log_interval_s: float | None = 30.0, stream: Any = None
    ) -> None:
        self.bar = bar
        self.log_interval_s = log_interval_s
        self.stream = stream if stream is not None else sys.stderr
        self._bar: Any = None
        self._start = 0.0
        self._start_frames = 0
        self._last_line = 0.0
        self._reward = math.nan
        self._eval = math.nan
        self._eval_metrics: dict[str, float] = {}  # the env's episode metrics (a win rate)
        self._logged_frames = -1

    def _use_bar(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        if not (callable(isatty) and isatty()):
            return False
        try:  # a terminal of zero width (some CI pseudo-terminals) shows no bar at all
            if os.get_terminal_size(self.stream.fileno()).columns == 0:
                return False
        except (AttributeError, OSError, ValueError):
            pass  # no real file descriptor (e.g. a test stream): trust isatty
        try:
            import tqdm  # noqa: F401
        except ImportError:
            return False
        return True

    def on_train_start(self, trainer: Trainer) -> None:
        """Open the bar at the (possibly restored) frame count."""
        last = trainer.last_evaluation  # a resumed run's
        if last is not None and last.returns:
            self._eval = sum(last.returns) / len(last.returns)
            self._eval_metrics = {k: sum(v) / len(v) for k, v in last.metrics.items() if v}
        self._start = self._last_line = time.perf_counter()
        self._start_frames = trainer.frames
        if self.bar and self._use_bar():
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=trainer.total_frames,
                initial=trainer.frames,
                unit="frames",
                unit_scale=True,
                dynamic_ncols=True,
                file=self.stream,
                smoothing=0.1,
            )

    def status(self, trainer: Trainer) -> str:
        """One status line: frames, fps, rewards, elapsed and ETA."""
        elapsed = time.perf_counter() - self._start
        done = trainer.frames - self._start_frames
        fps = done / elapsed if elapsed > 0 else math.nan
        left = max(trainer.total_frames - trainer.frames, 0) / fps if fps > 0 else math.nan
        pct = min(100.0, 100.0 * trainer.frames / trainer.total_frames)
        return (
            f"frames {trainer.frames}/{trainer.total_frames} ({pct:.0f}%) | {fps:,.0f} frames/s | "
            f"reward {_number(self._reward)} | eval {_number(self._eval)}{self._metric_text()} | "
            f"elapsed {format_duration(elapsed)} | ETA {format_duration(left)}"
        )

    def _metric_text(self) -> str:
        """`` (win_rate 0.56)``: the last evaluation's episode metrics, if the env has any."""
        if not self._eval_metrics:
            return ""
        return " (" + ", ".join(f"{k} {_number(v)}" for k, v in self._eval_metrics.items()) + ")"

    def _keep_eval(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self._eval = logs.get("eval/episode_reward", self._eval)
        last = trainer.last_evaluation
        # the env's episode metrics, and those its evaluator adds (a win rate against a
        # reference player: marl.league.VersusReference)
        names = [*trainer.env.episode_metrics, *(last.metrics if last is not None else ())]
        for name in dict.fromkeys(names):
            if f"eval/{name}" in logs:
                self._eval_metrics[name] = logs[f"eval/{name}"]

    def on_evaluation(self, trainer: Trainer, logs: dict[str, float]) -> None:
        """Keep the evaluation's return (and episode metrics) for the status (the
        untrained policy's at frame 0 too, which comes before any iteration)."""
        self._keep_eval(trainer, logs)

    def on_iteration_end(self, trainer: Trainer, logs: dict[str, float]) -> None:
        """Advance the bar, or log a status line every ``log_interval_s``."""
        self._reward = logs.get("train/episode_reward", self._reward)
        self._keep_eval(trainer, logs)
        if self._bar is not None:
            self._bar.update(trainer.frames - self._bar.n)
            extra = {k: _number(v) for k, v in self._eval_metrics.items()}
            self._bar.set_postfix(reward=_number(self._reward), eval=_number(self._eval), **extra)
            return
        if self.log_interval_s is None:
            return
        now = time.perf_counter()
        if now - self._last_line >= self.log_interval_s or trainer.frames >= trainer.total_frames:
            self._last_line = now
            self._logged_frames = trainer.frames
            log.info(self.status(trainer))

    def on_train_end(self, trainer: Trainer) -> None:
        """Close the bar and log the final status."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            return
        trained = trainer.frames != self._start_frames  # a resumed, finished run trains nothing
        if self.log_interval_s is not None and trained and self._logged_frames != trainer.frames:
            log.info(self.status(trainer))
