"""One run over many processes: ``torchrun`` launches, each rank collects a share.

``torchrun --nproc_per_node=N -m marl.experiment ...`` starts ``N`` copies of
``marl-run``; torchrun sets ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR``
and ``MASTER_PORT`` in each. With ``WORLD_SIZE > 1`` the run is data-parallel:

- :func:`process_group` starts the default process group (``gloo`` when
  ``experiment.train_device`` is ``cpu``, ``nccl`` on ``cuda:LOCAL_RANK`` otherwise)
  and ends it with the run;
- :class:`DataParallel` says what each rank does: it collects
  ``frames_per_batch // world_size`` frames per batch with envs seeded by
  :meth:`DataParallel.rank_seed` (``seed + 1000 * rank``), splits the global
  ``minibatch_size`` / ``batch_size`` of the algorithm over the ranks
  (:meth:`DataParallel.rank_algorithm`), averages its gradients with the others'
  before every optimizer step (:class:`~marl.algorithms.updates.GradientSync`), and
  counts frames globally (rank frames x ``world_size``);
- rank 0 alone writes the run folder; the others write nothing there;
- :meth:`DataParallel.check_agreement` compares the ranks' parameters at the end;
- a :class:`~marl.experiment.peers.PeerMonitor` exchanges heartbeats between the ranks,
  so that a rank that dies or hangs stops the others within seconds, with an error
  naming it (:class:`~marl.experiment.peers.PeerLost`; :func:`checked_peers`).

Every other module reaches ``torch.distributed`` through this one (or ``GradientSync``,
or :mod:`~marl.experiment.peers`).
Without ``WORLD_SIZE > 1`` nothing here runs and a run is the ordinary one process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn

from marl.algorithms import Algorithm, AlgorithmSpec, get_algorithm
from marl.algorithms.updates import GradientSync
from marl.experiment.argv import follower_args, launch_rank
from marl.experiment.peers import PeerMonitor, peers_checked

log = logging.getLogger("marl.experiment")

__all__ = [
    "RANK_SEED_STRIDE",
    "SPLIT_FIELDS",
    "DataParallel",
    "check_world_size",
    "checked_peers",
    "follower_args",
    "launch_rank",
    "process_group",
]

RANK_SEED_STRIDE = 1000
"""Rank ``r`` seeds its training envs (and torch, NumPy, Python) with ``seed + 1000 * r``."""

SPLIT_FIELDS = ("minibatch_size", "batch_size")
"""Algorithm settings that are global: each rank takes ``value // world_size`` of them."""


def check_world_size(state: Mapping[str, Any], world_size: int) -> None:
    """Refuse to resume a checkpoint written by another number of ranks.

    Args:
        state: the loaded checkpoint (a data-parallel one records ``world_size``).
        world_size: the ranks of the run that resumes it (1: one process).

    Raises:
        ValueError: naming both numbers.

    Examples:
        >>> check_world_size({"world_size": 2}, 2)
        >>> check_world_size({}, 2)
        Traceback (most recent call last):
        ...
        ValueError: this checkpoint was written by a run over 1 process(es); it resumes only with the same number (torchrun --nproc_per_node x --nnodes), not 2
    """
    saved = int(state.get("world_size", 1))
    if saved != world_size:
        raise ValueError(
            f"this checkpoint was written by a run over {saved} process(es); it resumes "
            "only with the same number (torchrun --nproc_per_node x --nnodes), not "
            f"{world_size}"
        )


@dataclasses.dataclass(frozen=True)
class DataParallel:
    """This rank's place in a data-parallel run.

    Args:
        rank: this process's rank (0 writes the run folder).
        world_size: the number of ranks.
        sync: the gradient averaging over the ranks (``Algorithm.build(gradient_sync=)``).
        monitor: the heartbeats with the other ranks (``None``: none).
    """

    rank: int
    world_size: int
    sync: GradientSync
    monitor: PeerMonitor | None = None

    @property
    def writes(self) -> bool:
        """Whether this rank writes the run folder (rank 0)."""
        return self.rank == 0

    def rank_seed(self, seed: int) -> int:
        """The seed of this rank's training envs: ``seed + 1000 * rank`` (rank 0: ``seed``)."""
        return seed + RANK_SEED_STRIDE * self.rank

    def share(self, value: int, name: str) -> int:
        """This rank's share of the global ``value`` of setting ``name``.

        Raises:
            ValueError: when ``value`` is not divisible by :attr:`world_size` (naming both).
        """
        if value % self.world_size:
            raise ValueError(
                f"{name}={value} is global: a data-parallel run over {self.world_size} "
                f"processes gives each {name} // {self.world_size}, so it must be divisible "
                f"by {self.world_size}"
            )
        return value // self.world_size

    def rank_frames(self, frames_per_batch: int, total_frames: int, env_numel: int) -> int:
        """This rank's frames per batch: its share of the global ``frames_per_batch``,
        rounded up to whole steps of its ``env_numel`` envs (as a collector would round
        it). Where that rounds, rank 0 says so once in the log, in the run's own figures
        (the batches the trainer counts, and the frames the run will end at), instead of
        one collector warning per rank in the rank's.

        Examples:
            >>> rank1 = DataParallel(rank=1, world_size=2, sync=None)  # no process group here
            >>> rank1.rank_frames(100, 1000, 4), rank1.rank_frames(120, 1000, 4)
            (52, 60)
        """
        share = frames_per_batch // self.world_size
        steps = -(-share // env_numel)
        rounded = steps * env_numel
        if rounded != share and self.writes:
            per_batch = rounded * self.world_size
            total = -(-total_frames // per_batch) * per_batch
            log.warning(
                "data-parallel over %d processes: experiment.frames_per_batch=%d gives each "
                "%d frames, rounded up to %d (%d steps of its %d envs): %d frames per batch, "
                "and the run ends at %d frames for total_frames=%d",
                self.world_size, frames_per_batch, share, rounded, steps, env_numel,
                per_batch, total, total_frames,
            )  # fmt: skip
        return rounded

    def check_config(self, config: Any) -> None:
        """Refuse the ``experiment`` settings a data-parallel run cannot honour.

        Raises:
            ValueError: for a ``frames_per_batch`` not divisible by the ranks, or
                ``checkpoint_buffers`` (rank 0's buffers would not be every rank's).
        """
        self.share(config.frames_per_batch, "experiment.frames_per_batch")
        if config.checkpoint_buffers:
            raise ValueError(
                "experiment.checkpoint_buffers=true: a data-parallel run keeps one replay "
                "buffer per rank and checkpoints rank 0's state only; set it false (every "
                "rank refills its buffer after a resume)"
            )

    def rank_algorithm(self, algorithm: Algorithm) -> Algorithm:
        """An unbuilt copy of ``algorithm`` whose global batch sizes are this rank's share.

        Each of :data:`SPLIT_FIELDS` that a group's config has becomes ``value //
        world_size``: one synchronized optimizer step then averages the gradients of
        ``world_size`` equal shares, as one process stepping on the whole minibatch.

        Raises:
            ValueError: when a batch size is not divisible by :attr:`world_size`.
        """
        choice, config = algorithm.choice, algorithm.config
        if isinstance(choice, Mapping):
            configs = config if isinstance(config, Mapping) else {}
            split: Any = {
                g: self._split(a, configs.get(g), f"algorithm.groups.{g}.")
                for g, a in choice.items()
            }
        else:
            split = self._split(choice, config, "algorithm.")
        return Algorithm(choice, split)

    def _split(self, algo: Any, config: Any, prefix: str) -> Any:
        spec = algo if isinstance(algo, AlgorithmSpec) else get_algorithm(algo)
        resolved = spec.make_config(config)
        names = {f.name for f in dataclasses.fields(resolved)}
        shares = {
            k: self.share(getattr(resolved, k), prefix + k) for k in SPLIT_FIELDS if k in names
        }
        return dataclasses.replace(resolved, **shares)

    def follow(self, trainer: Any, state: Mapping[str, Any] | None) -> None:
        """Train a rank > 0's ``trainer`` (from checkpoint ``state``, if any) to the end.

        From a checkpoint it takes rank 0's networks, optimizers and counters; its envs,
        random generators and replay buffers restart from its rank seed (only rank 0's
        are in the checkpoint). Then :meth:`check_agreement`.
        """
        with peers_checked(self.monitor):
            if state is not None:
                own = ("collector", "torch_rng", "buffers")
                trainer.load_state_dict({k: v for k, v in state["trainer"].items() if k not in own})
            for _ in trainer.train():
                pass
            self.check_agreement(trainer.algorithm)

    @torch.no_grad()
    def check_agreement(self, module: nn.Module, rtol: float = 1e-9) -> None:
        """Fail loudly unless every rank holds the same parameters as the others.

        A cheap check: a float64 digest of the parameters (their sum and a position-
        weighted sum), whose maximum and minimum over the ranks must agree.

        Raises:
            RuntimeError: when the ranks' parameters differ.
        """
        params = [p.detach().double().reshape(-1) for p in module.parameters()]
        flat = torch.cat(params) if params else torch.zeros(1, dtype=torch.float64)
        weights = torch.linspace(1.0, 2.0, flat.numel(), dtype=torch.float64, device=flat.device)
        digest = torch.stack([flat.sum(), (flat * weights).sum(), flat.abs().sum()])
        if torch.distributed.get_backend(self.sync.group) == "nccl":
            digest = digest.cuda()
        high, low = digest.clone(), digest.clone()
        torch.distributed.all_reduce(high, op=torch.distributed.ReduceOp.MAX)
        torch.distributed.all_reduce(low, op=torch.distributed.ReduceOp.MIN)
        if not torch.allclose(high, low, rtol=rtol, atol=0.0):
            raise RuntimeError(
                f"data-parallel ranks disagree on the parameters after training (rank "
                f"{self.rank}: digest {digest.tolist()}, max over ranks {high.tolist()}, min "
                f"{low.tolist()}): their updates diverged; this run's results are not those "
                "of one synchronized run"
            )


def checked_peers(
    data_parallel: DataParallel | None, write_status: Any = None
) -> contextlib.AbstractContextManager[None]:
    """Around a rank's training: an error that came from a lost peer becomes
    :class:`~marl.experiment.peers.PeerLost`, naming it (see
    :func:`~marl.experiment.peers.peers_checked`).

    Args:
        data_parallel: this rank's :class:`DataParallel` (``None``: one process, nothing
            checked).
        write_status: ``(status, **fields) -> None``, rank 0's ``status.json`` writer: the
            monitor writes ``failed`` with it before it ends a process that a hung peer
            blocks.
    """
    monitor = data_parallel.monitor if data_parallel is not None else None
    hook = None if write_status is None else (lambda msg: write_status("failed", error=msg))
    return peers_checked(monitor, hook)


@contextlib.contextmanager
def process_group(
    train_device: str, peer_timeout_s: float | None = None
) -> Iterator[DataParallel | None]:
    """The default process group of a ``torchrun`` launch, for the run; ``None`` without one.

    ``gloo`` when ``train_device`` is ``cpu``; ``nccl`` otherwise, with
    ``cuda:LOCAL_RANK`` as this process's current device (so ``cuda`` means it). The
    group is destroyed when the block ends.

    With ``peer_timeout_s``, every rank runs a
    :class:`~marl.experiment.peers.PeerMonitor` for the block, and tells the others how
    its run ended (finished, or an error) when the block ends.

    Args:
        train_device: ``experiment.train_device``.
        peer_timeout_s: ``experiment.peer_timeout_s`` (``None``: no heartbeats).

    Yields:
        This rank's :class:`DataParallel`, or ``None`` when ``WORLD_SIZE`` is unset or 1.
    """
    if launch_rank() is None:
        yield None
        return
    dist = torch.distributed
    if torch.device(train_device).type == "cpu":
        backend = "gloo"
    else:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        backend = "nccl"
    dist.init_process_group(backend, init_method="env://")
    monitor = None if peer_timeout_s is None else PeerMonitor(peer_timeout_s).start()
    ok = False
    try:
        yield DataParallel(dist.get_rank(), dist.get_world_size(), GradientSync(), monitor)
        ok = True
    finally:
        if monitor is not None:
            monitor.close(ok)
        dist.destroy_process_group()
