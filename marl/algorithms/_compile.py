"""Compiled updates: ``torch.compile`` of a loss's forward (and so of its backward).

``Algorithm.build(env, compile=True)`` (``experiment.compile=true``) turns it on:

- every learner's :class:`~marl.algorithms.updates.GradientStep` runs
  :func:`compiled_loss_terms`, the compiled :func:`~marl.algorithms.updates.loss_terms`
  (the loss and the sum of its ``loss_*`` terms). AOTAutograd compiles the backward
  of that graph too; ``backward()`` itself and the optimizer step stay eager;
- HAPPO's updater (:class:`~marl.algorithms.happo.HAPPOUpdater`), which steps one
  agent's slice at a time and so has no ``GradientStep``, runs its actor turns' and its
  critic's terms (:func:`~marl.algorithms.happo.happo_actor_loss_terms`,
  :func:`~marl.algorithms.happo.happo_critic_loss_terms`) compiled the same way; the
  agent's index is a tensor input of the graph, so one graph serves every agent;
- the algorithm's collection policy is compiled in place (``nn.Module.compile``), so
  its ``state_dict`` and the collectors' weight updates are unchanged.

Shapes are static (``dynamic=False``): the on-policy updater drops the incomplete
last minibatch and the replay buffers sample fixed batches, so each learner compiles
once per minibatch shape and the policy once per env batch size. A shape that changes
every call would recompile every call; torch then falls back to eager after
``torch._dynamo.config.recompile_limit`` compilations (with a warning).

:func:`compile_counts` reads torch's counters: how many frames and graphs were
compiled and how many graph breaks were met, the figures to check that a run really
uses the compiled path.

Examples:
    >>> from marl.algorithms._compile import compile_counts
    >>> sorted(compile_counts())
    ['frames', 'graph_breaks', 'graphs']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import torch

__all__ = ["compile_counts", "compiled_loss_terms"]

_COMPILED: dict[Callable[..., Any], Callable[..., Any]] = {}

TermsT = TypeVar("TermsT", bound=Callable[..., Any])


def compiled_loss_terms(terms: TermsT) -> TermsT:
    """``terms`` compiled with ``torch.compile`` (inductor, static shapes), made once.

    ``terms`` is a plain function of a loss module and its inputs that returns the
    loss's outputs and the sum of their ``loss_*`` terms:
    :func:`~marl.algorithms.updates.loss_terms` ``(loss, minibatch)``, or HAPPO's
    per-agent and critic terms. One compiled function serves every learner: torch
    keeps one graph per loss module and input shapes (its guards check both); tensor
    inputs (HAPPO's agent index) are not specialized on their values.
    """
    compiled = _COMPILED.get(terms)
    if compiled is None:
        compiled = _COMPILED[terms] = torch.compile(terms, dynamic=False)
    return cast(TermsT, compiled)


def compile_counts() -> dict[str, int]:
    """What ``torch.compile`` did in this process so far.

    Returns:
        ``{"frames": Python frames compiled (a recompilation counts again),
        "graphs": graphs compiled (a graph break adds one), "graph_breaks": graph
        breaks met while compiling}``.
    """
    from torch._dynamo.utils import counters

    return {
        "frames": int(counters["frames"]["ok"]),
        "graphs": int(counters["stats"]["unique_graphs"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
    }
