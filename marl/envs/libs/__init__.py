"""Wrappers around third-party environment libraries.

Each wrapper imports its library lazily (when an env is built), so importing
this package stays light; a missing library raises an ImportError that names
the extra to install.
"""

from typing import TYPE_CHECKING

from marl._lazy import lazy_exports

# the re-exports, imported on first access (marl._lazy): importing a light module of
# this package must not import torch through this file
if TYPE_CHECKING:
    from marl.envs.libs.gymnasium import GymnasiumEnv
    from marl.envs.libs.lbforaging import LBForagingEnv
    from marl.envs.libs.magent2 import magent2_env
    from marl.envs.libs.mamujoco import MaMuJoCoEnv
    from marl.envs.libs.meltingpot import meltingpot_env
    from marl.envs.libs.overcooked import OvercookedEnv
    from marl.envs.libs.pettingzoo import PettingZooEnv
    from marl.envs.libs.rware import RwareEnv
    from marl.envs.libs.vmas import VmasEnv

__all__ = [
    "GymnasiumEnv",
    "LBForagingEnv",
    "MaMuJoCoEnv",
    "OvercookedEnv",
    "PettingZooEnv",
    "RwareEnv",
    "VmasEnv",
    "magent2_env",
    "meltingpot_env",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__, __all__)
