"""The learner contract: what a learner owns, what an updater may do, what each saves.

A :class:`~marl.algorithms.base.GroupLearner` (the :class:`Learner` of one group)
owns its parts. A builder makes every part and passes it to the constructor; from
then on the parts are fixed (assigning one raises):

- ``policy``: the collection policy, a ``TensorDictModuleBase``;
- ``loss``: a :class:`Loss`. It owns the trained networks and their targets, and
  its own agent masking, configured when the builder points it at the group's keys
  (``set_keys(agent_mask=(group, "mask"))``), and fixed with the learner (its keys and
  value estimator cannot change afterwards, :meth:`~marl.objectives.common.KeyedModule.fix`);
- ``optimizer``: one ``torch.optim.Optimizer`` over the trained parameters;
- ``updater``: an :class:`Updater`, the update loop;
- ``exploration``: :class:`Exploration` modules, annealed with the collected frames;
- ``target_updater``: a :class:`TargetUpdater`, or ``None``.

An updater receives its collaborators (the loss, the optimizer, the target updater,
its own storage) in its constructor and only calls them: it never replaces or
reconfigures anyone's parts. It stores only the entries its loss reads
(:attr:`Loss.in_keys`).

A :class:`JointUpdater` (HAPPO's) updates together with the updaters of the same
``joint`` kind in the other groups: ``Algorithm.update`` hands them all, in group
order, to the first one's ``update_jointly``, which calls each one's own public methods
on each one's own entries (HAPPO: :func:`~marl.algorithms.happo.happo_round`; a group's
updater still never reads another group's keys, nor writes another updater's state).

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
    "JointUpdater",
    "Learner",
    "Loss",
    "OnPolicySettings",
    "Stateful",
    "TargetUpdater",
    "Updater",
]


class OnPolicySettings(Protocol):
    """The settings an on-policy learner is assembled from
    (:func:`~marl.algorithms.ppo.policy_gradient_learner`): PPO's, A2C's, MAPPO's,
    IPPO's, HAPPO's and MAT's configs have them, each default in its own config."""

    lr: float
    """Adam learning rate of the actor (and of the critic, unless the builder gives the
    critic its own)."""
    epochs: int
    """Passes over each collected batch."""
    minibatch_size: int
    """Transitions per optimizer step."""
    max_grad_norm: float | None
    """Per-role gradient clipping (``None``: off)."""


@runtime_checkable
class Stateful(Protocol):
    """A part whose state a checkpoint saves: ``state_dict()`` and ``load_state_dict()``."""

    def state_dict(self) -> Mapping[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> Any: ...


@runtime_checkable
class Loss(Protocol):
    """A loss: ``loss(minibatch)`` returns ``loss_*`` terms (summed into one backward) and
    scalar diagnostics; ``in_keys`` lists every entry it may read, all an updater stores."""

    @property
    def in_keys(self) -> list[NestedKey]: ...

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase: ...


@runtime_checkable
class AdvantageLoss(Loss, Protocol):
    """An on-policy loss whose estimator writes advantages and value targets on a batch."""

    value_estimator: ValueEstimator | None


@runtime_checkable
class TargetUpdater(Stateful, Protocol):
    """Moves target networks towards the online ones; ``step()`` after each optimizer step."""

    def step(self) -> None: ...


@runtime_checkable
class Exploration(Protocol):
    """An exploration schedule; ``step(frames)`` advances it by the collected frames."""

    def step(self, frames: int = 1) -> None: ...


@runtime_checkable
class Updater(Stateful, Protocol):
    """The update loop of one learner, built around the learner's loss and optimizer.

    - ``on_policy``: whether it learns from the latest batch only;
    - ``loss``, ``optimizer``: the learner's, received in its constructor;
    - ``buffer``: its replay buffer (saved with a run's buffers), or ``None``;
    - ``process(batch)``: prepare a collected ``[*B, T]`` batch in place (advantages);
    - ``update(batch)``: store the loss's entries of a processed batch, run the
      optimizer steps, return the mean of each scalar loss output (``{}`` without steps).
    """

    on_policy: bool

    @property
    def loss(self) -> Loss: ...

    @property
    def optimizer(self) -> torch.optim.Optimizer: ...

    @property
    def buffer(self) -> ReplayBuffer | None: ...

    def process(self, batch: TensorDictBase) -> TensorDictBase: ...

    def update(self, batch: TensorDictBase) -> dict[str, float]: ...


@runtime_checkable
class JointUpdater(Updater, Protocol):
    """An updater that runs one update together with its kind's updaters of other groups.

    - ``joint``: the kind; ``Algorithm.update`` gives every group whose updater has the
      same ``joint`` to the first one's ``update_jointly`` (the groups of other
      algorithms update as usual);
    - ``update_jointly(batch, updaters)``: one update of every updater in ``updaters``
      (``self`` among them) on a processed batch; one log dict per updater, in order.
      ``update(batch)`` is ``update_jointly(batch, [self])[0]``.
    """

    joint: str

    def update_jointly(
        self, batch: TensorDictBase, updaters: Sequence[JointUpdater]
    ) -> list[dict[str, float]]: ...


@runtime_checkable
class Learner(Protocol):
    """Everything that trains one group (the module docstring says who owns what).

    ``process_batch`` is the updater's ``process``; ``update`` the updater's, then the
    exploration schedules advance by the batch's frames (``advance_exploration(frames)``,
    which ``Algorithm.update`` calls itself after a joint update); ``extra_state`` holds the
    ``state_dict()`` of the parts that are not modules (optimizer, updater, target
    updater), restored by ``load_extra_state``.
    """

    info: GroupInfo
    algorithm: str
    policy: TensorDictModuleBase
    loss: Loss
    optimizer: torch.optim.Optimizer
    updater: Updater
    exploration: Sequence[Exploration]
    target_updater: TargetUpdater | None

    def process_batch(self, batch: TensorDictBase) -> TensorDictBase: ...

    def update(self, batch: TensorDictBase) -> dict[str, float]: ...

    def advance_exploration(self, frames: int) -> None: ...

    def extra_state(self) -> dict[str, Any]: ...

    def load_extra_state(self, state: Mapping[str, Any]) -> None: ...
