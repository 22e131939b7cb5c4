"""MaMuJoCoEnv: groups by shape, dtypes, state, endings, seeding, errors, missing package.

The catalogue tasks also run through ``check_env_specs`` and a random rollout in
tests/envs/test_tasks.py (every task, unbatched); here they run batched too.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

from marl.envs import MaMuJoCoEnv, check_env_specs, list_tasks, make_task
from marl.envs.libs.mamujoco import group_by_shape, mamujoco_partitions

pytest.importorskip("mujoco")
mamujoco_v1 = pytest.importorskip("gymnasium_robotics").mamujoco_v1


# ----------------------------------------------------------------------------- layout
@pytest.mark.parametrize(
    ("scenario", "conf", "groups", "state", "bound"),
    [
        ("HalfCheetah", "2x3", {"agents": (2, 12, 3)}, 17, 1.0),
        ("Humanoid", "9|8", {"agents_242_9": (1, 242, 9), "agents_170_8": (1, 170, 8)}, 348, 0.4),
        ("HalfCheetah", "6x1", {"agents_9_1": (4, 9, 1), "agents_8_1": (2, 8, 1)}, 17, 1.0),
        ("Hopper", "3x1", {"agents_8_1": (2, 8, 1), "agents_9_1": (1, 9, 1)}, 11, 1.0),
    ],
    ids=["halfcheetah-2x3", "humanoid-9|8", "halfcheetah-6x1", "hopper-3x1"],
)
def test_agents_of_one_shape_share_a_group_float32_state_at_root(
    scenario, conf, groups, state, bound
):
    env = MaMuJoCoEnv(scenario, conf, seed=0)
    raw = env.pettingzoo_env
    assert list(env.group_map) == list(groups)
    td = env.rollout(5)
    for g, (n, obs, act) in groups.items():
        members = env.group_map[g]
        assert len(members) == n
        # the group's agents really have these shapes in the package
        assert {raw.observation_space(a).shape for a in members} == {(obs,)}
        assert td[g, "observation"].shape == (td.shape[0], n, obs)
        assert td[g, "action"].shape == (td.shape[0], n, act)
        assert td["next", g, "reward"].shape == (td.shape[0], n, 1)
        spec = env.action_spec[g, "action"]
        assert torch.allclose(spec.low, torch.full((n, act), -bound))
        assert torch.allclose(spec.high, torch.full((n, act), bound))
        assert (td[g, "action"].abs() <= bound).all()
        for key in ("observation", "action"):
            assert td[g, key].dtype == torch.float32
        assert td["next", g, "reward"].dtype == torch.float32
    assert td["state"].shape == (td.shape[0], state) and td["state"].dtype == torch.float32
    assert td["next", "done"].shape == (td.shape[0], 1)
    assert not any("mask" in k for k in td.keys(True, True) if isinstance(k, tuple))
    check_env_specs(env, steps=5)


def test_observations_state_and_team_reward_are_the_packages_own():
    env = MaMuJoCoEnv("Humanoid", "9|8", seed=3)
    raw = mamujoco_v1.parallel_env("Humanoid", "9|8")
    td = env.reset()
    obs, _ = raw.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(5):
        actions = {
            a: rng.uniform(-0.4, 0.4, raw.action_space(a).shape).astype(np.float32)
            for a in raw.possible_agents
        }
        for g, members in env.group_map.items():
            td[g, "action"] = torch.from_numpy(np.stack([actions[a] for a in members]))
        td = env.step(td)
        obs, rew, _, _, _ = raw.step(actions)
        nxt = td["next"]
        for g, members in env.group_map.items():
            want = np.stack([obs[a] for a in members]).astype(np.float32)
            np.testing.assert_allclose(nxt[g, "observation"].numpy(), want, rtol=1e-6)
            # the same team reward in every agent's entry
            r = [rew[a] for a in members]
            np.testing.assert_allclose(nxt[g, "reward"].squeeze(-1).numpy(), r, rtol=1e-6)
        np.testing.assert_allclose(nxt["state"].numpy(), raw.state(), rtol=1e-6)
        td = nxt


def test_falling_terminates_and_the_time_limit_truncates():
    # zero torques: the hopper falls within the first hundred steps
    env = MaMuJoCoEnv("Hopper", "3x1", seed=0)

    def zeros(td):
        for g in env.group_map:
            td[g, "action"] = torch.zeros(env.action_spec[g, "action"].shape)
        return td

    td = env.rollout(1000, zeros)
    nxt = td["next"][-1]
    t = td.shape[0]
    assert t < 1000 and nxt["terminated"].item() and not nxt["truncated"].item()
    for g in env.group_map:
        assert nxt[g, "terminated"].all() and nxt[g, "done"].all()

    td = MaMuJoCoEnv("HalfCheetah", "2x3", seed=0, max_episode_steps=7).rollout(50)
    assert td.shape[0] == 7
    assert td["next", "truncated"][-1].item() and not td["next", "terminated"][-1].item()
    assert not td["next", "done"][:-1].any()


def test_return_state_false_and_a_custom_group_map():
    env = MaMuJoCoEnv("Ant", "4x2", return_state=False, group_map="one_per_agent")
    assert "state" not in env.observation_spec.keys()
    assert list(env.group_map) == ["agent_0", "agent_1", "agent_2", "agent_3"]
    check_env_specs(env, steps=3)


def test_group_by_shape_of_the_raw_env():
    raw = mamujoco_v1.parallel_env("Ant", "2x4")
    assert group_by_shape(raw).to_dict() == {"agents": ["agent_0", "agent_1"]}
    raw = mamujoco_v1.parallel_env("HalfCheetah", "6x1")
    assert group_by_shape(raw).to_dict() == {
        "agents_9_1": ["agent_0", "agent_1", "agent_3", "agent_4"],
        "agents_8_1": ["agent_2", "agent_5"],
    }


# ----------------------------------------------------------------------------- seeding
@pytest.mark.parametrize(
    "make",
    [
        lambda seed: MaMuJoCoEnv("HalfCheetah", "2x3", seed=seed),
        lambda seed: make_task("mamujoco/humanoid_9_8", num_envs=2, seed=seed),
    ],
    ids=["wrapper", "task-serial"],
)
def test_same_seed_same_rollout_other_seed_other_rollout(make):
    a, b, c = make(5).rollout(20), make(5).rollout(20), make(6).rollout(20)
    assert (a == b).all()
    g = next(k for k in a.keys() if k not in ("done", "terminated", "truncated", "state", "next"))
    assert torch.equal(a["next", g, "reward"], b["next", g, "reward"])
    assert not torch.equal(a[g, "observation"][..., 0, :, :], c[g, "observation"][..., 0, :, :])


def test_batched_task_passes_check_env_specs():
    env = make_task("mamujoco/halfcheetah_6x1", num_envs=2, seed=0, max_episode_steps=4)
    assert env.batch_size == (2,)
    check_env_specs(env, steps=6)  # across an end of episode (auto-reset)


# ----------------------------------------------------------------------------- errors
def test_partitions_are_the_packages():
    assert mamujoco_partitions("HalfCheetah") == ["2x3", "6x1"]
    assert mamujoco_partitions("Ant") == ["2x4", "2x4d", "4x2"]
    assert mamujoco_partitions("Humanoid") == ["9|8"]


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: MaMuJoCoEnv("Ant", "3x3"), r"partition '3x3' for 'Ant'; valid: \['2x4', '2x4d', '4x2'\]"),
        (lambda: MaMuJoCoEnv("Cheetah", "2x3"), r"unknown MaMuJoCo scenario 'Cheetah'.*HalfCheetah"),
        (lambda: mamujoco_partitions("Cheetah"), r"unknown MaMuJoCo scenario"),
        (lambda: make_task("mamujoco/ant_2x4", agent_confs="4x2"), r"agent_confs.*accepted"),
        (lambda: make_task("mamujoco/ant_2x4", agent_conf="2x3"), r"valid: \['2x4'"),
    ],
    ids=["partition", "scenario", "partitions-scenario", "task-override", "task-partition"],
)  # fmt: skip
def test_bad_arguments_get_clear_errors(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium_robotics", None)
    with pytest.raises(ImportError, match=r'pip install "marl\[mamujoco\]"'):
        MaMuJoCoEnv("HalfCheetah", "2x3")


def test_a_missing_family_is_left_out_of_the_help_with_its_extra(monkeypatch):
    """``list_tasks(available=True)`` and ``marl-run --help`` without gymnasium-robotics."""
    import importlib.util

    from marl.envs.tasks import install_hints
    from marl.experiment.cli import _tasks

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gymnasium_robotics" else find_spec(name, *a),
    )
    assert not any(n.startswith("mamujoco/") for n in list_tasks(available=True))
    names, command = install_hints()["mamujoco"]
    assert names == list_tasks("mamujoco") and len(names) == 8
    assert command == 'pip install "marl[mamujoco]"'
    assert '8 mamujoco tasks (pip install "marl[mamujoco]")' in _tasks()


def test_render_gives_an_rgb_frame(monkeypatch):
    if "DISPLAY" not in os.environ and "MUJOCO_GL" not in os.environ:
        monkeypatch.setenv("MUJOCO_GL", "egl")  # headless: EGL, as the docs say
    env = MaMuJoCoEnv("HalfCheetah", "2x3", seed=0, render_mode="rgb_array")
    env.reset()
    try:
        frame = env.render()
    except Exception as err:  # no MUJOCO_GL backend that works on this machine
        pytest.skip(f"mujoco cannot render here: {err!r}")
    assert frame.ndim == 3 and frame.shape[-1] == 3 and frame.dtype == np.uint8
    assert frame.std() > 0
