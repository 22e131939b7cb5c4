"""SmaxEnv: specs, resets, arguments, devices and a few rules on hand-made states.

Step-by-step agreement with JaxMARL's SMAX is ``test_smax_traces.py``'s job.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from marl.envs import check_env_specs
from marl.envs.native.smax import SCENARIOS, Scenario, SmaxEnv

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ),
]


@pytest.mark.parametrize(
    "scenario", ["3m", "2s3z", "3s5z_vs_3s6z", "6h_vs_8z", "smacv2_5_units", "smacv2_10_units"]
)
def test_check_env_specs(scenario: str) -> None:
    check_env_specs(SmaxEnv(scenario, num_envs=3, seed=0), steps=4)


def test_check_env_specs_unbatched_and_options() -> None:
    check_env_specs(SmaxEnv("3m", seed=0), steps=4)
    env = SmaxEnv(
        "5m_vs_6m",
        num_envs=2,
        seed=1,
        enemy_attack_mode="random",
        use_self_play_reward=True,
        see_enemy_actions=False,
        walls_cause_death=False,
    )
    check_env_specs(env, steps=4)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_shapes(name: str) -> None:
    s = SCENARIOS[name]
    env = SmaxEnv(name, num_envs=2, seed=0)
    td = env.reset()
    n = s.num_allies + s.num_enemies
    assert td["allies", "observation"].shape == (2, s.num_allies, 13 * (n - 1) + 10)
    assert td["allies", "action_mask"].shape == (2, s.num_allies, s.num_enemies + 5)
    assert td["state"].shape == (2, 12 * n)
    assert td["allies", "mask"].all()
    assert env.group_map.to_dict() == {"allies": [f"ally_{i}" for i in range(s.num_allies)]}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"unknown scenario '4z'.*3m.*smacv2_20_units"):
        SmaxEnv("4z")
    with pytest.raises(ValueError, match="only 'discrete'"):
        SmaxEnv("3m", action_type="continuous")
    with pytest.raises(ValueError, match="only 'unit_list'"):
        SmaxEnv("3m", observation_type="conic")
    with pytest.raises(ValueError, match="num_envs"):
        SmaxEnv("3m", num_envs=0)
    with pytest.raises(ValueError, match="max_steps"):
        SmaxEnv("3m", max_steps=0)
    with pytest.raises(ValueError, match="enemy_attack_mode"):
        SmaxEnv("3m", enemy_attack_mode="weakest")
    with pytest.raises(ValueError, match="one group, 'allies'"):
        SmaxEnv("3m", group_map={"a": ["ally_0"], "b": ["ally_1", "ally_2"]})
    with pytest.raises(ValueError, match="one unit type per unit"):
        SmaxEnv(Scenario((0, 0), 2, 1))
    with pytest.raises(ValueError, match="unit types must lie"):
        SmaxEnv(Scenario((0, 9, 0), 2, 1))
    env = SmaxEnv("3m", group_map={"allies": ["ally_0", "ally_1", "ally_2"]})
    with pytest.raises(KeyError, match="missing 'health'"):
        env.set_state(env.get_state().exclude("health"))
    bad = env.get_state()
    bad["positions"] = torch.zeros(7, 2)
    with pytest.raises(ValueError, match="'positions' has shape"):
        env.set_state(bad)


def test_custom_scenario() -> None:
    env = SmaxEnv(Scenario((3, 3, 0, 0, 0), 2, 3), num_envs=2, seed=0)
    assert env.scenario == "custom"
    check_env_specs(env, steps=3)


def test_seeding_reproduces() -> None:
    a = SmaxEnv("2s3z", num_envs=4, seed=3).rollout(20, break_when_any_done=False)
    b = SmaxEnv("2s3z", num_envs=4, seed=3).rollout(20, break_when_any_done=False)
    assert (a == b).all()


def test_partial_reset() -> None:
    env = SmaxEnv("3m", num_envs=4, seed=0)
    td = env.rollout(10, break_when_any_done=False)
    before = env.get_state()
    root = td[:, -1]["next"].exclude(("allies", "reward"))
    root["_reset"] = torch.tensor([[True], [False], [True], [False]])
    out = env.reset(root)
    after = env.get_state()
    keep = torch.tensor([1, 3])
    for key in before.keys():
        assert (after[key][keep] == before[key][keep]).all(), key
    assert (after["step"][[0, 2]] == 0).all()
    assert after["alive"][[0, 2]].all()
    assert (after["last_attacked"][[0, 2]] == -1).all()
    assert (after["default_target"][[0, 2]] == 0).all()
    assert (out["allies", "observation"][keep] == root["allies", "observation"][keep]).all()
    assert not out["done"][[0, 2]].any()
    assert out["done"][keep].equal(root["done"][keep])


def test_time_limit_and_flags() -> None:
    # SMAX checks the limit before counting the step: max_steps + 1 steps
    env = SmaxEnv("3m", num_envs=2, seed=0, max_steps=3, enemy_shoots=False)
    data = env.rollout(4, break_when_any_done=False)
    done = data["next", "done"][..., 0]
    assert done[:, :3].sum() == 0 and done[:, 3].all()
    assert data["next", "truncated"][:, 3].all() and not data["next", "terminated"].any()
    assert not data["next", "info", "battle_won"].any()


def test_episode_ends_consistent() -> None:
    env = SmaxEnv("3m", num_envs=32, seed=0)
    data = env.rollout(150, break_when_any_done=False)
    nxt = data["next"]
    done, term, trunc = nxt["done"], nxt["terminated"], nxt["truncated"]
    assert done.equal(term | trunc) and not (term & trunc).any()
    won = nxt["info", "battle_won"]
    assert not (won & ~term).any()
    assert term.any()  # random allies lose to the heuristic
    alive = nxt["allies", "mask"]
    assert not (won & ~alive.any(-1, keepdim=True)).any()  # a win needs a living ally
    # the damage reward is non-negative without self-play; the win adds the bonus
    reward = nxt["allies", "reward"]
    assert (reward >= 0).all()
    assert (reward[won[..., 0]] >= 1).all()
    # a dead ally may only stop
    mask = nxt["allies", "action_mask"]
    dead = ~alive
    assert (mask[dead][:, 4]).all() and mask[dead].sum() == dead.sum()


def test_rules_on_hand_made_state() -> None:
    """A marine in range of an enemy hits it for 9; its cooldown then restarts; a
    unit at the map's edge dies; the heuristic enemy shoots back."""
    env = SmaxEnv("3m", num_envs=1, seed=0)
    s = env.get_state()
    s["positions"][0] = torch.tensor(
        [[10.0, 10.0], [10.0, 14.0], [0.05, 25.0], [13.0, 10.0], [28.0, 28.0], [28.0, 20.0]]
    )
    env.set_state(s)
    obs = env.set_state(s)
    mask = obs["allies", "action_mask"][0]
    assert mask[0].tolist() == [True] * 5 + [True, False, False]  # enemy 0 at distance 3
    action = torch.tensor([[5, 4, 3]])  # attack, stop, walk west into the wall
    out = env.step(TensorDict({"allies": {"action": action}}, batch_size=[1]))["next"]
    after = env.get_state()
    assert after["health"][0, 3] == 45.0 - 9.0
    assert 0.61 - 1 / 16 <= after["cooldowns"][0, 0] + 7 / 16 <= 0.61 + 2 / 16
    assert not after["alive"][0, 2] and not out["allies", "mask"][0, 2]
    assert env.last_enemy_actions[0, 0] == 5 + 2  # enemy 0 attacks ally 0 (listed last)
    assert after["health"][0, 0] == 45.0 - 9.0
    assert out["allies", "reward"][0, 0, 0] == pytest.approx(9.0 / 45.0 / 3)


def test_reset_distributions() -> None:
    env = SmaxEnv("smacv2_10_units", num_envs=256, seed=0)
    s = env.get_state()
    types = s["unit_types"]
    assert types[:, :10].equal(types[:, 10:])  # the enemies mirror the allies' types
    counts = torch.bincount(types[:, :10].flatten(), minlength=6)
    assert counts.min() > 300  # uniform over the six types
    pos = s["positions"]
    assert pos.min() > -3 and pos.max() < 35
    env = SmaxEnv("3m", num_envs=64, seed=0)
    pos = env.get_state()["positions"]
    centre = torch.tensor([[8.0, 16.0]] * 3 + [[24.0, 16.0]] * 3)
    assert ((pos - centre).abs() < 3).all()


@pytest.mark.parametrize("device", DEVICES)
def test_device(device: str) -> None:
    env = SmaxEnv("2s3z", num_envs=8, device=device, seed=0)
    data = env.rollout(30, break_when_any_done=False)
    assert data["allies", "observation"].device.type == device
    assert data["next", "allies", "reward"].device.type == device
    check_env_specs(env, steps=3)


def test_render() -> None:
    env = SmaxEnv("3m", num_envs=2, seed=0)
    env.rollout(5)
    img = env.render(env_index=1)
    assert img.shape == (256, 256, 3) and img.dtype == np.uint8
    assert ((img == (40, 90, 220)).all(-1)).any() and ((img == (210, 50, 40)).all(-1)).any()


def test_draw() -> None:
    """The last ally and the last enemy kill each other in the same step: the episode
    terminates, nobody wins, and the reward is the damage alone (SMAX's draw)."""
    env = SmaxEnv("3m", num_envs=1, seed=0)
    s = env.get_state()
    s["positions"][0] = torch.tensor(
        [[10.0, 10.0], [5.0, 5.0], [5.0, 6.0], [12.0, 10.0], [25.0, 5.0], [25.0, 6.0]]
    )
    s["alive"][0] = torch.tensor([True, False, False, True, False, False])
    s["health"][0] = torch.tensor([5.0, 0.0, 0.0, 5.0, 0.0, 0.0])
    env.set_state(s)
    action = torch.tensor([[5, 4, 4]])
    out = env.step(TensorDict({"allies": {"action": action}}, batch_size=[1]))["next"]
    assert env.last_enemy_actions[0, 0] == 5 + 2  # enemy 0 shoots ally 0 (listed last)
    assert out["terminated"].all() and not out["truncated"].any()
    assert not out["info", "battle_won"].any() and not out["allies", "mask"].any()
    assert out["allies", "reward"][0, :, 0].tolist() == pytest.approx([5.0 / 45.0 / 3] * 3)
