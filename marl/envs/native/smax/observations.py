"""SMAX's observations ("unit_list"), world state and legal-action masks, batched.

Ports of JaxMARL 0.2.0 ``SMAX.get_obs_unit_list`` (with ``_observe_features`` and
``_get_own_features``), ``get_world_state`` and ``get_avail_actions``.

A unit's observation lists the ``n - 1`` other units (:data:`UNIT_FEATURES` each:
health fraction, position relative to the observer divided by its sight range, last
movement vector, last attack action divided by the observed unit's largest action
index, weapon cooldown fraction, unit-type one-hot), all zero for a unit out of sight
or dead (or when the observer is dead), then its own :data:`OWN_FEATURES` (health
fraction, position divided by the map size, cooldown fraction, type one-hot; zero when
dead). Allies are listed by index; an enemy lists units in reverse index order, so that
each side sees its own team first.

Examples:
    >>> from marl.envs.native.smax.scenarios import SCENARIOS
    >>> from marl.envs.native.smax.world import Rules
    >>> rules = Rules(SCENARIOS["3m"], torch.device("cpu"))
    >>> obs_size(rules), state_size(rules)
    (75, 72)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from marl.envs.native.smax.units import NUM_MOVE_ACTIONS, NUM_UNIT_TYPES, OWN_FEATURES
from marl.envs.native.smax.units import UNIT_FEATURES as _UF
from marl.envs.native.smax.world import Rules, plane_norm

__all__ = ["avail_actions", "obs_size", "observe", "state_size", "world_state"]


def obs_size(rules: Rules) -> int:
    """Features of one unit's observation."""
    return _UF * (rules.n_units - 1) + OWN_FEATURES


def state_size(rules: Rules) -> int:
    """Features of the world state: per unit its own features, team and type."""
    return (OWN_FEATURES + 2) * rules.n_units


def _onehot(types: torch.Tensor) -> torch.Tensor:
    return F.one_hot(types, NUM_UNIT_TYPES).to(torch.float32)


def own_features(rules: Rules, s: dict, units: slice = slice(None)) -> torch.Tensor:
    """``_get_own_features`` of the ``units`` ``[N, len(units), OWN_FEATURES]``."""
    tab, types = rules.tab, s["unit_types"][:, units]
    feats = torch.cat(
        [
            (s["health"][:, units] / tab["health"][types])[..., None],
            s["positions"][:, units] / rules.map_size,
            (s["cooldowns"][:, units] / tab["weapon_cooldown"][types]).clamp(0.0, 1.0)[..., None],
            _onehot(types),
        ],
        -1,
    )
    return torch.where(s["alive"][:, units, None], feats, 0.0)


def observe(rules: Rules, s: dict, observers: slice = slice(None)) -> torch.Tensor:
    """The observations of the units in ``observers`` (default: all, allies first)
    ``[N, len(observers), obs_size]``.

    What a unit shows of itself does not depend on the observer but for its relative
    position, so those features are computed once per unit and gathered.
    """
    tab = rules.tab
    pos, types = s["positions"], s["unit_types"]
    order = rules.order[observers]  # [m, n-1]
    n_env, m = pos.shape[0], order.shape[0]
    attack = s["prev_attack"].to(torch.float32) / rules.max_action_of
    shown = torch.cat(  # [N, n, UNIT_FEATURES]: unit j as anyone sees it
        [
            (s["health"] / tab["health"][types])[..., None],
            torch.zeros_like(pos),  # the relative position, set per observer below
            s["prev_movement"],
            attack[..., None],
            (s["cooldowns"] / tab["weapon_cooldown"][types]).clamp(0.0, 1.0)[..., None],
            _onehot(types),
        ],
        -1,
    )
    feats = shown[:, order]  # [N, m, n-1, UNIT_FEATURES]
    own_pos = pos[:, observers, None]
    delta = pos[:, order] - own_pos
    sight = tab["sight_range"][types[:, observers]][..., None]  # [N, m, 1]
    feats[..., 1:3] = delta / sight[..., None]
    if not rules.see_enemy_actions:  # the enemies' last actions are hidden
        hidden = ~rules.same_team[observers]
        feats[..., 3:6] = torch.where(hidden[..., None], 0.0, feats[..., 3:6])
    alive = s["alive"]
    keep = (plane_norm(delta) < sight) & alive[:, observers, None] & alive[:, order]
    feats = torch.where(keep[..., None], feats, 0.0)
    return torch.cat([feats.reshape(n_env, m, -1), own_features(rules, s, observers)], -1)


def world_state(rules: Rules, s: dict) -> torch.Tensor:
    """``get_world_state`` ``[N, state_size]``: per unit (zero when dead) its health
    fraction, position, raw cooldown and type one-hot; then every unit's team, then
    its type (as floats)."""
    tab, types = rules.tab, s["unit_types"]
    feats = torch.cat(
        [
            (s["health"] / tab["health"][types])[..., None],
            s["positions"],
            s["cooldowns"][..., None],
            _onehot(types),
        ],
        -1,
    )
    feats = torch.where(s["alive"][..., None], feats, 0.0)
    n_env = feats.shape[0]
    teams = rules.teams.expand(n_env, -1)
    return torch.cat([feats.reshape(n_env, -1), teams, types.to(torch.float32)], -1)


def avail_actions(rules: Rules, s: dict) -> torch.Tensor:
    """The allies' legal actions ``[N, num_allies, num_enemies + 5]`` (bool).

    Stop is always legal (it is a dead unit's only action); a living unit may move
    and attack the living enemies within its attack range.
    """
    na = rules.na
    pos, alive = s["positions"], s["alive"]
    dist = plane_norm(pos[:, None, :] - pos[:, :na, None])  # [N, na, n]: unit j from ally i
    attack_range = rules.tab["attack_range"][s["unit_types"][:, :na]]
    shootable = (dist < attack_range[..., None]) & alive[:, None, :]
    shootable = shootable[:, :, na:] & alive[:, :na, None]
    moves = alive[:, :na, None].expand(-1, -1, NUM_MOVE_ACTIONS - 1)
    stop = torch.ones_like(moves[..., :1])
    return torch.cat([moves, stop, shootable], -1)
