"""``experiment.runs``: several seeds of one run, trained together in one process.

``marl-run experiment.runs=R seed=S`` (or :meth:`ExperimentRuns.create`) trains seeds
``S, S+1, ..., S+R-1`` of one algorithm on one task. Each seed is an ordinary
:class:`~marl.experiment.Experiment` writing an ordinary run folder; together they share
what one process can share (:mod:`marl.experiment.runs_hub`): one env batch of
``R x num_envs`` sub-envs on the batched families (VMAS, the native envs), and one
stacked update of all runs' learners (on- and off-policy). The layout::

    <save_folder>/
        runs.json        {"runs": R, "seeds": [S, ...], "folders": ["seed_S", ...], ...}
        seed_S/          an ordinary run folder (config.yaml, scalars.csv, results.json,
        seed_S+1/        checkpoints/, status.json, ...), read by marl-report unchanged
        ...

The runs train in lockstep: one iteration of each per round, so a round's batches are
all collected before any run updates. One :class:`~marl.experiment.InterruptGuard` serves
them all: after SIGINT or SIGTERM every run stops at the end of the same round, writes
its final checkpoint, and :class:`~marl.experiment.RunInterrupted` is raised. A run that
fails stops the others (their ``status.json`` says which run failed).

:meth:`ExperimentRuns.resume` (``marl-run --resume <save_folder>``) continues every run
from the newest checkpoint frame that every run has: after a SIGKILL the runs' newest
checkpoints can differ (one run wrote its checkpoint of a round, the next had not yet),
and the runs restart in lockstep from the older one, each discarding its newer
checkpoints and log rows as a single run's resume from an older checkpoint does.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from marl.algorithms import TrainerCallback
from marl.algorithms.updates import PER_RUN_SETTINGS
from marl.atomic import atomic_write_json
from marl.envs.families import batched_family
from marl.experiment.config import ExperimentConfig, config_from_dict
from marl.experiment.experiment import Experiment, TaskFactory
from marl.experiment.lifecycle import RUNS_FILE, InterruptGuard, RunInterrupted
from marl.experiment.progress import log_to_stderr
from marl.experiment.runs_hub import RunsHub
from marl.serialization import CheckpointError

__all__ = [
    "RUNS_FILE",
    "ExperimentRuns",
    "common_checkpoint_frames",
    "read_runs_file",
    "run_folder_name",
]

log = logging.getLogger("marl.experiment")

_CHECKPOINT = re.compile(r"^checkpoint_(\d+)\.pt$")


def run_folder_name(seed: int) -> str:
    """The folder of seed ``seed`` in a folder of runs, named as ``marl-bench`` names its
    seeds' folders.

    Examples:
        >>> run_folder_name(3)
        'seed_3'
    """
    return f"seed_{seed}"


def common_checkpoint_frames(folders: Sequence[Path]) -> list[int]:
    """The frame counts at which every folder of ``folders`` holds a checkpoint, newest first.

    Raises:
        FileNotFoundError: naming a folder that holds no checkpoint.

    Examples:
        >>> import tempfile
        >>> a, b = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
        >>> for folder, frames in ((a, (400, 800)), (b, (400,))):
        ...     (folder / "checkpoints").mkdir()
        ...     for f in frames:
        ...         _ = (folder / "checkpoints" / f"checkpoint_{f}.pt").write_bytes(b"")
        >>> common_checkpoint_frames([a, b])
        [400]
    """
    sets = []
    for folder in folders:
        names = (p.name for p in (folder / "checkpoints").glob("checkpoint_*.pt"))
        frames = {int(m.group(1)) for m in map(_CHECKPOINT.match, names) if m}
        if not frames:
            raise FileNotFoundError(
                f"{folder} holds no checkpoint: the runs trained together cannot restart "
                "together (a run stopped before its first checkpoint); start them again in "
                "a new folder"
            )
        sets.append(frames)
    return sorted(set.intersection(*sets), reverse=True)


class _RoundStop:
    """The guard's signal as every run sees it within one round: read once per round, so
    that all runs stop after the same iteration (their checkpoints then match)."""

    def __init__(self, guard: InterruptGuard) -> None:
        self.guard = guard
        self.signum: int | None = None

    def latch(self) -> None:
        self.signum = self.guard.signum

    def disarm(self) -> None:
        self.guard.disarm()


class _Paused(SystemExit):
    """Ends a run that :meth:`ExperimentRuns.run` pauses at ``until_frames``: a
    ``SystemExit(0)``, which a run records as ``stopped`` (ended on purpose)."""

    def __init__(self) -> None:
        super().__init__(0)


class ExperimentRuns:
    """Train ordinary experiments, one per seed, together in one process (in lockstep).

    Args:
        experiments: ``R >= 2`` experiments of one task, algorithm, model and
            ``experiment`` settings (``experiment.runs == R``), each with its own seed
            and run folder. Each joins the runs' hub (``Experiment.use_runs``).
        folder: the folder of the runs (``runs.json``).

    Raises:
        ValueError: for fewer than 2 experiments, a count other than their
            ``experiment.runs``, experiments that differ in more than seed, folder and
            the settings of :data:`~marl.algorithms.updates.PER_RUN_SETTINGS` (a
            population's members: each run trains with its own value),
            repeated seeds or folders, recurrent networks, or a data-parallel run.

    Examples:
        >>> import tempfile
        >>> from marl.testing import MultiAgentFakeEnv
        >>> runs = ExperimentRuns.create(
        ...     lambda num_envs, seed, device: MultiAgentFakeEnv(num_envs=num_envs, seed=seed),
        ...     "mappo", seed=5, task_name="fake/multiagent",
        ...     config=dict(runs=2, num_envs=4, frames_per_batch=64, total_frames=128,
        ...                 evaluation_episodes=2, render=False, progress=False,
        ...                 save_folder=tempfile.mkdtemp()))
        >>> [s["frames"] for s in runs.run()]
        [128, 128]
        >>> sorted(p.name for p in runs.folder.iterdir())
        ['runs.json', 'seed_5', 'seed_6']
    """

    def __init__(self, experiments: Sequence[Experiment], folder: str | os.PathLike[str]) -> None:
        self.experiments = list(experiments)
        self.folder = Path(folder).resolve()
        count = len(self.experiments)
        if count < 2:
            raise ValueError(f"ExperimentRuns: expected 2 experiments or more, got {count}")
        first = self.experiments[0]

        def alike(exp: Experiment) -> dict[str, Any]:
            d = exp.describe()
            d.pop("seed")
            for key in ("save_folder", "restore_file"):
                d["experiment"].pop(key)
            d["algorithm_config"] = _shared_settings(d["algorithm_config"])
            return d

        for exp in self.experiments:
            if exp.config.runs != count:
                raise ValueError(
                    f"experiment.runs: expected {count} (the experiments given), got "
                    f"{exp.config.runs} for seed {exp.seed}"
                )
            if alike(exp) != alike(first):
                differ = _differences(alike(exp), alike(first))
                raise ValueError(
                    "the runs must differ only in seed, folder and the algorithm settings "
                    f"{sorted(PER_RUN_SETTINGS)}: seed {exp.seed}'s config differs from seed "
                    f"{first.seed}'s in {differ}"
                )
            if exp.data_parallel is not None:
                raise ValueError(
                    f"experiment.runs={count} trains its runs in one process: it cannot be "
                    "a data-parallel run (--nproc / torchrun) as well"
                )
        for name, values in (
            ("seeds", [e.seed for e in self.experiments]),
            ("folders", [e.folder for e in self.experiments]),
        ):
            if len(set(values)) != count:
                raise ValueError(f"the runs' {name} must differ, got {values}")
        if first.recurrent:
            raise ValueError(
                f"experiment.runs={count}: recurrent networks (model.network=gru/lstm) are not "
                "supported with several runs in one process yet; train each seed on its own"
            )
        batched = not isinstance(first.task, str) or batched_family(first.task_name.split("/")[0])
        make_env = (lambda n: first.make_env(n, first.seed)) if batched else None
        self.hub = RunsHub(count, make_env)
        for index, exp in enumerate(self.experiments):
            exp.use_runs(self.hub, index)

    @classmethod
    def create(
        cls,
        task: str | TaskFactory,
        algorithm: Any = "mappo",
        model: Any = None,
        seed: int = 0,
        config: ExperimentConfig | Mapping[str, Any] | None = None,
        *,
        algorithm_config: Any = None,
        task_overrides: Mapping[str, Any] | None = None,
        task_name: str | None = None,
        callbacks: Sequence[TrainerCallback] = (),
    ) -> ExperimentRuns:
        """``experiment.runs`` experiments with seeds ``seed, seed+1, ...``, each in
        ``<save_folder>/seed_<s>/`` (``save_folder``: the current directory by default).
        The arguments are :class:`~marl.experiment.Experiment`'s.

        Raises:
            ValueError: for ``experiment.restore_file`` (resume a folder of runs with
                :meth:`resume`), and as :class:`ExperimentRuns` does.
        """
        c = config_from_dict(ExperimentConfig, config, "experiment").validate()
        if c.restore_file:
            raise ValueError(
                f"experiment.restore_file with experiment.runs={c.runs}: resume the runs' "
                "folder instead (marl-run --resume <folder>, ExperimentRuns.resume)"
            )
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {seed!r}")
        folder = Path(c.save_folder or os.getcwd()).resolve()
        experiments = [
            Experiment(
                task,
                algorithm,
                model,
                seed + r,
                dataclasses.replace(c, save_folder=str(folder / run_folder_name(seed + r))),
                algorithm_config=algorithm_config,
                task_overrides=task_overrides,
                task_name=task_name,
                callbacks=callbacks,
            )
            for r in range(c.runs)
        ]
        return cls(experiments, folder)

    @classmethod
    def resume(
        cls,
        folder: str | os.PathLike[str],
        config: Mapping[str, Any] | None = None,
        *,
        task: TaskFactory | None = None,
        callbacks: Sequence[TrainerCallback] = (),
        trusted: bool = False,
    ) -> ExperimentRuns:
        """The runs of ``folder`` (its ``runs.json``), each restored from the newest
        checkpoint frame that every run has.

        Args:
            folder: the folder of the runs.
            config: ``experiment`` settings to change, as in
                :meth:`Experiment.resume <marl.experiment.Experiment.resume>`.
            task: the env factory of runs on a custom task.
            callbacks: extra callbacks of every run.
            trusted: unpickle the checkpoints in full (files you trust only).

        Raises:
            FileNotFoundError: when ``folder`` has no ``runs.json``, or a run no checkpoint.
            ValueError: when the runs have no checkpoint frame in common.
        """
        root = Path(folder).expanduser().resolve()
        folders = [root / name for name in read_runs_file(root)["folders"]]
        candidates = common_checkpoint_frames(folders)
        if not candidates:
            raise ValueError(
                f"the runs of {root} have no checkpoint at a frame count they all share, so "
                "they cannot restart together; start them again in a new folder"
            )
        for frames in candidates:
            try:
                experiments = [
                    Experiment.resume(
                        f / "checkpoints" / f"checkpoint_{frames}.pt",
                        config,
                        task=task,
                        callbacks=callbacks,
                        trusted=trusted,
                    )
                    for f in folders
                ]
            except CheckpointError as err:  # a damaged one: the next older common frame
                if not getattr(err, "damaged", False):
                    raise
                log.warning("checkpoint at %d frames unreadable (%s); trying older", frames, err)
                continue
            log_to_stderr(log)
            newest = [max(common_checkpoint_frames([f])) for f in folders]
            log.info(
                "resuming the %d runs of %s together from %d frames, the newest checkpoint "
                "every run has (newest per run: %s; newer ones are discarded)",
                len(folders),
                root,
                frames,
                dict(zip((f.name for f in folders), newest)),
            )
            return cls(experiments, root)
        raise ValueError(f"no checkpoint frame of the runs of {root} is readable in every run")

    def run(self, until_frames: int | None = None) -> list[dict[str, Any]]:
        """Train every run to ``total_frames``, in lockstep, or pause them all at a frame count.

        Args:
            until_frames: pause every run after the first round at which it has trained
                ``until_frames`` frames or more (``None``: train to ``total_frames``).
                Each paused run holds a checkpoint at its frames and says ``stopped`` in
                its ``status.json`` (ended on purpose, not failed or interrupted), so
                :meth:`resume` continues all of them from there: ``marl-tune``'s
                vectorized backend trains a population so, from one exploit to the next.
                A run that reaches ``total_frames`` first ends as usual (``complete``).

        Returns:
            Each run's :meth:`Experiment.run <marl.experiment.Experiment.run>` summary;
            a paused run's is ``{"frames", "folder", "paused": True}``.

        Raises:
            ValueError: when ``until_frames`` is not an integer >= 1.
            RunInterrupted: after SIGINT or SIGTERM, once every run saved its checkpoint
                (also when the runs paused at ``until_frames`` in the round it came in).
            Exception: the first run's failure (the other runs stop, ``failed``).

        Examples:
            >>> import tempfile
            >>> from marl.testing import MultiAgentFakeEnv
            >>> folder = tempfile.mkdtemp()
            >>> task = lambda num_envs, seed, device: MultiAgentFakeEnv(num_envs=num_envs, seed=seed)
            >>> runs = ExperimentRuns.create(task, "mappo", task_name="fake/multiagent",
            ...     config=dict(runs=2, num_envs=4, frames_per_batch=64, total_frames=192,
            ...                 evaluation=False, progress=False, save_folder=folder))
            >>> [s["frames"] for s in runs.run(until_frames=128)]
            [128, 128]
            >>> [s["frames"] for s in ExperimentRuns.resume(folder, task=task).run()]
            [192, 192]
        """
        if until_frames is not None and (
            isinstance(until_frames, bool) or not isinstance(until_frames, int) or until_frames < 1
        ):
            raise ValueError(
                f"until_frames: expected None or an integer >= 1, got {until_frames!r}"
            )
        first = self.experiments[0]
        guard = InterruptGuard(first.config.stop_timeout_s, setting="experiment.stop_timeout_s")
        stop = _RoundStop(guard)
        summaries: list[dict[str, Any]] = [{} for _ in self.experiments]
        interrupted: RunInterrupted | None = None
        with guard:
            steps = [exp.steps(stop) for exp in self.experiments]
            active = list(range(len(steps)))
            current: int | None = None  # the run stepping now
            written = False
            try:
                while active:
                    stop.latch()  # once per round: every run stops after the same iteration
                    for i in list(active):
                        current = i
                        try:
                            next(steps[i])
                        except StopIteration as done:
                            summaries[i] = done.value
                            active.remove(i)
                        except RunInterrupted as err:
                            if stop.signum is None:  # stopped at once: not at a round's end
                                raise
                            interrupted = err
                            active.remove(i)
                        current = None
                    if not written:  # every run set up: its folder checked, locked, written
                        self._write_runs_file()
                        written = True
                    if until_frames is not None and self._reached(active, until_frames):
                        for i in list(active):
                            current = i
                            summaries[i] = self._pause(steps[i], self.experiments[i])
                            active.remove(i)
                            current = None
            except BaseException as err:
                others = [j for j in active if j != current and steps[j].gi_frame is not None]
                self._stop_others(steps, others, err, current)
                raise
            finally:
                self.hub.close()
        if interrupted is not None:
            raise interrupted
        if guard.signum is not None and any(s.get("paused") for s in summaries):
            # the signal came in the round that reached until_frames: every run paused
            # with its checkpoint; the caller must still hear of it, not start the next
            raise RunInterrupted(guard.signum)
        return summaries

    def _reached(self, active: list[int], frames: int) -> bool:
        """Whether every active run has trained ``frames`` and has some left to train (in
        lockstep they get there in the same round; one set up but not yet trained counts
        its restored frames; one at ``total_frames`` ends in its next step, ``complete``)."""
        runs = [self.experiments[i] for i in active]
        return bool(runs) and all(
            e.trainer is not None and frames <= e.trainer.frames < e.config.total_frames
            for e in runs
        )

    @staticmethod
    def _pause(step: Any, exp: Experiment) -> dict[str, Any]:
        """End run ``exp`` between two iterations, with a checkpoint at its frames.

        Its generator gets a :class:`_Paused` (a ``SystemExit(0)``): the run closes its
        envs and loggers, releases its folder and writes ``stopped``, as a run whose owner
        ends it on purpose does, and its checkpoint resumes it.
        """
        frames = exp.trainer.frames
        if not (exp.folder / "checkpoints" / f"checkpoint_{frames}.pt").exists():
            exp.save_checkpoint()  # between iterations: a consistent state
        try:
            step.throw(_Paused())
        except _Paused:
            pass
        else:  # pragma: no cover - a run's generator never swallows it
            raise RuntimeError(f"run {exp.folder.name} went on after it was paused")
        log.info("run %s paused at %d frames (checkpoint written)", exp.folder.name, frames)
        return {"frames": frames, "folder": str(exp.folder), "paused": True}

    def _write_runs_file(self) -> None:
        first = self.experiments[0]
        atomic_write_json(
            self.folder / RUNS_FILE,
            {
                "runs": len(self.experiments),
                "seeds": [e.seed for e in self.experiments],
                "folders": [os.path.relpath(e.folder, self.folder) for e in self.experiments],
                "task": first.task_name,
                "algorithm": first.describe()["algorithm"],
            },
        )

    def _stop_others(
        self, steps: list[Any], others: list[int], err: BaseException, failed: int | None
    ) -> None:
        """Stop the runs ``others`` after ``err`` ended run ``failed`` (``None``: raised
        between runs): each writes its status (``interrupted`` for a signal, else
        ``failed`` naming the run that failed)."""
        name = "?" if failed is None else self.experiments[failed].folder.name
        for j in others:
            if isinstance(err, KeyboardInterrupt):
                exc: BaseException = RunInterrupted(getattr(err, "signum", 2))
            else:
                exc = RuntimeError(f"stopped with the run {name}, which failed: {err!r}")
            try:
                steps[j].throw(exc)
            except BaseException as other:  # each run wrote its own status on the way out
                if other is not exc:
                    log.warning("run %s, stopping: %r", self.experiments[j].folder.name, other)


def _shared_settings(configs: Any) -> Any:
    """An ``algorithm_config`` (flat or ``{group: {...}}``) without the settings each run
    may hold its own value of (:data:`~marl.algorithms.updates.PER_RUN_SETTINGS`)."""
    if not isinstance(configs, dict):
        return configs
    return {
        k: _shared_settings(v) if isinstance(v, dict) else v
        for k, v in configs.items()
        if k not in PER_RUN_SETTINGS
    }


def _differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    """The dotted keys at which two nested dicts differ."""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return [prefix or "<root>"] if a != b else []
    out = []
    for key in sorted(set(a) | set(b), key=str):
        out += _differences(a.get(key), b.get(key), f"{prefix}.{key}" if prefix else str(key))
    return out


def read_runs_file(folder: Path) -> dict[str, Any]:
    """``runs.json`` of a folder of runs.

    Raises:
        FileNotFoundError: when ``folder`` has none.
        ValueError: when it does not list the runs' folders.

    Examples:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / RUNS_FILE).write_text('{"runs": 2, "folders": ["seed_0", "seed_1"]}')
        >>> read_runs_file(folder)["folders"]
        ['seed_0', 'seed_1']
    """
    path = folder / RUNS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{folder} holds no {RUNS_FILE}: not a folder of runs trained together"
        )
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("folders"), list):
        raise ValueError(f"{path}: expected {{'folders': [...], ...}}, got {data!r}")
    return data
