"""What a run writes for people and tools to read, checkpoints aside.

The loggers (``scalars.csv``, wandb, tensorboard), ``results.json`` (with the best
evaluation's policy behind its ``absolute_metrics``, :mod:`marl.experiment.best_policy`),
evaluation videos, ``curves.png`` and ``status.json``. An
:class:`~marl.experiment.Experiment` owns one :class:`RunOutputs` and calls it at each
step of a run; checkpoints, which hold everything needed to continue, are
:mod:`marl.experiment.checkpoint`'s.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from marl.algorithms import Algorithm, Trainer
from marl.atomic import atomic_write_json
from marl.envs.common import EnvBase
from marl.experiment.best_policy import BestPolicy
from marl.experiment.config import ExperimentConfig
from marl.experiment.curves import plot_curves
from marl.experiment.loggers import Logger, make_loggers, read_scalars
from marl.report.results import RunResults

__all__ = ["RunOutputs"]

log = logging.getLogger("marl.experiment")


class RunOutputs:
    """The logs, ``results.json``, videos, ``curves.png`` and ``status.json`` of one run.

    Args:
        folder: the run folder they are written in.
        config: the run's settings (loggers, rendering, ``total_frames``, ...).
        algorithm_name: the algorithm's label (``"mappo"``, ``"adversary-mappo_agent-iql"``).
        task_name: ``"family/task"``.
        seed: the run's seed.
        make_render_env: builds the one-env rendering variant of the task; called at the
            first video only, so a run without videos never builds it.

    Attributes:
        loggers: ``{name: Logger}``, made by :meth:`open`.
        results: the run's ``results.json`` content (:class:`~marl.report.RunResults`),
            made by :meth:`open` (absent before).
        best_policy: the best evaluation's policy, re-evaluated for the absolute metric.
        render_env: the rendering env, once a video was recorded (closed by the owner).
    """

    def __init__(
        self,
        folder: Path,
        config: ExperimentConfig,
        *,
        algorithm_name: str,
        task_name: str,
        seed: int,
        make_render_env: Callable[[], EnvBase],
    ) -> None:
        self.folder = folder
        self.config = config
        self.algorithm_name = algorithm_name
        self.task_name = task_name
        self.seed = seed
        self.make_render_env = make_render_env
        self.loggers: dict[str, Logger] = {}
        self.results: RunResults
        self.best_policy = BestPolicy()
        self.render_env: EnvBase | None = None
        self._render_ok = config.render  # off for good after the first renderer failure
        self._wall_start = 0.0

    def open(self, description: dict[str, Any]) -> None:
        """Start ``results.json`` and the loggers (before a restore fills them)."""
        family, task = self.task_name.split("/", 1)
        self.results = RunResults(family, task, self.algorithm_name, self.seed)
        c = self.config
        self.loggers = make_loggers(
            c.loggers,
            self.folder,
            project=c.project_name,
            run_name=f"{self.algorithm_name}_{family}_{task}_seed{self.seed}",
            config=description,
        )

    def start_clock(self, elapsed_before: float) -> None:
        """Count training wall time from now on, on top of ``elapsed_before`` (a resume's)."""
        self._wall_start = time.time() - elapsed_before

    def elapsed(self) -> float:
        """Training wall time so far, a resumed run's earlier time included."""
        return time.time() - self._wall_start

    def log_config(self, description: dict[str, Any]) -> None:
        """Give every logger the run's resolved config."""
        for logger in self.loggers.values():
            logger.log_config(description)

    def log_scalars(self, logs: dict[str, float], frames: int) -> None:
        """Give every logger ``logs`` at ``frames``."""
        for logger in self.loggers.values():
            logger.log_scalars(logs, frames)

    def record_evaluation(self, trainer: Trainer, algorithm: Algorithm) -> None:
        """Add the trainer's last evaluation to ``results.json`` (and a video).

        Its policy competes for the best one first, so that a run killed right after
        this write still has it in its next checkpoint.
        """
        ev = trainer.last_evaluation
        if ev is None:
            return
        self.results.add_evaluation(
            trainer.frames,
            ev.returns,
            group_returns=ev.group_returns or None,
            elapsed_time=self.elapsed(),
            **ev.metrics,
        )
        self.best_policy.observe(algorithm, trainer.frames, ev.returns)
        self.results.write(self.folder / "results.json")
        if self._render_ok:
            self.record_video(trainer.frames, algorithm)

    def record_video(self, frames: int, algorithm: Algorithm) -> None:
        """Write ``videos/eval_<frames>.mp4`` of one episode of ``algorithm``'s eval policy.

        A renderer problem warns and turns videos off for the rest of the run: it must
        never stop training.
        """
        from marl.experiment.video import prepare_headless_rendering, record_episode, write_video

        try:
            prepare_headless_rendering()
            if self.render_env is None:
                self.render_env = self.make_render_env()
            images = record_episode(
                self.render_env,
                algorithm.eval_policy(),
                deterministic=self.config.evaluation_deterministic,
            )
            path = write_video(images, self.folder / "videos" / f"eval_{frames}.mp4")
        except Exception as err:  # a renderer problem must not kill a training run
            warnings.warn(f"evaluation video disabled: {type(err).__name__}: {err}", stacklevel=2)
            self._render_ok = False
            return
        for logger in self.loggers.values():
            logger.log_video("eval/video", path, frames)

    def write_absolute_metric(self, trainer: Trainer) -> None:
        """Write ``absolute_metrics``: the best evaluation's policy over 10x the episodes."""
        best = self.best_policy
        if best.weights is None or best.frames is None:
            return
        start = time.time()
        ev = best.evaluate(trainer)
        self.results.set_absolute_metrics(
            ev.returns, ev.group_returns, step_count=best.frames, **ev.metrics
        )
        self.results.write(self.folder / "results.json")
        log.info(
            "absolute metric: mean return %.4g over %d episodes of the best evaluation's policy "
            "(%d frames, mean return %.4g there) in %.1f s",
            sum(ev.returns) / len(ev.returns),
            len(ev.returns),
            best.frames,
            best.score,
            time.time() - start,
        )

    def state_dict(self) -> dict[str, Any]:
        """``{"loggers": {name: state}, "best_policy": state}`` for a checkpoint."""
        return {
            "loggers": {name: lg.state_dict() for name, lg in self.loggers.items()},
            "best_policy": self.best_policy.state_dict(),
        }

    def restore(self, state: dict[str, Any], frames: int, finished: bool = False) -> None:
        """Continue from a checkpoint at ``frames``: loggers, ``results.json``, best policy.

        ``results.json`` is cut back to ``frames``: rows written after the checkpoint
        come again when the run trains them again. Its absolute metric is dropped (the
        run's end writes it again), unless the run is ``finished`` (nothing left to train).
        """
        for name, logger in self.loggers.items():
            logger.load_state_dict(state.get("loggers", {}).get(name, {"frames": frames}))
        results = self.folder / "results.json"
        if results.exists():
            self.results = RunResults.load(results)
            self.results.truncate(frames, keep_absolute=finished)
            self.results.write(results)
        self.best_policy = BestPolicy.from_state(state.get("best_policy"))

    def write_status(self, status: str, frames: int, checkpoint: Path | None, **extra: Any) -> None:
        """Write ``status.json`` (:mod:`marl.experiment.lifecycle` lists the statuses).

        Args:
            status: ``"running"``, ``"complete"``, ``"failed"``, ...
            frames: the frames trained so far.
            checkpoint: the run's ``latest.pt`` (named only when it exists).
            **extra: more fields (``error``, ``traceback``, ``signal``).
        """
        atomic_write_json(
            self.folder / "status.json",
            {
                "status": status,
                "frames": frames,
                "total_frames": self.config.total_frames,
                "algorithm": self.algorithm_name,
                "task": self.task_name,
                "seed": self.seed,
                "checkpoint": (
                    str(checkpoint) if checkpoint is not None and checkpoint.exists() else None
                ),
                **extra,
            },
        )

    def plot(self, history: list[dict[str, float]]) -> Path | None:
        """Draw ``curves.png`` from ``scalars.csv`` (or from ``history`` without the CSV)."""
        csv_path = self.folder / "scalars.csv"
        if csv_path.exists():
            scalars = read_scalars(csv_path)
        else:
            scalars = {}
            for logs in history:
                for key, value in logs.items():
                    scalars.setdefault(key, []).append((int(logs["frames"]), float(value)))
        try:
            return plot_curves(
                scalars,
                self.folder / "curves.png",
                title=f"{self.algorithm_name} on {self.task_name} (seed {self.seed})",
            )
        except ImportError as err:
            warnings.warn(f"curves.png skipped: {err}", stacklevel=3)
            return None

    def close_loggers(self) -> None:
        """Close every logger (flushes ``scalars.csv``, ends a wandb run)."""
        for logger in self.loggers.values():
            logger.close()
