"""SMAX's world rules, batched: the state, one world substep, walls and unit collisions.

The state is a dict of tensors with a leading flat env dim ``N`` (see :data:`STATE_KEYS`);
units are indexed allies first, then enemies, as in JaxMARL. Every function here is a
port of the method of JaxMARL 0.2.0's ``SMAX`` (``smax_env.py``) named in its docstring,
written so that float32 operations happen in the same order (the trace test compares
them to 1e-5).

Examples:
    >>> from marl.envs.native.smax.scenarios import SCENARIOS
    >>> rules = Rules(SCENARIOS["3m"], torch.device("cpu"))
    >>> rules.n_units, rules.num_ally_actions
    (6, 8)
"""

from __future__ import annotations

import torch

from marl.envs.native.smax.scenarios import Scenario
from marl.envs.native.smax.units import (
    DT,
    MAP_HEIGHT,
    MAP_WIDTH,
    NUM_MOVE_ACTIONS,
    move_vectors,
    unit_table,
)

__all__ = ["STATE_KEYS", "Rules", "plane_norm"]

# name -> (per-unit?, dtype); "default_target"/"last_attacked" are the heuristic
# enemy's policy state (one row per enemy), "step" the env step counter.
STATE_KEYS = {
    "positions": torch.float32,
    "alive": torch.bool,
    "health": torch.float32,
    "unit_types": torch.int64,
    "cooldowns": torch.float32,
    "prev_movement": torch.float32,
    "prev_attack": torch.int64,
    "step": torch.int64,
    "default_target": torch.float32,
    "last_attacked": torch.int64,
}


def plane_norm(x: torch.Tensor) -> torch.Tensor:
    """The Euclidean length of 2-vectors along the last dim, as SMAX computes it.

    Args:
        x: vectors, ``[..., 2]``.

    Returns:
        Their lengths, ``[...]``.
    """
    # jnp.linalg.norm of a 2-vector is sqrt(x0^2 + x1^2); torch's vector_norm may scale
    return torch.sqrt((x * x).sum(-1))


class Rules:
    """A scenario's constants and SMAX's world rules on batched states.

    Args:
        scenario: the team composition.
        device: where the tables live.
        walls_cause_death: units that touch the map's edge die.
        see_enemy_actions: observations show the enemies' last actions.
        use_self_play_reward: no damage reward, and a -bonus for a lost battle.
        won_battle_bonus: the reward for winning.
        max_steps: the time limit (see :meth:`terminal`).
    """

    def __init__(
        self,
        scenario: Scenario,
        device: torch.device,
        *,
        walls_cause_death: bool = True,
        see_enemy_actions: bool = True,
        use_self_play_reward: bool = False,
        won_battle_bonus: float = 1.0,
        max_steps: int = 100,
    ) -> None:
        self.scenario = scenario
        self.device = device
        self.na, self.ne = scenario.num_allies, scenario.num_enemies
        self.n_units = self.na + self.ne
        self.walls_cause_death = walls_cause_death
        self.see_enemy_actions = see_enemy_actions
        self.use_self_play_reward = use_self_play_reward
        self.won_battle_bonus = float(won_battle_bonus)
        self.max_steps = int(max_steps)
        self.num_ally_actions = self.ne + NUM_MOVE_ACTIONS
        self.num_enemy_actions = self.na + NUM_MOVE_ACTIONS
        self.tab = unit_table(device)
        self.moves = move_vectors(device)
        self.map_size = torch.tensor([MAP_WIDTH, MAP_HEIGHT], device=device)
        n = self.n_units
        self.index = torch.arange(n, device=device)
        self.eye = torch.eye(n, device=device)
        self.teams = (self.index >= self.na).to(torch.float32)
        # order[i]: the units unit i observes, in SMAX's order: an ally sees the others
        # by index, an enemy in reverse (so each side sees its own team first)
        order = [
            [j for j in range(n) if j != i]
            if i < self.na
            else [j for j in reversed(range(n)) if j != i]
            for i in range(n)
        ]
        self.order = torch.tensor(order, dtype=torch.long, device=device)
        is_ally = self.index < self.na
        self.same_team = is_ally[:, None] == is_ally[self.order]
        # the observed last attack is scaled by the observed unit's last action index
        self.max_action_of = torch.where(
            self.index < self.na,
            torch.tensor(float(self.num_ally_actions - 1), device=device),
            torch.tensor(float(self.num_enemy_actions - 1), device=device),
        )

    # ------------------------------------------------------------ actions
    def decode(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``_decode_discrete_actions``: movement vectors ``[N, n, 2]`` and attack actions
        (the action where it is an attack, else 0)."""
        move = self.moves[actions.clamp(max=NUM_MOVE_ACTIONS - 1)]
        attack = torch.where(actions > NUM_MOVE_ACTIONS - 1, actions, torch.zeros_like(actions))
        return move, attack

    # ------------------------------------------------------------ one substep
    def _plan(self, s: dict, actions: torch.Tensor, noise: torch.Tensor) -> dict:
        """What stays fixed over an env step's substeps (actions, unit types), computed
        once. Each value is the same float32 expression SMAX evaluates at every
        substep, so hoisting it changes no bit."""
        tab, types = self.tab, s["unit_types"]
        move, attack = self.decode(actions)
        k = attack - NUM_MOVE_ACTIONS
        target = torch.where(self.index < self.na, k + self.na, self.na - 1 - k)
        target = torch.where(attack < NUM_MOVE_ACTIONS, self.index.expand_as(attack), target)
        target = target.clamp(0, self.n_units - 1)
        r = tab["radius"][types]
        return {
            "move": move,
            "attack": attack,
            "step_vec": move * tab["velocity"][types][..., None] * DT,
            "target": target,
            "target2": target[..., None].expand(*target.shape, 2),
            "not_self": target != self.index,
            "range": tab["attack_range"][types],
            "damage": -tab["attack"][types],
            "cooldown": tab["weapon_cooldown"][types][:, None] + noise,  # [N, substeps, n]
            "radii": r[:, :, None] + r[:, None, :],
        }

    def world_step(self, s: dict, plan: dict, k: int) -> None:
        """``_world_step`` (in place): every unit moves and attacks at once, from the
        substep's start.

        An attack hits when the target is alive, in range, not the attacker itself, and
        the attacker's weapon is ready (cooldown <= 0); the weapon's cooldown then
        becomes the type's cooldown plus the noise of substep ``k`` (SMAX's uniform
        jitter in ``[-DT, 2 DT)``), otherwise it goes down by ``DT``. Damage from
        several attackers adds up; health stops at 0.
        """
        pos, alive, cooldowns = s["positions"], s["alive"], s["cooldowns"]
        new_pos = pos + plan["step_vec"]
        new_pos = torch.maximum(torch.minimum(new_pos, self.map_size), torch.zeros_like(new_pos))
        new_pos = torch.where(alive[..., None], new_pos, pos)

        target = plan["target"]
        target_pos = torch.gather(pos, 1, plan["target2"])
        valid = (
            (plane_norm(pos - target_pos) < plan["range"])
            & alive
            & torch.gather(alive, 1, target)
            & plan["not_self"]
            & (cooldowns <= 0.0)
        )
        damage = torch.where(valid, plan["damage"], 0.0)
        # cooldown - c, then c + that: not exactly `cooldown` in float32, as in SMAX
        cd_diff = torch.where(valid, plan["cooldown"][:, k] - cooldowns, -DT)
        s["health"] = s["health"].scatter_add(1, target, damage).clamp_min(0.0)
        s["positions"] = new_pos
        s["cooldowns"] = cooldowns + cd_diff

    def kill_at_walls(self, s: dict) -> None:
        """``_kill_agents_touching_walls``: health 0 at or beyond the map's edge."""
        if not self.walls_cause_death:
            return
        pos = s["positions"]
        touching = (pos <= 0.0).any(-1) | (pos >= self.map_size).any(-1)
        s["health"] = torch.where(touching, 0.0, s["health"])

    def push_units_away(self, s: dict, radii: torch.Tensor | None = None) -> None:
        """``_push_units_away``: overlapping living units move apart (firmness 1).

        ``radii`` ``[N, n, n]``: the sums of the units' radii, when already computed.
        """
        pos, alive = s["positions"], s["alive"]
        if radii is None:
            r = self.tab["radius"][s["unit_types"]]
            radii = r[:, :, None] + r[:, None, :]
        pair = alive[:, :, None] & alive[:, None, :]
        delta = pos[:, :, None] - pos[:, None, :]
        dist = plane_norm(delta) + self.eye + 1e-6
        overlap = torch.where(pair, torch.relu(radii / dist - 1.0), 0.0)
        pushed = pos + (delta * overlap[..., None]).sum(2) / 2
        s["positions"] = torch.where(alive[..., None], pushed, pos)

    def substeps(self, s: dict, actions: torch.Tensor, noise: torch.Tensor) -> None:
        """The ``world_steps_per_env_step`` substeps of ``step_env_no_decode`` (in place).

        Args:
            s: the state.
            actions: every unit's action ``[N, n]`` (allies', then enemies').
            noise: the cooldown jitter ``[N, substeps, n]``.
        """
        plan = self._plan(s, actions, noise)
        for k in range(noise.shape[1]):  # a fixed, small number of substeps
            self.world_step(s, plan, k)
            self.kill_at_walls(s)
            s["alive"] = s["health"] > 0
            self.push_units_away(s, plan["radii"])
        s["prev_movement"] = plan["move"]
        s["prev_attack"] = plan["attack"]

    # ------------------------------------------------------------ outcome
    def outcome(self, s: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Whether the allies won (every enemy dead, some ally alive) and lost (every
        ally dead), ``[N]`` each. Both can be False, or, in a draw, ``lost`` alone."""
        allies_dead = ~s["alive"][:, : self.na].any(-1)
        enemies_dead = ~s["alive"][:, self.na :].any(-1)
        return enemies_dead & ~allies_dead, allies_dead

    def terminal(self, s: dict, old_step: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``is_terminal``: ``(terminated, truncated)`` ``[N]``.

        SMAX checks the time limit on the step counter *before* it is incremented,
        so an episode that nobody wins lasts ``max_steps + 1`` steps.
        """
        allies_dead = ~s["alive"][:, : self.na].any(-1)
        enemies_dead = ~s["alive"][:, self.na :].any(-1)
        terminated = allies_dead | enemies_dead
        return terminated, (old_step >= self.max_steps) & ~terminated

    def reward(self, s: dict, health_before: torch.Tensor) -> torch.Tensor:
        """``compute_reward`` of the allies' team ``[N]``: the enemies' lost share of
        health (averaged over the enemies), plus the won-battle bonus."""
        types = s["unit_types"][:, self.na :]
        lost = (s["health"][:, self.na :] - health_before[:, self.na :]) / self.tab["health"][types]
        damage = lost.sum(-1).abs() / self.ne
        if self.use_self_play_reward:
            damage = torch.zeros_like(damage)
        won, allies_dead = self.outcome(s)
        enemies_dead = ~s["alive"][:, self.na :].any(-1)
        bonus = torch.where(won, self.won_battle_bonus, 0.0)
        if self.use_self_play_reward:
            malus = torch.where(allies_dead & ~enemies_dead, -self.won_battle_bonus, 0.0)
        else:
            malus = torch.zeros_like(bonus)
        return damage + bonus + malus
