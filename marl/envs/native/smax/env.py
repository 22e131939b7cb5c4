"""``SmaxEnv``: SMAX (JaxMARL 0.2.0) battles against the heuristic enemy, batched in torch."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from marl.envs.common import EnvBase, make_done_spec, seed_generator
from marl.envs.native.smax.heuristic import heuristic_actions
from marl.envs.native.smax.observations import (
    avail_actions,
    obs_size,
    observe,
    state_size,
    world_state,
)
from marl.envs.native.smax.scenarios import (
    SCENARIOS,
    Scenario,
    start_positions,
    start_unit_types,
)
from marl.envs.native.smax.units import DT, MAP_WIDTH, UNIT_TYPES, WORLD_STEPS
from marl.envs.native.smax.world import STATE_KEYS, Rules
from marl.groups import GroupMap
from marl.specs import Categorical, Composite, Unbounded

__all__ = ["SmaxEnv"]


def _scenario(scenario: str | Scenario) -> Scenario:
    if isinstance(scenario, Scenario):
        types = tuple(int(t) for t in scenario.unit_types)
        na, ne = scenario.num_allies, scenario.num_enemies
        if na < 1 or ne < 1 or len(types) != na + ne:
            raise ValueError(
                f"SmaxEnv: a Scenario needs num_allies, num_enemies >= 1 and one unit type "
                f"per unit, got {na} allies, {ne} enemies and {len(types)} types"
            )
        if any(not 0 <= t < len(UNIT_TYPES) for t in types):
            raise ValueError(f"SmaxEnv: unit types must lie in [0, {len(UNIT_TYPES)}), got {types}")
        return scenario
    if scenario not in SCENARIOS:
        raise ValueError(f"SmaxEnv: unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    return SCENARIOS[scenario]


def _same_groups(group_map: Any, groups: GroupMap) -> bool:
    if not isinstance(group_map, Mapping):
        return False
    try:
        return GroupMap(dict(group_map)).to_dict() == groups.to_dict()
    except (TypeError, ValueError):
        return False


class SmaxEnv(EnvBase):
    """StarCraft-style micromanagement: the allies (the agents) fight the heuristic enemy.

    A batched port of JaxMARL 0.2.0's ``HeuristicEnemySMAX`` (see the package docstring
    for the rules and the deliberate differences). Every sub-env steps in the same
    tensor operations; there is no Python loop over envs or units.

    Layout (``B`` the batch dims, ``n`` the number of allies, ``A = num_enemies + 5``):

    - ``("allies", "observation")`` ``[*B, n, obs]`` float32: SMAX's "unit_list"
      observation (see :mod:`~marl.envs.native.smax.observations`).
    - ``("allies", "action_mask")`` ``[*B, n, A]`` bool: SMAX's available actions
      (move north/east/south/west, stop, attack enemy k). A dead ally may only stop.
    - ``("allies", "mask")`` ``[*B, n]`` bool: the ally is alive.
    - ``("allies", "action")`` ``[*B, n]`` int64, ``Categorical(A)``.
    - ``("next", "allies", "reward")`` ``[*B, n, 1]``: the team's reward (the enemies'
      health lost this step over their total, averaged over the enemies, plus
      ``won_battle_bonus`` for the win), the same for every ally, dead or alive.
    - ``"state"`` ``[*B, 12 * units]``: SMAX's world state (``get_world_state``), the
      global state JaxMARL's baselines use (``obs["world_state"]``).
    - ``("info", "battle_won")`` ``[*B, 1]`` bool: True at the last step of a won episode.
    - ``done``/``terminated``/``truncated`` ``[*B, 1]``: terminated when one side is all
      dead, truncated at the time limit.

    Args:
        scenario: a name from :data:`SCENARIOS` (``"3m"``, ``"2s3z"``, ``"smacv2_5_units"``...),
            or a :class:`Scenario` of one's own (what JaxMARL's ``register_scenario`` adds).
        num_envs: the batch size (``None``: one env with batch size ``[]``).
        device: where the tensors live (CPU or CUDA).
        seed: the seed of the resets, the enemy's random choices and the cooldown jitter.
        group_map: must be ``None`` or name the single group ``"allies"`` holding every ally.
        max_steps: the time limit. As in SMAX, the limit is checked before the step
            counter moves, so an undecided episode lasts ``max_steps + 1`` steps.
        use_self_play_reward: SMAX's self-play reward (no damage term, -bonus for a loss).
        see_enemy_actions: observations show the enemies' last actions.
        walls_cause_death: a unit that reaches the map's edge dies.
        won_battle_bonus: the reward for winning.
        enemy_shoots: whether the heuristic enemy attacks.
        enemy_attack_mode: the heuristic's target choice, ``"closest"`` or ``"random"``.
        action_type: only ``"discrete"``.
        observation_type: only ``"unit_list"``.

    Attributes:
        rules: the scenario's :class:`~marl.envs.native.smax.world.Rules`.
        last_enemy_actions: the heuristic enemy's actions at the last step,
            ``[max(prod(B), 1), num_enemies]`` int64 (flat over the batch; in the
            enemies' numbering: ``5 + k`` attacks ally ``num_allies - 1 - k``).

    Examples:
        >>> env = SmaxEnv("3m", num_envs=2, seed=0)
        >>> td = env.reset()
        >>> td["allies", "observation"].shape, td["allies", "action_mask"].shape
        (torch.Size([2, 3, 75]), torch.Size([2, 3, 8]))
        >>> td = env.rollout(5)
        >>> td["next", "allies", "reward"].shape, td["next", "info", "battle_won"].shape
        (torch.Size([2, 5, 3, 1]), torch.Size([2, 5, 1]))
        >>> env.render().shape
        (256, 256, 3)
    """

    partial_resets_on_device = False  # a reset draws random numbers for every sub-env
    complete_done_flags = True
    # the win rate of the episodes, logged in training and evaluation and kept in results.json
    episode_metrics = MappingProxyType({"win_rate": ("info", "battle_won")})

    def __init__(
        self,
        scenario: str | Scenario = "3m",
        num_envs: int | None = None,
        *,
        device: Any = None,
        seed: int | None = None,
        group_map: Any = None,
        max_steps: int = 100,
        use_self_play_reward: bool = False,
        see_enemy_actions: bool = True,
        walls_cause_death: bool = True,
        won_battle_bonus: float = 1.0,
        enemy_shoots: bool = True,
        enemy_attack_mode: str = "closest",
        action_type: str = "discrete",
        observation_type: str = "unit_list",
    ) -> None:
        spec = _scenario(scenario)
        if action_type != "discrete":
            raise ValueError(
                f"SmaxEnv: action_type {action_type!r} is not supported; only 'discrete' "
                "(SMAX's continuous actions are not ported)"
            )
        if observation_type != "unit_list":
            raise ValueError(
                f"SmaxEnv: observation_type {observation_type!r} is not supported; only "
                "'unit_list' (SMAX's 'conic' observations are not ported)"
            )
        if enemy_attack_mode not in ("closest", "random"):
            raise ValueError(
                f"SmaxEnv: enemy_attack_mode must be 'closest' or 'random', "
                f"got {enemy_attack_mode!r}"
            )
        if num_envs is not None and (not isinstance(num_envs, int) or num_envs < 1):
            raise ValueError(f"SmaxEnv: num_envs must be None or an int >= 1, got {num_envs!r}")
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"SmaxEnv: max_steps must be an int >= 1, got {max_steps!r}")
        names = [f"ally_{i}" for i in range(spec.num_allies)]
        groups = GroupMap.all_in_one(names, name="allies")
        if group_map is not None and not _same_groups(group_map, groups):
            raise ValueError(
                "SmaxEnv has one group, 'allies', holding every ally: group_map cannot be "
                f"changed (got {group_map!r})"
            )
        batch = torch.Size([] if num_envs is None else [num_envs])
        super().__init__(batch_size=batch, device=device, group_map=groups)
        self.scenario = scenario if isinstance(scenario, str) else "custom"
        self._n = 1 if num_envs is None else num_envs
        self.rules = Rules(
            spec,
            self.device,
            walls_cause_death=walls_cause_death,
            see_enemy_actions=see_enemy_actions,
            use_self_play_reward=use_self_play_reward,
            won_battle_bonus=won_battle_bonus,
            max_steps=max_steps,
        )
        self.max_steps = max_steps
        self.enemy_shoots = enemy_shoots
        self.enemy_attack_mode = enemy_attack_mode
        self.num_allies, self.num_enemies = spec.num_allies, spec.num_enemies
        self.num_actions = self.rules.num_ally_actions
        b, d, na = self.batch_size, self.device, self.num_allies
        self.observation_spec = Composite(
            {
                "allies": Composite(
                    {
                        "observation": Unbounded((*b, na, obs_size(self.rules)), device=d),
                        "action_mask": Unbounded(
                            (*b, na, self.num_actions), dtype=torch.bool, device=d
                        ),
                        "mask": Unbounded((*b, na), dtype=torch.bool, device=d),
                    },
                    shape=(*b, na),
                ),
                "state": Unbounded((*b, state_size(self.rules)), device=d),
                "info": Composite(
                    {"battle_won": Unbounded((*b, 1), dtype=torch.bool, device=d)}, shape=b
                ),
            },
            shape=b,
        )
        self.action_spec = Composite(
            {
                "allies": Composite(
                    {"action": Categorical(self.num_actions, (*b, na), device=d)}, shape=(*b, na)
                )
            },
            shape=b,
        )
        self.reward_spec = Composite(
            {"allies": Composite({"reward": Unbounded((*b, na, 1), device=d)}, shape=(*b, na))},
            shape=b,
        )
        self.done_spec = make_done_spec(b, d)
        self._gen = torch.Generator(device=self.device)
        self._injected: dict[str, torch.Tensor] | None = None
        self.last_enemy_actions = torch.zeros(
            (self._n, self.num_enemies), dtype=torch.long, device=d
        )
        self.set_seed(seed)
        self._state = self._initial_state(self._n)

    # ------------------------------------------------------------ state
    def _initial_state(self, n: int) -> dict[str, torch.Tensor]:
        """Fresh battles for ``n`` envs: SMAX's ``reset`` and the heuristic's initial state."""
        spec, d, g = self.rules.scenario, self.device, self._gen
        types = start_unit_types(spec, n, g, d)
        s = {
            "positions": start_positions(spec, n, g, d),
            "alive": torch.ones((n, self.rules.n_units), dtype=torch.bool, device=d),
            "health": self.rules.tab["health"][types],
            "unit_types": types,
            "cooldowns": torch.zeros((n, self.rules.n_units), device=d),
            "prev_movement": torch.zeros((n, self.rules.n_units, 2), device=d),
            "prev_attack": torch.zeros((n, self.rules.n_units), dtype=torch.long, device=d),
            "step": torch.zeros((n,), dtype=torch.long, device=d),
            "default_target": torch.zeros((n, self.num_enemies, 2), device=d),
            "last_attacked": torch.full((n, self.num_enemies), -1, dtype=torch.long, device=d),
        }
        self.rules.push_units_away(s)
        return s

    def get_state(self) -> TensorDict:
        """A copy of the full state (batch size ``batch_size``).

        Keys: ``positions`` ``[*B, units, 2]``, ``alive``, ``health``, ``unit_types``,
        ``cooldowns``, ``prev_movement`` ``[*B, units, 2]`` (the last decoded movement
        vectors), ``prev_attack`` (the last attack actions, 0 for none), ``step``
        ``[*B]``, and the heuristic enemy's ``default_target`` ``[*B, enemies, 2]`` and
        ``last_attacked`` ``[*B, enemies]``. Units are allies first, then enemies.
        """
        return TensorDict(
            {
                k: v.reshape((*self.batch_size, *v.shape[1:])).clone()
                for k, v in self._state.items()
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def set_state(self, td: TensorDictBase | Mapping[str, torch.Tensor]) -> TensorDict:
        """Replace the full state (every key of :meth:`get_state`) and return the
        observations of the new state, as :meth:`reset` would (all flags False).

        Raises:
            KeyError: when a key is missing.
            ValueError: when a shape differs from :meth:`get_state`'s.
        """
        current = self.get_state()
        new = {}
        for key, dtype in STATE_KEYS.items():
            if key not in td.keys():
                raise KeyError(f"SmaxEnv.set_state: missing {key!r}; needs {list(STATE_KEYS)}")
            value = torch.as_tensor(td[key]).to(device=self.device, dtype=dtype)
            if value.shape != current[key].shape:
                raise ValueError(
                    f"SmaxEnv.set_state: {key!r} has shape {tuple(value.shape)}, "
                    f"expected {tuple(current[key].shape)}"
                )
            new[key] = value.reshape(self._n, *value.shape[len(self.batch_size) :]).clone()
        self._state = new
        zeros = torch.zeros(self._n, dtype=torch.bool, device=self.device)
        return self._observe(zeros, zeros, zeros)

    def inject_noise(
        self, u_target: torch.Tensor, u_attack: torch.Tensor, cooldown: torch.Tensor
    ) -> None:
        """Make the next step use these random draws instead of its own (for replaying
        reference traces): the heuristic's uniforms ``[*B, enemies]`` behind its random
        move target and random attack target, and the cooldown jitter
        ``[*B, 8, units]`` (in ``[-DT, 2 DT)``) of each world substep."""
        n = self._n
        self._injected = {
            "u_target": torch.as_tensor(u_target, device=self.device).reshape(n, -1),
            "u_attack": torch.as_tensor(u_attack, device=self.device).reshape(n, -1),
            "cooldown": torch.as_tensor(cooldown, device=self.device).reshape(
                n, WORLD_STEPS, self.rules.n_units
            ),
        }

    def _draw_noise(self) -> dict[str, torch.Tensor]:
        if self._injected is not None:
            noise, self._injected = self._injected, None
            return noise
        n, d, g = self._n, self.device, self._gen
        return {
            "u_target": torch.rand((n, self.num_enemies), generator=g, device=d),
            "u_attack": torch.rand((n, self.num_enemies), generator=g, device=d),
            "cooldown": torch.rand((n, WORLD_STEPS, self.rules.n_units), generator=g, device=d)
            * (3 * DT)
            - DT,
        }

    # ------------------------------------------------------------ EnvBase API
    def _observe(
        self, terminated: torch.Tensor, truncated: torch.Tensor, won: torch.Tensor
    ) -> TensorDict:
        s, rules, b, na = self._state, self.rules, self.batch_size, self.num_allies
        obs = observe(rules, s, slice(0, na))

        def out(x: torch.Tensor) -> torch.Tensor:
            return x.reshape((*b, *x.shape[1:]))

        done = terminated | truncated
        return TensorDict(
            {
                "allies": TensorDict(
                    {
                        "observation": out(obs),
                        "action_mask": out(avail_actions(rules, s)),
                        "mask": out(s["alive"][:, :na].clone()),
                    },
                    batch_size=(*b, na),
                ),
                "state": out(world_state(rules, s)),
                "info": TensorDict({"battle_won": out(won[:, None])}, batch_size=b),
                "done": out(done[:, None]),
                "terminated": out(terminated[:, None]),
                "truncated": out(truncated[:, None]),
            },
            batch_size=b,
            device=self.device,
        )

    def _reset(self, td: TensorDictBase | None) -> TensorDictBase:
        mask = None if td is None else td.get("_reset", None)
        fresh = self._initial_state(self._n)
        if mask is None:
            self._state = fresh
        else:
            where = mask.reshape(self._n).to(self.device)
            for k, v in fresh.items():
                m = where.reshape(self._n, *(1,) * (v.dim() - 1))
                self._state[k] = torch.where(m, v, self._state[k])
        zeros = torch.zeros(self._n, dtype=torch.bool, device=self.device)
        return self._observe(zeros, zeros, zeros)

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        s, rules, na = self._state, self.rules, self.num_allies
        ally = td.get(("allies", "action")).to(self.device).long().reshape(self._n, na)
        noise = self._draw_noise()
        enemy, s["default_target"], s["last_attacked"] = heuristic_actions(
            rules,
            observe(rules, s, slice(na, None)),
            s["default_target"],
            s["last_attacked"],
            noise["u_target"],
            noise["u_attack"],
            shoot=self.enemy_shoots,
            attack_mode=self.enemy_attack_mode,
        )
        self.last_enemy_actions = enemy
        health_before = s["health"]
        rules.substeps(s, torch.cat([ally, enemy], 1), noise["cooldown"])
        terminated, truncated = rules.terminal(s, s["step"])
        s["step"] = s["step"] + 1
        won, _ = rules.outcome(s)
        out = self._observe(terminated, truncated, won & terminated)
        reward = rules.reward(s, health_before)
        out.set(
            ("allies", "reward"),
            reward[:, None, None].expand(self._n, na, 1).reshape(*self.batch_size, na, 1),
        )
        return out

    def _set_seed(self, seed: int | None) -> None:
        seed_generator(self._gen, seed)

    # ------------------------------------------------------------ render
    def render(self, mode: str = "rgb_array", env_index: int = 0, size: int = 256) -> np.ndarray:
        """An RGB picture ``[size, size, 3]`` uint8 of one sub-env, drawn with numpy.

        Allies are blue discs, enemies red, their radius the unit's; a bar above each
        living unit shows its health (green) over its maximum; dead units are small
        grey dots. North is up. ``mode`` is there for the signature of VMAS's, which
        the video writer calls: only ``"rgb_array"``.
        """
        if mode != "rgb_array":
            raise ValueError(f"SmaxEnv.render draws rgb_array frames only, got mode={mode!r}")
        n = max(1, self.batch_size.numel())
        if not isinstance(env_index, int) or not 0 <= env_index < n:
            raise ValueError(f"SmaxEnv.render: env_index must be in [0, {n}), got {env_index!r}")
        s = {k: v[env_index].detach().cpu().numpy() for k, v in self._state.items()}
        radius = self.rules.tab["radius"].cpu().numpy()
        max_hp = self.rules.tab["health"].cpu().numpy()
        img = np.full((size, size, 3), 235, dtype=np.uint8)
        scale = size / MAP_WIDTH
        yy, xx = np.mgrid[0:size, 0:size]
        for i in range(self.rules.n_units):  # drawing, not stepping: a loop is fine here
            x, y = s["positions"][i] * scale
            y = size - 1 - y
            t = int(s["unit_types"][i])
            if not s["alive"][i]:
                img[(xx - x) ** 2 + (yy - y) ** 2 <= 4] = (150, 150, 150)
                continue
            r = max(radius[t] * scale, 2.0)
            colour = (40, 90, 220) if i < self.num_allies else (210, 50, 40)
            img[(xx - x) ** 2 + (yy - y) ** 2 <= r * r] = colour
            frac = float(np.clip(s["health"][i] / max_hp[t], 0.0, 1.0))
            top, left = int(y - r - 4), int(x - r)
            width = max(int(2 * r), 2)
            if 0 <= top < size - 2:
                lo, hi = max(left, 0), min(left + width, size)
                img[top : top + 2, lo:hi] = (60, 60, 60)
                img[top : top + 2, lo : min(left + int(width * frac), size)] = (40, 180, 60)
        return img
