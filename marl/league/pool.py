"""The opponent pool: frozen snapshots of the learner's policy, and how one is drawn.

A :class:`Snapshot` holds a copy of the policy's ``state_dict`` (its tensors are
cloned, so training the learner afterwards leaves them unchanged) and the learner's
record against it in training. :class:`OpponentPool` draws the next opponent by a
strategy:

- ``"latest"``: always the newest snapshot;
- ``"uniform"``: any snapshot, with equal chances;
- ``"prioritized"``: prioritized fictitious self-play (PFSP), weighting each snapshot
  by ``(1 - win rate) ** power``, where the win rate is the learner's score against it
  so far (draws count half; one virtual draw keeps an unplayed snapshot at 0.5).
  Snapshots the learner still loses to are drawn more often; beaten ones keep a small
  chance (``min_weight``), so a forgotten weakness shows up again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import torch

__all__ = ["STRATEGIES", "OpponentPool", "Snapshot"]

STRATEGIES = ("latest", "uniform", "prioritized")


@dataclass
class Snapshot:
    """A frozen copy of the learner's policy, and the learner's training record against it.

    Attributes:
        name: unique in its pool (``"snapshot_<frames>"`` in a league).
        iteration: the learner's training iteration when it was taken.
        frames: the frames the learner had collected then.
        state: the policy's ``state_dict``, cloned.
        wins: training games the learner won against it.
        draws: training games drawn.
        losses: training games the learner lost against it.
    """

    name: str
    iteration: int
    frames: int
    state: dict[str, torch.Tensor] = field(repr=False)
    wins: int = 0
    draws: int = 0
    losses: int = 0

    @property
    def games(self) -> int:
        """Training games the learner played against this snapshot."""
        return self.wins + self.draws + self.losses

    @property
    def win_rate(self) -> float:
        """The learner's score against it, draws half, with one virtual draw (0.5 unplayed)."""
        return (self.wins + 0.5 * self.draws + 0.5) / (self.games + 1)

    def record(self, score: float) -> None:
        """Add one training game in which the learner scored ``score`` (1, 0.5 or 0)."""
        if score == 1.0:
            self.wins += 1
        elif score == 0.5:
            self.draws += 1
        elif score == 0.0:
            self.losses += 1
        else:
            raise ValueError(f"score must be 1 (win), 0.5 (draw) or 0 (loss), got {score!r}")


class OpponentPool:
    """Snapshots of a learner's policy, and a strategy that draws opponents from them.

    Args:
        strategy: ``"latest"``, ``"uniform"`` or ``"prioritized"`` (module docstring).
        max_size: keep at most this many snapshots; the oldest is dropped (``None``: all).
        power: PFSP's exponent: higher favours the hardest opponents more.
        min_weight: PFSP's floor on a snapshot's weight.
        seed: seeds the pool's own generator (draws are reproducible, and do not
            consume torch's global random numbers).

    Raises:
        ValueError: for an unknown strategy or a bad size, power or floor.

    Examples:
        >>> import torch
        >>> pool = OpponentPool("latest", seed=0)
        >>> net = torch.nn.Linear(2, 1)
        >>> first = pool.add(net.state_dict(), iteration=0, frames=0)
        >>> second = pool.add(net.state_dict(), iteration=5, frames=500)
        >>> pool.sample().name
        'snapshot_500'
        >>> [s.name for s in pool]
        ['snapshot_0', 'snapshot_500']
    """

    def __init__(
        self,
        strategy: str = "uniform",
        *,
        max_size: int | None = None,
        power: float = 2.0,
        min_weight: float = 0.05,
        seed: int | None = None,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(
                f"unknown opponent sampling strategy {strategy!r}; expected one of {list(STRATEGIES)}"
            )
        if max_size is not None and (
            isinstance(max_size, bool) or int(max_size) != max_size or max_size < 1
        ):
            raise ValueError(f"max_size must be an integer >= 1 or None, got {max_size!r}")
        if not power > 0 or not 0 <= min_weight < 1:
            raise ValueError(
                f"need power > 0 and 0 <= min_weight < 1, got {power!r}, {min_weight!r}"
            )
        self.strategy = strategy
        self.max_size = max_size
        self.power = power
        self.min_weight = min_weight
        self._generator = torch.Generator()
        self._generator.manual_seed(0 if seed is None else seed)
        self._snapshots: list[Snapshot] = []

    def __len__(self) -> int:
        return len(self._snapshots)

    def __iter__(self):
        return iter(list(self._snapshots))

    def __getitem__(self, name: str) -> Snapshot:
        for snap in self._snapshots:
            if snap.name == name:
                return snap
        raise KeyError(
            f"no snapshot named {name!r}; the pool has {[s.name for s in self._snapshots]}"
        )

    def add(
        self, state: Mapping[str, Any], *, iteration: int, frames: int, name: str | None = None
    ) -> Snapshot:
        """Freeze ``state`` (a ``state_dict``; tensors are cloned) into a new snapshot.

        Raises:
            ValueError: when a snapshot of that name is already in the pool.
        """
        name = f"snapshot_{frames}" if name is None else name
        if any(s.name == name for s in self._snapshots):
            raise ValueError(f"the pool already has a snapshot named {name!r}")
        snap = Snapshot(name=name, iteration=iteration, frames=frames, state=_cloned(state))
        self._snapshots.append(snap)
        if self.max_size is not None and len(self._snapshots) > self.max_size:
            self._snapshots.pop(0)
        return snap

    def weights(self) -> torch.Tensor:
        """Each snapshot's chance of being drawn next, in pool order."""
        n = len(self._snapshots)
        if n == 0:
            return torch.zeros(0)
        if self.strategy == "latest":
            w = torch.zeros(n, dtype=torch.float64)
            w[-1] = 1.0
        elif self.strategy == "uniform":
            w = torch.ones(n, dtype=torch.float64)
        else:
            rates = torch.tensor([s.win_rate for s in self._snapshots], dtype=torch.float64)
            w = (1.0 - rates).pow(self.power).clamp_min(self.min_weight)
        return w / w.sum()

    def state_dict(self) -> dict[str, Any]:
        """The snapshots (weights, names, frames, records) and the generator's state, copied.

        The strategy, ``max_size``, ``power`` and ``min_weight`` are the pool's
        construction arguments and are not saved: a resumed league may change them.

        Examples:
            >>> import torch
            >>> pool = OpponentPool("uniform", seed=0)
            >>> _ = pool.add(torch.nn.Linear(2, 1).state_dict(), iteration=0, frames=0)
            >>> pool.sample().record(1.0)
            >>> copy = OpponentPool("uniform")
            >>> copy.load_state_dict(pool.state_dict())
            >>> [(s.name, s.wins) for s in copy]
            [('snapshot_0', 1)]
        """
        return {
            "snapshots": [snapshot_state(s) for s in self._snapshots],
            "generator": self._generator.get_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace the pool's snapshots and generator state with :meth:`state_dict`'s.

        When the saved pool holds more than ``max_size`` snapshots, the oldest are dropped.

        Raises:
            ValueError: for a state that is not an :meth:`state_dict` of a pool.
        """
        if not isinstance(state, Mapping) or not {"snapshots", "generator"} <= set(state):
            got = sorted(state) if isinstance(state, Mapping) else type(state).__name__
            raise ValueError(
                f"expected an OpponentPool.state_dict() (keys 'snapshots', 'generator'), got {got}"
            )
        snapshots = [snapshot_from_state(s) for s in state["snapshots"]]
        if self.max_size is not None:
            snapshots = snapshots[-self.max_size :]
        self._snapshots = snapshots
        self._generator.set_state(state["generator"].clone())

    def sample(self) -> Snapshot:
        """Draw the next opponent by the pool's strategy.

        Raises:
            RuntimeError: when the pool is empty.
        """
        if not self._snapshots:
            raise RuntimeError("the opponent pool is empty: add a snapshot first")
        i = int(torch.multinomial(self.weights(), 1, generator=self._generator))
        return self._snapshots[i]


def _cloned(state: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in state.items()}


def snapshot_state(snap: Snapshot) -> dict[str, Any]:
    """A snapshot as plain data (its tensors cloned), for checkpoints."""
    return {**{f.name: getattr(snap, f.name) for f in fields(snap)}, "state": _cloned(snap.state)}


def snapshot_from_state(state: Mapping[str, Any]) -> Snapshot:
    """The :class:`Snapshot` that :func:`snapshot_state` saved (its tensors cloned)."""
    return Snapshot(**{**state, "state": _cloned(state["state"])})
