"""Hyperparameter search and population-based training of whole marl runs, on Ray Tune.

- :func:`load_space` / :class:`SearchSpace`: a YAML search space over ``marl-run``
  keys (``algorithm.lr``, ``model.actor_cells``, ``algorithm.groups.adversary.lr``, ...);
  shipped spaces are in ``marl/tune/spaces/``.
- :func:`tune`: run it with PBT, ASHA or random search; each member is an
  :class:`~marl.experiment.Experiment` in ``<folder>/members/<member>``.
- :func:`resume_tuning`: continue a stopped tuning run.

``marl-tune`` is the command line (:mod:`marl.tune.cli`). Ray Tune is an optional
dependency (``pip install "marl[ray]"``), imported when a run starts.
"""

from typing import TYPE_CHECKING

from marl._lazy import lazy_exports

# the re-exports, imported on first access (marl._lazy): importing a light module of
# this package must not import torch through this file
if TYPE_CHECKING:
    from marl.tune.run import TuneResult, resume_tuning, tune
    from marl.tune.space import SearchSpace, TuneSettings, load_space

__all__ = ["SearchSpace", "TuneResult", "TuneSettings", "load_space", "resume_tuning", "tune"]

__getattr__, __dir__ = lazy_exports(__name__, __file__, __all__)
