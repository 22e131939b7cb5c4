"""MAgent2Env's engine path (team arrays) against the PettingZoo path, value for value.

``magent2_env`` steps through the engine's per-team arrays (MAgent2Env.step_arrays);
``engine_arrays = False`` steps through MAgent2's PettingZoo dicts, as the generic
PettingZoo wrapper does. Both must give the same rollouts on every task and option:
observations (with the minimap and extra-feature channels), rewards, masks of the
dead, per-agent and env-level flags across deaths, game over and truncation.
"""

from __future__ import annotations

import pytest
import torch

from marl.envs import SerialEnv, magent2_env

pytest.importorskip("magent2")


def _attacking_policy(seed: int):
    """Random actions, 60% of them attacks (battle's actions 13-20): agents die, a team
    is wiped out and the game ends (random play alone rarely kills)."""
    gen = torch.Generator().manual_seed(seed)

    def policy(td):
        for g in ("red", "blue"):
            n = td[g, "observation"].shape[0]
            any_action = torch.randint(0, 21, (n,), generator=gen)
            attack = torch.randint(13, 21, (n,), generator=gen)
            td[g, "action"] = torch.where(torch.rand(n, generator=gen) < 0.6, attack, any_action)
        return td

    return policy


def _rollout(task, engine, steps, num_envs=None, policy=None, **kwargs):
    def make(**extra):
        env = magent2_env(task, **kwargs, **extra)
        env.engine_arrays = engine
        return env

    if num_envs is None:
        env = make(seed=3)
    else:
        env = SerialEnv(num_envs, make, {})
        env.set_seed(3)
    td = env.rollout(steps, policy, break_when_any_done=False)
    base = env if num_envs is None else env.envs[0]
    return td, base._plan is not None


def _assert_same(a, b):
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in b.keys(True, True):
        x, y = a[key], b[key]
        assert (x.dtype, x.shape) == (y.dtype, y.shape), key
        assert torch.equal(x, y), f"{key} differs"


CASES = {
    "battle": ("battle_v4", {"map_size": 16, "max_cycles": 30}),
    "battle_minimap": ("battle_v4", {"map_size": 16, "max_cycles": 60, "minimap_mode": True}),
    "battle_extra_state": (
        "battle_v4",
        {"map_size": 16, "max_cycles": 60, "extra_features": True, "return_state": True},
    ),
    "battle_minimap_extra": (
        "battle_v4",
        {"map_size": 16, "max_cycles": 60, "minimap_mode": True, "extra_features": True},
    ),
    "battle_one_hot": (
        "battle_v4",
        {"map_size": 16, "max_cycles": 50, "categorical_actions": False},
    ),
    "battle_groups_within_teams": (
        "battle_v4",
        {
            "map_size": 16,
            "max_cycles": 50,
            "group_map": {
                "a": ["red_3", "red_0"],
                "b": ["red_1", "red_2", "red_4", "red_5"],
                "c": [f"blue_{i}" for i in range(6)],
            },
        },
    ),
    "gather": ("gather_v5", {"max_cycles": 40}),
    "combined_arms": ("combined_arms_v6", {"map_size": 16, "max_cycles": 50}),
    "tiger_deer": ("tiger_deer_v4", {"map_size": 10, "max_cycles": 50}),
    "adversarial_pursuit": ("adversarial_pursuit_v4", {"map_size": 16, "max_cycles": 50}),
    "battlefield": ("battlefield_v5", {"map_size": 46, "max_cycles": 50}),
}


@pytest.mark.parametrize("num_envs", [None, 3], ids=["one_env", "serial_3"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_engine_path_equals_the_pettingzoo_path(case, num_envs):
    task, kwargs = CASES[case]
    steps = 120 if num_envs is None else 60
    fast, used = _rollout(task, True, steps, num_envs, **kwargs)
    slow, _ = _rollout(task, False, steps, num_envs, **kwargs)
    assert used, "the engine path should apply to groups within one team"
    assert slow["next", "done"].any()  # at least one episode ends (and resets) in each
    _assert_same(fast, slow)


def test_engine_path_equals_the_pettingzoo_path_through_deaths_and_game_over():
    """Attacks kill agents mid-episode and wipe a team out: terminated flags (sticky),
    masks and zero observations of the dead, the game-over step, the reset after it."""
    kwargs = {"map_size": 12, "max_cycles": 3000}
    fast, used = _rollout("battle_v4", True, 2200, policy=_attacking_policy(0), **kwargs)
    slow, _ = _rollout("battle_v4", False, 2200, policy=_attacking_policy(0), **kwargs)
    assert used
    nxt = slow["next"]
    assert nxt["terminated"].any()  # a team wiped out: game over
    assert (~nxt["red", "mask"]).any() and (~nxt["blue", "mask"]).any()
    _assert_same(fast, slow)


def test_groups_across_teams_step_through_pettingzoo():
    kwargs = {"map_size": 16, "max_cycles": 20, "group_map": "all_in_one"}
    fast, used = _rollout("battle_v4", True, 30, **kwargs)
    slow, _ = _rollout("battle_v4", False, 30, **kwargs)
    assert not used
    _assert_same(fast, slow)


def test_reset_counts_each_team_after_the_map_is_built():
    """MAgent2 0.3.4's reset counts the teams before adding their agents (``team_sizes``
    [0, 0]), so its next step hands the engine empty action arrays; the wrapper recounts."""
    env = magent2_env("battle_v4", seed=0, map_size=16, max_cycles=10)
    env.reset()
    assert env.pettingzoo_env.team_sizes == [6, 6]
    env.engine_arrays = False
    env.reset()
    assert env.pettingzoo_env.team_sizes == [6, 6]
