"""SMAX, StarCraft-style micromanagement without the game: a batched torch port of
JaxMARL 0.2.0's SMAX.

The reference is ``jaxmarl/environments/smax/`` of the ``jaxmarl==0.2.0`` wheel:
``smax_env.py`` (the world, observations, rewards), ``heuristic_enemy.py`` (the enemy
policy), ``heuristic_enemy_smax_env.py`` (``HeuristicEnemySMAX``: the allies against
the heuristic enemy) and ``distributions.py`` (the SMACv2-style start distributions).
Its rules are the specification; ``tests/envs/native/test_smax_traces.py`` replays
traces recorded from it (``benchmarks/crosscheck/smax_traces.py``) step by step.

The rules, in short: two teams of units (6 types, :mod:`.units`; no shields) on a
32x32 map. An env step is 8 world substeps of 1/16 s in which every unit moves (at its
type's speed, in one of four directions) or attacks (a living enemy within its attack
range, when its weapon has cooled down; the cooldown is the type's plus a uniform
jitter in ``[-1/16, 2/16)``), all at once; units at the map's edge die; overlapping
units push each other apart. The enemies follow the heuristic policy
(:mod:`.heuristic`). The allies' reward is the enemies' health lost, as a fraction of
their total, averaged over the enemies, plus 1 for winning; an episode ends when one
side is all dead or at the time limit.

Files: :mod:`.units` (unit types, constants), :mod:`.scenarios` (maps and start
distributions), :mod:`.world` (the substep physics, rewards, end), :mod:`.observations`
(observations, world state, action masks), :mod:`.heuristic` (the enemy policy),
:mod:`.env` (:class:`SmaxEnv`).

Deliberate differences from the reference:

- Random numbers come from torch generators, not JAX keys: the same seed gives other
  battles. The step's draws (the heuristic's two ``choice`` uniforms per enemy, the
  cooldown jitter per substep and unit) keep their distributions and can be injected
  (:meth:`SmaxEnv.inject_noise`), which the trace test does; the reset distributions
  keep theirs (checked by summary tests, not draw for draw).
- The time limit is SMAX's, off-by-one included (an undecided episode lasts
  ``max_steps + 1`` steps), but it is reported as ``truncated``, the side's defeat as
  ``terminated`` (SMAX has a single ``done``).
- The global ``"state"`` is SMAX's ``get_world_state`` (``obs["world_state"]``), the
  same for every ally. JaxMARL 0.2.0's wheel has no ``SMAXWorldStateWrapper``: that
  wrapper lives in JaxMARL's MAPPO baseline script and repeats this vector per agent,
  optionally with a one-hot agent id, which marl's models add themselves.
- Only discrete actions and "unit_list" observations ("continuous" actions and "conic"
  observations are refused with an error); only the heuristic enemy (no learned or
  self-play enemy).
- Dead allies keep SMAX's layout: they stay in the group, ``("allies", "mask")`` is
  False for them and stop is their only legal action.

Examples:
    >>> env = SmaxEnv("2s3z", num_envs=4, seed=0)
    >>> td = env.rollout(3)
    >>> td["allies", "observation"].shape
    torch.Size([4, 3, 5, 127])
"""

from __future__ import annotations

from marl.envs.native.smax.env import SmaxEnv
from marl.envs.native.smax.scenarios import SCENARIOS, Scenario
from marl.envs.native.smax.units import UNIT_TYPES, UnitType

__all__ = ["SCENARIOS", "UNIT_TYPES", "Scenario", "SmaxEnv", "UnitType"]
