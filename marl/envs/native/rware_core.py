"""Helpers of :class:`~marl.envs.native.rware.RwareEnv`: layouts, ids and collisions.

Everything here follows ``rware`` 2.0.0's ``rware/warehouse.py`` (the specification).
The collision resolution reproduces the outcome of the package's ``networkx`` graph
walk, including how it breaks ties, which is an accident of ``networkx`` 3.x and
CPython internals (see :func:`resolve_moves`).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import torch

__all__ = [
    "REWARD_TYPES",
    "check_args",
    "enum_name",
    "make_layout",
    "parse_env_id",
    "resolve_moves",
    "set_probe_table",
]

REWARD_TYPES = ("global", "individual", "two_stage")  # RewardType values 0, 1, 2

# as ``rware/__init__.py`` registers the default ids
_SIZES = {"tiny": (1, 3), "small": (2, 3), "medium": (2, 5), "large": (3, 5)}
_DIFFICULTY = {"-easy": 2.0, "": 1.0, "-hard": 0.5}
_ID = re.compile(r"^rware-(tiny|small|medium|large)-(\d+)ag(-easy|-hard|)-v2$")


def parse_env_id(env_id: str) -> dict[str, Any]:
    """The ``Warehouse`` arguments that ``rware/__init__.py`` registers for ``env_id``.

    Only the default (flattened-observation) ids ``rware-<size>-<n>ag[-easy|-hard]-v2``
    with 1 to 19 agents are registered by importing ``rware``; the others need its
    ``image_registration``/``full_registration`` and are not parsed here.
    """
    match = _ID.match(env_id) if isinstance(env_id, str) else None
    if match is None or not 1 <= int(match.group(2)) <= 19:
        raise ValueError(
            f"RwareEnv: env_id must look like 'rware-tiny-2ag-v2' "
            f"(size tiny/small/medium/large, 1-19 agents, optional -easy/-hard), got {env_id!r}"
        )
    size, agents, diff = match.group(1), int(match.group(2)), match.group(3)
    return {
        "column_height": 8,
        "shelf_rows": _SIZES[size][0],
        "shelf_columns": _SIZES[size][1],
        "n_agents": agents,
        "msg_bits": 0,
        "sensor_range": 1,
        "request_queue_size": int(agents * _DIFFICULTY[diff]),
        "max_inactivity_steps": None,
        "max_steps": 500,
        "reward_type": "individual",
    }


def enum_name(value: Any) -> str:
    """``RewardType.INDIVIDUAL`` / ``"individual"`` -> ``"individual"``."""
    return str(getattr(value, "name", value)).lower()


def check_args(cfg: dict, num_envs: Any, layout: Any, observation_type: Any) -> None:
    """Raise a ``ValueError`` naming the first bad ``RwareEnv`` argument."""

    def bad(name: str, expected: str, value: Any) -> ValueError:
        return ValueError(f"RwareEnv: {name} must be {expected}, got {value!r}")

    for name in (
        "shelf_columns",
        "column_height",
        "shelf_rows",
        "n_agents",
        "sensor_range",
        "request_queue_size",
    ):
        if not isinstance(cfg[name], int) or cfg[name] < 1:
            raise bad(name, "an int >= 1", cfg[name])
    if cfg["msg_bits"] != 0:
        raise bad("msg_bits", "0 (communication bits are not supported)", cfg["msg_bits"])
    for name in ("max_steps", "max_inactivity_steps"):
        if cfg[name] is not None and (not isinstance(cfg[name], int) or cfg[name] < 0):
            raise bad(name, "None or an int >= 0", cfg[name])
    if enum_name(cfg["reward_type"]) not in REWARD_TYPES:
        raise bad("reward_type", f"one of {list(REWARD_TYPES)}", cfg["reward_type"])
    if enum_name(observation_type) != "flattened":
        raise bad("observation_type", "'flattened' (the only one supported)", observation_type)
    if layout is not None and not isinstance(layout, str):
        raise bad("layout", "None or a layout string", layout)
    if num_envs is not None and (not isinstance(num_envs, int) or num_envs < 1):
        raise bad("num_envs", "None or an int >= 1", num_envs)


def make_layout(
    shelf_columns: int, shelf_rows: int, column_height: int, layout: str | None
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """``(highways [H, W] uint8, goals [(x, y), ...])`` as ``Warehouse`` builds them.

    Non-highway cells hold the shelves at reset, in row-major order (shelf ids).
    """
    if layout:
        lines = layout.strip().replace(" ", "").split("\n")
        width = len(lines[0])
        if any(len(line) != width for line in lines):
            raise ValueError(f"RwareEnv: layout must be rectangular, got {layout!r}")
        highways = np.zeros((len(lines), width), dtype=np.uint8)
        goals = []
        for y, line in enumerate(lines):
            for x, char in enumerate(line):
                if char.lower() not in "gx.":
                    raise ValueError(
                        f"RwareEnv: layout characters must be 'x', 'g' or '.', got {char!r}"
                    )
                if char.lower() == "g":
                    goals.append((x, y))
                highways[y, x] = char.lower() in "g."
        if not goals:
            raise ValueError(f"RwareEnv: layout needs at least one goal 'g', got {layout!r}")
        return highways, goals
    if shelf_columns % 2 != 1:
        raise ValueError(f"RwareEnv: shelf_columns must be odd, got {shelf_columns}")
    h, w = (column_height + 1) * shelf_rows + 2, 3 * shelf_columns + 1
    y, x = np.indices((h, w))
    queue = (y > h - (column_height + 3)) & ((x == w // 2 - 1) | (x == w // 2))
    highways = (x % 3 == 0) | (y % (column_height + 1) == 0) | (y == h - 1) | queue
    return highways.astype(np.uint8), [(w // 2 - 1, h - 1), (w // 2, h - 1)]


# ---------------------------------------------------------------- CPython emulation
_M64 = 1 << 64


def _i64(v: int) -> int:
    """A uint64 constant as the int64 with the same bits."""
    return v - _M64 if v >= 1 << 63 else v


_XX1, _XX2, _XX5 = (
    _i64(11400714785074694791),
    _i64(14029467366897019727),
    _i64(2870177450012600261),
)
_LEN2 = _i64(2 ^ (2870177450012600261 ^ 3527539))


def _shr(v: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical (uint64) right shift of int64 bits."""
    return (v >> bits) & ((1 << (64 - bits)) - 1)


def py_tuple_hash(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """CPython 3.8+'s ``hash((x, y))`` of two small non-negative ints, as int64 bits.

    int64 multiplication and addition wrap like the C code's uint64 arithmetic.
    """
    acc = torch.full_like(x, _XX5)
    for lane in (x, y):
        acc = acc + lane * _XX2
        acc = (acc << 31) | _shr(acc, 33)
        acc = acc * _XX1
    acc = acc + _LEN2
    return torch.where(acc == -1, torch.full_like(acc, 1546275796), acc)


_PROBES = 22  # enough to reach a free slot of 8 with at most 4 used (see below)


def set_probe_table(width: int, n_cells: int, device: Any = None) -> torch.Tensor:
    """The slots that CPython's ``set.add`` tries for each cell's ``(x, y)``, table of 8.

    ``[n_cells, 22]``. With 8 slots the linear probes of ``set_add_entry`` never apply
    (``i + 9 > mask``), so each try moves on by ``i = (i * 5 + 1 + (perturb >>= 5)) & 7``;
    after 13 shifts ``perturb`` is 0 and ``i -> 5 i + 1`` visits all 8 slots.
    """
    cell = torch.arange(n_cells, device=device)
    h = py_tuple_hash(cell % width, cell // width)
    i, perturb, out = h & 7, h, []
    for _ in range(_PROBES):
        out.append(i)
        perturb = _shr(perturb, 5)
        i = (i * 5 + 1 + perturb) & 7
    return torch.stack(out, -1)


def py_set_slots(probes: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Slots of the elements ``[..., m]`` added in order to a new CPython set (``m <= 4``).

    ``probes`` ``[..., m, 22]``: each element's probe sequence (:func:`set_probe_table`);
    the elements from ``count`` on are not added (slot -1).
    """
    m = probes.shape[-2]
    used = torch.zeros((*probes.shape[:-2], 8), dtype=torch.bool, device=probes.device)
    slots = []
    for k in range(m):
        seq = probes[..., k, :]
        first = (~used.gather(-1, seq)).long().argmax(-1, keepdim=True)
        slot = seq.gather(-1, first)
        valid = (k < count)[..., None]
        used = used | (torch.nn.functional.one_hot(slot, 8).squeeze(-2).bool() & valid)
        slots.append(torch.where(valid, slot, -1).squeeze(-1))
    return torch.stack(slots, -1)


def _set_iteration_rank(probes: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Rank of each element in ``set(iter(c))`` where ``c`` got the elements in order.

    ``networkx`` builds the component ``c`` by BFS (``seen.add``), then the subgraph
    filter ``show_nodes`` copies it into a new set by iterating ``c``: two tables.
    """
    slots = py_set_slots(probes, count)
    order = torch.where(slots < 0, 99, slots).argsort(-1)  # c's iteration order
    ordered = probes.gather(-2, order[..., None].expand_as(probes))
    slots2 = py_set_slots(ordered, count)
    return torch.empty_like(slots2).scatter_(-1, order, slots2)


# ---------------------------------------------------------------- collisions
def resolve_moves(
    start: torch.Tensor, target: torch.Tensor, n_cells: int, probes: torch.Tensor
) -> torch.Tensor:
    """Which robots the package commits: ``[B, n]`` bool (the others' moves fail).

    ``start``/``target`` are cell indices ``y * width + x`` ``[B, n]`` (``target ==
    start`` for robots that do not move); ``probes`` is :func:`set_probe_table`. ``Warehouse.step`` adds an edge start ->
    target per robot (a functional graph: one out-edge per robot cell) and, per weakly
    connected component: with a cycle of length 2 (a swap) commits nobody; with another
    cycle (a self-loop: a standing robot) commits the robots on it; with none (a tree
    into an empty cell) commits the robots on ``dag_longest_path``. That path goes from
    the empty cell back through the predecessor of greatest depth, the first one in
    the subgraph's node order on a tie. That order is the graph's insertion order
    (first appearance in ``s0, t0, s1, t1, ...``) unless the component has fewer than
    half the graph's nodes, where ``networkx`` iterates its node *set* instead: CPython
    set order, reproduced with its tuple hash and probing for the components where
    ties can occur with up to 5 robots (two or three robots into one empty cell).
    Ties elsewhere in such small components (6+ robots) fall back to insertion order,
    a documented difference.

    Loops are over robots, never over envs.
    """
    b, n = start.shape
    dev = start.device
    self_loop = target == start
    if dev.type == "cpu" and bool(self_loop.all()):
        return self_loop  # nobody moves (a host read is cheap on the CPU, not on a GPU)
    idx = torch.arange(n, device=dev)
    occ = torch.full((b, n_cells), -1, dtype=torch.long, device=dev)
    occ.scatter_(1, start, idx.expand(b, n).contiguous())
    nxt = torch.where(self_loop, -1, occ.gather(1, target))  # robot in the target cell
    has_nxt = nxt >= 0
    terminal = ~has_nxt & ~self_loop  # moves into an empty cell (a sink)

    # cycles: i is on one if following nxt comes back to i; length 2 is a swap
    cur = nxt.clone()
    on_cycle = torch.zeros_like(self_loop)
    swap = torch.zeros_like(self_loop)
    for k in range(n):
        cur_ok = cur >= 0
        on_cycle |= cur_ok & (cur == idx)
        if k == 1:
            swap = cur_ok & (cur == idx)
        cur = torch.where(cur_ok, nxt.gather(1, cur.clamp(min=0)), cur)
    # last robot of each chain (itself if terminal) and its sink cell
    root = idx.expand(b, n).clone()
    for _ in range(n):
        step = nxt.gather(1, root)
        root = torch.where(step >= 0, step, root)
    sink = torch.where(terminal.gather(1, root), target.gather(1, root), -1)

    # depth of the longest chain of followers ending at each robot (dist in networkx)
    child = nxt[:, :, None] == idx  # child[b, i, j]: robot i moves into robot j's cell
    depth = torch.zeros((b, n), dtype=torch.long, device=dev)
    for _ in range(n):
        depth = torch.where(child, depth[:, :, None] + 1, 0).amax(1)

    # graph insertion order of each robot's start node
    followers = torch.where(child, 2 * idx[:, None] + 1, 2 * n).amin(1)
    order = torch.minimum(2 * idx, followers)
    # CPython set order where networkx iterates a node set: star components (robots
    # all moving into the same empty cell) of a component under half the graph
    n_nodes = n + _distinct_count(torch.where(terminal, target, -1))
    same_sink = (sink[:, :, None] == sink[:, None, :]) & (sink >= 0)[:, :, None]
    comp_size = same_sink.sum(-1) + 1
    star = (same_sink & ~(terminal[:, None, :])).sum(-1) == 0
    # (only ties matter: components of two or three robots)
    small = (comp_size >= 3) & (comp_size <= 4) & (2 * comp_size < n_nodes[:, None])
    use_set = (sink >= 0) & small & star
    if bool(use_set.any()):
        order = torch.where(use_set, _star_set_rank(start, target, same_sink, probes), order)

    # the longest path: from each sink back through the best predecessor
    parent = torch.where(has_nxt, nxt, torch.where(terminal, n + target, -1 - idx))
    score = depth * 1000 - order
    sibling = parent[:, :, None] == parent[:, None, :]
    best = score >= torch.where(sibling, score[:, None, :], -(10**9)).amax(-1)
    on_path = best & terminal
    for _ in range(n):
        on_path = on_path | (best & has_nxt & on_path.gather(1, nxt.clamp(min=0)))
    return self_loop | (on_cycle & ~swap) | on_path


def _distinct_count(values: torch.Tensor) -> torch.Tensor:
    """Distinct non-negative values per row of ``values`` ``[B, n]``."""
    srt = values.sort(-1).values
    new = torch.ones_like(srt, dtype=torch.bool)
    new[:, 1:] = srt[:, 1:] != srt[:, :-1]
    return (new & (srt >= 0)).sum(-1)


def _star_set_rank(start, target, same_sink, probes):
    """Each robot's rank in the set order of its star component (see ``resolve_moves``).

    BFS from the component's first node (the lowest robot's cell) adds that cell, the
    empty cell, then the other robots in index order (``G.pred`` order).
    """
    b, n = start.shape
    rank_in = same_sink.long().cumsum(-1) - 1  # rank_in[b, i, j]: j's rank in i's comp
    pos = torch.where(rank_in == 0, 0, rank_in + 1)  # insertion position of robot j
    count = same_sink.sum(-1) + 1
    cols = max(n + 1, 5)  # the robots outside the component land on a spare column
    cells = torch.zeros((b, n, cols), dtype=torch.long, device=start.device)
    cells.scatter_(-1, torch.where(same_sink, pos, cols - 1), start[:, None, :].expand(b, n, n))
    cells[:, :, 1] = target  # every robot of a star has the empty cell as target
    ranks = _set_iteration_rank(probes[cells[..., :4]], count)
    own = rank_in.diagonal(dim1=1, dim2=2)
    own = torch.where(own == 0, 0, own + 1).clamp(max=3)  # larger comps: unused
    return ranks.gather(-1, own[..., None]).squeeze(-1)
