"""The hydra structured configs of ``marl-run``, registered from the config dataclasses.

The dataclasses are the one source of every default and type. :func:`register_configs`
stores them in hydra's ``ConfigStore``:

- ``experiment/base``: :class:`~marl.experiment.ExperimentConfig`;
- ``model/default``: :class:`~marl.experiment.ModelConfig`;
- ``algorithm/<name>``: each registered algorithm's config dataclass, plus ``name`` and
  ``groups`` (``{group: algorithm config}`` for one algorithm per group, filled with
  ``+algorithm@algorithm.groups.<group>=<name>``);
- ``marl_run_schema``: the types of the root keys (``task``, ``task_overrides``, ``seed``).

So hydra checks every type and key when it composes the config, before anything is
built. Nothing here imports torch: the config classes come from torch-free modules
(:func:`marl.algorithms.registry.algorithm_configs`), so ``marl-run --help`` is quick. The YAML files in ``marl/conf/`` hold only the root config (the defaults list
and hydra's settings) and presets that extend these nodes (``experiment/debug.yaml``,
``model/small.yaml``, ...).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import MISSING

from marl.algorithms.registry import algorithm_configs
from marl.experiment.config import ExperimentConfig, ModelConfig

__all__ = [
    "CONF_DIR",
    "RunSchema",
    "TaskSchema",
    "algorithm_node",
    "field_docs",
    "register_configs",
]

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


@dataclass
class TaskSchema:
    """The fields that open the root config of ``marl-run`` and of ``marl-league``
    (subclasses add theirs after these, keeping the composed config's key order)."""

    task: str = MISSING
    task_overrides: dict[str, Any] = field(default_factory=dict)
    seed: int = MISSING


@dataclass
class RunSchema(TaskSchema):
    """The root of ``marl-run``'s config; ``config.yaml`` gives the values."""

    experiment: ExperimentConfig = MISSING
    algorithm: Any = MISSING
    model: ModelConfig = MISSING


def algorithm_node(name: str) -> type:
    """The structured config of algorithm ``name``: ``name``, every field of its config
    dataclass (same types and defaults), and ``groups``.

    Examples:
        >>> from omegaconf import OmegaConf
        >>> node = OmegaConf.structured(algorithm_node("mappo"))
        >>> node.name, node.lr, dict(node.groups)
        ('mappo', 5e-05, {})
    """
    configs = algorithm_configs()
    if name not in configs:
        raise ValueError(f"unknown algorithm {name!r}; available: {', '.join(configs)}")
    config_cls = configs[name]
    hints = typing.get_type_hints(config_cls)
    fields: list[tuple[str, Any, Any]] = [("name", str, dataclasses.field(default=name))]
    for f in dataclasses.fields(config_cls):
        if not f.init:
            continue
        if f.default_factory is not dataclasses.MISSING:
            default = dataclasses.field(default_factory=f.default_factory)
        else:
            default = dataclasses.field(default=f.default)
        fields.append((f.name, hints[f.name], default))
    fields.append(("groups", dict[str, Any], dataclasses.field(default_factory=dict)))
    # named like the dataclass, so hydra's errors say `object_type=MAPPOConfig`
    node = dataclasses.make_dataclass(config_cls.__name__, fields)
    node.__module__ = config_cls.__module__
    node.__doc__ = config_cls.__doc__
    return node


def register_configs() -> None:
    """Store the config dataclasses in hydra's ``ConfigStore`` (idempotent)."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(name="marl_run_schema", node=RunSchema)
    store.store(group="experiment", name="base", node=ExperimentConfig)
    store.store(group="model", name="default", node=ModelConfig)
    for name in algorithm_configs():
        store.store(group="algorithm", name=name, node=algorithm_node(name))


def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` from the string literals under each annotated field (MRO too)."""
    import ast
    import inspect
    import itertools
    import textwrap

    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body
        for node, after in itertools.pairwise(body):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs
