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

import difflib
from collections.abc import Sequence

from marl.algorithms import (
    a2c,
    ddpg,
    dqn,
    happo,
    iddpg,
    ippo,
    iql,
    isac,
    maddpg,
    mappo,
    masac,
    mat,
    ppo,
    pqn,
    pqn_vdn,
    qmix,
    sac,
    td3,
    vdn,
)
from marl.algorithms._groups import ROOT, GroupInfo, group_infos
from marl.algorithms._networks import NETWORKS
from marl.algorithms._recurrent import RECURRENT_NETWORKS, is_recurrent
from marl.algorithms.a2c import A2CConfig
from marl.algorithms.base import Algorithm
from marl.algorithms.checks import AlgorithmContractError, check_algorithm, check_learner
from marl.algorithms.ddpg import DDPGConfig
from marl.algorithms.dqn import DQNConfig
from marl.algorithms.evaluation import EvalEpisodes, Evaluator, evaluate, evaluate_episodes
from marl.algorithms.happo import HAPPOConfig
from marl.algorithms.iddpg import IDDPGConfig
from marl.algorithms.ippo import IPPOConfig
from marl.algorithms.iql import IQLConfig
from marl.algorithms.isac import ISACConfig
from marl.algorithms.learner import GroupLearner
from marl.algorithms.maddpg import MADDPGConfig
from marl.algorithms.mappo import MAPPOConfig
from marl.algorithms.masac import MASACConfig
from marl.algorithms.mat import MATConfig
from marl.algorithms.ppo import PPOConfig
from marl.algorithms.pqn import PQNConfig
from marl.algorithms.pqn_vdn import PQNVDNConfig
from marl.algorithms.qmix import QMIXConfig
from marl.algorithms.sac import SACConfig
from marl.algorithms.spec import AlgorithmSpec, check_network
from marl.algorithms.td3 import TD3Config
from marl.algorithms.trainer import Trainer, TrainerCallback, TrainingRun
from marl.algorithms.updates import compile_report
from marl.algorithms.vdn import VDNConfig

__all__ = [
    "NETWORKS",
    "RECURRENT_NETWORKS",
    "ROOT",
    "A2CConfig",
    "Algorithm",
    "AlgorithmContractError",
    "AlgorithmSpec",
    "DDPGConfig",
    "DQNConfig",
    "EvalEpisodes",
    "Evaluator",
    "GroupInfo",
    "GroupLearner",
    "HAPPOConfig",
    "IDDPGConfig",
    "IPPOConfig",
    "IQLConfig",
    "ISACConfig",
    "MADDPGConfig",
    "MAPPOConfig",
    "MASACConfig",
    "MATConfig",
    "PPOConfig",
    "PQNConfig",
    "PQNVDNConfig",
    "QMIXConfig",
    "SACConfig",
    "TD3Config",
    "Trainer",
    "TrainerCallback",
    "TrainingRun",
    "VDNConfig",
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
]

_REGISTRY: dict[str, AlgorithmSpec] = {}


def register_algorithm(spec: AlgorithmSpec, *, overwrite: bool = False) -> AlgorithmSpec:
    """Add an algorithm to the registry.

    Args:
        spec: the algorithm.
        overwrite: replace an algorithm of the same name instead of raising.

    Returns:
        ``spec``.

    Raises:
        ValueError: when the name is taken and ``overwrite`` is False.
    """
    if spec.name in _REGISTRY and not overwrite:
        raise ValueError(f"an algorithm named {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def get_algorithm(name: str) -> AlgorithmSpec:
    """The registered algorithm ``name``.

    Raises:
        ValueError: for an unknown name; the message lists the available ones.

    Examples:
        >>> sorted(get_algorithm("dqn").action_spaces)
        ['discrete']
    """
    if not isinstance(name, str) or name not in _REGISTRY:
        close = difflib.get_close_matches(str(name), list(_REGISTRY), n=3)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"unknown algorithm {name!r}{hint}; available: {', '.join(list_algorithms())}"
        )
    return _REGISTRY[name]


def list_algorithms() -> list[str]:
    """The registered algorithm names, sorted."""
    return sorted(_REGISTRY)


def network_refusal(algorithm: str, network: str) -> str | None:
    """Why the registered ``algorithm`` cannot take ``network`` whatever the env, or
    ``None`` if it can (:meth:`AlgorithmSpec.network_refusal`).

    Examples:
        >>> network_refusal("mappo", "gnn") is None
        True
        >>> network_refusal("mat", "mlp")
        "mat is a transformer over the group's agents (MultiAgentTransformer, sized by embed_dim and n_blocks); it has no MLP body to replace"
    """
    return get_algorithm(algorithm).network_refusal(network)


def network_table(algorithms: Sequence[str]) -> dict[str, dict[str, str]]:
    """``{algorithm: {network: "yes" or why not}}``, whatever the env (see ``check_network``
    for what a group adds: deepsets and gnn need agents, cnn image observations).

    Examples:
        >>> network_table(["mappo", "mat"])["mat"]["gnn"].startswith("mat is a transformer")
        True
    """
    return {a: {n: network_refusal(a, n) or "yes" for n in NETWORKS} for a in sorted(algorithms)}


for _module in (
    a2c,
    ddpg,
    dqn,
    ppo,
    sac,
    td3,
    mappo,
    ippo,
    happo,
    mat,
    maddpg,
    iddpg,
    masac,
    isac,
    qmix,
    vdn,
    iql,
    pqn,
    pqn_vdn,
):
    register_algorithm(_module.SPEC)
del _module
