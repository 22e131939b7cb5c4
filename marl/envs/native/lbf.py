"""`LBFEnv`: Level-Based Foraging as batched tensor code, a port of ``lbforaging`` 2.0.0.

A port of ``ForagingEnv`` (``lbforaging/foraging/environment.py`` in lbforaging
2.0.0), vector observations only: its rules are the specification, and
``tests/envs/native/test_lbf.py`` checks them step by step against the package
(observations, action masks, rewards and episode ends). Every sub-env of the batch
steps in the same tensor operations; the rules themselves are in
:mod:`marl.envs.native.lbf_rules`. Keys, shapes and dtypes are those of the
package's wrapper :class:`~marl.envs.libs.lbforaging.LBForagingEnv`.

Deliberate differences from the package:

- Spawning draws from a ``torch.Generator``, so start states follow the package's
  rules in distribution but not its numpy draws. Players take distinct uniform
  cells (the package also avoids the cells the later players held in the previous
  episode, a leftover of ``_is_empty_location``); a food is placed whenever a cell
  allows it (the package gives up after 1000 rejected draws in all).
- On layouts the package never spawns, where a cell touches two food (see
  :func:`~marl.envs.native.lbf_rules.load`) or a food lies on the border (its
  ``adjacent_food_location`` can then return ``None`` and ``step`` raises), the
  package's loads depend on the iteration order of a Python set or fail; here they
  follow a fixed rule. Its step has no other randomness.
- Non-square fields: the observation bounds are ``rows - 1`` for rows and
  ``cols - 1`` for columns (the package swaps them, and its own check then fails).
- Actions outside ``0..5`` count as illegal (NONE) instead of raising, so a step
  never reads the actions on the host; ``check_actions=True`` rejects them.
- No ``grid_observation`` and no rendering window: :meth:`LBFEnv.render` returns
  an RGB array drawn with numpy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from marl.envs.batched import new_td
from marl.envs.common import EnvBase, make_done_spec, seed_generator
from marl.envs.native import lbf_rules as rules
from marl.envs.native.lbf_render import draw_frame
from marl.groups import GroupMap, GroupMapLike
from marl.specs import Bounded, Categorical, Composite, OneHot, Unbounded

__all__ = ["LBFEnv"]

# get_state's names of the state entries -> the env's own
_NAMES = {
    "player_position": "pos",
    "player_level": "level",
    "food_position": "food_pos",
    "food_level": "food_level",
    "food_spawned": "food_spawned",
    "step_count": "step",
}
# the ids lbforaging 2.0.0 registers (lbforaging/__init__.py), vector observations
_ID = re.compile(
    r"^Foraging(?P<sight>-2s)?-(?P<s>\d+)x(?P=s)-(?P<p>\d+)p-(?P<f>\d+)f(?P<coop>-coop)?-v3$"
)


def _levels(name: str, value: Any, count: int, allow_none: bool = False) -> torch.Tensor | None:
    """A scalar or per-item level as a ``[count]`` long tensor (``ForagingEnv``'s rule)."""
    if value is None and allow_none:
        return None
    values = list(value) if isinstance(value, (list, tuple)) else [value] * count
    if len(values) != count or not all(isinstance(v, int) and v >= 1 for v in values):
        raise ValueError(
            f"LBFEnv: {name} must be an int >= 1 or a list of {count} of them"
            f"{' (or None)' if allow_none else ''}, got {value!r}"
        )
    return torch.tensor(values, dtype=torch.long)


class LBFEnv(EnvBase):
    """Level-Based Foraging over a batch of ``[num_envs]`` grids, on any device.

    Players with levels walk a grid and load food whose level is at most the sum of
    the levels of the adjacent players loading it together. Keys (one group
    ``"agents"`` of ``n`` players by default), as :class:`LBForagingEnv`'s:

    - ``("agents", "observation")`` ``[*B, n, 3 * (max_num_food + players)]``
      float32: the food then the players seen, ``(row, col, level)`` relative to
      the sight window, ``(-1, -1, 0)`` for what is not seen, self first;
    - ``("agents", "action_mask")`` ``[*B, n, 6]`` bool: legal actions (NONE,
      NORTH, SOUTH, WEST, EAST, LOAD); an illegal action plays NONE;
    - ``("agents", "action")``: ``Categorical(6)`` ``[*B, n]`` (one-hot with
      ``categorical_actions=False``);
    - ``("next", "agents", "reward")`` ``[*B, n, 1]`` float32;
    - root ``done``/``terminated``/``truncated`` ``[*B, 1]``: ``terminated`` when
      all food is loaded, ``truncated`` when ``max_episode_steps`` ran out first.

    Args:
        num_envs: sub-envs (``None``: one env, batch size ``[]``).
        field_size: ``(rows, cols)``, each at least 3.
        players: number of players.
        max_num_food: food slots (fewer spawn when the field has no room).
        sight: how many cells a player sees around it (``None``: the whole field).
        max_episode_steps: the step limit (a truncation).
        force_coop: every food at its max level, the sum of the three lowest
            player levels by default (so it needs several players).
        normalize_reward: divide each reward by the sum of the levels loading the
            food and the episode's total food level (an episode sums to at most 1).
        penalty: subtracted from each player of a failed load.
        min_player_level: an int or one per player.
        max_player_level: an int or one per player.
        min_food_level: an int or one per food.
        max_food_level: an int or one per food; ``None``: the sum of the three lowest
            player levels of the episode.
        observe_agent_levels: players' entries with their level (3 values) or not (2).
        categorical_actions: actions as indices (True) or one-hot (False).
        device: device of the state and every tensor.
        seed: optional seed of the spawns.
        group_map: ``None`` (one group ``"agents"``), a constructor name, a dict or
            a ``GroupMap`` over ``agent_0 ... agent_{n-1}``.

    Raises:
        ValueError: on a bad argument, naming it, what it expects and what it got.

    Examples:
        >>> env = LBFEnv.from_id("Foraging-8x8-2p-2f-coop-v3", num_envs=4, seed=0)
        >>> td = env.rollout(5)
        >>> td["agents", "observation"].shape, td["agents", "action_mask"].shape
        (torch.Size([4, 5, 2, 12]), torch.Size([4, 5, 2, 6]))
        >>> state = env.get_state()
        >>> state["player_position"].shape, state["food_level"].shape
        (torch.Size([4, 2, 2]), torch.Size([4, 2]))
        >>> env.render(env_index=0).shape
        (256, 256, 3)
    """

    complete_done_flags = True

    def __init__(
        self,
        num_envs: int | None = None,
        *,
        field_size: Sequence[int] = (8, 8),
        players: int = 2,
        max_num_food: int = 2,
        sight: int | None = None,
        max_episode_steps: int = 50,
        force_coop: bool = False,
        normalize_reward: bool = True,
        penalty: float = 0.0,
        min_player_level: int | Sequence[int] = 1,
        max_player_level: int | Sequence[int] = 2,
        min_food_level: int | Sequence[int] = 1,
        max_food_level: int | Sequence[int] | None = None,
        observe_agent_levels: bool = True,
        categorical_actions: bool = True,
        device: Any = None,
        seed: int | None = None,
        group_map: GroupMapLike | None = None,
    ) -> None:
        if num_envs is not None and (not isinstance(num_envs, int) or num_envs < 1):
            raise ValueError(f"LBFEnv: num_envs must be None or an int >= 1, got {num_envs!r}")
        size = tuple(field_size) if isinstance(field_size, (list, tuple)) else ()
        if len(size) != 2 or not all(isinstance(s, int) and s >= 3 for s in size):
            raise ValueError(
                f"LBFEnv: field_size must be (rows, cols), ints >= 3, got {field_size!r}"
            )
        rows, cols = size
        for name, value in (
            ("players", players),
            ("max_num_food", max_num_food),
            ("max_episode_steps", max_episode_steps),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"LBFEnv: {name} must be an int >= 1, got {value!r}")
        if players > rows * cols:
            raise ValueError(
                f"LBFEnv: players must fit the field ({rows * cols} cells), got {players}"
            )
        if sight is not None and (not isinstance(sight, int) or sight < 1):
            raise ValueError(f"LBFEnv: sight must be None or an int >= 1, got {sight!r}")
        if not isinstance(penalty, (int, float)) or penalty < 0:
            raise ValueError(f"LBFEnv: penalty must be a number >= 0, got {penalty!r}")
        lo_p = _levels("min_player_level", min_player_level, players)
        hi_p = _levels("max_player_level", max_player_level, players)
        lo_f = _levels("min_food_level", min_food_level, max_num_food)
        hi_f = _levels("max_food_level", max_food_level, max_num_food, allow_none=True)
        if bool((lo_p > hi_p).any()):
            raise ValueError(
                "LBFEnv: min_player_level must be <= max_player_level for every player, got "
                f"{min_player_level!r} and {max_player_level!r}"
            )
        if hi_f is not None and bool((lo_f > hi_f).any()):
            raise ValueError(
                "LBFEnv: min_food_level must be <= max_food_level for every food, got "
                f"{min_food_level!r} and {max_food_level!r}"
            )
        lowest = int(lo_p.sort().values[:3].sum())
        if hi_f is None and not force_coop and int(lo_f.max()) > lowest:
            raise ValueError(
                "LBFEnv: with max_food_level=None the max food level is the sum of the three "
                f"lowest player levels, which can be {lowest}: min_food_level must be <= "
                f"{lowest}, got {min_food_level!r}"
            )
        agents = [f"agent_{i}" for i in range(players)]
        groups = GroupMap.build(group_map or "all_in_one", agents)
        super().__init__(
            batch_size=() if num_envs is None else (num_envs,), device=device, group_map=groups
        )
        d = self.device
        self.field_size = (rows, cols)
        self.n_players, self.max_num_food = players, max_num_food
        self.sight = max(rows, cols) if sight is None else sight
        self.max_episode_steps = max_episode_steps
        self.force_coop, self.normalize_reward = bool(force_coop), bool(normalize_reward)
        self.penalty = float(penalty)
        self.observe_agent_levels = bool(observe_agent_levels)
        self.categorical_actions = bool(categorical_actions)
        self._player_levels = (lo_p.to(d), hi_p.to(d))
        self._food_levels = (lo_f.to(d), None if hi_f is None else hi_f.to(d))
        self._n = 1 if num_envs is None else num_envs  # the flat batch of the state
        order = [[i] + [j for j in range(players) if j != i] for i in range(players)]
        self._self_first = torch.tensor(order, dtype=torch.long, device=d)
        self._groups = [
            (g, None if ix == list(range(players)) else torch.tensor(ix, device=d))
            for g, ix in ((g, [agents.index(a) for a in m]) for g, m in groups.items())
        ]
        max_food = int(hi_f.max()) if hi_f is not None else int(hi_p.sort().values[:3].sum())
        self._make_specs(max(int(hi_p.max()), 1), max_food)
        self._gen = torch.Generator(device=d)
        self.set_seed(seed)
        self._state = self._spawn()
        self._refresh_mask()

    @classmethod
    def from_id(cls, env_id: str, num_envs: int | None = None, **kwargs: Any) -> LBFEnv:
        """The env of a registered lbforaging id, e.g. ``"Foraging-2s-8x8-2p-2f-coop-v3"``.

        Parsed as ``lbforaging/__init__.py`` registers its ids: an ``s x s`` field,
        ``p`` players, ``f`` food, ``-coop`` for ``force_coop``, a ``-2s`` prefix for
        sight 2 (the whole field otherwise), 50 steps. ``kwargs`` replace those
        arguments (``max_episode_steps=``, ``max_num_food=`` ...).

        Raises:
            ValueError: on an id of another form (grid observations included).
        """
        match = _ID.match(env_id) if isinstance(env_id, str) else None
        if match is None:
            raise ValueError(
                f"LBFEnv.from_id: env_id must look like 'Foraging-8x8-2p-2f-coop-v3' or "
                f"'Foraging-2s-10x10-3p-3f-v3' (vector observations), got {env_id!r}"
            )
        s = int(match["s"])
        args: dict[str, Any] = dict(
            field_size=(s, s),
            players=int(match["p"]),
            max_num_food=int(match["f"]),
            sight=2 if match["sight"] else s,
            force_coop=bool(match["coop"]),
            max_episode_steps=50,
        )
        args.update(kwargs)
        return cls(num_envs, **args)

    # ------------------------------------------------------------ specs
    def _make_specs(self, max_player_level: int, max_food_level: int) -> None:
        b, d, f = self.batch_size, self.device, self.max_num_food
        rows, cols = self.field_size
        per_player = 3 if self.observe_agent_levels else 2
        low = [-1, -1, 0] * f + [-1, -1, 0][:per_player] * self.n_players
        high = [rows - 1, cols - 1, max_food_level] * f
        high += [rows - 1, cols - 1, max_player_level][:per_player] * self.n_players
        obs, act, rew = Composite(shape=b), Composite(shape=b), Composite(shape=b)
        for g, ix in self._groups:
            k = self.n_players if ix is None else len(ix)
            shape = (*b, k)
            obs[g] = Composite(
                {
                    "observation": Bounded(
                        torch.tensor(low, dtype=torch.float32),
                        torch.tensor(high, dtype=torch.float32),
                        (*shape, len(low)),
                        device=d,
                    ),
                    "action_mask": Unbounded((*shape, rules.N_ACTIONS), torch.bool, d),
                },
                shape=shape,
            )
            action = (
                Categorical(rules.N_ACTIONS, shape, device=d)
                if self.categorical_actions
                else OneHot(rules.N_ACTIONS, (*shape, rules.N_ACTIONS), device=d)
            )
            act[g] = Composite({"action": action}, shape=shape)
            rew[g] = Composite({"reward": Unbounded((*shape, 1), device=d)}, shape=shape)
        self.observation_spec, self.action_spec, self.reward_spec = obs, act, rew
        self.done_spec = make_done_spec(b, d)

    # ------------------------------------------------------------ core
    def _refresh_mask(self) -> None:
        s = self._state
        food = rules.food_cells(s["food_pos"], s["food_level"], self.field_size[1])
        self._mask = rules.valid_actions(s["pos"], food, *self.field_size)

    def _output(self, reward: torch.Tensor | None, flags: Sequence[torch.Tensor]) -> TensorDict:
        """The TensorDict of the current observations (and ``reward`` ``[N, n]``)."""
        s, b = self._state, self.batch_size
        obs = rules.observe(
            s["pos"], s["level"], s["food_pos"], s["food_level"], self.sight,
            self._self_first, self.observe_agent_levels,
        )  # fmt: skip
        entries = {"observation": obs, "action_mask": self._mask}
        if reward is not None:
            entries["reward"] = reward.unsqueeze(-1)
        root: dict[str, Any] = {}
        for g, ix in self._groups:
            group = {k: v if ix is None else v.index_select(1, ix) for k, v in entries.items()}
            group = {k: v.reshape(*b, *v.shape[1:]) for k, v in group.items()}
            size = torch.Size([*b, group["observation"].shape[len(b)]])
            root[g] = new_td(group, size, self.device)
        for key, flag in zip(("done", "terminated", "truncated"), flags):
            root[key] = flag.reshape(*b, 1)
        return new_td(root, b, self.device)

    def _no_flags(self) -> tuple[torch.Tensor, ...]:
        """Three all-False flags (done, terminated, truncated), separate tensors."""
        return torch.zeros(3, self._n, dtype=torch.bool, device=self.device).unbind(0)

    def _spawn(self) -> dict[str, torch.Tensor]:
        """A start state for every sub-env (the reset keeps those of the masked ones).

        It draws for the whole batch whatever the mask, which is why the env leaves
        ``partial_resets_on_device`` False: the base class calls it only when some
        sub-env ended, so the draws do not depend on how often it is called.
        """
        s = rules.spawn(
            self._gen, self._n, self.field_size, self._player_levels, self._food_levels,
            self.force_coop,
        )  # fmt: skip
        s["step"] = torch.zeros(self._n, dtype=torch.long, device=self.device)
        return s

    def _reset(self, td: TensorDictBase | None) -> TensorDictBase:
        mask = None if td is None else td.get("_reset", None)
        new = self._spawn()
        if mask is None:
            self._state = new
        else:
            where = mask.reshape(self._n).to(self.device)
            self._state = {k: _where(where, v, self._state[k]) for k, v in new.items()}
        self._refresh_mask()
        return self._output(None, self._no_flags())

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        s = self._state
        if self._groups[0][1] is None:  # one group of every player in order
            action = self._group_action(td, self._groups[0][0])
        else:
            action = torch.zeros(self._n, self.n_players, dtype=torch.long, device=self.device)
            for g, ix in self._groups:
                action[:, ix] = self._group_action(td, g)
        codes = torch.arange(rules.N_ACTIONS, device=self.device)
        legal = (self._mask & (action.unsqueeze(-1) == codes)).any(-1)
        action = torch.where(legal, action, 0)  # the package plays NONE for illegal ones
        pos = rules.move(s["pos"], action, self.field_size[1])
        reward, food_level = rules.load(
            pos, s["level"], s["food_pos"], s["food_level"], action == rules.LOAD,
            s["food_spawned"], self.normalize_reward, self.penalty,
        )  # fmt: skip
        step = s["step"] + 1
        self._state = {**s, "pos": pos, "food_level": food_level, "step": step}
        self._refresh_mask()
        cleared = (food_level == 0).all(-1)
        truncated = (step >= self.max_episode_steps) & ~cleared
        return self._output(reward, (cleared | truncated, cleared, truncated))

    def _group_action(self, td: TensorDictBase, group: str) -> torch.Tensor:
        a = td.get((group, "action"))
        a = a if a.device == self.device else a.to(self.device)
        a = a.argmax(-1) if not self.categorical_actions else a.long()
        return a.reshape(self._n, -1)

    def _set_seed(self, seed: int | None) -> None:
        seed_generator(self._gen, seed)

    # ------------------------------------------------------------ state
    def get_state(self) -> TensorDict:
        """The state of every sub-env, a TensorDict of batch size ``batch_size``.

        Entries (long): ``player_position`` ``[*B, n, 2]`` (row, col),
        ``player_level`` ``[*B, n]``, ``food_position`` ``[*B, F, 2]`` and
        ``food_level`` ``[*B, F]`` (0: no food in the slot; the present food in
        row-major order over the slots), ``food_spawned`` ``[*B]`` (the episode's total food
        level, which normalizes the rewards) and ``step_count`` ``[*B]``.
        """
        b = self.batch_size
        return TensorDict(
            {
                k: self._state[v].reshape(*b, *self._state[v].shape[1:]).clone()
                for k, v in _NAMES.items()
            },
            batch_size=b,
        )

    def set_state(self, state: TensorDictBase | dict, env_mask: torch.Tensor | None = None):
        """Set the state of the sub-envs (those where ``env_mask`` ``[*B]`` is True).

        Args:
            state: as :meth:`get_state` returns it; instead of ``food_position`` and
                ``food_level`` it may hold ``field`` ``[*B, rows, cols]`` (each
                cell's food level, 0 for none: the package's ``env.field``).
                ``food_spawned`` defaults to the sum of the food levels,
                ``step_count`` to 0.
            env_mask: which sub-envs to set (``None``: all).

        Returns:
            The observations, action masks and (False) done flags of the whole
            batch, as :meth:`reset` returns them.

        Raises:
            ValueError: on a missing entry, a shape, or a position off the grid,
                a level below 1, two food on one cell or more food than slots.
        """
        rows, cols = self.field_size
        flat = {}
        if state.get("field", None) is not None:
            if any(state.get(k, None) is not None for k in ("food_position", "food_level")):
                raise ValueError("LBFEnv.set_state: give either field or food_position/level")
            flat["food_position"], flat["food_level"] = self._food_from_field(state["field"])
        for key, trailing in self._state_shapes().items():
            value = flat.get(key, state.get(key, None))
            if value is None and key in ("food_spawned", "step_count"):
                continue  # defaults below
            if value is None:
                raise ValueError(f"LBFEnv.set_state: the state has no {key!r} (nor 'field')")
            value = torch.as_tensor(value, device=self.device).long()
            if key not in flat and tuple(value.shape) != (*self.batch_size, *trailing):
                raise ValueError(
                    f"LBFEnv.set_state: {key!r} has shape {tuple(value.shape)}, expected "
                    f"{(*self.batch_size, *trailing)}"
                )
            flat[key] = value.reshape(self._n, *trailing)
        pos, food_pos, food_level = (
            flat["player_position"],
            flat["food_position"],
            flat["food_level"],
        )
        present = food_level > 0
        for what, p, keep in (("player", pos, None), ("food", food_pos, present)):
            off = (p < 0).any(-1) | (p[..., 0] >= rows) | (p[..., 1] >= cols)
            if bool((off if keep is None else off & keep).any()):
                raise ValueError(
                    f"LBFEnv.set_state: a {what} position lies off the {rows}x{cols} grid"
                )
        if bool((flat["player_level"] < 1).any()) or bool((food_level < 0).any()):
            raise ValueError("LBFEnv.set_state: player levels must be >= 1, food levels >= 0")
        cells = rules.food_cells(food_pos, food_level, cols)
        same = (cells.unsqueeze(-1) == cells.unsqueeze(-2)) & present.unsqueeze(-1)
        if bool((same.sum(-1) > 1).any()):
            raise ValueError("LBFEnv.set_state: two food share a cell")
        flat["food_position"], flat["food_level"] = rules.sort_food(food_pos, food_level, cols)
        flat.setdefault("food_spawned", flat["food_level"].sum(-1))
        flat.setdefault("step_count", torch.zeros_like(flat["food_spawned"]))
        new = {_NAMES[k]: v for k, v in flat.items()}
        where = None if env_mask is None else torch.as_tensor(env_mask, device=self.device)
        self._state = {
            k: v.clone() if where is None else _where(where.reshape(self._n), v, self._state[k])
            for k, v in new.items()
        }
        self._refresh_mask()
        return self._output(None, self._no_flags())

    def _state_shapes(self) -> dict[str, tuple[int, ...]]:
        n, f = self.n_players, self.max_num_food
        return {
            "player_position": (n, 2),
            "player_level": (n,),
            "food_position": (f, 2),
            "food_level": (f,),
            "food_spawned": (),
            "step_count": (),
        }

    def _food_from_field(self, field: Any) -> tuple[torch.Tensor, torch.Tensor]:
        rows, cols = self.field_size
        field = torch.as_tensor(np.asarray(field) if not torch.is_tensor(field) else field)
        if field.numel() != self._n * rows * cols:
            raise ValueError(
                f"LBFEnv.set_state: 'field' has shape {tuple(field.shape)}, expected "
                f"{(*self.batch_size, rows, cols)}"
            )
        field = field.to(self.device).long().reshape(self._n, rows * cols)
        if bool(((field > 0).sum(-1) > self.max_num_food).any()):
            raise ValueError(
                f"LBFEnv.set_state: a field holds more than max_num_food={self.max_num_food} food"
            )
        return rules.food_from_field(field, self.max_num_food, cols)

    # ------------------------------------------------------------ render
    def render(self, mode: str = "rgb_array", env_index: int = 0, cell: int = 32) -> np.ndarray:
        """An RGB frame ``[rows * cell, cols * cell, 3]`` uint8 of one sub-env, drawn with numpy.

        Grid lines in grey, food as orange boxes, players as blue boxes (overlapping
        players share one); each shows its level as that many white dots.
        """
        if mode != "rgb_array":  # the signature of VMAS's, which the video writer calls
            raise ValueError(f"LBFEnv.render draws rgb_array frames only, got mode={mode!r}")
        if not isinstance(env_index, int) or not 0 <= env_index < self._n:
            raise ValueError(
                f"LBFEnv.render: env_index must be in [0, {self._n}), got {env_index!r}"
            )
        s = {k: v[env_index].cpu().numpy() for k, v in self._state.items()}
        return draw_frame(
            s["pos"], s["level"], s["food_pos"], s["food_level"], self.field_size, cell
        )


def _where(mask: torch.Tensor, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """``new`` where ``mask`` ``[N]`` is True, else ``old`` (any trailing dims)."""
    return torch.where(mask.view(-1, *([1] * (new.dim() - 1))), new, old)
