"""MAgent2 through the PettingZoo wrapper: teams as groups at scale, dead agents, seeding.

Every catalogue task's ``check_env_specs`` and random rollout is in test_tasks.py
(``test_every_available_task_passes_check_env_specs``); here are the MAgent2-specific
behaviours.
"""

from __future__ import annotations

import sys
import time

import pytest
import torch

from marl.envs import check_env_specs, make_task, step_mdp
from marl.envs.libs.magent2 import TASKS, magent2_env
from marl.envs.tasks import install_hints, task_available


@pytest.fixture(autouse=True)
def _needs_magent2(request):
    if request.node.name != "test_missing_magent2_names_the_extra":
        pytest.importorskip("magent2")


def _live(env) -> set[str]:
    """The agents MAgent2 still has (it drops dead ones from ``agents``)."""
    return set(env.base_env.pettingzoo_env.agents)


def test_battle_at_default_size_keeps_162_agents_in_two_groups_with_masks():
    """The group layer at scale: 81 + 81 agents, random play, a full 1000-step episode."""
    env = make_task("magent2/battle", seed=0)
    assert {g: len(m) for g, m in env.group_map.items()} == {"red": 81, "blue": 81}
    start = time.perf_counter()
    td = env.reset()
    dead: dict[str, set[int]] = {"red": set(), "blue": set()}
    steps = 0
    while True:
        td = env.step(env.rand_action(td))
        steps += 1
        nxt, live = td["next"], _live(env)
        for g, members in env.group_map.items():
            assert nxt[g, "observation"].shape == (81, 13, 13, 5)
            assert nxt[g, "observation"].dtype == torch.float32
            assert nxt[g, "reward"].shape == (81, 1)
            mask = nxt[g, "mask"]
            assert mask.tolist() == [a in live for a in members]
            gone = set((~mask).nonzero().flatten().tolist())
            assert dead[g] <= gone  # the dead stay dead
            # an agent dead before this step: zero observation and reward, done
            for j in dead[g]:
                assert nxt[g, "observation"][j].eq(0).all()
                assert nxt[g, "reward"][j].item() == 0.0
                assert nxt[g, "done"][j].item()
            dead[g] = gone
        if nxt["done"].item():
            break
        td = step_mdp(td)
    elapsed = time.perf_counter() - start
    # at max_cycles every agent leaves (truncated); the ones that died are terminated
    killed = {g: int(nxt[g, "terminated"].sum()) for g in env.group_map}
    print(f"\nbattle 162 agents: {steps} steps in {elapsed:.2f} s, killed {killed}")
    assert steps == 1000 and nxt["truncated"].item()
    assert not any(nxt[g, "mask"].any() for g in env.group_map)
    assert all(nxt[g, "truncated"][~nxt[g, "terminated"]].all() for g in env.group_map)
    # random play kills a few agents (seed 0: see the print)
    assert 0 < sum(killed.values()) < 162
    assert elapsed < 60  # about 4 s on a loaded 2-core machine


def test_agents_that_die_leave_with_masks_zero_observations_and_rewards():
    """Tigers that never eat starve (10 HP, -0.1 a step): every tiger dies, deterministically."""
    env = magent2_env("tiger_deer_v4", seed=0, map_size=20, max_cycles=300)
    check_env_specs(env, steps=5)
    td = env.reset()
    tiger_n = len(env.group_map["tiger"])
    died_at = [None] * tiger_n
    for t in range(150):
        action = env.rand_action(td)
        action["tiger", "action"] = torch.full((tiger_n,), 2)  # stay put (index 2 of move_4)
        td = env.step(action)
        nxt = td["next"]
        for j in range(tiger_n):
            if died_at[j] is None and not nxt["tiger", "mask"][j]:
                died_at[j] = t
                assert nxt["tiger", "terminated"][j].item()
                assert nxt["tiger", "done"][j].item()
            elif died_at[j] is not None:
                assert not nxt["tiger", "mask"][j]
                assert nxt["tiger", "observation"][j].eq(0).all()
                assert nxt["tiger", "reward"][j].item() == 0.0
                assert nxt["tiger", "done"][j].item()
        if nxt["done"].item():
            break
        td = step_mdp(td)
    assert all(t is not None for t in died_at), died_at
    assert not nxt["done"].item() or nxt["deer", "done"].all()  # the deer live on


def test_seeding_repeats_maps_and_episodes():
    def run(seed):
        env = make_task("magent2/adversarial_pursuit_small", seed=seed)
        return env.rollout(30)

    a, b, c = run(0), run(0), run(1)
    for g in ("predator", "prey"):
        assert torch.equal(a["next", g, "observation"], b["next", g, "observation"])
        assert torch.equal(a["next", g, "reward"], b["next", g, "reward"])
    # walls and agents are placed at random: another seed, another map
    assert not torch.equal(a["predator", "observation"], c["predator", "observation"])


def test_groups_observations_state_and_one_hot_actions():
    env = magent2_env("combined_arms_v6", seed=0, map_size=16, max_cycles=5, return_state=True)
    assert list(env.group_map) == ["redmelee", "redranged", "bluemelee", "blueranged"]
    assert env.action_spec["redmelee", "action"].n == 9
    assert env.action_spec["redranged", "action"].n == 25
    assert env.observation_spec["state"].shape == (16, 16, 9)
    check_env_specs(env, steps=5)
    env = magent2_env(
        "adversarial_pursuit_v4", seed=0, map_size=20, max_cycles=5, categorical_actions=False
    )
    assert env.observation_spec["predator", "observation"].shape == (5, 10, 10, 5)
    assert env.observation_spec["prey", "observation"].shape == (10, 9, 9, 5)
    assert env.action_spec["predator", "action"].shape == (5, 13)
    td = env.rollout(5)
    assert td["predator", "action"].sum(-1).eq(1).all()
    assert env.pettingzoo_env.map_size == 20


def test_catalogue_gather_is_one_group_of_495():
    env = make_task("magent2/gather", seed=0, max_cycles=3)
    assert {g: len(m) for g, m in env.group_map.items()} == {"omnivore": 495}
    td = env.rollout(3)
    assert td["next", "omnivore", "observation"].shape == (3, 495, 15, 15, 5)


def test_errors_name_the_choices():
    with pytest.raises(ValueError, match=r"closest: \[.battle_v4."):
        magent2_env("battle_v3")
    with pytest.raises(ValueError, match=r"unknown argument.*bogus"):
        magent2_env("battle_v4", bogus=1)
    with pytest.raises(ValueError, match="map_size"):  # gather's map is fixed
        magent2_env("gather_v5", map_size=20)
    with pytest.raises(ValueError, match="bogus"):
        make_task("magent2/battle", bogus=1)
    assert sorted(TASKS) == list(TASKS)


def test_missing_magent2_names_the_extra(monkeypatch):
    for name in [m for m in sys.modules if m == "magent2" or m.startswith("magent2.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "magent2", None)
    with pytest.raises(ImportError, match=r'pip install "marl\[magent2\]"'):
        magent2_env("battle_v4")
    assert not task_available("magent2/battle")
    names, command = install_hints()["magent2"]
    assert "magent2/battle" in names and command == 'pip install "marl[magent2]"'


def test_make_task_stacks_envs_in_a_serial_env():
    env = make_task("magent2/battle_small", num_envs=2, seed=0, max_cycles=3)
    td = env.rollout(3)
    assert td["red", "observation"].shape == (2, 3, 12, 13, 13, 5)
    assert td["next", "blue", "mask"].shape == (2, 3, 12)
    assert td["next", "done"][:, -1].all()  # max_cycles=3: every env truncates together
