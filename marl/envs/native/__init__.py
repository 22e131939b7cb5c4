"""Batched, torch-native task families: envs written as tensor code over ``[num_envs]``.

No wrapped Python package and no per-env Python loop: every sub-env of the batch
steps in the same tensor operations, on the CPU or a GPU, with partial resets of
the sub-envs that ended and the layout of every other env (groups stacked,
env-level done flags at the root, ``mask`` for units that left, action masks).

- :class:`LBFEnv`: Level-Based Foraging, a port of ``lbforaging`` 2.0.
- :class:`RwareEnv`: the multi-robot warehouse, a port of ``rware`` 2.0.
- :class:`SmaxEnv`: StarCraft-style micromanagement, a port of JaxMARL 0.2.0's SMAX.

Each follows its reference's rules (they are the specification) and is tested
against it step by step; where one deliberately differs, its docstring says where
and why. The classes are imported lazily, so ``import marl.envs.native`` costs nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LBFEnv", "RwareEnv", "SmaxEnv"]

_WHERE = {
    "LBFEnv": "marl.envs.native.lbf",
    "RwareEnv": "marl.envs.native.rware",
    "SmaxEnv": "marl.envs.native.smax",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'marl.envs.native' has no attribute {name!r}")
