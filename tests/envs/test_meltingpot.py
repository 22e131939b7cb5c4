"""Melting Pot through the PettingZoo wrapper: pixel layout, the world frame, episode ends, seeding.

Every catalogue task's ``check_env_specs`` and random rollout is in test_tasks.py
(``test_every_available_task_passes_check_env_specs``); here are the Melting Pot
specific behaviours.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from marl.envs import check_env_specs, make_task, step_mdp
from marl.envs.libs.meltingpot import TASKS, meltingpot_env
from marl.envs.tasks import install_hints, task_available


@pytest.fixture(autouse=True)
def _needs_meltingpot(request):
    if request.node.name != "test_missing_meltingpot_names_the_extra":
        pytest.importorskip("meltingpot")


def test_players_stack_in_one_group_with_uint8_views_and_the_world_frame():
    env = meltingpot_env("commons_harvest__open", max_steps=10, seed=0, return_state=True)
    assert {g: len(m) for g, m in env.group_map.items()} == {"player": 7}
    obs = env.observation_spec["player", "observation"]
    # the individual observations only: WORLD.RGB is the root state, not a player's view
    assert set(obs.keys()) == {"RGB", "READY_TO_SHOOT"}
    assert obs["RGB"].shape == (7, 88, 88, 3) and obs["RGB"].dtype == torch.uint8
    assert obs["READY_TO_SHOOT"].shape == (7,) and obs["READY_TO_SHOOT"].dtype == torch.float32
    assert env.action_spec["player", "action"].n == 8
    assert env.observation_spec["state"].shape == (144, 192, 3)
    check_env_specs(env, steps=5)
    td = env.reset()
    raw = env.pettingzoo_env
    for _ in range(3):
        td = env.step(env.rand_action(td))
        nxt = td["next"]
        assert nxt["player", "reward"].shape == (7, 1)
        assert nxt["player", "reward"].dtype == torch.float32
        # the state is this step's world frame; the views are pixels (not all black)
        assert torch.equal(nxt["state"], torch.from_numpy(np.asarray(raw.state())))
        assert nxt["player", "observation", "RGB"].float().mean() > 10
        td = step_mdp(td)


def test_rewards_are_each_players_own():
    """Random play in commons harvest: apples eaten pay +1 to the eater only."""
    env = meltingpot_env("commons_harvest__open", max_steps=300, seed=0)
    td = env.rollout(300)
    rewards = td["next", "player", "reward"].squeeze(-1)  # [T, 7]
    assert rewards.sum() > 0  # random players do eat some apples in 300 steps
    assert set(rewards.unique().tolist()) <= {0.0, 1.0}
    # different players eat at different times: a per-player signal, not a shared one
    assert not (rewards == rewards[:, :1]).all()


def test_max_steps_truncates_every_player_at_once():
    env = meltingpot_env("collaborative_cooking__asymmetric", max_steps=6, seed=0)
    td = env.rollout(6)
    done = td["next", "done"].squeeze(-1)
    assert done.tolist() == [False] * 5 + [True]
    assert td["next", "truncated"][-1].item() and not td["next", "terminated"][-1].item()
    assert td["next", "player", "truncated"][-1].all()
    td = env.reset()  # a new episode after the cut
    assert not td["done"].item()
    td = env.step(env.rand_action(td))
    assert not td["next", "done"].item()


def test_substrate_end_is_terminated_for_every_player():
    """Melting Pot ends episodes at random (about 1000 steps): force its last step."""
    env = meltingpot_env("collaborative_cooking__asymmetric", seed=0)
    td = env.reset()
    raw = env.pettingzoo_env
    step = raw._env.step

    def last_step(actions):
        return step(actions)._replace(step_type=2, discount=0.0)  # dm_env.StepType.LAST

    raw._env.step = last_step
    td = env.step(env.rand_action(td))
    assert td["next", "done"].item() and td["next", "terminated"].item()
    assert not td["next", "truncated"].item()
    assert td["next", "player", "terminated"].all()


def test_seed_reaches_the_lua_world_and_each_reset_moves_on(monkeypatch):
    """The seed is Melting Pot's ``env_seed``: set by ``reset(seed=...)``, else drawn at random.

    Melting Pot (dmlab2d 1.0.2) does not repeat episodes from it: the avatars'
    spawn points change between two builds with the same seed (see the docs page),
    so this checks the plumbing, not the replay.
    """
    from meltingpot.utils.substrates import builder

    seeds = []
    real = builder.builder

    def spy(settings, env_seed=None, **kwargs):
        seeds.append(env_seed)
        return real(settings, env_seed=env_seed, **kwargs)

    monkeypatch.setattr(builder, "builder", spy)
    env = meltingpot_env("collaborative_cooking__asymmetric", max_steps=2, seed=5)
    assert seeds == []  # built at the first reset, not at construction
    env.rollout(2)
    env.reset()  # an unseeded reset keeps the built world (Melting Pot moves to seed + 1)
    assert seeds == [5]
    env.set_seed(11)
    env.reset()
    assert seeds == [5, 11]
    unseeded = meltingpot_env("collaborative_cooking__asymmetric", max_steps=2)
    unseeded.reset()
    assert seeds[2] is not None and seeds[2] > 0


def test_one_hot_actions_roles_and_render():
    env = meltingpot_env(
        "predator_prey__open",
        seed=0,
        max_steps=3,
        categorical_actions=False,
        render_mode="rgb_array",
    )
    assert len(env.group_map["player"]) == 13  # 3 predators and 10 prey by default
    assert env.pettingzoo_env.roles[:4] == ("predator",) * 3 + ("prey",)
    td = env.rollout(3)
    assert td["player", "action"].sum(-1).eq(1).all()
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[-1] == 3
    env = meltingpot_env("predator_prey__open", roles=["predator", "prey"], max_steps=3)
    assert len(env.group_map["player"]) == 2


def test_errors_name_the_choices():
    with pytest.raises(ValueError, match=r"closest: \[.clean_up."):
        meltingpot_env("clean_upp")
    with pytest.raises(ValueError, match=r"roles.*\['default'\].*got \['predator'\]"):
        meltingpot_env("clean_up", roles=["predator"])
    with pytest.raises(ValueError, match="max_steps must be a positive int"):
        meltingpot_env("clean_up", max_steps=0)
    with pytest.raises(ValueError, match="bogus"):
        make_task("meltingpot/clean_up", bogus=1)
    assert sorted(TASKS) == list(TASKS)


def test_missing_meltingpot_names_the_extra(monkeypatch):
    for name in [m for m in sys.modules if m == "meltingpot" or m.startswith("meltingpot.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "meltingpot", None)
    with pytest.raises(ImportError, match=r'pip install "marl\[meltingpot\]"'):
        meltingpot_env("clean_up")
    assert not task_available("meltingpot/clean_up")
    names, command = install_hints()["meltingpot"]
    assert "meltingpot/clean_up" in names and command == 'pip install "marl[meltingpot]"'


def test_make_task_stacks_envs_in_a_serial_env():
    env = make_task("meltingpot/collaborative_cooking__asymmetric", num_envs=2, seed=0, max_steps=3)
    td = env.rollout(3)
    assert td["player", "observation", "RGB"].shape == (2, 3, 2, 40, 40, 3)
    assert td["next", "done"][:, -1].all()
