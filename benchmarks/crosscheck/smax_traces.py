"""Record JaxMARL 0.2.0 SMAX traces: the fixtures of ``tests/envs/native/test_smax_traces.py``.

Run with the jax venv's python (``bash benchmarks/crosscheck/setup_jax_venv.sh`` makes it)::

    ~/.cache/marl-crosscheck/jax-venv/bin/python benchmarks/crosscheck/smax_traces.py

For each scenario it plays ``HeuristicEnemySMAX`` (the heuristic enemy, attack mode
"closest") with random legal ally actions (biased towards focused fire in some scenarios, so that
some battles are won: see ``pick_actions``), and stores per step: the full state before (the SMAX state and the heuristic's
policy state), the ally actions, the heuristic enemy's actions, every random number the
step drew, the next state, the allies' observations, the world state, rewards, dones and
the action masks before and after. One compressed ``.npz`` per scenario under
``tests/envs/data/smax/``.

The step's randomness is recorded, not re-drawn: JaxMARL's keys are split here exactly as
``EnemySMAX.step_env`` / ``SMAX.step_env_no_decode`` / the heuristic split them, and the
uniform numbers behind them are stored: per enemy the two ``jax.random.choice`` uniforms
of the heuristic (movement target among the visible enemies, and the attack target in
"random" mode) and per world substep and unit the weapon-cooldown jitter. The native env
replays them through its ``_noise`` hook. Whether the derivation here is right is checked
by the replay itself: a wrong draw shows as a different target or cooldown.

The episodes are stepped with ``step_env`` (no auto-reset) and reset by hand with fresh
keys, so that each stored step is one transition.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jaxmarl.environments.smax import HeuristicEnemySMAX, Scenario, map_name_to_scenario

OUT = Path(__file__).resolve().parents[2] / "tests" / "envs" / "data" / "smax"

# A scenario of JaxMARL's map, or (unit types, allies, enemies) for a custom one
# (JaxMARL's register_scenario; SmaxEnv takes a Scenario too): 4 marines against 3
# win often, which the named scenarios rarely do against the heuristic.
CUSTOM = {"4m_vs_3m": ((0,) * 7, 4, 3)}
# The SMAX options of the last case (and HeuristicEnemySMAX's attack_mode).
OPTIONS = {
    "attack_mode": "random",
    "see_enemy_actions": False,
    "walls_cause_death": False,
    "use_self_play_reward": True,
}
# (file tag, scenario, max_steps, steps recorded, seed, focus: see pick_actions[, options])
CASES = [
    ("3m", "3m", 100, 450, 0, 0.95),
    ("4m_vs_3m", "4m_vs_3m", 100, 250, 8, 0.9),
    ("3m_short", "3m", 12, 150, 1, 0.0),
    ("2s3z", "2s3z", 100, 350, 2, 0.8),
    ("3s5z_vs_3s6z", "3s5z_vs_3s6z", 60, 250, 3, 0.5),
    ("6h_vs_8z", "6h_vs_8z", 100, 250, 4, 0.5),
    ("5m_vs_6m", "5m_vs_6m", 100, 200, 5, 0.8),
    ("smacv2_5_units", "smacv2_5_units", 100, 400, 6, 0.6),
    ("smacv2_10_units", "smacv2_10_units", 40, 150, 7, 0.3),
    ("2s3z_options", "2s3z", 100, 200, 9, 0.5, OPTIONS),
]

STATE_FIELDS = (
    "unit_positions",
    "unit_alive",
    "unit_teams",
    "unit_health",
    "unit_types",
    "unit_weapon_cooldowns",
    "prev_movement_actions",
    "prev_attack_actions",
    "step",
)


def make_aux(env):
    """The jitted recorder of a step's random numbers and the heuristic enemy's actions.

    Mirrors the key splits of ``EnemySMAX.step_env`` (``key, action_key = split(key)``),
    ``HeuristicEnemySMAX.get_enemy_actions`` (``split(action_key, num_enemies)``), the
    heuristic (``key, key_attack = split(key)``; ``choice`` draws ``uniform(key, ())``)
    and ``SMAX.step_env_no_decode``'s scan (``step_key, world_step_key = split(step_key)``,
    ``split(world_step_key, num_agents)``, ``uniform(k, minval=-dt, maxval=2 dt)``).
    """
    inner = env._env
    dt = inner.time_per_step

    @jax.jit
    def aux(key, state):
        key, action_key = jax.random.split(key)
        enemy_obs = inner.get_obs_unit_list(state.state)
        enemy_obs = jnp.array([enemy_obs[a] for a in env.enemy_agents])
        enemy_actions, _ = env.get_enemy_actions(action_key, state.enemy_policy_state, enemy_obs)
        enemy_actions = jnp.array([enemy_actions[a] for a in env.enemy_agents])
        per_enemy = jax.random.split(action_key, num=env.num_enemies)

        def draws(k):
            k, k_attack = jax.random.split(k)
            return jax.random.uniform(k, ()), jax.random.uniform(k_attack, ())

        u_target, u_attack = jax.vmap(draws)(per_enemy)

        def substep(step_key, _):
            step_key, world_key = jax.random.split(step_key)
            keys = jax.random.split(world_key, num=inner.num_agents)
            dev = jax.vmap(lambda k: jax.random.uniform(k, minval=-dt, maxval=2 * dt))(keys)
            return step_key, dev

        _, cooldown_noise = jax.lax.scan(substep, key, None, length=inner.world_steps_per_env_step)
        return enemy_actions, u_target, u_attack, cooldown_noise

    return aux


def flat_state(state) -> dict[str, np.ndarray]:
    s = state.state
    out = {f: np.asarray(getattr(s, f)) for f in STATE_FIELDS}
    out["default_target"] = np.asarray(state.enemy_policy_state.default_target)
    out["last_attacked_enemy"] = np.asarray(state.enemy_policy_state.last_attacked_enemy)
    return out


def pick_actions(
    rng: np.random.Generator, masks: np.ndarray, n_move: int, focus: float
) -> np.ndarray:
    """Random legal actions, biased so that some battles are won.

    With probability ``focus`` an agent that can attack attacks the legal target of
    lowest index (the team focuses its fire), and one that cannot holds its position
    (stop, always legal), so that the enemies come to it; otherwise it takes a uniformly
    random legal action.
    """
    actions = np.zeros(len(masks), np.int32)
    for i, m in enumerate(masks):
        legal = np.flatnonzero(m)
        attacks = legal[legal >= n_move]
        if rng.random() < focus:
            actions[i] = attacks[0] if len(attacks) else 4
        else:
            actions[i] = rng.choice(legal)
    return actions


def record(
    tag: str,
    scenario: str,
    max_steps: int,
    steps: int,
    seed: int,
    focus: float,
    options: dict | None = None,
) -> dict[str, int]:
    if scenario in CUSTOM:
        types, n_allies, n_enemies = CUSTOM[scenario]
        spec = Scenario(jnp.array(types, dtype=jnp.uint8), n_allies, n_enemies, False, False)
    else:
        spec = map_name_to_scenario(scenario)
    env = HeuristicEnemySMAX(scenario=spec, max_steps=max_steps, **(options or {}))
    inner = env._env
    aux = make_aux(env)
    step = jax.jit(env.step_env)
    reset = jax.jit(env.reset)
    avail = jax.jit(env.get_avail_actions)
    rng = np.random.default_rng(seed)
    key = jax.random.PRNGKey(seed)
    key, k = jax.random.split(key)
    _, state = reset(k)
    rows: dict[str, list[np.ndarray]] = {}
    ends = {"won": 0, "lost": 0, "draw": 0, "time_limit": 0}

    def add(name, value):
        rows.setdefault(name, []).append(np.asarray(value))

    for _ in range(steps):
        masks = avail(state)
        mask_before = np.stack([np.asarray(masks[a]) for a in env.agents]).astype(bool)
        actions = pick_actions(rng, mask_before, inner.num_movement_actions, focus)
        key, k = jax.random.split(key)
        enemy_actions, u_target, u_attack, noise = aux(k, state)
        before = flat_state(state)
        obs, state, rewards, dones, _ = step(
            k, state, {a: jnp.int32(actions[i]) for i, a in enumerate(env.agents)}
        )
        after = flat_state(state)
        masks = avail(state)
        for f, v in before.items():
            add("s_" + f, v)
        for f, v in after.items():
            add("n_" + f, v)
        add("ally_actions", actions)
        add("enemy_actions", enemy_actions)
        add("u_target", u_target)
        add("u_attack", u_attack)
        add("cooldown_noise", noise)
        add("obs", np.stack([np.asarray(obs[a]) for a in env.agents]))
        add("world_state", obs["world_state"])
        add("reward", np.stack([np.asarray(rewards[a]) for a in env.agents]))
        add("agent_done", np.stack([np.asarray(dones[a]) for a in env.agents]))
        add("done", dones["__all__"])
        add("mask_before", mask_before)
        add("mask_after", np.stack([np.asarray(masks[a]) for a in env.agents]).astype(bool))
        if bool(dones["__all__"]):
            alive = after["unit_alive"]
            allies, enemies = alive[: inner.num_allies].any(), alive[inner.num_allies :].any()
            if allies and not enemies:
                ends["won"] += 1
            elif enemies and not allies:
                ends["lost"] += 1
            elif not allies and not enemies:
                ends["draw"] += 1
            else:
                ends["time_limit"] += 1
            key, k = jax.random.split(key)
            _, state = reset(k)
    arrays = {}
    for name, vals in rows.items():
        a = np.stack(vals)
        if a.dtype == np.float64:
            a = a.astype(np.float32)
        arrays[name] = a
    arrays["scenario"] = np.array(scenario)
    if scenario in CUSTOM:
        arrays["custom_unit_types"] = np.array(CUSTOM[scenario][0])
        arrays["custom_teams"] = np.array(CUSTOM[scenario][1:])
    arrays["max_steps"] = np.array(max_steps)
    arrays["options"] = np.array(json.dumps(options or {}))
    OUT.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT / f"{tag}.npz", **arrays)
    size = os.path.getsize(OUT / f"{tag}.npz")
    print(f"{tag}: {steps} steps, ends {ends}, {size / 1e3:.0f} kB", flush=True)
    return ends


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="file tags to record (default: all)")
    args = parser.parse_args()
    print(f"jax {jax.__version__}, jaxmarl {importlib.metadata.version('jaxmarl')}")
    for case in CASES:
        if args.only and case[0] not in args.only:
            continue
        record(*case)


if __name__ == "__main__":
    main()
