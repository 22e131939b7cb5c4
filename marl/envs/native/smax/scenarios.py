"""SMAX scenarios (JaxMARL 0.2.0 ``MAP_NAME_TO_SCENARIO``) and their start distributions.

A scenario fixes the two teams' sizes and unit types, or, for the SMACv2-style
``smacv2_*_units`` ones, draws them at each reset: unit types uniformly over the six
types (the enemies mirror the allies' types) and start positions from JaxMARL's
"surround and reflect" distribution. The others start each team in a 4x4 square
around ``(W/4, H/2)`` (allies) and ``(3W/4, H/2)`` (enemies).

Examples:
    >>> s = SCENARIOS["2s3z"]
    >>> s.num_allies, s.num_enemies, s.unit_types[:5]
    (5, 5, (2, 2, 3, 3, 3))
    >>> g = torch.Generator().manual_seed(0)
    >>> pos = start_positions(s, 4, g, torch.device("cpu"))
    >>> pos.shape, bool((pos[:, :5, 0] < 16).all())
    (torch.Size([4, 10, 2]), True)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from marl.envs.native.smax.units import MAP_HEIGHT, MAP_WIDTH, NUM_UNIT_TYPES

__all__ = ["SCENARIOS", "Scenario", "start_positions", "start_unit_types"]


@dataclass(frozen=True)
class Scenario:
    """A team composition: ``unit_types`` lists the allies' types, then the enemies'."""

    unit_types: tuple[int, ...]
    num_allies: int
    num_enemies: int
    smacv2_position_generation: bool = False
    smacv2_unit_type_generation: bool = False


def _same(n_allies: int, n_enemies: int, t: int = 0) -> Scenario:
    return Scenario((t,) * (n_allies + n_enemies), n_allies, n_enemies)


_SZ = (2, 2, 2, 3, 3, 3, 3, 3)  # 3 stalkers, 5 zealots
SCENARIOS: dict[str, Scenario] = {
    "3m": _same(3, 3),
    "2s3z": Scenario((2, 2, 3, 3, 3) * 2, 5, 5),
    "25m": _same(25, 25),
    "3s5z": Scenario(_SZ * 2, 8, 8),
    "8m": _same(8, 8),
    "5m_vs_6m": _same(5, 6),
    "10m_vs_11m": _same(10, 11),
    "27m_vs_30m": _same(27, 30),
    "3s5z_vs_3s6z": Scenario(_SZ + _SZ + (3,), 8, 9),
    "3s_vs_5z": Scenario(_SZ, 3, 5),
    "6h_vs_8z": Scenario((5,) * 6 + (3,) * 8, 6, 8),
    "smacv2_5_units": Scenario((0,) * 10, 5, 5, True, True),
    "smacv2_10_units": Scenario((0,) * 20, 10, 10, True, True),
    "smacv2_20_units": Scenario((0,) * 40, 20, 20, True, True),
}


def _uniform(g: torch.Generator, shape: tuple[int, ...], lo, hi, device) -> torch.Tensor:
    lo = torch.as_tensor(lo, dtype=torch.float32, device=device)
    hi = torch.as_tensor(hi, dtype=torch.float32, device=device)
    return lo + (hi - lo) * torch.rand(shape, generator=g, device=device)


def _surround(n_in: int, n_out: int, n: int, g: torch.Generator, device) -> dict:
    """JaxMARL's ``SurroundPositionDistribution.draw_positions``, batched over ``n`` envs.

    ``n_in`` units start in a 4x4 square at the centre; each of the ``n_out`` others
    joins one of 4 groups, each group somewhere on the segment from a corner to the centre.
    """
    centre = torch.tensor([MAP_WIDTH / 2, MAP_HEIGHT / 2], device=device)
    inside = centre + _uniform(g, (n, n_in, 2), -2.0, 2.0, device)
    group = torch.randint(0, 4, (n, n_out), generator=g, device=device)
    corners = torch.tensor(
        [[0.0, 0.0], [0.0, MAP_HEIGHT], [MAP_WIDTH, 0.0], [MAP_WIDTH, MAP_HEIGHT]], device=device
    )
    t = torch.rand((n, 4, 1), generator=g, device=device)
    group_pos = t * centre + (1 - t) * corners  # [n, 4, 2]
    outside = torch.gather(group_pos, 1, group[..., None].expand(n, n_out, 2))
    outside = outside + _uniform(g, (n, n_out, 2), -2.0, 2.0, device)
    return {"inside": inside, "outside": outside}


def _reflect(na: int, ne: int, n: int, g: torch.Generator, device) -> torch.Tensor:
    """JaxMARL's ``ReflectPositionDistribution``: allies anywhere in the left half,
    enemies at their mirror images (extra enemies anywhere in the right half)."""
    allies = _uniform(g, (n, na, 2), [0.0, 0.0], [MAP_WIDTH / 2, MAP_HEIGHT], device)
    mirrored = torch.stack([MAP_WIDTH - allies[..., 0], allies[..., 1]], -1)
    if ne >= na:
        extra = _uniform(g, (n, ne - na, 2), [MAP_WIDTH / 2, 0.0], [MAP_WIDTH, MAP_HEIGHT], device)
        enemies = torch.cat([mirrored, extra], 1)
    else:
        enemies = mirrored[:, :ne]
    return torch.cat([allies, enemies], 1)


def start_positions(s: Scenario, n: int, g: torch.Generator, device: torch.device) -> torch.Tensor:
    """Start positions ``[n, num_allies + num_enemies, 2]`` (before units are pushed apart)."""
    na, ne = s.num_allies, s.num_enemies
    if not s.smacv2_position_generation:
        allies = torch.tensor([MAP_WIDTH / 4, MAP_HEIGHT / 2], device=device)
        enemies = torch.tensor([MAP_WIDTH / 4 * 3, MAP_HEIGHT / 2], device=device)
        allies = allies + _uniform(g, (n, na, 2), -2.0, 2.0, device)
        enemies = enemies + _uniform(g, (n, ne, 2), -2.0, 2.0, device)
        return torch.cat([allies, enemies], 1)
    # SurroundAndReflectPositionDistribution: surround or reflect, one half each
    a = _surround(na, ne, n, g, device)  # allies inside, enemies around them
    e = _surround(ne, na, n, g, device)  # enemies inside, allies around them
    ally_inside = torch.cat([a["inside"], a["outside"]], 1)
    enemy_inside = torch.cat([e["outside"], e["inside"]], 1)
    pick_allies = torch.randint(0, 2, (n, 1, 1), generator=g, device=device).bool()
    surround = torch.where(pick_allies, ally_inside, enemy_inside)
    reflect = _reflect(na, ne, n, g, device)
    use_surround = (torch.rand((n, 1, 1), generator=g, device=device) < 0.5).expand_as(reflect)
    return torch.where(use_surround, surround, reflect)


def start_unit_types(s: Scenario, n: int, g: torch.Generator, device: torch.device) -> torch.Tensor:
    """Unit types ``[n, num_allies + num_enemies]`` (int64).

    With SMACv2 unit generation the allies' types are uniform over the six types and
    the enemies copy them in order. Where there are more enemies than allies, the
    extra ones are marines (type 0): JaxMARL 0.2.0 draws their types but discards
    the draw (``enemy_unit_types.at[...].set(...)`` is not assigned), and this port
    keeps its behaviour.
    """
    na, ne = s.num_allies, s.num_enemies
    if not s.smacv2_unit_type_generation:
        return torch.tensor(s.unit_types, dtype=torch.long, device=device).expand(n, -1).clone()
    allies = torch.randint(0, NUM_UNIT_TYPES, (n, na), generator=g, device=device)
    enemies = torch.cat([allies, allies.new_zeros(n, ne - na)], 1) if ne >= na else allies[:, :ne]
    return torch.cat([allies, enemies], 1)
