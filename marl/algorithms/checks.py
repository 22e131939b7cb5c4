"""Public checkers of the algorithm extension points, as PettingZoo's ``api_test`` is.

- :func:`check_learner`: one group's learner follows
  :class:`~marl.algorithms.contracts.Learner` (its parts follow their protocols, and the
  parts are fixed once built).
- :func:`check_algorithm`: an algorithm, built on an env, collects, processes and
  updates a real batch; the update changes its parameters and reports finite numbers;
  its checkpoint state restores it exactly (same actions on the same input).

Every built-in is checked by ``tests/algorithms/test_checks.py``; run them on your own
algorithm (see ``docs/advanced/new_algorithm.md``).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from marl.algorithms.base import Algorithm
from marl.algorithms.contracts import Learner, Loss, TargetUpdater, Updater
from marl.algorithms.trainer import Trainer
from marl.envs.common import EnvBase

__all__ = ["AlgorithmContractError", "check_algorithm", "check_learner"]


class AlgorithmContractError(AssertionError):
    """An algorithm or learner breaks its contract; the message names the check."""


def _require(ok: bool, check: str, detail: str) -> None:
    if not ok:
        raise AlgorithmContractError(f"{check}: {detail}")


def check_learner(learner: Any, label: str = "learner") -> None:
    """Check one built learner against :class:`~marl.algorithms.contracts.Learner`.

    Args:
        learner: the learner (a built algorithm's ``group_learners()`` yields them).
        label: how messages name it.

    Raises:
        AlgorithmContractError: naming the broken check.

    Examples:
        >>> from marl.algorithms import Algorithm
        >>> from marl.testing import MultiAgentFakeEnv
        >>> algo = Algorithm("mappo").build(MultiAgentFakeEnv(num_envs=2), seed=0)
        >>> for label, learner in algo.group_learners():
        ...     check_learner(learner, label)
        >>> check_learner(object())
        Traceback (most recent call last):
        ...
        marl.algorithms.checks.AlgorithmContractError: learner: not a Learner (missing info, algorithm, policy, ...)
    """
    if not isinstance(learner, Learner):
        missing = [
            name
            for name in ("info", "algorithm", "policy", "loss", "optimizer", "updater")
            if not hasattr(learner, name)
        ]
        shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
        _require(False, label, f"not a Learner (missing {shown or 'a method'})")
    _require(isinstance(learner.updater, Updater), label, "its updater is not an Updater")
    _require(isinstance(learner.loss, Loss), label, "its loss is not a Loss")
    _require(
        learner.updater.loss is learner.loss and learner.updater.optimizer is learner.optimizer,
        label,
        "its updater must train the learner's own loss and optimizer",
    )
    _require(
        learner.target_updater is None or isinstance(learner.target_updater, TargetUpdater),
        label,
        "its target_updater is not a TargetUpdater",
    )
    for part in ("loss", "optimizer", "updater"):
        try:
            setattr(learner, part, getattr(learner, part))
        except AttributeError:
            continue
        _require(False, label, f"its {part} can be replaced after construction")


def _actions(algorithm: Algorithm, td: Any) -> list[torch.Tensor]:
    out = algorithm.eval_policy()(td.clone())
    return [out.get(key) for key in sorted(out.keys(True, True), key=str) if "action" in key]


def check_algorithm(
    algorithm: Algorithm, env: EnvBase, frames_per_batch: int | None = None, batches: int = 2
) -> None:
    """Build ``algorithm`` on ``env`` and check it trains and restores as the contract says.

    It trains ``batches`` batches with a :class:`~marl.algorithms.Trainer` (the one
    loop every run uses), then checks that every learner follows
    :func:`check_learner`, that the updates changed the parameters and logged finite
    numbers, and that :meth:`~marl.algorithms.Algorithm.state_dict_full` restores a
    second algorithm of the same choice to the same deterministic actions.

    Args:
        algorithm: an unbuilt :class:`~marl.algorithms.Algorithm` (configs small enough
            to update on ``batches`` batches: off-policy ``learning_starts`` low).
        env: the env to build it on.
        frames_per_batch: frames per batch (default: 8 steps of every env).
        batches: batches to train.

    Raises:
        AlgorithmContractError: naming the broken check.

    Examples:
        >>> from marl.algorithms import Algorithm
        >>> from marl.testing import MultiAgentFakeEnv
        >>> config = {"minibatch_size": 8, "epochs": 1}
        >>> check_algorithm(Algorithm("mappo", config=config), MultiAgentFakeEnv(num_envs=2))
    """
    frames = frames_per_batch or 8 * max(1, env.batch_size.numel())
    algorithm.build(env, seed=0)
    for label, learner in algorithm.group_learners():
        check_learner(learner, f"group {label!r}")
    before = {k: v.detach().clone() for k, v in algorithm.named_parameters()}
    trainer = Trainer(algorithm, env, frames_per_batch=frames, total_frames=frames * batches)
    history = list(trainer.train())
    _require(len(history) == batches, "training", f"{len(history)} iterations for {batches}")
    logs = {k: v for h in history for k, v in h.items() if isinstance(v, float)}
    bad = sorted(k for k, v in logs.items() if not math.isfinite(v))
    _require(not bad, "update logs", f"non-finite values for {bad}")
    after = dict(algorithm.named_parameters())
    changed = [k for k, v in before.items() if not torch.equal(v, after[k])]
    _require(bool(changed), "update", f"no parameter changed in {batches} batches")
    # the checkpoint state restores the same policy into a fresh algorithm
    restored = Algorithm(algorithm.choice, config=algorithm.config).build(env, seed=1)
    restored.load_state_dict_full(algorithm.state_dict_full())
    td = env.reset()
    ours, theirs = _actions(algorithm, td), _actions(restored, td)
    _require(
        len(ours) == len(theirs) and all(torch.equal(a, b) for a, b in zip(ours, theirs)),
        "state_dict_full",
        "a restored algorithm acts differently from the one it was saved from",
    )
