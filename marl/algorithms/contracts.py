"""The learner contract: what a learner owns, what an updater may do, what each saves.

A :class:`~marl.algorithms.base.GroupLearner` (the :class:`Learner` of one group)
owns its parts. A builder makes every part and passes it to the constructor; from
then on the parts are fixed (assigning one raises):

- ``policy``: the collection policy, a ``TensorDictModuleBase``;
- ``loss``: a :class:`Loss`. It owns the trained networks and their targets, and
  its own agent masking, configured when the builder points it at the group's keys
  (``set_keys(agent_mask=(group, "mask"))``);
- ``optimizer``: one ``torch.optim.Optimizer`` over the trained parameters;
- ``updater``: an :class:`Updater`, the update loop;
- ``exploration``: :class:`Exploration` modules, annealed with the collected frames;
- ``target_updater``: a :class:`TargetUpdater`, or ``None``.

An updater receives its collaborators (the loss, the optimizer, the target updater,
its own storage) in its constructor and only calls them: it never replaces or
reconfigures anyone's parts. It stores only the entries its loss reads
(:attr:`Loss.in_keys`).

State: every stateful part saves and restores itself with ``state_dict()`` and
``load_state_dict()`` (:class:`Stateful`): the modules (networks, exploration
schedules, a loss's counters as module extra state), the optimizer, the updater
(e.g. the fractional off-policy updates carried over), the target updater (the
phase of a periodic copy). A checkpoint is made of these and of nothing else.

Examples:
    >>> from marl.algorithms import Algorithm
    >>> from marl.algorithms.contracts import Learner, Updater
    >>> from marl.testing import MultiAgentFakeEnv
    >>> learner = Algorithm("mappo").build(MultiAgentFakeEnv(num_envs=2)).learners["walker"]
    >>> isinstance(learner, Learner), isinstance(learner.updater, Updater)
    (True, True)
    >>> learner.loss = None
    Traceback (most recent call last):
    ...
    AttributeError: GroupLearner.loss is fixed at construction: build a new learner instead
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey

from marl.algorithms._groups import GroupInfo
from marl.data import ReplayBuffer
from marl.objectives import ValueEstimator

__all__ = [
    "AdvantageLoss",
    "Exploration",
    "Learner",
    "Loss",
    "Stateful",
    "TargetUpdater",
    "Updater",
]


@runtime_checkable
class Stateful(Protocol):
    """A part whose state a checkpoint saves."""

    def state_dict(self) -> Mapping[str, Any]:
        """The part's state (tensors, counters), enough to resume it."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> Any:
        """Restore :meth:`state_dict`."""
        ...


@runtime_checkable
class Loss(Protocol):
    """A loss module: ``loss(minibatch)`` returns ``loss_*`` terms and diagnostics."""

    @property
    def in_keys(self) -> list[NestedKey]:
        """Every entry the loss may read from a minibatch: all an updater stores."""
        ...

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The ``loss_*`` terms (summed into one backward) and scalar diagnostics."""
        ...


@runtime_checkable
class AdvantageLoss(Loss, Protocol):
    """An on-policy loss whose estimator writes advantages and value targets on a batch."""

    value_estimator: ValueEstimator | None


@runtime_checkable
class TargetUpdater(Stateful, Protocol):
    """Moves target networks towards the online ones (``SoftUpdate``, ``HardUpdate``)."""

    def step(self) -> None:
        """Called after every optimizer step."""
        ...


@runtime_checkable
class Exploration(Protocol):
    """An exploration module whose schedule follows the collected frames."""

    def step(self, frames: int = 1) -> None:
        """Advance the schedule by ``frames`` collected frames."""
        ...


@runtime_checkable
class Updater(Stateful, Protocol):
    """The update loop of one learner, built around the learner's loss and optimizer.

    Attributes:
        on_policy: whether it learns from the latest batch only.
        loss: the loss it trains (the learner's).
        optimizer: the optimizer it steps (the learner's).
        buffer: its replay buffer (saved with a run's buffers), ``None`` when it keeps
            none between batches.
    """

    on_policy: bool

    @property
    def loss(self) -> Loss: ...

    @property
    def optimizer(self) -> torch.optim.Optimizer: ...

    @property
    def buffer(self) -> ReplayBuffer | None: ...

    def process(self, batch: TensorDictBase) -> TensorDictBase:
        """Prepare a collected ``[*B, T]`` batch in place (e.g. write advantages)."""
        ...

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        """Store what the loss reads of a processed batch and run the optimizer steps.

        Returns:
            The mean of every scalar loss output over the steps (empty without steps).
        """
        ...


@runtime_checkable
class Learner(Protocol):
    """Everything that trains one group (see the module docstring for who owns what)."""

    info: GroupInfo
    algorithm: str
    policy: TensorDictModuleBase
    loss: Loss
    optimizer: torch.optim.Optimizer
    updater: Updater
    exploration: Sequence[Exploration]
    target_updater: TargetUpdater | None

    def process_batch(self, batch: TensorDictBase) -> TensorDictBase:
        """``updater.process``: prepare a collected batch in place."""
        ...

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        """``updater.update``, then the exploration schedules advance by the batch's frames."""
        ...

    def extra_state(self) -> dict[str, Any]:
        """The ``state_dict()`` of every part that is not a module: optimizer, updater,
        target updater."""
        ...

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`extra_state`."""
        ...
