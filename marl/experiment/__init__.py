"""The experiment runner: one command trains, logs, evaluates, checkpoints and plots.

- :class:`Experiment` runs one algorithm on one task with one seed and leaves an
  output folder (``config.yaml``, ``scalars.csv``, ``results.json``,
  ``curves.png``, ``videos/``, ``checkpoints/``, ``status.json``).
- :class:`ExperimentConfig` and :class:`ModelConfig` are its typed configs.
- ``marl-run`` (:mod:`marl.experiment.cli`) is the hydra CLI over the same
  pieces: the config dataclasses are its structured configs, checked before a
  run starts, with presets in ``marl/conf/``.
- :meth:`Experiment.resume` (``marl-run --resume <folder>``) continues a run from
  its checkpoint; ``status.json`` ends ``complete``, ``failed`` or ``interrupted``
  (:class:`RunInterrupted` after SIGINT/SIGTERM, with a final checkpoint).
- :class:`ExperimentRuns` (:mod:`marl.experiment.runs`, ``marl-run experiment.runs=N``)
  trains ``N`` seeds of one run together in one process, each in its own run folder.
- :func:`lock_run_folder` (:mod:`marl.experiment.runlock`): one live writer per run
  folder; a run or resume into a live run's folder raises :class:`RunFolderInUse`.

Examples:
    >>> from marl.experiment import ExperimentConfig
    >>> ExperimentConfig().loggers
    ['csv']
"""

from typing import TYPE_CHECKING

from marl._lazy import lazy_exports

# the re-exports, imported on first access (marl._lazy): importing a light module of
# this package must not import torch through this file
if TYPE_CHECKING:
    from marl.experiment.checkpoint import CheckpointManager, atomic_save, load_checkpoint
    from marl.experiment.config import ExperimentConfig, ModelConfig
    from marl.experiment.curves import plot_curves
    from marl.experiment.experiment import Experiment
    from marl.experiment.league_run import LeagueConfig, run_league
    from marl.experiment.lifecycle import RunInterrupted
    from marl.experiment.loggers import (
        CSVLogger,
        Logger,
        TensorboardLogger,
        WandbLogger,
        check_logger,
        make_loggers,
        read_scalars,
    )
    from marl.experiment.parts import evaluation_num_envs
    from marl.experiment.progress import ProgressCallback
    from marl.experiment.runlock import RunFolderInUse, check_run_folder, lock_run_folder
    from marl.experiment.runs import ExperimentRuns

__all__ = [
    "CSVLogger",
    "CheckpointManager",
    "Experiment",
    "ExperimentConfig",
    "ExperimentRuns",
    "LeagueConfig",
    "Logger",
    "ModelConfig",
    "ProgressCallback",
    "RunFolderInUse",
    "RunInterrupted",
    "TensorboardLogger",
    "WandbLogger",
    "atomic_save",
    "check_logger",
    "check_run_folder",
    "evaluation_num_envs",
    "load_checkpoint",
    "lock_run_folder",
    "make_loggers",
    "plot_curves",
    "read_scalars",
    "run_league",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__, __all__)
