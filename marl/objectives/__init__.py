"""Losses, value estimators and target-network updaters.

Every loss and estimator is key-agnostic (``set_keys``) and shape-agnostic (any
leading batch dims, including an agent dim), so a MARL algorithm is a single-agent
loss pointed at a group's keys. This package imports only torch, tensordict, numpy
and ``marl._C``; the networks it trains are passed in as modules.
"""

from typing import TYPE_CHECKING

from marl._lazy import lazy_exports

# the re-exports, imported on first access (marl._lazy): importing a light module of
# this package must not import torch through this file
if TYPE_CHECKING:
    from marl.objectives import settings, value
    from marl.objectives.common import ActorCritic, KeyedModule, LossModule
    from marl.objectives.ddpg import DDPGLoss
    from marl.objectives.dqn import DQNLoss
    from marl.objectives.estimators import GAE, TD0, TDLambda, ValueEstimator, VTrace
    from marl.objectives.happo import HAPPOLoss
    from marl.objectives.ppo import A2CLoss, PPOLoss
    from marl.objectives.pqn import PQNLoss, QLambda
    from marl.objectives.qmix import QMixLoss
    from marl.objectives.sac import DiscreteSACLoss, SACLoss
    from marl.objectives.settings import (
        A2CSettings,
        DDPGSettings,
        DQNSettings,
        PPOSettings,
        PQNSettings,
        SACSettings,
        TD3Settings,
    )
    from marl.objectives.standardize import RankSum, standardize
    from marl.objectives.targets import HardUpdate, SoftUpdate
    from marl.objectives.td3 import TD3Loss

__all__ = [
    "GAE",
    "TD0",
    "A2CLoss",
    "A2CSettings",
    "ActorCritic",
    "DDPGLoss",
    "DDPGSettings",
    "DQNLoss",
    "DQNSettings",
    "DiscreteSACLoss",
    "HAPPOLoss",
    "HardUpdate",
    "KeyedModule",
    "LossModule",
    "PPOLoss",
    "PPOSettings",
    "PQNLoss",
    "PQNSettings",
    "QLambda",
    "QMixLoss",
    "RankSum",
    "SACLoss",
    "SACSettings",
    "SoftUpdate",
    "TD3Loss",
    "TD3Settings",
    "TDLambda",
    "VTrace",
    "ValueEstimator",
    "settings",
    "standardize",
    "value",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__, __all__)
