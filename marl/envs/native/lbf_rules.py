"""The rules of Level-Based Foraging as batched tensor functions (used by :mod:`.lbf`).

Every function takes the state of ``N`` sub-envs as tensors with a leading ``[N]`` dim:

- ``pos`` ``[N, n, 2]`` long: each player's ``(row, col)``;
- ``level`` ``[N, n]`` long: each player's level;
- ``food_pos`` ``[N, F, 2]`` long and ``food_level`` ``[N, F]`` long: the food slots,
  ``food_level == 0`` for an empty slot (never spawned, or loaded). The present food
  keep the slots' order sorted by ``row * cols + col`` (spawns and ``set_state`` sort
  them; a load only empties a slot): that is the row-major order in which
  ``np.nonzero`` lists the package's field, and so the order of the food entries of
  an observation, for any window of the field (a window keeps row-major order).

Each function cites the ``ForagingEnv`` method of
``lbforaging/foraging/environment.py`` (lbforaging 2.0.0) that it reproduces.
"""

from __future__ import annotations

import functools

import torch

__all__ = [
    "LOAD",
    "N_ACTIONS",
    "food_from_field",
    "load",
    "move",
    "observe",
    "sort_food",
    "spawn",
    "valid_actions",
]

# lbforaging's Action enum: NONE, NORTH, SOUTH, WEST, EAST, LOAD
N_ACTIONS = 6
LOAD = 5
# (row, col) offset of each action; NONE and LOAD stay in place
_OFFSETS = ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1), (0, 0))


@functools.cache
def offsets(device: torch.device) -> torch.Tensor:
    """The ``[6, 2]`` long ``(row, col)`` offset of every action (cached: built once)."""
    return torch.tensor(_OFFSETS, dtype=torch.long, device=device)


@functools.cache
def _fill(width: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``(-1, -1, 0)`` (or ``(-1, -1)``), the package's entry for what is not seen."""
    return torch.tensor([-1, -1, 0][:width], dtype=dtype, device=device)


def food_cells(food_pos: torch.Tensor, food_level: torch.Tensor, cols: int) -> torch.Tensor:
    """``[N, F]`` flat cell index ``row * cols + col`` of each present food, ``-1`` if empty."""
    cell = food_pos[..., 0] * cols + food_pos[..., 1]
    return torch.where(food_level > 0, cell, torch.full_like(cell, -1))


def valid_actions(pos: torch.Tensor, food: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """``[N, n, 6]`` bool: ``ForagingEnv._is_valid_action`` for every player and action.

    A move is legal when it stays on the grid and its cell holds no food; other players
    do not block it (they are resolved as collisions in :func:`move`). LOAD is legal
    when ``adjacent_food`` is positive: that method clamps the four neighbours to the
    grid, so on an edge it reads the player's own cell; kept here for exactness.

    Args:
        pos: ``[N, n, 2]`` positions.
        food: ``[N, F]`` cells of the present food (:func:`food_cells`).
        rows: field rows.
        cols: field columns.
    """
    target = pos.unsqueeze(-2) + offsets(pos.device)[1:5]  # [N, n, 4, 2]: N, S, W, E
    r, c = target[..., 0], target[..., 1]
    inside = (r >= 0) & (r < rows) & (c >= 0) & (c < cols)
    cell = r.clamp(0, rows - 1) * cols + c.clamp(0, cols - 1)
    has_food = (cell.unsqueeze(-1) == food[:, None, None, :]).any(-1)  # [N, n, 4]
    none = torch.ones_like(inside[..., :1])
    return torch.cat([none, inside & ~has_food, has_food.any(-1, keepdim=True)], -1)


def move(pos: torch.Tensor, action: torch.Tensor, cols: int) -> torch.Tensor:
    """The positions after the moves of ``ForagingEnv.step`` (``action`` already legal).

    The package files every player under the cell it goes to (its own for NONE and
    LOAD) and moves exactly the players alone under their cell. So two players going
    to one cell both stay, a player going into a standing player's cell stays, and,
    as in the package, a player may go into the cell of one that tried to leave but
    was blocked (both then share a cell until one moves).
    """
    target = pos + offsets(pos.device)[action]
    cell = target[..., 0] * cols + target[..., 1]
    claims = (cell.unsqueeze(-1) == cell.unsqueeze(-2)).sum(-1)  # [N, n]
    return torch.where((claims == 1).unsqueeze(-1), target, pos)


def load(
    pos: torch.Tensor,
    level: torch.Tensor,
    food_pos: torch.Tensor,
    food_level: torch.Tensor,
    loading: torch.Tensor,
    spawned: torch.Tensor,
    normalize: bool,
    penalty: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The loads of ``ForagingEnv.step``: ``(rewards [N, n] float32, new food_level)``.

    The package pops the loading players from a set one at a time; each takes its food
    (``adjacent_food_location``) and every still-loading player adjacent to that food
    (``adjacent_players``). The food is loaded when their levels sum to at least its
    level: each gets ``level * food`` (over ``sum * food spawned`` when normalized) and
    the food goes; otherwise each gets ``-penalty``.

    When no cell touches two food, which the package's spawning guarantees (food keeps
    3x3 and same-row/column distance-2 clear of other food, and never moves), every
    loading player has one food and the groups do not depend on the set's order: each
    food's group is the loading players adjacent to it, as here. On hand-made layouts
    where a player touches two food, the package's outcome depends on the set's
    iteration order (object hashes); here such a player joins its first food in the
    order north, south, west, east (``adjacent_food_location``'s order).
    """
    d = pos.unsqueeze(-2) - food_pos.unsqueeze(-3)  # [N, n, F, 2]: player - food
    dr, dc = d[..., 0], d[..., 1]
    adjacent = ((dr.abs() + dc.abs()) == 1) & (food_level > 0).unsqueeze(-2)
    # side of the food seen from the player: 0 north (dr == 1), 1 south, 2 west, 3 east
    side = torch.where(dr == 1, 0, torch.where(dr == -1, 1, torch.where(dc == 1, 2, 3)))
    side = torch.where(adjacent, side, 4)
    first = side.argmin(-1, keepdim=True)  # [N, n, 1]
    slots = torch.arange(food_level.shape[-1], device=pos.device)
    joins = adjacent & loading.unsqueeze(-1) & (slots == first)  # [N, n, F]
    group = (joins * level.unsqueeze(-1)).sum(-2)  # [N, F]: levels loading each food
    loaded = joins.any(-2) & (group >= food_level)
    share = (level.unsqueeze(-1) * food_level.unsqueeze(-2)).float()
    if normalize:
        share = share / (group * spawned.unsqueeze(-1)).clamp_min(1).unsqueeze(-2).float()
    gets = joins & loaded.unsqueeze(-2)
    fails = joins & ~loaded.unsqueeze(-2)
    reward = torch.where(gets, share, 0.0) - fails.float() * penalty
    # a player joins one food at most: the sum over food picks its one reward
    return reward.sum(-1), torch.where(loaded, 0, food_level)


def _compact(seen: torch.Tensor, values: torch.Tensor, k: int) -> torch.Tensor:
    """``[N, n, k, c]``: the ``values`` ``[N, n, m, c]`` whose ``seen`` is True, in order,
    then ``(-1, -1, 0)`` (the package's fill for what is not seen)."""
    slot = torch.where(seen, seen.cumsum(-1) - 1, k)
    shape = (*values.shape[:-2], k + 1, values.shape[-1])
    out = _fill(values.shape[-1], values.dtype, values.device).expand(shape).clone()
    out.scatter_(-2, slot.unsqueeze(-1).expand_as(values), values)
    return out[..., :k, :]


def observe(
    pos: torch.Tensor,
    level: torch.Tensor,
    food_pos: torch.Tensor,
    food_level: torch.Tensor,
    sight: int,
    self_first: torch.Tensor,
    observe_levels: bool = True,
) -> torch.Tensor:
    """``[N, n, 3 * F + 3 * n]`` float32: ``ForagingEnv._make_gym_obs`` (vector obs).

    Player ``i`` sees the field window ``rows max(r - sight, 0) .. r + sight`` (and the
    same for columns; ``neighborhood``), coordinates relative to the window's corner.
    Food entries list the window's food in row-major order. Player entries list player
    ``i`` first, then the others in index order, those whose relative coordinates
    both lie in ``[0, 2 * sight]`` (``_make_obs``); near the top or left edge that
    square reaches further than the field window, which the package does too.

    Args:
        self_first: ``[n, n]`` long, row ``i`` = ``[i, then every other index]``.
        observe_levels: with False the player entries are ``(row, col)`` only.
    """
    n_food = food_level.shape[-1]
    corner = (pos - sight).clamp_min(0)  # [N, n, 2]
    # players, in each observer's order
    others = pos[:, self_first]  # [N, n, n, 2]
    rel = others - corner.unsqueeze(-2)
    seen = ((rel >= 0) & (rel <= 2 * sight)).all(-1)
    entry = [rel, level[:, self_first].unsqueeze(-1)] if observe_levels else [rel]
    players = _compact(seen, torch.cat(entry, -1), pos.shape[-2])
    # food
    rel_f = food_pos.unsqueeze(-3) - corner.unsqueeze(-2)  # [N, n, F, 2]
    far = food_pos.unsqueeze(-3) > (pos + sight).unsqueeze(-2)
    seen_f = (food_level > 0).unsqueeze(-2) & (rel_f >= 0).all(-1) & ~far.any(-1)
    lvl_f = food_level.unsqueeze(-2).expand(seen_f.shape).unsqueeze(-1)
    food = _compact(seen_f, torch.cat([rel_f, lvl_f], -1), n_food)
    return torch.cat([food.flatten(-2), players.flatten(-2)], -1).float()


def _uniform_int(gen: torch.Generator, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """An integer drawn uniformly in ``[low, high]`` for every element (``high >= low``)."""
    u = torch.rand(low.shape, generator=gen, device=low.device)
    return torch.minimum(low + (u * (high - low + 1)).long(), high)


def spawn(
    gen: torch.Generator,
    n_envs: int,
    field: tuple[int, int],
    player_levels: tuple[torch.Tensor, torch.Tensor],
    food_levels: tuple[torch.Tensor, torch.Tensor | None],
    force_coop: bool,
) -> dict[str, torch.Tensor]:
    """A fresh start state of ``n_envs`` sub-envs (``ForagingEnv.reset``), in distribution.

    Players (``spawn_players``): distinct uniform cells, levels uniform in their
    ``[min, max]`` after a random permutation of the per-player bounds. Food
    (``spawn_food``), one slot after the other: a uniform cell among those off the
    border, off the players and outside the 3x3 square and the same-row/column
    distance 2 of the food already placed; level uniform in ``[min, max]`` after a
    permutation of the per-food bounds, ``max`` being the sum of the three lowest
    player levels when no ``max_food_level`` is given, and ``min = max`` with
    ``force_coop``. Where no cell is left the slot stays empty (the package gives up
    after 1000 rejected draws; here a food is placed whenever a cell allows it).

    Args:
        gen: the generator of every draw.
        n_envs: ``N``.
        field: ``(rows, cols)``.
        player_levels: ``([n], [n])`` long min and max level of each player.
        food_levels: ``([F], [F] or None)`` long min and max level of each food.
        force_coop: every food at its max level.

    Returns:
        ``pos``, ``level``, ``food_pos``, ``food_level``, ``food_spawned``.
    """
    rows, cols = field
    lo_p, hi_p = player_levels
    device, n, n_food = lo_p.device, lo_p.shape[0], food_levels[0].shape[0]

    def rand(*shape: int) -> torch.Tensor:
        return torch.rand(shape, generator=gen, device=device)

    cells = rand(n_envs, rows * cols).topk(n, -1).indices  # distinct, uniformly ordered
    pos = torch.stack([cells // cols, cells % cols], -1)
    perm = rand(n_envs, n).argsort(-1)
    level = _uniform_int(gen, lo_p[perm], hi_p[perm])

    lo_f, hi_f = food_levels
    perm_f = rand(n_envs, n_food).argsort(-1)
    lo_f = lo_f[perm_f]
    if hi_f is None:
        hi_f = level.sort(-1).values[:, :3].sum(-1, keepdim=True).expand(n_envs, n_food)
    else:
        hi_f = hi_f[perm_f]
    if force_coop:
        lo_f = hi_f
    rr = torch.arange(rows, device=device).view(1, rows, 1)
    cc = torch.arange(cols, device=device).view(1, 1, cols)
    inner = (rr >= 1) & (rr <= rows - 2) & (cc >= 1) & (cc <= cols - 2)
    free = inner.expand(n_envs, rows, cols).reshape(n_envs, -1).clone()
    free.scatter_(1, cells, False)
    food_pos = torch.zeros(n_envs, n_food, 2, dtype=torch.long, device=device)
    food_level = torch.zeros(n_envs, n_food, dtype=torch.long, device=device)
    for k in range(n_food):  # sequential: each food keeps the next ones away
        best = rand(n_envs, rows * cols).masked_fill(~free, -1.0).argmax(-1)
        ok = free.gather(1, best.unsqueeze(-1)).squeeze(-1)
        r, c = best // cols, best % cols
        food_pos[:, k] = torch.stack([r, c], -1)
        food_level[:, k] = torch.where(ok, _uniform_int(gen, lo_f[:, k], hi_f[:, k]), 0)
        dr = (rr - r.view(-1, 1, 1)).abs()
        dc = (cc - c.view(-1, 1, 1)).abs()
        near = ((dr <= 1) & (dc <= 1)) | ((dr == 0) & (dc <= 2)) | ((dc == 0) & (dr <= 2))
        free &= ~(near & ok.view(-1, 1, 1)).reshape(n_envs, -1)
    food_pos, food_level = sort_food(food_pos, food_level, cols)
    return {
        "pos": pos,
        "level": level,
        "food_pos": food_pos,
        "food_level": food_level,
        "food_spawned": food_level.sum(-1),
    }


def sort_food(
    food_pos: torch.Tensor, food_level: torch.Tensor, cols: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The food slots with the present food first, in row-major order (module docstring)."""
    cell = food_pos[..., 0] * cols + food_pos[..., 1]
    big = torch.iinfo(torch.long).max
    order = torch.where(food_level > 0, cell, big).argsort(dim=-1, stable=True)
    return food_pos.gather(-2, order.unsqueeze(-1).expand_as(food_pos)), food_level.gather(
        -1, order
    )


def food_from_field(
    field: torch.Tensor, n_food: int, cols: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The food slots of a flat field ``[N, rows * cols]`` (each cell's food level, the
    package's ``env.field``) holding at most ``n_food`` food: row-major, then empty."""
    present = field > 0
    slot = torch.where(present, present.cumsum(-1) - 1, n_food)
    cells = torch.arange(field.shape[-1], device=field.device).expand_as(field)
    idx = torch.zeros(field.shape[0], n_food + 1, dtype=torch.long, device=field.device)
    lvl = torch.zeros_like(idx)
    idx.scatter_(1, slot, cells)
    lvl.scatter_(1, slot, torch.where(present, field, 0))
    idx, lvl = idx[:, :-1], lvl[:, :-1]
    return torch.stack([idx // cols, idx % cols], -1), lvl
