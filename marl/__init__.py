"""marl: multi-agent reinforcement learning on TensorDict, with agent groups.

``import marl`` stays light: it loads the specs and the group map only.
Subpackages (``marl.envs``, ``marl.data``, ...) are imported on first access.
"""

from __future__ import annotations

import importlib
from typing import Any

from marl.groups import GroupMap

__version__ = "0.1.0"

_SUBPACKAGES = (
    "specs",
    "groups",
    "envs",
    "data",
    "modules",
    "objectives",
    "collectors",
    "algorithms",
    "experiment",
    "report",
    "testing",
)

__all__ = ["GroupMap", "__version__", *_SUBPACKAGES]


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"marl.{name}")
    raise AttributeError(f"module 'marl' has no attribute {name!r}")
