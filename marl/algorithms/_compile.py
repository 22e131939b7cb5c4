"""Compiled updates: ``torch.compile`` of a loss's forward (and so of its backward).

``Algorithm.build(env, compile=True)`` (``experiment.compile=true``) turns it on:

- every learner's :class:`~marl.algorithms.updates.GradientStep` runs
  :func:`compiled_loss_terms`, the compiled :func:`~marl.algorithms.updates.loss_terms`
  (the loss and the sum of its ``loss_*`` terms). AOTAutograd compiles the backward
  of that graph too; ``backward()`` itself and the optimizer step stay eager;
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
from typing import Any

import torch
from tensordict import TensorDictBase

__all__ = ["compile_counts", "compiled_loss_terms"]

_COMPILED: dict[Callable[..., Any], Callable[..., Any]] = {}


def compiled_loss_terms(
    terms: Callable[[Any, TensorDictBase], tuple[TensorDictBase, torch.Tensor | None]],
) -> Callable[[Any, TensorDictBase], tuple[TensorDictBase, torch.Tensor | None]]:
    """``terms`` compiled with ``torch.compile`` (inductor, static shapes), made once.

    One compiled function serves every learner: torch keeps one graph per loss module
    and minibatch shape (its guards check both).
    """
    compiled = _COMPILED.get(terms)
    if compiled is None:
        compiled = _COMPILED[terms] = torch.compile(terms, dynamic=False)
    return compiled


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
