"""The algorithm registry: every algorithm by name, its spec loaded when first asked for.

The built-in algorithms are known by name and config class without importing their
modules (:data:`BUILTIN_CONFIGS`, torch-free): the command line composes and checks
configs (:func:`algorithm_configs`) and lists names (:func:`list_algorithms`) without
torch. :func:`get_algorithm` imports the built-in modules (torch, the builders) the
first time a spec is needed, and checks that each module's ``SPEC`` carries the config
class named here.

Examples:
    >>> list_algorithms()[:3]
    ['a2c', 'ddpg', 'dqn']
    >>> algorithm_configs()["mappo"].__name__
    'MAPPOConfig'
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from marl.algorithms import configs as builtin
from marl.algorithms.settings import NETWORKS

if TYPE_CHECKING:
    from marl.algorithms.spec import AlgorithmSpec

__all__ = [
    "BUILTIN_CONFIGS",
    "algorithm_configs",
    "get_algorithm",
    "list_algorithms",
    "network_refusal",
    "network_table",
    "register_algorithm",
]

BUILTIN_CONFIGS: Mapping[str, type] = MappingProxyType(
    {
        "a2c": builtin.A2CConfig,
        "ddpg": builtin.DDPGConfig,
        "dqn": builtin.DQNConfig,
        "happo": builtin.HAPPOConfig,
        "iddpg": builtin.IDDPGConfig,
        "ippo": builtin.IPPOConfig,
        "iql": builtin.IQLConfig,
        "isac": builtin.ISACConfig,
        "maddpg": builtin.MADDPGConfig,
        "mappo": builtin.MAPPOConfig,
        "masac": builtin.MASACConfig,
        "mat": builtin.MATConfig,
        "ppo": builtin.PPOConfig,
        "pqn": builtin.PQNConfig,
        "pqn_vdn": builtin.PQNVDNConfig,
        "qmix": builtin.QMIXConfig,
        "sac": builtin.SACConfig,
        "td3": builtin.TD3Config,
        "vdn": builtin.VDNConfig,
    }
)
"""``{name: config class}`` of the built-in algorithms; ``marl.algorithms.<name>`` holds
each one's ``SPEC`` (its builder), imported on first use."""

_REGISTRY: dict[str, AlgorithmSpec] = {}
_builtins_loaded = False


def _load_builtins() -> None:
    """Import the built-in algorithm modules and register their specs (once)."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    for name, config_cls in BUILTIN_CONFIGS.items():
        spec = importlib.import_module(f"marl.algorithms.{name}").SPEC
        if spec.name != name or spec.config_cls is not config_cls:
            raise RuntimeError(
                f"marl.algorithms.{name}.SPEC is {spec.name!r} with "
                f"{spec.config_cls.__name__}; BUILTIN_CONFIGS expects {name!r} with "
                f"{config_cls.__name__}"
            )
        _REGISTRY[name] = spec
    _builtins_loaded = True


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
    _load_builtins()
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
    _load_builtins()
    if not isinstance(name, str) or name not in _REGISTRY:
        close = difflib.get_close_matches(str(name), list(_REGISTRY), n=3)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"unknown algorithm {name!r}{hint}; available: {', '.join(list_algorithms())}"
        )
    return _REGISTRY[name]


def algorithm_configs() -> dict[str, type]:
    """``{name: config class}`` of every registered algorithm, sorted by name, without
    importing the built-in algorithms' modules (what hydra's config store needs).

    Examples:
        >>> algorithm_configs()["qmix"]().mixing_embed_dim
        32
    """
    found = {**BUILTIN_CONFIGS, **{n: s.config_cls for n, s in _REGISTRY.items()}}
    return dict(sorted(found.items()))


def list_algorithms() -> list[str]:
    """The registered algorithm names, sorted."""
    return list(algorithm_configs())


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
