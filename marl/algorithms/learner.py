"""``GroupLearner``: everything that trains one group, its parts fixed at build.

Builders (one per algorithm, ``marl.algorithms.<name>``) make every part and pass it
here; :class:`~marl.algorithms.Algorithm` holds one learner per group. The parts'
protocols are :mod:`marl.algorithms.contracts`'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.algorithms.contracts import Exploration, Loss, TargetUpdater, Updater
from marl.data import ReplayBuffer
from marl.objectives.common import KeyedModule

__all__ = ["GroupLearner"]


_PARTS = frozenset(
    {
        "info",
        "algorithm",
        "policy",
        "loss",
        "optimizer",
        "updater",
        "exploration",
        "target_updater",
        "config",
    }
)


class GroupLearner(nn.Module):
    """Everything that trains one group: policy, loss, optimizer, updater, exploration.

    Builders (one per algorithm) make every part and pass it here; the parts are fixed
    from then on (see :mod:`marl.algorithms.contracts`). The update loop is the
    ``updater`` (``marl.algorithms.updates``), shared by every algorithm of a kind
    and built around this learner's loss and optimizer.

    Args:
        info: the group.
        algorithm: the name of the algorithm that built the learner.
        policy: the collection policy, writing the group's action (exploration included;
            exploration modules are no-ops under ``InteractionType.DETERMINISTIC``).
        loss: the group's loss module (it owns the trained networks, their targets and
            its agent masking).
        optimizer: one optimizer over every trained parameter (one param group per role).
        updater: the update loop; it must train ``loss`` with ``optimizer``.
        exploration: modules annealed with the collected frames (``step(frames)``).
        target_updater: ``SoftUpdate``/``HardUpdate`` stepped by the updater after its
            optimizer steps (``None``: no target networks).
        config: the algorithm config the learner was built from.

    Raises:
        TypeError: when a part does not follow its protocol.
        ValueError: when the updater trains another loss or optimizer than the learner's.
    """

    info: GroupInfo
    algorithm: str
    policy: TensorDictModuleBase
    loss: Loss
    optimizer: torch.optim.Optimizer
    updater: Updater
    exploration: nn.ModuleList
    target_updater: TargetUpdater | None
    config: object

    def __init__(
        self,
        info: GroupInfo,
        *,
        algorithm: str,
        policy: TensorDictModuleBase,
        loss: Loss,
        optimizer: torch.optim.Optimizer,
        updater: Updater,
        exploration: Sequence[Exploration] | None = None,
        target_updater: TargetUpdater | None = None,
        config: object = None,
    ) -> None:
        super().__init__()
        if not isinstance(updater, Updater):
            raise TypeError(
                "updater must follow marl.algorithms.contracts.Updater (on_policy, loss, "
                f"optimizer, buffer, process, update, state_dict), got {type(updater).__name__}"
            )
        if updater.loss is not loss or updater.optimizer is not optimizer:
            raise ValueError(
                "the updater must train this learner's loss with this learner's optimizer: "
                "build it with the same loss and optimizer objects"
            )
        if target_updater is not None and not isinstance(target_updater, TargetUpdater):
            raise TypeError(
                "target_updater must have step(), state_dict() and load_state_dict(), got "
                f"{type(target_updater).__name__}"
            )
        self.info = info
        self.algorithm = algorithm
        self.policy = policy
        self.loss = loss
        self.exploration = nn.ModuleList(exploration or [])
        self.optimizer = optimizer
        self.updater = updater
        self.target_updater = target_updater
        self.config = config
        self._frozen = True
        for module in loss.modules():  # the loss's keys and estimator: fixed from now on
            if isinstance(module, KeyedModule):
                module.fix()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _PARTS and self.__dict__.get("_frozen", False):
            raise AttributeError(
                f"GroupLearner.{name} is fixed at construction: build a new learner instead"
            )
        super().__setattr__(name, value)

    @property
    def buffer(self) -> ReplayBuffer | None:
        """The updater's replay buffer (``None`` for on-policy learners, which keep none)."""
        return self.updater.buffer

    def process_batch(self, batch: TensorDictBase) -> TensorDictBase:
        """Prepare a collected ``[*B, T]`` batch (e.g. advantages for on-policy losses)."""
        return self.updater.process(batch)

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        """Store the processed batch and run the optimizer steps; returns mean loss terms."""
        logs = self.updater.update(batch)
        self.advance_exploration(batch.numel())
        return logs

    def advance_exploration(self, frames: int) -> None:
        """Step the exploration schedules by ``frames`` collected frames (after an update:
        :meth:`update` calls it, ``Algorithm.update`` too after a joint update)."""
        for module in self.exploration:
            module.step(frames)

    def extra_state(self) -> dict[str, Any]:
        """The ``state_dict()`` of the parts that are not modules: optimizer, updater and
        target updater (the modules are in the learner's own ``state_dict``)."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "updater": self.updater.state_dict(),
            "target_updater": (
                None if self.target_updater is None else self.target_updater.state_dict()
            ),
        }

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`extra_state`.

        The optimizer's moments and step counts come from ``state``; its settings (each
        param group's ``lr``, ``betas``, ``eps``, ``weight_decay``) stay those this learner
        was built with from its config. A resumed run's config equals its checkpoint's, so
        nothing changes there; a population-based-training member that loads a better
        member's checkpoint with perturbed hyperparameters trains with the perturbed ones
        (``torch.optim.Optimizer.load_state_dict`` alone would bring back the donor's).
        """
        settings = [
            {k: v for k, v in group.items() if k != "params"}
            for group in self.optimizer.param_groups
        ]
        self.optimizer.load_state_dict(state["optimizer"])
        for group, kept in zip(self.optimizer.param_groups, settings):
            group.update(kept)
        self.updater.load_state_dict(state["updater"])
        if self.target_updater is not None and state.get("target_updater") is not None:
            self.target_updater.load_state_dict(state["target_updater"])
