"""`RwareEnv`: a batched, torch-native port of the multi-robot warehouse.

A port of ``rware`` 2.0.0's ``Warehouse`` (``rware/warehouse.py``), whose rules are
the specification: the layouts (shelf blocks, goals, highways, or a layout string),
the five actions (NOOP, FORWARD, LEFT, RIGHT, TOGGLE_LOAD), loading (a robot picks up
the shelf in its cell, puts it down only off the highways), the collision resolution
(``networkx`` graph of intended moves: chains move, cycles of 3+ rotate, swaps and
moves into a standing robot fail, ties go as ``networkx`` breaks them), the request
queue and delivery rewards (individual, global, two-stage), the step and inactivity
limits and the flattened observation (its feature order, sensor range, zero padding
outside the grid). Every sub-env of ``[num_envs]`` steps in the same tensor operations;
loops run over robots or goals, never over envs. The keys, shapes, dtypes and flags
are those of :class:`marl.envs.libs.rware.RwareEnv` (an ended episode is
``truncated``, never ``terminated``).

Deliberate differences:

- Random draws (the robots' cells and directions at reset, the first requests, the
  request that replaces a delivered shelf) follow the package's distributions but use
  a ``torch.Generator``, so the values differ from numpy's for the same seed.
- Only ``msg_bits=0`` and the flattened observation type (the registered default)
  are supported; others raise ``ValueError``. No ``render_mode``: :meth:`render`
  returns an array drawn with numpy.
- Collision ties: where robots compete for one cell, ``networkx`` picks the winner
  by the order it iterates the move graph's nodes, which for a component under half
  the graph's size is CPython's set order (64-bit CPython 3.8+ tuple hashes). That is
  reproduced wherever it can arise with up to 5 robots (two or three robots moving
  into one empty cell); with 6+ robots, a tie deeper in such a component, or four
  robots entering one empty cell, is broken by graph insertion order instead (see
  :func:`~marl.envs.native.rware_core.resolve_moves`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from marl.envs.common import EnvBase, make_done_spec, seed_generator
from marl.envs.native.rware_core import (
    check_args,
    enum_name,
    make_layout,
    parse_env_id,
    resolve_moves,
    set_probe_table,
)
from marl.envs.native.rware_render import draw_warehouse
from marl.groups import GroupMap
from marl.specs import Categorical, Composite, Unbounded

__all__ = ["RwareEnv"]

_UNSET: Any = object()  # an argument not given: the registered (or default) value
_DEFAULTS = parse_env_id("rware-tiny-2ag-v2")
# the wraplist of Agent.req_direction: UP, RIGHT, DOWN, LEFT (Direction values 0, 3, 1, 2)
_WRAP = torch.tensor([0, 3, 1, 2])
_WRAP_POS = torch.tensor([0, 2, 3, 1])  # a direction's position in _WRAP
_STATE_KEYS = (
    "agent_pos",
    "agent_dir",
    "carrying",
    "has_delivered",
    "shelf_pos",
    "request_queue",
    "steps",
    "inactive_steps",
)


class RwareEnv(EnvBase):
    """The multi-robot warehouse (``rware`` 2.0.0), batched over ``num_envs`` in torch.

    Keys (default one group ``"agents"`` of ``agent_0 ... agent_{n-1}``):
    ``("agents", "observation")`` ``[*B, n, obs]`` float32 (71 features with sensor
    range 1), ``("agents", "action")`` ``Categorical(5)``, ``("agents", "reward")``
    ``[*B, n, 1]`` float32, root ``done``/``terminated``/``truncated`` ``[*B, 1]``.

    Args:
        env_id: a registered id, ``"rware-<tiny|small|medium|large>-<n>ag[-easy|-hard]-v2"``;
            its registered arguments are the defaults of the others.
        num_envs: env batch size (``None``: one unbatched env, like the package wrapper).
        shelf_columns: shelf blocks across (odd).
        column_height: shelves per block column.
        shelf_rows: shelf blocks down.
        n_agents: robots.
        msg_bits: must be 0 (communication bits are not supported).
        sensor_range: cells seen in each direction.
        request_queue_size: shelves requested at a time.
        max_inactivity_steps: end an episode after this many steps without a delivery
            (``None``: never).
        max_steps: episode length (``None``: unlimited).
        reward_type: ``"individual"``, ``"global"`` or ``"two_stage"`` (or a ``RewardType``).
        layout: a layout string (``x`` shelf, ``.`` corridor, ``g`` goal), replacing
            the shelf block arguments.
        observation_type: ``"flattened"`` only (or ``ObservationType.FLATTENED``).
        normalised_coordinates: own coordinates divided by the grid's width/height - 1.
        device: device of the state and the tensors.
        seed: seed of the env's ``torch.Generator``.
        group_map: ``None`` (one group ``"agents"``), a constructor name, a dict or a
            ``GroupMap`` over the robots.

    Raises:
        ValueError: on an unknown id or a bad argument (named, with what was expected).

    Examples:
        >>> env = RwareEnv("rware-tiny-2ag-v2", num_envs=3, seed=0, max_steps=5)
        >>> td = env.rollout(5)
        >>> td["agents", "observation"].shape, td["next", "agents", "reward"].shape
        (torch.Size([3, 5, 2, 71]), torch.Size([3, 5, 2, 1]))
        >>> td["next", "truncated"][:, -1, 0].tolist(), td["next", "terminated"].any().item()
        ([True, True, True], False)
        >>> env.get_state()["request_queue"].shape
        torch.Size([3, 2])
        >>> env.render().shape
        (220, 200, 3)
    """

    complete_done_flags = True

    def __init__(
        self,
        env_id: str | None = None,
        num_envs: int | None = None,
        *,
        shelf_columns: int = _UNSET,
        column_height: int = _UNSET,
        shelf_rows: int = _UNSET,
        n_agents: int = _UNSET,
        msg_bits: int = _UNSET,
        sensor_range: int = _UNSET,
        request_queue_size: int = _UNSET,
        max_inactivity_steps: int | None = _UNSET,
        max_steps: int | None = _UNSET,
        reward_type: Any = _UNSET,
        layout: str | None = None,
        observation_type: Any = "flattened",
        normalised_coordinates: bool = False,
        device: Any = None,
        seed: int | None = None,
        group_map: Any = None,
    ) -> None:
        cfg = dict(_DEFAULTS) if env_id is None else parse_env_id(env_id)
        given = {
            "shelf_columns": shelf_columns,
            "column_height": column_height,
            "shelf_rows": shelf_rows,
            "n_agents": n_agents,
            "msg_bits": msg_bits,
            "sensor_range": sensor_range,
            "request_queue_size": request_queue_size,
            "max_inactivity_steps": max_inactivity_steps,
            "max_steps": max_steps,
            "reward_type": reward_type,
        }
        cfg.update({k: v for k, v in given.items() if v is not _UNSET})
        check_args(cfg, num_envs, layout, observation_type)
        highways, goals = make_layout(
            cfg["shelf_columns"], cfg["shelf_rows"], cfg["column_height"], layout
        )
        self.config = {**cfg, "layout": layout, "normalised_coordinates": normalised_coordinates}
        self.n_agents, self.sensor_range = cfg["n_agents"], cfg["sensor_range"]
        self.reward_type = enum_name(cfg["reward_type"])
        self.max_steps, self.max_inactivity_steps = cfg["max_steps"], cfg["max_inactivity_steps"]
        self.request_queue_size = cfg["request_queue_size"]
        self.normalised_coordinates = normalised_coordinates
        self.grid_size = highways.shape  # (height, width), as Warehouse.grid_size
        self.goals = goals
        n, (h, w) = self.n_agents, self.grid_size
        if n > h * w:
            raise ValueError(f"RwareEnv: n_agents must be <= the {h * w} grid cells, got {n}")
        ys, xs = np.nonzero(highways == 0)  # shelves, in Warehouse's row-major id order
        self.n_shelves = len(xs)
        if self.request_queue_size > self.n_shelves:
            raise ValueError(
                f"RwareEnv: request_queue_size must be <= the {self.n_shelves} shelves, "
                f"got {self.request_queue_size}"
            )
        agents = [f"agent_{i}" for i in range(n)]
        gmap = (
            GroupMap.all_in_one(agents) if group_map is None else GroupMap.build(group_map, agents)
        )
        self._nb = 1 if num_envs is None else num_envs
        batch = () if num_envs is None else (num_envs,)
        super().__init__(batch_size=batch, device=device, group_map=gmap)
        d = self.device
        self._highways = torch.as_tensor(highways.reshape(-1), dtype=torch.bool, device=d)
        self._goal_cells = [y * w + x for x, y in goals]
        self._shelf_home = torch.as_tensor(ys * w + xs, dtype=torch.long, device=d)
        self._wrap, self._wrap_pos = _WRAP.to(d), _WRAP_POS.to(d)
        self._probes = set_probe_table(w, h * w, d)  # CPython set slots per cell
        r = self.sensor_range
        dy, dx = torch.meshgrid(torch.arange(-r, r + 1), torch.arange(-r, r + 1), indexing="ij")
        self._win = (dy.reshape(-1) * (w + 2 * r) + dx.reshape(-1)).to(d)
        self.obs_dim = 8 + 7 * (2 * r + 1) ** 2
        self._groups = [
            (g, None if m == agents else torch.tensor([agents.index(a) for a in m], device=d))
            for g, m in gmap.items()
        ]
        self._make_specs()
        self._gen = torch.Generator(device=d)
        self.set_seed(seed)
        self._alloc_state()

    # ------------------------------------------------------------ construction
    def _make_specs(self) -> None:
        b, d = self.batch_size, self.device
        obs, act, rew = (Composite(shape=b, device=d) for _ in range(3))
        for g, members in self.group_map.items():
            k = len(members)
            obs[g] = Composite(
                {"observation": Unbounded((*b, k, self.obs_dim), device=d)}, shape=(*b, k)
            )
            act[g] = Composite({"action": Categorical(5, (*b, k), device=d)}, shape=(*b, k))
            rew[g] = Composite({"reward": Unbounded((*b, k, 1), device=d)}, shape=(*b, k))
        self.observation_spec, self.action_spec, self.reward_spec = obs, act, rew
        self.done_spec = make_done_spec(b, d)

    def _alloc_state(self) -> None:
        nb, n, d = self._nb, self.n_agents, self.device
        z = torch.zeros
        self._cell = z((nb, n), dtype=torch.long, device=d)  # robot cells y * W + x
        self._dir = z((nb, n), dtype=torch.long, device=d)  # Direction values
        self._carry = torch.full((nb, n), -1, dtype=torch.long, device=d)  # shelf index
        self._delivered = z((nb, n), dtype=torch.bool, device=d)  # two-stage has_delivered
        self._shelf = self._shelf_home.expand(nb, -1).clone()  # shelf cells
        self._queue = z((nb, self.request_queue_size), dtype=torch.long, device=d)
        self._steps = z(nb, dtype=torch.long, device=d)
        self._inactive = z(nb, dtype=torch.long, device=d)

    # ------------------------------------------------------------ state
    def get_state(self) -> TensorDict:
        """The full state, batch size ``batch_size`` (copies).

        Keys: ``agent_pos`` ``[n, 2]`` (x, y), ``agent_dir`` ``[n]`` (``Direction``
        values: 0 up, 1 down, 2 left, 3 right), ``carrying`` ``[n]`` (carried shelf's
        index, the package's shelf id - 1; -1 for none), ``has_delivered`` ``[n]``,
        ``shelf_pos`` ``[n_shelves, 2]``, ``request_queue`` ``[request_queue_size]``
        (shelf indices, in queue order), ``steps``, ``inactive_steps``.
        """
        w = self.grid_size[1]
        st = {
            "agent_pos": torch.stack([self._cell % w, self._cell // w], -1),
            "agent_dir": self._dir,
            "carrying": self._carry,
            "has_delivered": self._delivered,
            "shelf_pos": torch.stack([self._shelf % w, self._shelf // w], -1),
            "request_queue": self._queue,
            "steps": self._steps,
            "inactive_steps": self._inactive,
        }
        b = self.batch_size
        st = {k: v.reshape(tuple(b) + v.shape[1:]).clone() for k, v in st.items()}
        return TensorDict(st, batch_size=b, device=self.device)

    def set_state(self, state: TensorDictBase | dict) -> TensorDictBase:
        """Replace the state with ``state`` (the keys of :meth:`get_state`, all required).

        Returns:
            The observations of the new state and done flags (False), as ``reset`` does.
        """
        missing = [k for k in _STATE_KEYS if k not in state.keys()]
        if missing:
            raise ValueError(f"RwareEnv.set_state: missing keys {missing}")
        w, nb, d = self.grid_size[1], self._nb, self.device

        def get(key: str) -> torch.Tensor:
            value = torch.as_tensor(state[key], device=d)
            return value.reshape(nb, *value.shape[len(self.batch_size) :])

        pos, spos = get("agent_pos").long(), get("shelf_pos").long()
        self._cell = pos[..., 1] * w + pos[..., 0]
        self._dir = get("agent_dir").long().clone()
        self._carry = get("carrying").long().clone()
        self._delivered = get("has_delivered").bool().clone()
        self._shelf = spos[..., 1] * w + spos[..., 0]
        self._queue = get("request_queue").long().clone()
        self._steps = get("steps").long().reshape(nb).clone()
        self._inactive = get("inactive_steps").long().reshape(nb).clone()
        obs = self._observe(*self._grids())
        return self._output(obs, None, torch.zeros(nb, dtype=torch.bool, device=d))

    # ------------------------------------------------------------ grids / obs
    def _grids(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Robot and shelf index per cell ``[B, H*W]`` (-1: none), as ``_recalc_grid``."""
        nb, n = self._nb, self.n_agents
        cells = self.grid_size[0] * self.grid_size[1]
        agents = torch.full((nb, cells), -1, dtype=torch.long, device=self.device)
        agents.scatter_(1, self._cell, torch.arange(n, device=self.device).expand(nb, n))
        shelves = torch.full_like(agents, -1)
        ids = torch.arange(self.n_shelves, device=self.device).expand(nb, -1)
        shelves.scatter_reduce_(1, self._shelf, ids, "amax")  # the later id wins, as there
        return agents, shelves

    def _observe(self, agents: torch.Tensor, shelves: torch.Tensor) -> torch.Tensor:
        """The flattened observations ``[B, n, obs]`` of ``Warehouse._get_default_obs``."""
        (h, w), r, nb = self.grid_size, self.sensor_range, self._nb
        x, y = self._cell % w, self._cell // w
        f = torch.float32
        if self.normalised_coordinates:
            own_xy = [x.to(f) / (w - 1), y.to(f) / (h - 1)]
        else:
            own_xy = [x.to(f), y.to(f)]
        own = torch.stack([*own_xy, (self._carry >= 0).to(f)], -1)
        dir_hot = torch.nn.functional.one_hot(self._dir, 4).to(f)
        highway = self._highways[self._cell].to(f)[..., None]
        # the sensors read the grids padded by the sensor range with zeros (no robot,
        # no shelf), row by row over the (2r+1)^2 window around the robot
        pad = (0, 0, r, r, r, r)
        agents_p = torch.nn.functional.pad(agents.view(nb, h, w, 1), pad, value=-1).view(nb, -1)
        shelves_p = torch.nn.functional.pad(shelves.view(nb, h, w, 1), pad, value=-1).view(nb, -1)
        centre = (y + r) * (w + 2 * r) + (x + r)
        where = (centre[..., None] + self._win).reshape(nb, -1)
        seen_a = agents_p.gather(1, where).view(nb, self.n_agents, -1)
        seen_s = shelves_p.gather(1, where).view(nb, self.n_agents, -1)
        has_a = seen_a >= 0
        # an empty sensor cell writes the direction one-hot of UP, [1, 0, 0, 0]
        seen_dir = torch.where(
            has_a, self._dir.gather(1, seen_a.clamp(min=0).flatten(1)).view_as(seen_a), 0
        )
        requested = torch.zeros((nb, self.n_shelves + 1), dtype=torch.bool, device=self.device)
        requested.scatter_(1, self._queue, True)
        req = requested.gather(1, torch.where(seen_s >= 0, seen_s, self.n_shelves).flatten(1))
        sensors = torch.cat(
            [
                has_a[..., None].to(f),
                torch.nn.functional.one_hot(seen_dir, 4).to(f),
                (seen_s >= 0)[..., None].to(f),
                req.view_as(seen_s)[..., None].to(f),
            ],
            -1,
        )
        return torch.cat([own, dir_hot, highway, sensors.flatten(2)], -1)

    def _output(self, obs: torch.Tensor, reward: torch.Tensor | None, done: torch.Tensor):
        b = self.batch_size
        out = TensorDict({}, batch_size=b, device=self.device)
        for g, idx in self._groups:
            o = obs if idx is None else obs[:, idx]
            k = o.shape[1]
            group = {"observation": o.reshape(*b, k, self.obs_dim)}
            if reward is not None:
                rr = reward if idx is None else reward[:, idx]
                group["reward"] = rr.reshape(*b, k, 1)
            out.set(g, TensorDict(group, batch_size=(*b, k), device=self.device))
        done = done.reshape(*b, 1)
        out.set("done", done)
        out.set("terminated", torch.zeros_like(done))  # rware only ends on step limits
        out.set("truncated", done.clone())
        return out

    # ------------------------------------------------------------ reset / step
    def _reset(self, td: TensorDictBase | None) -> TensorDictBase:
        nb, n, d, g = self._nb, self.n_agents, self.device, self._gen
        mask = td.get("_reset", None) if td is not None else None
        where = torch.ones(nb, dtype=torch.bool, device=d) if mask is None else mask.reshape(nb)
        cells = self.grid_size[0] * self.grid_size[1]
        # np_random.choice(cells, n, replace=False), directions uniform, and the
        # requests: a uniform draw of distinct shelves (argsort of uniform keys)
        cell = torch.rand((nb, cells), generator=g, device=d).argsort(1)[:, :n]
        dirs = torch.randint(0, 4, (nb, n), generator=g, device=d)
        keys = torch.rand((nb, self.n_shelves), generator=g, device=d)
        queue = keys.argsort(1)[:, : self.request_queue_size]
        w1, w2 = where[:, None], where
        self._cell = torch.where(w1, cell, self._cell)
        self._dir = torch.where(w1, dirs, self._dir)
        self._carry = torch.where(w1, -1, self._carry)
        self._delivered = self._delivered & ~w1
        self._shelf = torch.where(w1, self._shelf_home, self._shelf)
        self._queue = torch.where(w1, queue, self._queue)
        self._steps = torch.where(w2, 0, self._steps)
        self._inactive = torch.where(w2, 0, self._inactive)
        obs = self._observe(*self._grids())
        return self._output(obs, None, torch.zeros(nb, dtype=torch.bool, device=d))

    def _actions(self, td: TensorDictBase) -> torch.Tensor:
        nb, n = self._nb, self.n_agents
        if len(self._groups) == 1 and self._groups[0][1] is None:
            return td.get((self._groups[0][0], "action")).reshape(nb, n).long()
        act = torch.zeros((nb, n), dtype=torch.long, device=self.device)
        for g, idx in self._groups:
            a = td.get((g, "action")).reshape(nb, -1).long()
            act[:, idx if idx is not None else slice(None)] = a
        return act

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        (h, w), nb, n, d = self.grid_size, self._nb, self.n_agents, self.device
        act = self._actions(td).to(d)
        agents, shelves = self._grids()
        x, y, s = self._cell % w, self._cell // w, self._cell
        # Agent.req_location: one cell ahead, clamped to the grid
        tx = torch.stack([x, x, (x - 1).clamp(min=0), (x + 1).clamp(max=w - 1)], -1)
        ty = torch.stack([(y - 1).clamp(min=0), (y + 1).clamp(max=h - 1), y, y], -1)
        facing = self._dir[..., None]
        ahead = (ty.gather(-1, facing) * w + tx.gather(-1, facing)).squeeze(-1)
        target = torch.where(act == 1, ahead, s)
        # a loaded robot cannot move under a standing shelf (a shelf not carried by the
        # robot there): the package cancels that move before building the graph
        loaded = self._carry >= 0
        there = agents.gather(1, target)
        there_loaded = (there >= 0) & loaded.gather(1, there.clamp(min=0))
        blocked = loaded & (target != s) & (shelves.gather(1, target) >= 0) & ~there_loaded
        act = torch.where(blocked, 0, act)
        target = torch.where(blocked, s, target)
        moves = (act == 1) & resolve_moves(s, target, h * w, self._probes)
        self._cell = torch.where(moves, target, s)
        turn = (act == 2) | (act == 3)
        pos = (self._wrap_pos[self._dir] + torch.where(act == 3, 1, -1)) % 4
        self._dir = torch.where(turn, self._wrap[pos], self._dir)
        reward = torch.zeros((nb, n), dtype=torch.float32, device=d)
        toggle = act == 4
        under = shelves.gather(1, s)  # the standing shelf in the robot's cell
        pick = toggle & ~loaded & (under >= 0)
        drop = toggle & loaded & ~self._highways[s]
        if self.reward_type == "two_stage":
            reward = reward + 0.5 * (drop & self._delivered).float()
        self._delivered = self._delivered & ~drop
        self._carry = torch.where(pick, under, torch.where(drop, -1, self._carry))
        # carried shelves follow their robots
        carried = self._carry >= 0
        self._shelf = self._move_shelves(carried)
        agents, shelves = self._grids()
        delivered_any = torch.zeros(nb, dtype=torch.bool, device=d)
        for goal in self._goal_cells:  # in the package's order: the queue changes between
            sid = shelves[:, goal]
            slot = (self._queue == sid[:, None]) & (sid >= 0)[:, None]
            hit = slot.any(1)
            if d.type == "cpu" and not bool(hit.any()):
                continue  # no delivery (on a GPU, skip this host read and draw anyway)
            delivered_any |= hit
            self._queue = torch.where(slot, self._new_request()[:, None], self._queue)
            robot = agents[:, goal].clamp(min=0)
            at_goal = torch.nn.functional.one_hot(robot, n).bool() & hit[:, None]
            if self.reward_type == "global":
                reward = reward + hit[:, None].float()
            elif self.reward_type == "individual":
                reward = reward + at_goal.float()
            else:
                self._delivered = self._delivered | at_goal
                reward = reward + 0.5 * at_goal.float()
        self._inactive = torch.where(delivered_any, 0, self._inactive + 1)
        self._steps = self._steps + 1
        done = torch.zeros(nb, dtype=torch.bool, device=d)
        if self.max_inactivity_steps:
            done |= self._inactive >= self.max_inactivity_steps
        if self.max_steps:
            done |= self._steps >= self.max_steps
        return self._output(self._observe(agents, shelves), reward, done)

    def _move_shelves(self, carried: torch.Tensor) -> torch.Tensor:
        # a spare column n_shelves takes the robots that carry nothing
        shelf = torch.cat([self._shelf, self._shelf[:, :1]], 1)
        shelf.scatter_(1, torch.where(carried, self._carry, self.n_shelves), self._cell)
        return shelf[:, : self.n_shelves]

    def _new_request(self) -> torch.Tensor:
        """A shelf drawn uniformly among those not requested (``np_random.choice``)."""
        free = torch.ones((self._nb, self.n_shelves), dtype=torch.bool, device=self.device)
        free.scatter_(1, self._queue, False)
        count = free.sum(1)
        u = torch.rand(self._nb, generator=self._gen, device=self.device)
        k = (u * count).long().clamp(max=(count - 1).clamp(min=0))
        rank = free.long().cumsum(1) - 1
        return (free & (rank == k[:, None])).long().argmax(1)

    def _set_seed(self, seed: int | None) -> None:
        seed_generator(self._gen, seed)

    def render(self, mode: str = "rgb_array", env_index: int = 0) -> np.ndarray:
        """An RGB frame ``[H * 20, W * 20, 3]`` uint8 of sub-env ``env_index``, drawn with numpy.

        Goals dark grey, shelves blue (requested ones teal), robots orange (red when
        loaded) with a dark mark on the side they face.
        """
        if mode != "rgb_array":  # the signature of VMAS's, which the video writer calls
            raise ValueError(f"RwareEnv.render draws rgb_array frames only, got mode={mode!r}")
        if not 0 <= env_index < self._nb:
            raise ValueError(
                f"RwareEnv.render: env_index must be in [0, {self._nb}), got {env_index}"
            )
        st = {
            k: v.reshape(self._nb, *v.shape[len(self.batch_size) :])
            for k, v in self.get_state().items()
        }
        return draw_warehouse(
            self.grid_size,
            self.goals,
            {k: v[env_index].cpu().numpy() for k, v in st.items()},
        )
