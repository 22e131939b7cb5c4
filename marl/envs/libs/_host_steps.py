"""The part of the host-stepped wrappers that does not depend on the wrapped package.

:class:`~marl.envs.libs.pettingzoo.PettingZooEnv`, the tuple-agents wrappers and
:class:`~marl.envs.libs.overcooked.OvercookedEnv` step their env on the host in numpy
arrays (they are :class:`~marl.envs.HostArrayEnv`\\ s); their ``_reset`` / ``_step``
and their last construction steps are the same, kept here once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from marl.envs.common import EnvBase

__all__ = ["HostStepsEnv"]

_SCALAR = torch.Size([])


class HostStepsEnv(EnvBase):
    """An unbatched env stepped through ``reset_arrays`` / ``step_arrays`` and
    ``arrays_to_tensordict``, which a subclass defines."""

    def _host_options(
        self, *, categorical_actions: bool, keep_float64: bool, check_actions: bool, seed: Any
    ) -> None:
        """Stores the options the host wrappers share, builds the specs and seeds.

        Args:
            categorical_actions: actions as indices (False: one-hot).
            keep_float64: keep float64 observations and rewards.
            check_actions: check the actions against the specs before a step.
            seed: the first reset's seed (``None``: unseeded).
        """
        self.categorical_actions = categorical_actions
        self.keep_float64 = keep_float64
        self.check_actions = check_actions
        self._reward_dtype = np.float64 if keep_float64 else np.float32
        self._seed_next: int | None = seed
        self._make_specs()
        if seed is not None:
            self.set_seed(seed)

    def _reset(self, td: TensorDictBase | None) -> TensorDictBase:
        return self.arrays_to_tensordict(self.reset_arrays(), _SCALAR)

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        return self.arrays_to_tensordict(self.step_arrays(td), _SCALAR)
