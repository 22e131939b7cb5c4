"""The experiment runner: one command trains, logs, evaluates, checkpoints and plots.

- :class:`Experiment` runs one algorithm on one task with one seed and leaves an
  output folder (``config.yaml``, ``scalars.csv``, ``results.json``,
  ``curves.png``, ``videos/``, ``checkpoints/``, ``status.json``).
- :class:`ExperimentConfig` and :class:`ModelConfig` are its typed configs.
- ``marl-run`` (:mod:`marl.experiment.cli`) is the hydra CLI over the same
  pieces, with the configs shipped in ``marl/conf/``.

Examples:
    >>> from marl.experiment import ExperimentConfig
    >>> ExperimentConfig().loggers
    ['csv']
"""

from marl.experiment.checkpoint import CheckpointManager, atomic_save, load_checkpoint
from marl.experiment.config import ExperimentConfig, ModelConfig
from marl.experiment.curves import plot_curves
from marl.experiment.experiment import Experiment
from marl.experiment.loggers import (
    CSVLogger,
    Logger,
    TensorboardLogger,
    WandbLogger,
    check_logger,
    make_loggers,
    read_scalars,
)
from marl.experiment.progress import ProgressCallback

__all__ = [
    "CSVLogger",
    "CheckpointManager",
    "Experiment",
    "ExperimentConfig",
    "Logger",
    "ModelConfig",
    "ProgressCallback",
    "TensorboardLogger",
    "WandbLogger",
    "atomic_save",
    "check_logger",
    "load_checkpoint",
    "make_loggers",
    "plot_curves",
    "read_scalars",
]
