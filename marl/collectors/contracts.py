"""`BatchCollector`: what every collector offers the rest of marl.

The trainer, the league and the experiment runner only use these members, so
any object that has them (and passes :func:`~marl.collectors.check_collector`)
can replace a built-in collector, e.g. as ``Trainer(..., collector=...)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from tensordict import TensorDictBase

__all__ = ["BatchCollector"]


@runtime_checkable
class BatchCollector(Protocol):
    """The collector contract: iterate over batches, sync weights, save counters, shut down.

    :class:`~marl.collectors.Collector`, :class:`~marl.collectors.MultiSyncCollector`,
    :class:`~marl.collectors.MultiAsyncCollector` and
    :class:`~marl.collectors.RayCollector` implement it, and
    :func:`~marl.collectors.check_collector` checks it by running a collector.
    ``isinstance(obj, BatchCollector)`` only checks that the members exist.

    Attributes:
        frames_per_batch: the frames (env steps times the env batch numel) in
            every yielded batch, after any rounding the collector did. A
            positive int.
        total_frames: the frames after which iteration stops: ``-1`` for
            never, else a positive multiple of ``frames_per_batch`` (the last
            batch is never cut short).

    Examples:
        >>> from marl.collectors import BatchCollector, Collector
        >>> from marl.testing import SingleAgentFakeEnv
        >>> isinstance(Collector(SingleAgentFakeEnv(num_envs=2), frames_per_batch=4),
        ...            BatchCollector)
        True
    """

    frames_per_batch: int
    total_frames: int

    @property
    def frames(self) -> int:
        """Frames yielded so far.

        It starts at 0 (or where :meth:`load_state_dict` put it) and grows by
        ``frames_per_batch`` with every yielded batch.
        """
        ...

    def __iter__(self) -> Iterator[TensorDictBase | None]:
        """Yield batches until :attr:`frames` reaches ``total_frames`` (never stop for ``-1``).

        Each batch is a fresh TensorDict of ``frames_per_batch`` frames, safe
        to keep, with time as its last batch dim (``[*env_batch, T]``, or
        ``[num_workers, *env_batch, T]`` for collectors that stack their
        workers' batches). It holds the layout of the design contract: the
        root observations and the policy's outputs (actions...), the
        transition under ``"next"`` (rewards, next observations and bool
        ``"done"``/``"terminated"``/``"truncated"`` flags of shape
        ``[*batch, 1]``), and ``("collector", "traj_ids")`` of shape
        ``[*batch]``, which changes along time exactly after the steps that
        are done. Padded ``[num_trajs, max_len]`` trajectories with a
        ``("collector", "mask")`` are yielded instead when the collector was
        asked to split trajectories, and ``None`` when it extends a replay
        buffer instead of yielding.
        """
        ...

    def update_policy_weights_(self, weights: TensorDictBase | dict | None = None) -> None:
        """Make the policy the collector runs use ``weights`` from its next batch on.

        Collectors that collect ahead (asynchronous workers) may finish the
        batches already under way with the old weights.

        Args:
            weights: a ``TensorDict`` of parameters (``TensorDict.from_module``),
                a ``state_dict``, or ``None`` for the current weights of the
                policy given at construction (a no-op when the collector runs
                that very policy, or a policy without parameters).
        """
        ...

    def state_dict(self) -> dict[str, Any]:
        """What resuming needs: at least the frame counter, as a picklable dict.

        Returns:
            A dict that :meth:`load_state_dict` accepts; built-in collectors
            also save the policy's (and, where they can, the env's) state.
        """
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved: afterwards :attr:`frames` is the saved count.

        Args:
            state: a dict from :meth:`state_dict` (of this collector or of one
                built the same way).
        """
        ...

    def shutdown(self) -> None:
        """Release the collector's envs, workers or actors.

        Idempotent: a second call does nothing. The collector is not used
        after it.
        """
        ...
