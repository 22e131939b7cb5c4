"""Algorithms built from the pieces below: one learner per agent group, and a ``Trainer``.

- :class:`Algorithm` holds one :class:`GroupLearner` per group (a single-agent env
  is one group, ``"root"``); groups may use different algorithms.
- Each algorithm module registers an :class:`AlgorithmSpec`: a config dataclass, the
  action spaces it serves, ``on_policy``, and a builder ``(GroupInfo, config) -> GroupLearner``.
- :class:`Trainer` drives any algorithm: collect, process, update, sync, log, evaluate.

Examples:
    >>> from marl.algorithms import get_algorithm, list_algorithms
    >>> list_algorithms()
    ['a2c', 'ddpg', 'dqn', 'happo', 'iddpg', 'ippo', 'iql', 'isac', 'maddpg', 'mappo', 'masac', 'mat', 'ppo', 'pqn', 'pqn_vdn', 'qmix', 'sac', 'td3', 'vdn']
    >>> get_algorithm("ppo").on_policy
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from marl._lazy import lazy_exports
from marl.algorithms import configs
from marl.algorithms.configs import *  # noqa: F403  (torch-free: the config classes, eagerly)

# the re-exports, imported on first access (marl._lazy): the config classes and the
# registry import no torch, so the command line reads them without loading the builders
if TYPE_CHECKING:
    from marl.algorithms._groups import ROOT, GroupInfo, group_infos
    from marl.algorithms._recurrent import RECURRENT_NETWORKS, is_recurrent
    from marl.algorithms.base import Algorithm
    from marl.algorithms.checks import AlgorithmContractError, check_algorithm, check_learner
    from marl.algorithms.evaluation import EvalEpisodes, Evaluator, evaluate, evaluate_episodes
    from marl.algorithms.learner import GroupLearner
    from marl.algorithms.registry import (
        algorithm_configs,
        get_algorithm,
        list_algorithms,
        network_refusal,
        network_table,
        register_algorithm,
    )
    from marl.algorithms.settings import NETWORKS
    from marl.algorithms.spec import AlgorithmSpec, check_network
    from marl.algorithms.trainer import Trainer, TrainerCallback, TrainingRun
    from marl.algorithms.updates import compile_report

__all__ = [
    "NETWORKS",
    "RECURRENT_NETWORKS",
    "ROOT",
    "Algorithm",
    "AlgorithmContractError",
    "AlgorithmSpec",
    "EvalEpisodes",
    "Evaluator",
    "GroupInfo",
    "GroupLearner",
    "Trainer",
    "TrainerCallback",
    "TrainingRun",
    "algorithm_configs",
    "check_algorithm",
    "check_learner",
    "check_network",
    "compile_report",
    "evaluate",
    "evaluate_episodes",
    "get_algorithm",
    "group_infos",
    "is_recurrent",
    "list_algorithms",
    "network_refusal",
    "network_table",
    "register_algorithm",
    *configs.__all__,
]

__getattr__, __dir__ = lazy_exports(__name__, __file__, __all__)
