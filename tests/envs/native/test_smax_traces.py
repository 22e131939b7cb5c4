"""SmaxEnv against JaxMARL 0.2.0's SMAX, step by step, from recorded traces.

The fixtures in ``tests/envs/data/smax/`` come from
``benchmarks/crosscheck/smax_traces.py`` (run in the jax venv of
``benchmarks/crosscheck/setup_jax_venv.sh``); this test needs only torch and numpy.
Each file holds the transitions of several episodes of ``HeuristicEnemySMAX``: the
state before, the ally actions, the heuristic enemy's actions, the step's random draws,
the state after, and the observations, world state, rewards, dones and action masks.

Every recorded transition is replayed at once, as one batch of sub-envs: the native
state is set from the trace, the trace's draws are injected, and one step is taken.
The native heuristic must choose the same enemy actions; states, observations, world
state and rewards must agree within 1e-5 (absolute; values are at most 32), integers
and flags exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from marl.envs.native.smax import Scenario, SmaxEnv

DATA = Path(__file__).resolve().parents[1] / "data" / "smax"
FILES = sorted(DATA.glob("*.npz"))
ATOL = 1e-5

# native state key -> the trace's field (SMAX's State, then the heuristic's policy state)
FIELDS = {
    "positions": "unit_positions",
    "alive": "unit_alive",
    "health": "unit_health",
    "unit_types": "unit_types",
    "cooldowns": "unit_weapon_cooldowns",
    "prev_movement": "prev_movement_actions",
    "prev_attack": "prev_attack_actions",
    "step": "step",
    "default_target": "default_target",
    "last_attacked": "last_attacked_enemy",
}


def _state(d, prefix: str) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(np.asarray(d[prefix + f])) for k, f in FIELDS.items()}


def _close(name: str, got: torch.Tensor, want: np.ndarray, exact: bool = False) -> None:
    got = got.detach().cpu().numpy()
    want = np.asarray(want)
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    bad = got != want if exact else np.abs(got.astype(np.float64) - want.astype(np.float64)) > ATOL
    if bad.any():
        rows = np.flatnonzero(bad.reshape(len(bad), -1).any(1))
        err = np.abs(got.astype(np.float64) - want.astype(np.float64)).max()
        pytest.fail(f"{name}: {len(rows)} transitions differ (first {rows[:5]}), max error {err}")


def _load(path: Path):
    d = np.load(path)
    steps = len(d["ally_actions"])
    scenario = str(d["scenario"])
    if "custom_unit_types" in d:  # a scenario of the recorder's own (register_scenario)
        na, ne = (int(x) for x in d["custom_teams"])
        scenario = Scenario(tuple(int(t) for t in d["custom_unit_types"]), na, ne)
    options = json.loads(str(d["options"]))
    if "attack_mode" in options:  # HeuristicEnemySMAX's name for it
        options["enemy_attack_mode"] = options.pop("attack_mode")
    env = SmaxEnv(scenario, num_envs=steps, max_steps=int(d["max_steps"]), seed=0, **options)
    return d, env, steps


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_replay_transitions(path: Path) -> None:
    d, env, steps = _load(path)
    na = env.num_allies
    before = env.set_state(_state(d, "s_"))
    _close("action mask before", before["allies", "action_mask"], d["mask_before"], exact=True)
    env.inject_noise(
        torch.as_tensor(d["u_target"]),
        torch.as_tensor(d["u_attack"]),
        torch.as_tensor(d["cooldown_noise"]),
    )
    actions = torch.as_tensor(d["ally_actions"]).long()
    td = TensorDict({"allies": {"action": actions}}, batch_size=[steps])
    out = env.step(td)["next"]
    _close("heuristic enemy actions", env.last_enemy_actions, d["enemy_actions"], exact=True)
    after = env.get_state()
    for key, field in FIELDS.items():
        exact = after[key].dtype in (torch.bool, torch.int64)
        _close(f"state {key}", after[key], d["n_" + field], exact=exact)
    _close("observation", out["allies", "observation"], d["obs"])
    _close("world state", out["state"], d["world_state"])
    _close("reward", out["allies", "reward"][..., 0], d["reward"])
    _close("done", out["done"][:, 0], d["done"], exact=True)
    _close("alive mask", ~out["allies", "mask"], d["agent_done"], exact=True)
    _close("action mask after", out["allies", "action_mask"], d["mask_after"], exact=True)
    alive = np.asarray(d["n_unit_alive"])
    allies, enemies = alive[:, :na].any(1), alive[:, na:].any(1)
    won = np.asarray(d["done"]) & allies & ~enemies
    _close("battle_won", out["info", "battle_won"][:, 0], won, exact=True)
    _close("terminated", out["terminated"][:, 0], ~(allies & enemies), exact=True)
    _close("truncated", out["truncated"][:, 0], np.asarray(d["done"]) & allies & enemies, True)


def test_replay_episode_sequentially() -> None:
    """The first episode of the 3m trace, stepped from its first state only: the env
    carries its own state (heuristic policy state included) from step to step."""
    d, _, _ = _load(DATA / "3m.npz")
    env = SmaxEnv("3m", max_steps=int(d["max_steps"]), seed=0)
    env.set_state({k: v[0] for k, v in _state(d, "s_").items()})
    t = 0
    while True:
        env.inject_noise(
            torch.as_tensor(d["u_target"][t]),
            torch.as_tensor(d["u_attack"][t]),
            torch.as_tensor(d["cooldown_noise"][t]),
        )
        td = TensorDict({"allies": {"action": torch.as_tensor(d["ally_actions"][t]).long()}})
        out = env.step(td)["next"]
        assert env.last_enemy_actions[0].tolist() == d["enemy_actions"][t].tolist(), t
        state = env.get_state()
        for key, field in FIELDS.items():
            _close(f"step {t}: {key}", state[key][None], d["n_" + field][t : t + 1])
        _close(f"step {t}: observation", out["allies", "observation"][None], d["obs"][t : t + 1])
        if d["done"][t]:
            break
        t += 1
    assert t > 5


def test_trace_coverage() -> None:
    """The fixtures hold >= 2000 transitions, deaths, and every kind of episode end."""
    ends = {"won": 0, "lost": 0, "time limit": 0}
    total = 0
    for path in FILES:
        d = np.load(path)
        na = int(d["reward"].shape[1])
        alive = np.asarray(d["n_unit_alive"])
        done = np.asarray(d["done"])
        allies, enemies = alive[:, :na].any(1), alive[:, na:].any(1)
        ends["won"] += int((done & allies & ~enemies).sum())
        ends["lost"] += int((done & ~allies).sum())
        ends["time limit"] += int((done & allies & enemies).sum())
        total += len(done)
    assert total >= 2000
    assert all(v > 0 for v in ends.values()), ends
    assert sum(p.stat().st_size for p in FILES) < 5e6
