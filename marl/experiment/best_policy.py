"""The best evaluation's policy, kept through a run and re-evaluated at its end.

This is the absolute metric of the evaluation protocol most MARL papers follow
(Gorsane et al., 2022, "Towards a Standardised Performance Evaluation Protocol for
Cooperative MARL", marl-eval): during training, keep the policy of the evaluation
with the best mean return; when training ends, evaluate that policy again over 10
times the evaluation episodes. :class:`~marl.experiment.Experiment` writes the result
as ``absolute_metrics`` in ``results.json``.

Only what the evaluation policy needs is kept: the ``state_dict`` of
:attr:`Algorithm.policy <marl.algorithms.Algorithm.policy>` (no optimizers, critics or
buffers), as CPU tensor copies, so it fits a checkpoint that loads with
``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from marl.algorithms import Algorithm, EvalEpisodes, Trainer

__all__ = ["ABSOLUTE_EPISODES_FACTOR", "BestPolicy"]

ABSOLUTE_EPISODES_FACTOR = 10
"""The absolute metric runs this many times the evaluation episodes (marl-eval's 10)."""


def _policy_weights(algorithm: Algorithm) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in algorithm.policy.state_dict().items()}


class BestPolicy:
    """The weights, frames and score of the best evaluation seen so far.

    The score is the mean over the evaluation's episodes of the team return (the value
    ``marl-report`` ranks a run by); a tie keeps the earlier evaluation.

    Attributes:
        frames: the frames of the best evaluation (``None`` before the first one).
        score: its mean return.
        weights: the evaluation policy's ``state_dict`` then (CPU copies).

    Examples:
        >>> from marl.algorithms import Algorithm
        >>> from marl.testing import MultiAgentFakeEnv
        >>> algo = Algorithm("mappo").build(MultiAgentFakeEnv(num_envs=2), seed=0)
        >>> best = BestPolicy()
        >>> best.observe(algo, 0, [1.0, 2.0]), best.observe(algo, 64, [0.0, 1.0])
        (True, False)
        >>> best.frames, best.score
        (0, 1.5)
        >>> BestPolicy.from_state(best.state_dict()).frames
        0
    """

    def __init__(self) -> None:
        self.frames: int | None = None
        self.score: float | None = None
        self.weights: dict[str, torch.Tensor] | None = None

    def observe(self, algorithm: Algorithm, frames: int, returns: Sequence[float]) -> bool:
        """Keep ``algorithm``'s policy if its evaluation ``returns`` beat the best so far.

        Returns:
            Whether this evaluation is the new best.
        """
        score = math.fsum(returns) / len(returns)
        if self.score is not None and score <= self.score:
            return False
        self.frames, self.score, self.weights = int(frames), score, _policy_weights(algorithm)
        return True

    def state_dict(self) -> dict[str, Any] | None:
        """``{"frames", "score", "weights"}`` (plain ints, floats and tensors), or ``None``."""
        if self.weights is None:
            return None
        return {"frames": self.frames, "score": self.score, "weights": dict(self.weights)}

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None) -> BestPolicy:
        """The :class:`BestPolicy` of :meth:`state_dict` (empty for ``None``)."""
        best = cls()
        if state:
            best.frames, best.score = int(state["frames"]), float(state["score"])
            best.weights = dict(state["weights"])
        return best

    def evaluate(self, trainer: Trainer) -> EvalEpisodes:
        """Evaluate the best policy over 10x the trainer's evaluation episodes.

        It runs the trainer's evaluator (:attr:`Trainer.evaluator
        <marl.algorithms.Trainer.evaluator>`: the same headline as every evaluation) on
        its evaluation env, deterministic as the trainer's evaluations are, with the best
        weights loaded into the algorithm's policy; the current weights are restored
        afterwards. The trainer's own evaluation state (``last_evaluation``, its
        callbacks) is untouched.

        Raises:
            RuntimeError: without an evaluation env or a best evaluation.
        """
        if trainer.eval_env is None or self.weights is None:
            raise RuntimeError("BestPolicy.evaluate: needs an eval_env and an evaluation")
        policy = trainer.algorithm.policy
        current = _policy_weights(trainer.algorithm)
        policy.load_state_dict(self.weights)
        try:
            return trainer.evaluator(
                trainer.eval_env,
                trainer.algorithm.eval_policy(),
                ABSOLUTE_EPISODES_FACTOR * trainer.eval_episodes,
                deterministic=trainer.eval_deterministic,
            )
        finally:
            policy.load_state_dict(current)
