"""How much of an algorithm's training ran compiled."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from marl.algorithms._compile import compile_counts
from marl.algorithms.updates.gradient import GradientStep
from marl.algorithms.updates.off_policy import OffPolicyUpdater
from marl.algorithms.updates.on_policy import OnPolicyUpdater

if TYPE_CHECKING:  # base imports the updaters: an import here would be a circle
    from marl.algorithms.base import Algorithm

__all__ = ["compile_report"]


def compile_report(algorithm: Algorithm) -> dict[str, Any]:
    """How much of ``algorithm``'s training ran compiled, and what compiling cost.

    Returns:
        ``{"steps": {group: optimizer steps run by a compiled GradientStep},
        "eager_steps": {group: steps run eagerly}}`` (learners of the on- and off-policy
        updaters, and HAPPO's, whose actor turns and critic steps count) and
        :func:`~marl.algorithms._compile.compile_counts` (frames, graphs and graph
        breaks compiled so far in this process).

    Examples:
        >>> from marl.algorithms import Algorithm
        >>> from marl.testing import MultiAgentFakeEnv
        >>> report = compile_report(Algorithm("mappo").build(MultiAgentFakeEnv(num_envs=2)))
        >>> report["steps"], report["eager_steps"]
        ({'walker': 0, 'picker': 0}, {'walker': 0, 'picker': 0})
    """
    # imported here: marl.algorithms.happo imports marl.algorithms.updates, whose
    # __init__ imports this module
    from marl.algorithms.happo import HAPPOUpdater

    steps, eager = {}, {}
    for label, learner in algorithm.group_learners():
        updater = learner.updater
        if isinstance(updater, (OnPolicyUpdater, OffPolicyUpdater)):
            step: GradientStep | HAPPOUpdater = updater.gradient_step
        elif isinstance(updater, HAPPOUpdater):  # no GradientStep: it counts its own steps
            step = updater
        else:
            continue
        steps[label] = step.steps if step.compiled else 0
        eager[label] = 0 if step.compiled else step.steps
    return {"steps": steps, "eager_steps": eager, **compile_counts()}
