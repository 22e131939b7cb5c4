"""``Experiment``: one algorithm, one task, one seed, with everything a run leaves behind.

It wraps :class:`~marl.algorithms.Trainer` and adds what a user needs to trust and reuse
a run: the resolved config, scalar logs, evaluation results in the marl-eval
``results.json`` format, ``curves.png``, videos, atomic checkpoints, a progress display.

The output folder::

    config.yaml          the resolved config of this run
    run.json             {"run_id": ...}: written when the run first starts, never changed
    scalars.csv          every scalar, long format: frames,key,value
    results.json         evaluation returns per step (overall and per group), and at the
                         end absolute_metrics: the best evaluation's policy over 10x the
                         episodes (see marl.experiment.best_policy)
    curves.png           training and evaluation return against frames
    videos/eval_<frames>.mp4
    checkpoints/checkpoint_<frames>.pt, checkpoints/latest.pt
    export/<group>.pt2, export/<group>.onnx, export/manifest.json   (experiment.export)
    status.json          {"status": "running" | "complete" | "failed" | "interrupted" | "stopped", ...}

A run continues from its checkpoint with :meth:`Experiment.resume` (``marl-run --resume
<folder>``): same folder, config and seed, frames counting on, logs appended without
gaps or duplicates. A folder that already holds a run is never written into by a new
one (that would duplicate its rows): resume it, or choose another folder. While a run
is live its folder is locked (``.lock``, :mod:`marl.experiment.runlock`): every other
writer, a resume included, is refused with the live run's PID.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Generator, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marl.algorithms import Algorithm, Trainer, TrainerCallback, compile_report, get_algorithm
from marl.collectors import BatchCollector
from marl.envs import InitTracker, TransformedEnv
from marl.envs.common import EnvBase
from marl.envs.tasks import check_task_name
from marl.experiment.best_policy import BestPolicy
from marl.experiment.checkpoint import CheckpointManager, fault_point, rng_state
from marl.experiment.config import (
    ExperimentConfig,
    ModelConfig,
    algorithm_label,
    config_from_dict,
)
from marl.experiment.data_parallel import DataParallel, check_world_size, checked_peers
from marl.experiment.lifecycle import InterruptGuard, RunInterrupted, StatusOnExit, StopSignal
from marl.experiment.loggers import Logger
from marl.experiment.outputs import RunOutputs
from marl.experiment.parts import (
    TaskFactory,
    build_algorithm,
    describe_algorithm,
    evaluation_num_envs,
    export_run,
    make_task_env,
)
from marl.experiment.progress import ProgressCallback, log_to_stderr
from marl.experiment.restore import (
    RestorePoint,
    check_folder,
    identify,
    load_restore,
    restore_run,
)
from marl.experiment.resume import load_resumable, resume_arguments, write_run_id
from marl.experiment.runlock import lock_run_folder
from marl.experiment.trainer_setup import build_trainer
from marl.export import FORMATS as EXPORT_FORMATS
from marl.report.results import RunResults

if TYPE_CHECKING:
    from marl.experiment.runs_hub import RunsHub

__all__ = ["Experiment", "TaskFactory", "evaluation_num_envs"]

log = logging.getLogger("marl.experiment")


class _Hooks(TrainerCallback):
    """Routes the trainer's events to the experiment (logging, checkpoints, results)."""

    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment

    def on_evaluation(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self.experiment.outputs.record_evaluation(trainer, self.experiment.algorithm)

    def on_iteration_end(self, trainer: Trainer, logs: dict[str, float]) -> None:
        exp = self.experiment
        exp.outputs.log_scalars(logs, trainer.frames)
        fault_point("iteration", trainer.frames)
        interval = exp.config.checkpoint_interval
        if interval and trainer.frames - exp._last_checkpoint >= interval:
            exp.save_checkpoint()


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
        algorithm_config: the algorithm's config (dataclass or dict of overrides). With a
            per-group ``algorithm``, ``{group: config}``: a flat config next to it is
            refused (the error shows the per-group form), never ignored.
        task_overrides: options of the task's env section (``{"n_agents": 4}``).
        task_name: ``"family/task"`` name used in ``results.json`` for a factory task.
        callbacks: extra :class:`~marl.algorithms.TrainerCallback` objects.

    Raises:
        ValueError: on a bad value, before anything is built (``experiment.export`` of a
            recurrent policy included).
        TypeError: on a value of the wrong type, before anything is built.

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
        ['checkpoints', 'config.yaml', 'curves.png', 'results.json', 'run.json',
         'scalars.csv', 'status.json']

        The same run, continued to 256 frames in its folder:

        >>> Experiment.resume(exp.folder, {"total_frames": 256},
        ...                   task=exp.task).run()["frames"]
        256
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
        self.model = config_from_dict(ModelConfig, model, "model").validate()
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {seed!r}")
        if not 0 <= seed < 2**32 - 3:  # numpy seeds [0, 2**32); the eval/video envs add 1 and 2
            raise ValueError(f"seed: expected an integer in [0, 2**32 - 4], got {seed}")
        self.seed = seed
        if task_overrides is not None and not isinstance(task_overrides, Mapping):
            raise TypeError(f"task_overrides must be a mapping, got {task_overrides!r}")
        self.task_overrides = dict(task_overrides or {})
        if isinstance(task, str):
            self.task_name = check_task_name(task)  # a close name suggested when unknown
        elif callable(task):
            self.task_name = task_name or "custom/task"
        else:
            raise TypeError(f"task must be a catalogue name or an env factory, got {task!r}")
        if "/" not in self.task_name:
            raise ValueError(f"task_name must look like 'family/task', got {self.task_name!r}")
        self.task = task
        self.algorithm = build_algorithm(algorithm, algorithm_config, self.model, self.config)
        self._configured = self.algorithm  # the config as given: global batch sizes
        self.data_parallel: DataParallel | None = None  # see use_data_parallel
        self.runs_hub: RunsHub | None = None  # see use_runs
        self.run_index = 0
        self.folder = Path(self.config.save_folder or os.getcwd()).resolve()
        self.extra_callbacks = list(callbacks)
        self.trainer: Trainer | None = None
        self.checkpoints: CheckpointManager | None = None
        # logs, results.json, videos, curves.png and status.json (marl.experiment.outputs)
        self.outputs = RunOutputs(
            self.folder,
            self.config,
            algorithm_name=self.algorithm_name,
            task_name=self.task_name,
            seed=self.seed,
            make_render_env=lambda: self.make_env(1, self.seed + 2, render=True),
        )
        self._last_checkpoint = 0
        self._restore_state: RestorePoint | None = None
        self.run_id: str | None = None  # run.json's, set by run()
        self._envs: list[EnvBase] = []
        # worker-process collectors, shut down at the end
        self._collectors: list[BatchCollector] = []
        if self.config.export and self.recurrent:  # refused now, not after training
            raise ValueError(
                f"experiment.export={list(self.config.export)}: a recurrent policy "
                "(model.network=gru/lstm) cannot be exported: its action depends on a hidden "
                "state carried from step to step, which a stateless artifact (observation "
                "in, action out) cannot carry; drop experiment.export or train with an "
                "mlp network"
            )

    @classmethod
    def resume(
        cls,
        path: str | os.PathLike[str],
        config: Mapping[str, Any] | None = None,
        *,
        task: TaskFactory | None = None,
        folder: str | os.PathLike[str] | None = None,
        callbacks: Sequence[TrainerCallback] = (),
        trusted: bool = False,
    ) -> Experiment:
        """The experiment of a checkpoint, ready to :meth:`run` on from it.

        Task, algorithm and its hyperparameters, model and seed come from the
        checkpoint; the run continues in the folder that holds its ``checkpoints/``,
        appending to its ``scalars.csv`` and ``results.json``.

        Args:
            path: a run folder (resumed from its ``checkpoints/latest.pt``) or a checkpoint.
            config: ``experiment`` settings to change, e.g. ``{"total_frames": 10**6}``;
                those in :data:`~marl.experiment.resume.FIXED_ON_RESUME` must keep
                their value.
            task: the env factory of a run on a custom task (a factory is not saved).
            folder: where the run continues (default: the checkpoint's run folder).
            callbacks: extra :class:`~marl.algorithms.TrainerCallback` objects.
            trusted: unpickle the checkpoint in full (only a file you trust: it can run
                code); by default it is read as data (:mod:`marl.serialization`).

        A run folder resumes from its newest intact checkpoint (a damaged newer one is
        logged and kept aside as ``<name>.damaged``), and only from its own run's
        checkpoints (:func:`~marl.experiment.resume.check_run_identity`).

        Raises:
            FileNotFoundError: when ``path`` holds no checkpoint.
            ValueError: naming each setting of ``config`` that contradicts the checkpoint.
            marl.serialization.CheckpointError: when the checkpoint is damaged, a link
                out of its folder, or not data.
        """
        checkpoint, state = load_resumable(path, trusted=trusted)
        return cls._from_checkpoint(checkpoint, state, config, task, folder, callbacks)

    @classmethod
    def _from_checkpoint(
        cls,
        checkpoint: Path,
        state: dict[str, Any],
        config: Mapping[str, Any] | None,
        task: TaskFactory | None,
        folder: str | os.PathLike[str] | None,
        callbacks: Sequence[TrainerCallback] = (),
    ) -> Experiment:
        kwargs = resume_arguments(checkpoint, state, config, task, folder)
        exp = cls(**kwargs, callbacks=callbacks)
        exp._restore_state = (checkpoint, state)
        return exp

    # ------------------------------------------------------------------ setup
    @property
    def algorithm_name(self) -> str:
        """``"mappo"``, or ``"adversary-mappo_agent-iql"`` for one algorithm per group."""
        return algorithm_label(self.algorithm.choice)

    def algorithm_on_policy(self) -> bool:
        """Whether every group's algorithm is on-policy (decides the default env count)."""
        algo = self.algorithm.choice
        names = algo.values() if isinstance(algo, Mapping) else [algo]
        return all((a if hasattr(a, "on_policy") else get_algorithm(a)).on_policy for a in names)

    @property
    def recurrent(self) -> bool:
        """Whether a group's network is recurrent (``gru``/``lstm``): its envs then get an
        ``InitTracker``, whose ``"is_init"`` flag resets the hidden states."""
        from marl.algorithms import RECURRENT_NETWORKS

        config = self.describe()["algorithm_config"]
        configs = config.values() if isinstance(self.algorithm.choice, Mapping) else [config]
        return any(c.get("network") in RECURRENT_NETWORKS for c in configs)

    def make_env(self, num_envs: int | None, seed: int, render: bool = False) -> EnvBase:
        """Build the task (training, evaluation, or a one-env ``render`` variant).

        A recurrent model's envs get an ``InitTracker`` (see :attr:`recurrent`).
        """
        env = make_task_env(
            self.task, self.task_name, self.task_overrides, self.config, num_envs, seed, render
        )
        if self.recurrent:
            env = TransformedEnv(env, InitTracker())
        return env

    def describe(self) -> dict[str, Any]:
        """The resolved config as plain data (``config.yaml``, and every checkpoint).

        ``algorithm`` is a name or ``{group: name}``; ``algorithm_config`` holds every
        hyperparameter (model applied), flat or ``{group: {...}}`` alike.
        """
        algorithm, configs = describe_algorithm(self._configured)
        return {
            "task": self.task_name,
            "task_overrides": self.task_overrides,
            "algorithm": algorithm,
            "algorithm_config": configs,
            "model": dataclasses.asdict(self.model),
            "seed": self.seed,
            "experiment": dataclasses.asdict(self.config),
        }

    def use_data_parallel(self, data_parallel: DataParallel) -> None:
        """Train as one rank of a data-parallel run (:mod:`marl.experiment.data_parallel`):
        rank 0 writes the run folder, the others nothing.

        Raises:
            ValueError: a setting the ranks cannot share (each names its value), before
                anything is built or written.
        """
        data_parallel.check_config(self.config)
        self.algorithm = data_parallel.rank_algorithm(self._configured)
        self.data_parallel = data_parallel

    def use_runs(self, hub: RunsHub, index: int) -> None:
        """Train as run ``index`` of several in one process (``ExperimentRuns`` calls it):
        ``hub`` collects its batches and updates it with the others, where it can."""
        self.runs_hub, self.run_index = hub, index

    # -------------------------------------------------------------------- run
    def run(self) -> dict[str, Any]:
        """Train to ``total_frames`` (resuming from ``restore_file`` if set).

        Everything is checked before anything is built or written: a checkpoint that
        contradicts this run's config, a folder that already holds another run, or one
        that a live run holds (:mod:`~marl.experiment.runlock`), raises without touching
        it. From then on ``status.json`` follows the run:
        ``running``, then ``complete``, ``failed`` (with the error and the end of the
        traceback) or ``interrupted``. SIGINT and SIGTERM stop the run at the end of
        the current iteration, with a final checkpoint, and raise
        :class:`~marl.experiment.RunInterrupted`.

        Returns:
            ``{"frames", "train/episode_reward", "eval/episode_reward", "folder", ...}``:
            the last training and evaluation metrics.

        Raises:
            FileExistsError: when the folder holds another run, or a live run (another
                process, or another Experiment of this one) writes it:
                :class:`~marl.experiment.runlock.RunFolderInUse` names its PID.
            ValueError: when ``restore_file`` is a checkpoint of another run.
            RunInterrupted: after SIGINT or SIGTERM (a ``KeyboardInterrupt``).
        """
        steps = self.steps()
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value

    def steps(self, stop: StopSignal | None = None) -> Generator[int, None, dict[str, Any]]:
        """:meth:`run`, one iteration at a time (runs sharing a process interleave so): it
        yields the frames trained once set up (built, restored, evaluated at 0), then after
        each iteration, and returns :meth:`run`'s summary.

        Args:
            stop: one stop signal for all runs of the process (``None``: its own guard).

        Raises:
            ValueError: for ``experiment.runs > 1`` outside ``ExperimentRuns``.

        Examples:
            >>> import tempfile
            >>> from marl.testing import SingleAgentFakeEnv
            >>> exp = Experiment(lambda num_envs, seed, device: SingleAgentFakeEnv(num_envs=4),
            ...     "ppo", task_name="fake/single", config=dict(num_envs=4, frames_per_batch=64,
            ...     total_frames=128, evaluation=False, save_folder=tempfile.mkdtemp()))
            >>> list(exp.steps())  # set up, then each iteration
            [0, 64, 128]
        """
        if self.config.runs > 1 and self.runs_hub is None:
            raise ValueError(
                f"experiment.runs={self.config.runs}: an Experiment trains one run; train "
                "several with marl.experiment.runs.ExperimentRuns (marl-run experiment.runs=N; "
                "resume them with --resume <their folder>), or this one alone with runs=1"
            )
        restore = load_restore(self._restore_state, self.config.restore_file, self.describe)
        dp = self.data_parallel
        if restore is not None:
            check_world_size(restore[1], dp.world_size if dp is not None else 1)
        if dp is not None and not dp.writes:  # a rank > 0: trains its share, writes nothing
            try:
                trainer = self._setup(evaluate=False, callbacks=self.extra_callbacks)
                dp.follow(trainer, restore[1] if restore is not None else None)
                return {"frames": trainer.frames, "folder": str(self.folder)}
            finally:
                self._close()
        # the folder's one live writer (marl.experiment.runlock): taken before anything is
        # written into it, released however the run ends
        lock = lock_run_folder(self.folder, owner=self)
        try:
            return (yield from self._run(restore, stop))
        finally:
            lock.release()

    def _run(
        self, restore: RestorePoint | None, stop: StopSignal | None
    ) -> Generator[int, None, dict[str, Any]]:
        import yaml

        check_folder(self.folder, restore[0] if restore else None)
        self.run_id = identify(self.folder, restore)
        self.folder.mkdir(parents=True, exist_ok=True)
        write_run_id(self.folder, self.run_id)
        log_to_stderr(log)
        self.checkpoints = CheckpointManager(
            self.folder / "checkpoints", self.config.keep_checkpoints
        )
        if restore is not None:
            self._last_checkpoint = int(restore[1]["trainer"]["frames"])
        description = self.describe()
        (self.folder / "config.yaml").write_text(yaml.safe_dump(description, sort_keys=False))
        self._status("running")
        guard = InterruptGuard(self.config.stop_timeout_s) if stop is None else None
        status = StatusOnExit(self._status, self._frames, self.folder)
        try:  # checked_peers: an error that a lost data-parallel rank caused names it
            with status, guard or nullcontext(), checked_peers(self.data_parallel, self._status):
                return (yield from self._train(restore, guard or stop, description))
        finally:
            self._close()

    def _close(self) -> None:
        for collector in self._collectors:
            collector.shutdown()
        self._collectors.clear()
        self.outputs.close_loggers()
        for e in (*self._envs, self.outputs.render_env):
            if e is not None:
                e.close()

    def _frames(self) -> int:
        return self.trainer.frames if self.trainer is not None else self._last_checkpoint

    def _setup(self, evaluate: bool, callbacks: list[TrainerCallback]) -> Trainer:
        """Seed, build the envs, the algorithm, the collector and the trainer
        (:func:`~marl.experiment.trainer_setup.build_trainer`)."""
        return build_trainer(self, evaluate, callbacks, self._envs, self._collectors)

    def _train(
        self, restore: RestorePoint | None, guard: StopSignal, description: dict[str, Any]
    ) -> Generator[int, None, dict[str, Any]]:
        c = self.config
        progress = ProgressCallback(bar=c.progress, log_interval_s=c.log_interval_s)
        self.trainer = trainer = self._setup(
            evaluate=c.evaluation, callbacks=[_Hooks(self), progress, *self.extra_callbacks]
        )
        eval_env = trainer.eval_env
        outputs = self.outputs
        outputs.open(description)
        elapsed_before = 0.0
        if restore is not None:
            elapsed_before = restore_run(
                *restore,
                trainer=trainer,
                algorithm=self.algorithm,
                outputs=outputs,
                checkpoints=self.checkpoints,
                config=self.config,
            )
            self._last_checkpoint = trainer.frames
        outputs.log_config(description)
        outputs.start_clock(elapsed_before)
        if trainer.frames >= c.total_frames:
            log.info("already at %d of %d frames: nothing to train", trainer.frames, c.total_frames)
        log.info(
            "training %s on %s (seed %d) for %d frames; output in %s",
            self.algorithm_name,
            self.task_name,
            self.seed,
            c.total_frames,
            self.folder,
        )

        def stopping() -> bool:
            return guard.signum is not None and trainer.frames < c.total_frames

        if eval_env is not None and trainer.frames == 0 and not stopping():
            # the untrained policy: the first point of every learning curve
            outputs.log_scalars(trainer.evaluate(), 0)
        yield trainer.frames  # set up: runs sharing a process start their iterations together
        history = []
        run = trainer.train()
        try:
            while not stopping():
                logs = next(run, None)
                if logs is None:
                    break
                history.append(logs)
                yield trainer.frames
        finally:
            run.close()
        if self.data_parallel is not None and not stopping():
            self.data_parallel.check_agreement(self.algorithm)
        if stopping():
            guard.disarm()  # the final checkpoint is not cut short by the stop's timeout
            # at 0 frames there is nothing to continue (a resume would evaluate at 0 again)
            if trainer.frames not in (0, self._last_checkpoint):
                self.save_checkpoint()
            raise RunInterrupted(guard.signum)
        if c.checkpoint_at_end and trainer.frames != self._last_checkpoint:
            self.save_checkpoint()
        if eval_env is not None and not outputs.results.has_absolute_metrics:  # kept: resumed done
            outputs.write_absolute_metric(trainer)
        self.plot()
        if c.export:
            self.export(c.export)
        self._status("complete")
        summary: dict[str, Any] = {"frames": trainer.frames, "folder": str(self.folder)}
        if self.algorithm.compiled:
            summary["compile"] = compile_report(self.algorithm)
            log.info("compiled updates: %s", summary["compile"])
        for logs in history:
            summary.update({k: v for k, v in logs.items() if k.endswith("episode_reward")})
        return summary

    def export(self, formats: Sequence[str] = EXPORT_FORMATS) -> dict[str, dict[str, Path]]:
        """Export every group's deterministic policy to ``<folder>/export`` (see
        :func:`marl.export.export_policies`); ``experiment.export`` calls it when training ends.

        Returns:
            ``{group: {format: path}}``.
        """
        return export_run(self.algorithm, self.folder / "export", formats)

    # ----------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Trainer (networks, optimizers, counters), RNG states, loggers, the best
        evaluation's policy (:mod:`~marl.experiment.best_policy`), config."""
        if self.trainer is None:
            raise RuntimeError("Experiment.state_dict: call run() first")
        ev = self.trainer.last_evaluation
        return {
            "trainer": self.trainer.state_dict(include_buffers=self.config.checkpoint_buffers),
            "rng": rng_state(),
            **self.outputs.state_dict(),  # loggers, and the absolute metric's policy
            "last_evaluation": dataclasses.asdict(ev) if ev is not None else None,
            # training wall time so far: a resumed run's results.json counts on from it
            "elapsed_time": self.outputs.elapsed(),
            "config": self.describe(),
            "run_id": self.run_id,  # the folder's run.json: a resume checks it
            "version": 3,
            **({} if self.data_parallel is None else {"world_size": self.data_parallel.world_size}),
        }

    def save_checkpoint(self) -> Path:
        """Write ``checkpoints/checkpoint_<frames>.pt`` and ``latest.pt`` atomically."""
        if self.checkpoints is None:
            raise RuntimeError("Experiment.save_checkpoint: call run() first")
        frames = self.trainer.frames if self.trainer is not None else 0
        path = self.checkpoints.save(self.state_dict(), frames)
        self._last_checkpoint = frames
        self._status("running")
        return path

    # ---------------------------------------------------------------- outputs
    @property
    def loggers(self) -> dict[str, Logger]:
        """``{name: Logger}`` of the run (empty before :meth:`run`)."""
        return self.outputs.loggers

    @property
    def results(self) -> RunResults:
        """The run's ``results.json`` content (set by :meth:`run`)."""
        return self.outputs.results

    @property
    def best_policy(self) -> BestPolicy:
        """The best evaluation's policy, re-evaluated for the absolute metric."""
        return self.outputs.best_policy

    def _status(self, status: str, **extra: Any) -> None:
        latest = self.checkpoints.latest if self.checkpoints is not None else None
        self.outputs.write_status(status, self._frames(), latest, **extra)

    def plot(self) -> Path | None:
        """Draw ``curves.png`` from ``scalars.csv`` (or this run's history without the CSV)."""
        return self.outputs.plot(self.trainer.history if self.trainer is not None else [])
