"""SMAX's unit types and world constants (JaxMARL 0.2.0 ``SMAX.__init__`` defaults).

There are no shields in SMAX: protoss units (stalker, zealot) have only health.
Times are in seconds of game time; an env step is ``WORLD_STEPS`` substeps of ``DT``.

Examples:
    >>> UNIT_TYPES[2].name, UNIT_TYPES[2].health, UNIT_TYPES[2].attack_range
    ('stalker', 160.0, 6.0)
    >>> unit_table(torch.device("cpu"))["health"].tolist()
    [45.0, 125.0, 160.0, 150.0, 35.0, 80.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "DT",
    "MAP_HEIGHT",
    "MAP_WIDTH",
    "NUM_MOVE_ACTIONS",
    "OWN_FEATURES",
    "UNIT_FEATURES",
    "UNIT_TYPES",
    "WORLD_STEPS",
    "UnitType",
    "move_vectors",
    "unit_table",
]

MAP_WIDTH = 32.0
MAP_HEIGHT = 32.0
WORLD_STEPS = 8  # world substeps per env step
DT = 1.0 / 16  # seconds per substep
# actions 0..3 move (north, east, south, west), 4 is stop, 5.. attack the k-th enemy
NUM_MOVE_ACTIONS = 5


@dataclass(frozen=True)
class UnitType:
    """One unit type's stats (speed in map units per second, cooldown in seconds)."""

    name: str
    shorthand: str
    velocity: float
    attack: float
    attack_range: float
    sight_range: float
    radius: float
    health: float
    weapon_cooldown: float


UNIT_TYPES = (
    UnitType("marine", "m", 3.15, 9.0, 5.0, 9.0, 0.375, 45.0, 0.61),
    UnitType("marauder", "M", 2.25, 10.0, 6.0, 10.0, 0.5625, 125.0, 1.07),
    UnitType("stalker", "s", 4.13, 13.0, 6.0, 10.0, 0.625, 160.0, 1.87),
    UnitType("zealot", "Z", 3.15, 8.0, 2.0, 9.0, 0.5, 150.0, 0.86),
    UnitType("zergling", "z", 4.13, 5.0, 2.0, 8.0, 0.375, 35.0, 0.5),
    UnitType("hydralisk", "h", 3.15, 12.0, 5.0, 9.0, 0.625, 80.0, 0.59),
)
NUM_UNIT_TYPES = len(UNIT_TYPES)
# per-unit features seen by others, and one's own (SMAX.unit_features / own_features)
UNIT_FEATURES = 7 + NUM_UNIT_TYPES
OWN_FEATURES = 4 + NUM_UNIT_TYPES

_FIELDS = (
    "velocity",
    "attack",
    "attack_range",
    "sight_range",
    "radius",
    "health",
    "weapon_cooldown",
)


def unit_table(device: torch.device) -> dict[str, torch.Tensor]:
    """Each stat as a float32 tensor ``[NUM_UNIT_TYPES]``, indexed by the unit type."""
    return {
        f: torch.tensor([getattr(u, f) for u in UNIT_TYPES], dtype=torch.float32, device=device)
        for f in _FIELDS
    }


def move_vectors(device: torch.device) -> torch.Tensor:
    """The movement vector of each move action and of stop ``[5, 2]`` float32.

    SMAX's ``_decode_discrete_actions`` rotates a diagonal unit vector by 45 degrees:
    ``[[c, -c], [c, c]] @ [v0, v1]`` with ``c = 1/sqrt(2)`` in float32. SMAX runs
    jitted, and XLA on the CPU contracts each row of that product into a fused
    multiply-add (the first product rounded, the second fused), so the vectors it
    uses are not exactly the axes: north is ``(-1.27e-8, 0.99999994)``. This table is
    computed the same way, to the bit (the trace test checks it). Row 4 (stop, and
    every attack action) moves nothing.
    """
    c = torch.tensor(1.0, dtype=torch.float32) / torch.sqrt(torch.tensor(2.0))
    rows = []
    for a in range(NUM_MOVE_ACTIONS - 1):
        v0 = (-1) ** (a // 2) * c
        v1 = (-1) ** (a // 2 + a % 2) * c
        # fma(-c, v1, round(c * v0)) and fma(c, v1, round(c * v0)): a float32 product
        # is exact in float64, so one rounding at the end is the fused one
        rounded, fused = (c * v0).double(), c.double() * v1.double()
        rows.append(torch.stack([rounded - fused, rounded + fused]).float())
    rows.append(torch.zeros(2))
    return torch.stack(rows).to(device)
