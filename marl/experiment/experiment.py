"""``Experiment``: one algorithm, one task, one seed, with everything a run leaves behind.

It wraps :class:`~marl.algorithms.Trainer` and adds what a user needs to trust
and reuse a run: the resolved config, scalar logs, evaluation results in the
marl-eval ``results.json`` format, a ``curves.png``, evaluation videos,
atomic checkpoints with resume, and a progress display.

The output folder::

    config.yaml          the resolved config of this run
    scalars.csv          every scalar, long format: frames,key,value
    results.json         evaluation returns per step (overall and per group)
    curves.png           training and evaluation return against frames
    videos/eval_<frames>.mp4
    checkpoints/checkpoint_<frames>.pt, checkpoints/latest.pt
    status.json          {"status": "running" | "complete", "frames": ..., ...}
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from marl.algorithms import Algorithm, Trainer, TrainerCallback, get_algorithm
from marl.collectors import Collector
from marl.envs import RewardSum, TransformedEnv, list_tasks, make_task
from marl.envs.common import EnvBase
from marl.experiment.checkpoint import (
    CheckpointManager,
    load_checkpoint,
    rng_state,
    set_rng_state,
)
from marl.experiment.config import ExperimentConfig, ModelConfig, config_from_dict
from marl.experiment.curves import plot_curves
from marl.experiment.loggers import Logger, make_loggers, read_scalars
from marl.experiment.progress import ProgressCallback
from marl.report.results import RunResults, atomic_write_json

__all__ = ["Experiment", "TaskFactory"]

log = logging.getLogger("marl.experiment")

TaskFactory = Callable[..., EnvBase]
"""``(num_envs=, seed=, device=) -> EnvBase``: a custom task instead of a catalogue name."""


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class _Hooks(TrainerCallback):
    """Routes the trainer's events to the experiment (logging, checkpoints, results)."""

    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment

    def on_evaluation(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self.experiment._on_evaluation(trainer)

    def on_iteration_end(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self.experiment._on_iteration(trainer, logs)


class Experiment:
    """Train ``algorithm`` on ``task`` with ``seed``; write logs, results, plots and checkpoints.

    Args:
        task: a catalogue name (``"vmas/navigation"``, see :func:`marl.envs.list_tasks`)
            or a factory ``(num_envs=, seed=, device=) -> EnvBase`` for your own env.
        algorithm: a registered name (``"mappo"``), ``{group: name}`` for one algorithm
            per group, or an unbuilt :class:`~marl.algorithms.Algorithm`.
        model: network sizes (:class:`ModelConfig` or a dict); ``None``: each
            algorithm's defaults.
        seed: seeds Python, NumPy and torch, the training env (``seed``) and the
            evaluation env (``seed + 1``).
        config: the :class:`ExperimentConfig` (or a dict of its fields).
        algorithm_config: the algorithm's config (dataclass or dict of overrides;
            ``{group: ...}`` with a per-group ``algorithm``).
        task_overrides: options of the task's env section (``{"n_agents": 4}``).
        task_name: ``"family/task"`` name used in ``results.json`` for a factory task.
        callbacks: extra :class:`~marl.algorithms.TrainerCallback` objects.

    Examples:
        >>> import tempfile
        >>> from marl.testing import MultiAgentFakeEnv
        >>> exp = Experiment(
        ...     lambda num_envs, seed, device: MultiAgentFakeEnv(num_envs=num_envs, seed=seed),
        ...     "mappo", seed=0, task_name="fake/multiagent",
        ...     config=dict(num_envs=4, frames_per_batch=64, total_frames=128,
        ...                 evaluation_episodes=2, render=False, progress=False,
        ...                 save_folder=tempfile.mkdtemp()))
        >>> exp.run()["frames"]
        128
        >>> sorted(p.name for p in exp.folder.iterdir())  # doctest: +NORMALIZE_WHITESPACE
        ['checkpoints', 'config.yaml', 'curves.png', 'results.json', 'scalars.csv',
         'status.json']
    """

    def __init__(
        self,
        task: str | TaskFactory,
        algorithm: str | Mapping[str, str] | Algorithm = "mappo",
        model: ModelConfig | Mapping[str, Any] | None = None,
        seed: int = 0,
        config: ExperimentConfig | Mapping[str, Any] | None = None,
        *,
        algorithm_config: Any = None,
        task_overrides: Mapping[str, Any] | None = None,
        task_name: str | None = None,
        callbacks: Sequence[TrainerCallback] = (),
    ) -> None:
        self.config = config_from_dict(ExperimentConfig, config, "experiment").validate()
        self.model = config_from_dict(ModelConfig, model, "model")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {seed!r}")
        self.seed = seed
        self.task_overrides = dict(task_overrides or {})
        if isinstance(task, str):
            known = list_tasks()
            if task not in known:
                raise ValueError(f"unknown task {task!r}; available tasks: {known}")
            self.task_name = task
        elif callable(task):
            self.task_name = task_name or "custom/task"
        else:
            raise TypeError(f"task must be a catalogue name or an env factory, got {task!r}")
        if "/" not in self.task_name:
            raise ValueError(f"task_name must look like 'family/task', got {self.task_name!r}")
        self.task = task
        self.algorithm = self._make_algorithm(algorithm, algorithm_config)
        self.folder = Path(self.config.save_folder or os.getcwd()).resolve()
        self.extra_callbacks = list(callbacks)
        self.trainer: Trainer | None = None
        self.loggers: dict[str, Logger] = {}
        self._render_env: EnvBase | None = None
        self._render_ok = self.config.render
        self._last_checkpoint = 0
        self._wall_start = 0.0

    # ------------------------------------------------------------------ setup
    @property
    def algorithm_name(self) -> str:
        """``"mappo"``, or ``"adversary=mappo+agent=iql"`` for a per-group algorithm."""
        algo = self.algorithm.choice
        if isinstance(algo, Mapping):
            return "+".join(f"{g}={getattr(a, 'name', a)}" for g, a in sorted(algo.items()))
        return getattr(algo, "name", algo)

    def _make_algorithm(self, algorithm: Any, algorithm_config: Any) -> Algorithm:
        if isinstance(algorithm, Algorithm):
            if algorithm.built:
                raise ValueError("pass an unbuilt Algorithm; the experiment builds it on its env")
            if algorithm_config is not None:
                raise ValueError("algorithm_config is only for an algorithm given by name")
            return algorithm
        if isinstance(algorithm, Mapping):
            configs = algorithm_config or {}
            config = {
                group: self._algorithm_config(name, configs.get(group))
                for group, name in algorithm.items()
            }
            return Algorithm(dict(algorithm), config)
        return Algorithm(algorithm, self._algorithm_config(algorithm, algorithm_config))

    def _algorithm_config(self, name: str, overrides: Any) -> Any:
        """The algorithm config with the model and the buffer device applied."""
        spec = get_algorithm(name)  # raises with the list of algorithms
        if isinstance(overrides, Mapping):  # YAML lists -> the dataclasses' tuples
            overrides = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}
        config = spec.make_config(overrides)
        fields = {f.name for f in dataclasses.fields(config) if f.init}
        changes = self.model.algorithm_overrides(fields)
        if "buffer_device" in fields:
            changes["buffer_device"] = self.config.buffer_device
        return dataclasses.replace(config, **changes) if changes else config

    def _num_envs(self) -> int:
        if self.config.num_envs is not None:
            return self.config.num_envs
        n = 60 if self.algorithm_on_policy() else 10
        family = self.task_name.split("/")[0]
        return n if family == "vmas" or not isinstance(self.task, str) else min(n, 8)

    def algorithm_on_policy(self) -> bool:
        """Whether every group's algorithm is on-policy (decides the default env count)."""
        algo = self.algorithm.choice
        names = algo.values() if isinstance(algo, Mapping) else [algo]
        return all((a if hasattr(a, "on_policy") else get_algorithm(a)).on_policy for a in names)

    def make_env(self, num_envs: int | None, seed: int, render: bool = False) -> EnvBase:
        """Build the task (training, evaluation, or a one-env ``render`` variant)."""
        device = self.config.sampling_device
        if not isinstance(self.task, str):
            env = self.task(num_envs=num_envs or 1, seed=seed, device=device)
            if not isinstance(env, EnvBase):
                raise TypeError(f"the task factory must return an EnvBase, got {type(env)}")
            leaves = env.observation_spec.keys(True, True)
            if not any((k[-1] if isinstance(k, tuple) else k) == "episode_reward" for k in leaves):
                env = TransformedEnv(env, RewardSum())  # episode returns for the logs
            return env
        overrides = dict(self.task_overrides)
        family = self.task_name.split("/")[0]
        if render and family != "vmas":
            overrides["render_mode"] = "rgb_array"
            num_envs = None
        return make_task(self.task, num_envs=num_envs, seed=seed, device=device, **overrides)

    def describe(self) -> dict[str, Any]:
        """The resolved config as plain data (written to ``config.yaml``)."""
        algo = self.algorithm
        configs = {
            label: dataclasses.asdict(cfg)
            for label, cfg in (
                algo.config.items() if isinstance(algo.config, Mapping) else [("all", algo.config)]
            )
            if dataclasses.is_dataclass(cfg)
        }
        return {
            "task": self.task_name,
            "task_overrides": self.task_overrides,
            "algorithm": self.algorithm_name,
            "algorithm_config": configs,
            "model": dataclasses.asdict(self.model),
            "seed": self.seed,
            "experiment": dataclasses.asdict(self.config),
        }

    # -------------------------------------------------------------------- run
    def run(self) -> dict[str, Any]:
        """Train to ``total_frames`` (resuming from ``restore_file`` if set).

        Returns:
            ``{"frames", "train/episode_reward", "eval/episode_reward", "folder", ...}``:
            the last training and evaluation metrics.
        """
        import yaml

        c = self.config
        self.folder.mkdir(parents=True, exist_ok=True)
        if not logging.getLogger().handlers and not log.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("[%(asctime)s] %(message)s", "%H:%M:%S"))
            log.addHandler(handler)
            log.setLevel(logging.INFO)
        description = self.describe()
        (self.folder / "config.yaml").write_text(yaml.safe_dump(description, sort_keys=False))
        if c.num_threads is not None:
            torch.set_num_threads(c.num_threads)
        _seed_everything(self.seed)
        env = self.make_env(self._num_envs(), self.seed)
        eval_env = None
        if c.evaluation:
            eval_envs = c.evaluation_episodes if self.task_name.startswith("vmas/") else None
            if eval_envs is None:
                eval_envs = min(c.evaluation_episodes, 8) if isinstance(self.task, str) else 4
            eval_env = self.make_env(eval_envs, self.seed + 1)
        self.algorithm.build(env, seed=self.seed, device=c.train_device)
        collector = Collector(
            env,
            self.algorithm.policy,
            frames_per_batch=c.frames_per_batch,
            init_random_frames=c.init_random_frames,
            policy_device=c.sampling_device,
            storing_device=c.sampling_device,
        )
        progress = ProgressCallback(c.progress, c.log_interval_s)
        self.trainer = trainer = Trainer(
            self.algorithm,
            env,
            frames_per_batch=collector.frames_per_batch,
            total_frames=c.total_frames,
            eval_env=eval_env,
            eval_interval=c.evaluation_interval,
            eval_episodes=c.evaluation_episodes,
            eval_deterministic=c.evaluation_deterministic,
            callbacks=[_Hooks(self), progress, *self.extra_callbacks],
            collector=collector,
        )
        family, task = self.task_name.split("/", 1)
        self.results = RunResults(family, task, self.algorithm_name, self.seed)
        self.checkpoints = CheckpointManager(self.folder / "checkpoints", c.keep_checkpoints)
        self.loggers = make_loggers(
            c.loggers,
            self.folder,
            project=c.project_name,
            run_name=f"{self.algorithm_name}_{family}_{task}_seed{self.seed}",
            config=description,
        )
        if c.restore_file:
            self._restore(c.restore_file)
        for logger in self.loggers.values():
            logger.log_config(description)
        self._wall_start = time.time()
        self._status("running")
        log.info(
            "training %s on %s (seed %d) for %d frames; output in %s",
            self.algorithm_name,
            self.task_name,
            self.seed,
            c.total_frames,
            self.folder,
        )
        try:
            if eval_env is not None and trainer.frames == 0:
                # the untrained policy: the first point of every learning curve
                logs = trainer.evaluate()
                for logger in self.loggers.values():
                    logger.log_scalars(logs, 0)
            history = list(trainer.train())
            if c.checkpoint_at_end and trainer.frames != self._last_checkpoint:
                self.save_checkpoint()
            if trainer.last_evaluation is not None:
                ev = trainer.last_evaluation
                self.results.set_absolute_metrics(ev.returns, ev.group_returns)
                self.results.write(self.folder / "results.json")
            self.plot()
            self._status("complete")
        finally:
            for logger in self.loggers.values():
                logger.close()
            for e in (env, eval_env, self._render_env):
                if e is not None:
                    e.close()
        summary: dict[str, Any] = {"frames": trainer.frames, "folder": str(self.folder)}
        for logs in history:
            summary.update({k: v for k, v in logs.items() if k.endswith("episode_reward")})
        return summary

    # ------------------------------------------------------------- callbacks
    def _on_iteration(self, trainer: Trainer, logs: dict[str, float]) -> None:
        for logger in self.loggers.values():
            logger.log_scalars(logs, trainer.frames)
        interval = self.config.checkpoint_interval
        if interval and trainer.frames - self._last_checkpoint >= interval:
            self.save_checkpoint()

    def _on_evaluation(self, trainer: Trainer) -> None:
        ev = trainer.last_evaluation
        if ev is None:
            return
        self.results.add_evaluation(
            trainer.frames,
            ev.returns,
            group_returns=ev.group_returns or None,
            elapsed_time=time.time() - self._wall_start,
        )
        self.results.write(self.folder / "results.json")
        if self._render_ok:
            self._record_video(trainer.frames)

    def _record_video(self, frames: int) -> None:
        from marl.experiment.video import prepare_headless_rendering, record_episode, write_video

        try:
            prepare_headless_rendering()
            if self._render_env is None:
                self._render_env = self.make_env(1, self.seed + 2, render=True)
            images = record_episode(
                self._render_env,
                self.algorithm.eval_policy(),
                deterministic=self.config.evaluation_deterministic,
            )
            path = write_video(images, self.folder / "videos" / f"eval_{frames}.mp4")
        except Exception as err:  # a renderer problem must not kill a training run
            warnings.warn(f"evaluation video disabled: {type(err).__name__}: {err}", stacklevel=2)
            self._render_ok = False
            return
        for logger in self.loggers.values():
            logger.log_video("eval/video", path, frames)

    # ----------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Trainer (networks, optimizers, counters), RNG states, loggers, config."""
        if self.trainer is None:
            raise RuntimeError("Experiment.state_dict: call run() first")
        return {
            "trainer": self.trainer.state_dict(include_buffers=self.config.checkpoint_buffers),
            "rng": rng_state(),
            "loggers": {name: lg.state_dict() for name, lg in self.loggers.items()},
            "config": self.describe(),
            "version": 1,
        }

    def save_checkpoint(self) -> Path:
        """Write ``checkpoints/checkpoint_<frames>.pt`` and ``latest.pt`` atomically."""
        frames = self.trainer.frames if self.trainer is not None else 0
        path = self.checkpoints.save(self.state_dict(), frames)
        self._last_checkpoint = frames
        self._status("running")
        return path

    def _restore(self, path: str | os.PathLike[str]) -> None:
        state = load_checkpoint(path)
        saved, current = state.get("config", {}), self.describe()
        for key in ("task", "algorithm"):
            if key in saved and saved[key] != current[key]:
                raise ValueError(
                    f"experiment.restore_file: the checkpoint is for {key} {saved[key]!r}, "
                    f"this run is {current[key]!r}"
                )
        trainer = self.trainer
        trainer.load_state_dict(state["trainer"])
        set_rng_state(state["rng"])
        frames = trainer.frames
        for name, logger in self.loggers.items():
            logger.load_state_dict(state.get("loggers", {}).get(name, {"frames": frames}))
        results = self.folder / "results.json"
        if results.exists():
            self.results = RunResults.load(results)
            self.results.truncate(frames)
        self._last_checkpoint = frames
        log.info("resumed from %s at %d frames", path, frames)

    # ---------------------------------------------------------------- outputs
    def _status(self, status: str) -> None:
        frames = self.trainer.frames if self.trainer is not None else 0
        atomic_write_json(
            self.folder / "status.json",
            {
                "status": status,
                "frames": frames,
                "total_frames": self.config.total_frames,
                "algorithm": self.algorithm_name,
                "task": self.task_name,
                "seed": self.seed,
                "checkpoint": str(self.checkpoints.latest) if self._last_checkpoint else None,
            },
        )

    def plot(self) -> Path | None:
        """Draw ``curves.png`` from ``scalars.csv`` (or this run's history without the CSV)."""
        csv_path = self.folder / "scalars.csv"
        if csv_path.exists():
            scalars = read_scalars(csv_path)
        else:
            scalars = {}
            for logs in self.trainer.history if self.trainer is not None else []:
                for key, value in logs.items():
                    scalars.setdefault(key, []).append((int(logs["frames"]), float(value)))
        try:
            return plot_curves(
                scalars,
                self.folder / "curves.png",
                title=f"{self.algorithm_name} on {self.task_name} (seed {self.seed})",
            )
        except ImportError as err:
            warnings.warn(f"curves.png skipped: {err}", stacklevel=2)
            return None
