"""SMAX's heuristic enemy policy, batched over envs and enemies.

A port of JaxMARL 0.2.0 ``create_heuristic_policy`` (``heuristic_enemy.py``) for team 1,
as ``HeuristicEnemySMAX`` runs it: each enemy reads its own "unit_list" observation and

- if some ally is visible and within its attack range, attacks: the one it attacked
  last while that one stays shootable, else the closest shootable one ("closest"
  mode) or a random one ("random" mode);
- otherwise moves (the one of the four directions closest to the target's direction)
  towards a random visible ally, or, when none is visible, towards its default target:
  its start position mirrored through the map's centre, fixed at its first step.

Its policy state per enemy is ``default_target`` ``[2]`` and ``last_attacked`` (-1 for
none). Positions are read back from the observation (scaled by the map size and the
sight range), as the reference does, so that the float32 values are the same.

The two random choices use the inverse-CDF rule of ``jax.random.choice`` with a
probability vector: with ``u`` uniform in ``[0, 1)``, the pick is the first index whose
cumulative probability reaches ``total * (1 - u)``. The ``u`` are inputs, so a trace's
draws can be replayed.

Examples:
    >>> from marl.envs.native.smax.scenarios import SCENARIOS
    >>> from marl.envs.native.smax.world import Rules
    >>> rules = Rules(SCENARIOS["3m"], torch.device("cpu"))
    >>> obs = torch.zeros(1, 3, 75)  # three dead enemies see nothing
    >>> act, target, last = heuristic_actions(
    ...     rules, obs, torch.zeros(1, 3, 2), torch.full((1, 3), -1), torch.rand(1, 3),
    ...     torch.rand(1, 3))
    >>> act.shape, last.tolist()
    (torch.Size([1, 3]), [[-1, -1, -1]])
"""

from __future__ import annotations

import math

import torch

from marl.envs.native.smax.units import (
    MAP_HEIGHT,
    MAP_WIDTH,
    NUM_MOVE_ACTIONS,
    NUM_UNIT_TYPES,
    UNIT_FEATURES,
)
from marl.envs.native.smax.world import Rules, plane_norm

__all__ = ["heuristic_actions"]

_MAP_DIAGONAL = math.sqrt(MAP_WIDTH**2 + MAP_HEIGHT**2)


def _choice(mask: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``jax.random.choice(key, K, p=mask / mask.sum())`` given its uniform draw ``u``.

    Args:
        mask: ``[..., K]`` bool.
        u: ``[...]`` uniform in ``[0, 1)``.

    Returns:
        ``[...]`` int64, clamped into ``[0, K)`` (garbage, but in range, where the mask
        is empty: the caller ignores it there, as the reference does).
    """
    p = mask.to(torch.float32)
    p = p / p.sum(-1, keepdim=True)
    cum = torch.cumsum(p, -1)
    r = cum[..., -1:] * (1 - u[..., None])
    idx = torch.searchsorted(cum.contiguous(), r.contiguous()).squeeze(-1)
    return idx.clamp(0, mask.shape[-1] - 1)


def heuristic_actions(
    rules: Rules,
    obs: torch.Tensor,
    default_target: torch.Tensor,
    last_attacked: torch.Tensor,
    u_target: torch.Tensor,
    u_attack: torch.Tensor,
    *,
    shoot: bool = True,
    attack_mode: str = "closest",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The enemies' actions and their new policy state.

    Args:
        rules: the scenario's rules.
        obs: the enemies' observations ``[N, num_enemies, obs_size]``.
        default_target: ``[N, num_enemies, 2]`` (zeros before the first step).
        last_attacked: ``[N, num_enemies]`` int64 (-1 before the first attack).
        u_target: ``[N, num_enemies]`` the uniform draw behind the random move target.
        u_attack: ``[N, num_enemies]`` the uniform draw behind the random attack target.
        shoot: whether the enemies attack at all.
        attack_mode: ``"closest"`` or ``"random"``.

    Returns:
        ``(actions, default_target, last_attacked)``: the actions ``[N, num_enemies]``
        (int64, in the enemies' numbering: 5 + k attacks ally ``num_allies - 1 - k``).
    """
    na, n = rules.na, rules.n_units
    tab = rules.tab
    own_at = (n - 1) * UNIT_FEATURES
    first_enemy = (rules.ne - 1) * UNIT_FEATURES  # the allies, as the enemies see them
    # the first set type bit (0 where none is: a dead unit's zeroed observation)
    bits = obs[..., -NUM_UNIT_TYPES:] != 0
    unit_type = torch.where(bits.any(-1), bits.to(torch.int8).argmax(-1), 0).long()
    initial = (default_target == 0).all(-1) & (last_attacked == -1)

    own_pos = obs[..., own_at + 1 : own_at + 3] * rules.map_size
    others = obs[..., first_enemy:own_at].reshape(*obs.shape[:-1], na, UNIT_FEATURES)
    sight = tab["sight_range"][unit_type][..., None, None]
    target_pos = others[..., 1:3] * sight  # relative to the enemy
    visible = others[..., 0] > 0
    dist = plane_norm(target_pos)
    shootable = (dist < tab["attack_range"][unit_type][..., None]) & visible
    can_shoot = shootable.any(-1)

    random_attack = _choice(shootable, u_attack)
    closest = torch.where(shootable, dist, torch.full_like(dist, _MAP_DIAGONAL)).argmin(-1)
    new_attack = random_attack if attack_mode == "random" else closest
    last = last_attacked.clamp(min=0)
    keep = (last_attacked != -1) & torch.gather(shootable, -1, last[..., None]).squeeze(-1)
    attacked = torch.where(keep, last, new_attack)
    still = torch.gather(shootable, -1, attacked[..., None]).squeeze(-1)
    last_attacked = torch.where(still, attacked, torch.full_like(attacked, -1))

    pick = _choice(visible, u_target)
    chase = torch.gather(
        target_pos + own_pos[..., None, :], -2, pick[..., None, None].expand(*pick.shape, 1, 2)
    ).squeeze(-2)
    centre = rules.map_size / 2
    mirrored = -(own_pos - centre) + centre
    default_target = torch.where(initial[..., None], mirrored, default_target)
    target = torch.where(visible.any(-1)[..., None], chase, default_target)
    v = target - own_pos
    # dot products with (0, 1), (1, 0), (0, -1), (-1, 0); argmax takes the first maximum
    similarity = torch.stack([v[..., 1], v[..., 0], -v[..., 1], -v[..., 0]], -1)
    move = similarity.argmax(-1)
    attack_action = attacked + NUM_MOVE_ACTIONS
    act = torch.where(can_shoot & shoot, attack_action, move)
    return act, default_target, last_attacked
