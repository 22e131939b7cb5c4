"""LBForagingEnv and RwareEnv: layout, masks, endings, seeding, errors, missing packages.

The catalogue tasks of both families also run through ``check_env_specs`` and a
random rollout in tests/envs/test_tasks.py.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from marl.envs import LBForagingEnv, RwareEnv, check_env_specs, make_task
from marl.envs.action_checks import InvalidActionError

lbforaging = pytest.importorskip("lbforaging")
rware = pytest.importorskip("rware")

LBF_ID = "Foraging-8x8-2p-2f-coop-v3"
RWARE_ID = "rware-tiny-4ag-v2"


def _raw(env_id: str, **kwargs):
    """The package's own env, built from its registration (as the wrappers do)."""
    import gymnasium

    return gymnasium.make(env_id, disable_env_checker=True, **kwargs).unwrapped


# ----------------------------------------------------------------------------- layout
@pytest.mark.parametrize(
    ("cls", "env_id", "kwargs", "n", "obs", "n_actions", "mask"),
    [
        (LBForagingEnv, LBF_ID, {}, 2, 12, 6, True),
        (LBForagingEnv, "Foraging-15x15-4p-3f-v3", {}, 4, 21, 6, True),
        (RwareEnv, RWARE_ID, {"max_steps": 20}, 4, 71, 5, False),
    ],
    ids=["lbf-8x8-2p", "lbf-15x15-4p", "rware-tiny-4ag"],
)
def test_layout_one_group_stacked_float32_done_at_root(
    cls, env_id, kwargs, n, obs, n_actions, mask
):
    env = cls(env_id, seed=0, **kwargs)
    assert list(env.group_map) == ["agents"]
    assert env.group_map["agents"] == [f"agent_{i}" for i in range(n)]
    spec = env.observation_spec["agents", "observation"]
    assert spec.shape == (n, obs) and spec.dtype == torch.float32
    action = env.action_spec["agents", "action"]
    assert action.shape == (n,) and action.n == n_actions
    assert env.reward_spec["agents", "reward"].shape == (n, 1)
    assert env.reward_spec["agents", "reward"].dtype == torch.float32
    assert ("agents", "action_mask") in env.observation_spec.keys(True) if mask else True
    if not mask:
        assert ("agents", "action_mask") not in env.observation_spec.keys(True)
    # every agent ends together: the flags are env-level only
    assert sorted(env.done_keys) == ["done", "terminated", "truncated"]
    check_env_specs(env, steps=25)
    td = env.rollout(5)
    assert td["next", "agents", "reward"].shape == (5, n, 1)
    assert td["agents", "observation"].dtype == torch.float32


def test_observations_and_rewards_are_the_packages_own():
    """Same seed and actions: the wrapper's data equals the raw env's, agent by agent."""
    env = LBForagingEnv("Foraging-5x5-2p-1f-v3", seed=3)
    raw = _raw("Foraging-5x5-2p-1f-v3")
    raw_obs, _ = raw.reset(seed=3)
    td = env.reset()
    gen = torch.Generator().manual_seed(0)
    for _ in range(40):
        assert np.array_equal(td["agents", "observation"].numpy(), np.stack(raw_obs))
        action = torch.randint(6, (2,), generator=gen)
        td["agents", "action"] = action
        td = env.step(td)
        raw_obs, rewards, done, _, _ = raw.step(action.tolist())
        reward = td["next", "agents", "reward"].squeeze(-1).numpy()
        assert np.allclose(reward, np.asarray(rewards, dtype=np.float32))
        assert td["next", "done"].item() == done
        if done:
            break
        td = td["next"]


def test_rware_observations_and_rewards_are_the_packages_own():
    """RWARE too, to the episode's end (its step limit, set small here)."""
    env = RwareEnv(RWARE_ID, seed=3, max_steps=60)
    raw = _raw(RWARE_ID, max_steps=60)
    raw_obs, _ = raw.reset(seed=3)
    td = env.reset()
    gen = torch.Generator().manual_seed(0)
    for t in range(70):
        obs = td["agents", "observation"].numpy()
        assert np.array_equal(obs, np.stack(raw_obs).astype(np.float32)), t
        action = torch.randint(5, (4,), generator=gen)
        td["agents", "action"] = action
        td = env.step(td)
        raw_obs, rewards, done, truncated, _ = raw.step(action.tolist())
        reward = td["next", "agents", "reward"].squeeze(-1).numpy()
        assert np.array_equal(reward, np.asarray(rewards, dtype=np.float32)), t
        assert td["next", "done"].item() == (done or truncated)
        if done or truncated:
            break
        td = td["next"]
    assert t == 59  # the step limit ended it


def test_one_hot_actions_and_group_maps():
    env = LBForagingEnv(LBF_ID, seed=0, categorical_actions=False, group_map="one_per_agent")
    assert list(env.group_map) == ["agent_0", "agent_1"]
    assert env.action_spec["agent_0", "action"].shape == (1, 6)
    check_env_specs(env, steps=5)
    # a dict group map that swaps the agents: each row stays its own agent's
    swapped = LBForagingEnv(LBF_ID, seed=0, group_map={"team": ["agent_1", "agent_0"]})
    plain = LBForagingEnv(LBF_ID, seed=0)
    obs_swapped = swapped.reset()["team", "observation"]
    obs_plain = plain.reset()["agents", "observation"]
    assert torch.equal(obs_swapped, obs_plain.flip(0))
    # agent_1's action goes to player 1: its move shows in player 1's position only
    td = swapped.reset()
    moves = td["team", "action_mask"].clone()
    moves[:, 5] = False  # no LOAD
    moves[:, 0] = False  # no NONE
    td["team", "action"] = torch.stack([moves[0].nonzero()[0, 0], torch.tensor(0)])
    before = [p.position for p in swapped.raw_env.players]
    swapped.step(td)
    after = [p.position for p in swapped.raw_env.players]
    assert after[0] == before[0] and after[1] != before[1]


# ----------------------------------------------------------------------------- LBF specifics
def test_lbf_action_mask_is_the_envs_legal_actions():
    env = LBForagingEnv(LBF_ID, seed=1, check_actions=True)
    td = env.reset()
    for _ in range(30):
        mask = td["agents", "action_mask"]
        raw = env.raw_env
        for i, player in enumerate(raw.players):
            legal = sorted(a.value for a in raw._valid_actions[player])
            assert mask[i].nonzero().flatten().tolist() == legal
        td = env.step(env.rand_action(td))
        if td["next", "done"].item():
            break
        td = td["next"]
    # an illegal action is refused with check_actions (LBF would silently play NONE)
    td = env.reset()
    illegal = (~td["agents", "action_mask"][0]).nonzero()
    if len(illegal):
        td["agents", "action"] = torch.tensor([int(illegal[0, 0]), 0])
        with pytest.raises(InvalidActionError):
            env.step(td)


def test_lbf_time_limit_is_truncated_and_all_food_loaded_is_terminated():
    env = LBForagingEnv("Foraging-5x5-2p-1f-v3", seed=0, max_episode_steps=3)
    td = env.rollout(
        10,
        policy=lambda td: td.set(
            "agents", td["agents"].set("action", torch.zeros(2, dtype=torch.long))
        ),
    )
    assert td.shape == (3,)
    assert td["next", "truncated"][-1].item() and not td["next", "terminated"][-1].item()
    # random play on the smallest task: find an episode that ends by loading the food
    ends = set()
    for seed in range(20):
        env = LBForagingEnv("Foraging-5x5-2p-1f-v3", seed=seed)
        td = env.rollout(60)
        last = td[-1]
        assert last["next", "done"].item()
        field_empty = env.raw_env.field.sum() == 0
        assert last["next", "terminated"].item() == field_empty
        assert last["next", "truncated"].item() == (not field_empty)
        if field_empty:
            assert td["next", "agents", "reward"].sum() > 0
        ends.add(bool(field_empty))
    assert ends == {True, False}


# ----------------------------------------------------------------------------- RWARE specifics
def test_rware_episodes_end_truncated_and_reward_type_is_passed():
    env = RwareEnv("rware-tiny-2ag-v2", seed=0, max_steps=6)
    td = env.rollout(20)
    assert td.shape == (6,)
    assert td["next", "truncated"][-1].item() and not td["next", "terminated"].any()
    env = RwareEnv("rware-tiny-2ag-v2", seed=0, reward_type="global")
    assert env.rware_env.reward_type == rware.RewardType.GLOBAL
    assert RwareEnv("rware-tiny-2ag-v2").rware_env.reward_type == rware.RewardType.INDIVIDUAL


# ----------------------------------------------------------------------------- seeding
@pytest.mark.parametrize(
    "make",
    [
        lambda seed: LBForagingEnv(LBF_ID, seed=seed),
        lambda seed: RwareEnv(RWARE_ID, seed=seed, max_steps=30),
        lambda seed: make_task("lbforaging/10x10-3p-3f", num_envs=2, seed=seed),
    ],
    ids=["lbf", "rware", "lbf-serial"],
)
def test_same_seed_same_rollout_other_seed_other_rollout(make):
    def rollout(seed):
        # make_task's TransformedEnv draws random actions from torch's global generator
        # (its own is never seeded), so fix that one; the wrappers seed theirs
        torch.manual_seed(0)
        return make(seed).rollout(30)

    a, b, c = rollout(5), rollout(5), rollout(6)
    assert (a == b).all()
    key = next(k for k in a.keys(True, True) if k[-1] == "observation" and k[0] != "next")
    assert not torch.equal(a[key][..., 0, :, :], c[key][..., 0, :, :])


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: LBForagingEnv("Foraging-9x9-2p-2f-v3x"), ValueError, "Foraging-8x8-2p-2f-coop-v3"),
        (lambda: LBForagingEnv("rware-tiny-2ag-v2"), ValueError, "not a lbforaging env"),
        (lambda: RwareEnv("rware-tiny-2ag-v2", sight=3), ValueError, "unknown argument.*sight"),
        (lambda: RwareEnv("rware-tiny-2ag-v2", reward_type="team"), ValueError, "two_stage"),
        (lambda: LBForagingEnv(), ValueError, "exactly one of env_id= or env="),
        (lambda: LBForagingEnv(env=_raw(LBF_ID), sight=2), ValueError, "need env_id="),
        (lambda: make_task("lbforaging/5x5-2p-1f", sightt=2), ValueError, "closest|accepted"),
        (
            lambda: RwareEnv("rware-tiny-2ag-v2", observation_type=rware.ObservationType.DICT),
            NotImplementedError,
            "got a Dict observation space",
        ),
    ],
    ids=[
        "unknown-id",
        "other-family",
        "bad-arg",
        "bad-reward-type",
        "no-id",
        "env-kwargs",
        "task",
        "dict-obs",
    ],
)
def test_bad_arguments_get_clear_errors(build, error, match):
    with pytest.raises(error, match=match):
        build()


@pytest.mark.parametrize(("cls", "package"), [(LBForagingEnv, "lbforaging"), (RwareEnv, "rware")])
def test_missing_package_names_the_extra(monkeypatch, cls, package):
    monkeypatch.setitem(sys.modules, package, None)
    with pytest.raises(ImportError, match=rf'pip install "marl\[{package}\]"'):
        cls(cls.example_id)


def test_render_gives_an_rgb_frame():
    env = RwareEnv("rware-tiny-2ag-v2", seed=0)
    env.reset()
    try:
        frame = env.render()
    except Exception as err:  # no display and no EGL: pyglet cannot draw here
        pytest.skip(f"pyglet cannot render on this machine: {err!r}")
    assert frame.ndim == 3 and frame.shape[-1] == 3 and frame.dtype == np.uint8
    assert frame.std() > 0


def test_a_missing_family_is_left_out_of_the_help_with_its_extra(monkeypatch):
    """``list_tasks(available=True)`` and ``marl-run --help`` without rware installed."""
    import importlib.util

    from marl.envs import list_tasks
    from marl.envs.tasks import install_hints
    from marl.experiment.cli import _tasks

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "rware" else find_spec(name, *a),
    )
    available = list_tasks(available=True)
    assert "lbforaging/8x8-2p-2f-coop" in available
    assert not any(name.startswith("rware/") for name in available)
    names, command = install_hints()["rware"]
    assert names == list_tasks("rware") and len(names) == 6
    assert command == 'pip install "marl[rware]"'
    text = _tasks()
    assert "rware/tiny-2ag" not in text.split("\n")[0]
    assert '6 rware tasks (pip install "marl[rware]")' in text
