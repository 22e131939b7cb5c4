"""LBFEnv (marl.envs.native.lbf) against lbforaging 2.0.0's ForagingEnv, step by step.

The package's rules are the specification: after every package reset its start state
is copied into the native env (``set_state``), both play the same actions (legal and
illegal ones, biased towards food so that loads, coop loads and collisions happen),
and every step's observations, action masks, rewards and flags must match. The
package's step has no randomness for the layouts it spawns (see ``lbf_rules.load``):
nothing needs aligning beyond the start states.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from marl.envs.checks import check_env_specs
from marl.envs.native.lbf import LBFEnv

pytest.importorskip("lbforaging")
from lbforaging.foraging.environment import Action, ForagingEnv

ACTIONS = sorted(Action, key=lambda a: a.value)


def _kwargs(size, players, food, *, sight=None, coop=False, steps=50, **extra):
    """ForagingEnv arguments; LBFEnv takes the same names."""
    args = dict(
        players=players,
        min_player_level=1,
        max_player_level=2,
        min_food_level=1,
        max_food_level=None,
        field_size=(size, size),
        max_num_food=food,
        sight=size if sight is None else sight,
        max_episode_steps=steps,
        force_coop=coop,
    )
    return {**args, **extra}


CONFIGS = {
    "5x5-2p-1f": _kwargs(5, 2, 1, steps=12),
    "8x8-2p-2f-coop": _kwargs(8, 2, 2, coop=True),
    "10x10-3p-3f-2s": _kwargs(10, 3, 3, sight=2, steps=30),
    "15x15-4p-5f": _kwargs(15, 4, 5, steps=30),
    "6x6-3p-2f-penalty": _kwargs(6, 3, 2, penalty=0.1, max_player_level=3),
    "7x7-3p-2f-unnormalized-1s": _kwargs(7, 3, 2, sight=1, normalize_reward=False, steps=25),
    # per-player and per-food level bounds, player entries without levels
    "8x8-3p-2f-lists-no-levels": _kwargs(
        8,
        3,
        2,
        steps=30,
        min_player_level=[1, 2, 1],
        max_player_level=[2, 3, 1],
        max_food_level=[3, 4],
        observe_agent_levels=False,
    ),
}


def _package(kwargs):
    return ForagingEnv(**kwargs)


def _state(envs):
    """The package envs' state as LBFEnv.set_state takes it."""
    return {
        "player_position": torch.tensor([[p.position for p in e.players] for e in envs]),
        "player_level": torch.tensor([[p.level for p in e.players] for e in envs]),
        "field": torch.tensor(np.stack([e.field for e in envs])),
        "food_spawned": torch.tensor([int(e._food_spawned) for e in envs]),
        "step_count": torch.tensor([e.current_step for e in envs]),
    }


def _no_cell_touches_two_food(env):
    """True of the package's spawns: then its loads do not depend on a set's order."""
    food = np.pad(env.field > 0, 1).astype(int)
    touching = food[:-2, 1:-1] + food[2:, 1:-1] + food[1:-1, :-2] + food[1:-1, 2:]
    return touching.max() <= 1


def _masks(env):
    valid = env._valid_actions
    return torch.tensor([[a in valid[p] for a in ACTIONS] for p in env.players])


def _check_obs(out, envs, obs, where, rows=None):
    rows = range(len(envs)) if rows is None else rows
    for i in rows:
        np.testing.assert_array_equal(
            out["agents", "observation"][i].numpy(), np.stack(obs[i]), err_msg=f"{where} env {i}"
        )
        assert torch.equal(out["agents", "action_mask"][i], _masks(envs[i])), f"{where} env {i}"


def _policy(rng, env):
    """Per player: LOAD when legal (mostly), a step towards the nearest food, or any action."""
    actions = []
    food = np.argwhere(env.field > 0)
    for p in env.players:
        valid = env._valid_actions[p]
        u = rng.random()
        if Action.LOAD in valid and u < 0.6:
            actions.append(5)
        elif len(food) and u < 0.75:
            r, c = p.position
            fr, fc = food[np.abs(food - [r, c]).sum(1).argmin()]
            options = [1 if fr < r else 2 if fr > r else 0, 3 if fc < c else 4 if fc > c else 0]
            actions.append(int(rng.choice(options)))
        else:
            actions.append(int(rng.integers(0, 6)))  # legal or not
    return actions


def _play(kwargs, n_envs, steps, seed):
    """Play both side by side; returns counts of what happened."""
    envs = [_package(kwargs) for _ in range(n_envs)]
    obs = [e.reset(seed=seed * 100 + i)[0] for i, e in enumerate(envs)]
    full = kwargs["sight"] >= max(kwargs["field_size"])  # the package's full sight is None here
    native = LBFEnv(n_envs, seed=seed, **{**kwargs, "sight": None if full else kwargs["sight"]})
    assert all(_no_cell_touches_two_food(e) for e in envs)
    _check_obs(native.set_state(_state(envs)), envs, obs, "reset")
    rng = np.random.default_rng(seed)
    ends = {"terminated": 0, "truncated": 0, "loads": 0, "coop_loads": 0, "failed_loads": 0}
    for t in range(steps):
        actions = [_policy(rng, e) for e in envs]
        td = TensorDict({"agents": {"action": torch.tensor(actions)}}, batch_size=[n_envs])
        nxt = native.step(td)["next"]
        ended = []
        for i, e in enumerate(envs):
            obs[i], rewards, done, _, _ = e.step(actions[i])
            where = f"step {t} env {i} actions {actions[i]}"
            np.testing.assert_allclose(
                nxt["agents", "reward"][i, :, 0].numpy(), rewards, atol=1e-6, err_msg=where
            )
            trunc = done and e.field.sum() > 0
            assert nxt["done"][i].item() == done, where
            assert nxt["truncated"][i].item() == trunc, where
            assert nxt["terminated"][i].item() == (done and not trunc), where
            ends["loads"] += any(r > 0 for r in rewards)
            ends["coop_loads"] += sum(r > 0 for r in rewards) > 1
            ends["failed_loads"] += any(r < 0 for r in rewards)
            if done:
                ends["truncated" if trunc else "terminated"] += 1
                ended.append(i)
        _check_obs(nxt, envs, obs, f"step {t}")
        if ended:
            for i in ended:
                obs[i] = envs[i].reset()[0]
                assert _no_cell_touches_two_food(envs[i])
            mask = torch.zeros(n_envs, dtype=torch.bool)
            mask[ended] = True
            _check_obs(native.set_state(_state(envs), env_mask=mask), envs, obs, "reset", ended)
    return ends


@pytest.mark.parametrize("name", list(CONFIGS))
def test_matches_package_step_by_step(name):
    ends = _play(CONFIGS[name], n_envs=8, steps=150, seed=len(name))
    print(name, ends)
    assert ends["terminated"] > 0 and ends["truncated"] > 0 and ends["loads"] > 0, ends
    if CONFIGS[name]["force_coop"]:
        assert ends["coop_loads"] > 0, ends
    if CONFIGS[name].get("penalty"):
        assert ends["failed_loads"] > 0, ends


# ----------------------------------------------------------------------------- edge cases
def _layout(kwargs, players, levels, food, actions):
    """One hand-made state on both sides, one step: returns (native next, package rewards)."""
    env = _package(kwargs)
    env.reset(seed=0)
    for p, pos, lvl in zip(env.players, players, levels):
        p.position, p.level = tuple(pos), lvl
    env.field[:] = 0
    for (r, c), lvl in food:
        env.field[r, c] = lvl
    env._food_spawned = env.field.sum()
    env._gen_valid_moves()
    native = LBFEnv(1, **kwargs)
    first = native.set_state(_state([env]))
    _check_obs(first, [env], [env._make_gym_obs()], "start")
    td = TensorDict({"agents": {"action": torch.tensor([actions])}}, batch_size=[1])
    nxt = native.step(td)["next"]
    obs, rewards, done, _, _ = env.step(actions)
    _check_obs(nxt, [env], [obs], "after")
    np.testing.assert_allclose(nxt["agents", "reward"][0, :, 0].numpy(), rewards, atol=1e-6)
    assert nxt["done"][0].item() == done
    return native, env, rewards


EDGE = _kwargs(7, 3, 2, penalty=0.25, max_player_level=3)
N, S, W, E, L, X = 1, 2, 3, 4, 5, 0


@pytest.mark.parametrize(
    ("players", "levels", "food", "actions", "check"),
    [
        # two players into one cell: both stay; the third walks into the food (illegal)
        ([(2, 2), (2, 4), (5, 5)], [1, 1, 1], [((4, 5), 2)], [E, W, N], "same_cell"),
        # off the grid, and into a food: both become NONE
        ([(0, 0), (3, 2), (6, 6)], [1, 1, 1], [((3, 3), 2)], [N, E, S], "blocked"),
        # into the cell of a player blocked by another: the package lets them overlap
        ([(1, 1), (1, 2), (1, 3)], [1, 1, 1], [((5, 5), 2)], [E, E, X], "overlap"),
        ([(1, 1), (1, 2), (4, 4)], [1, 1, 1], [((5, 5), 2)], [E, W, X], "swap"),
        # three players around one food: levels 1 + 2 + 3 reach 6 exactly
        ([(2, 3), (4, 3), (3, 2)], [1, 2, 3], [((3, 3), 6)], [L, L, L], "coop_loaded"),
        # the same three, one short (level sum 5 < 6): all get -penalty
        ([(2, 3), (4, 3), (3, 2)], [1, 1, 3], [((3, 3), 6)], [L, L, L], "coop_failed"),
        # one of three does not load: the two loaders fall short
        ([(2, 3), (4, 3), (3, 2)], [1, 2, 3], [((3, 3), 5)], [L, X, L], "coop_partial"),
        # two sides of one food, the third loads another food alone (level too low)
        ([(3, 2), (3, 4), (1, 5)], [1, 1, 1], [((3, 3), 2), ((1, 1), 0)], [L, L, X], "two_sides"),
        ([(3, 2), (3, 4), (1, 2)], [1, 1, 1], [((3, 3), 2), ((1, 1), 2)], [L, L, L], "mixed"),
        # one loader touching two food (never spawned): the package takes the northern one
        ([(3, 3), (0, 0), (6, 6)], [1, 1, 1], [((2, 3), 1), ((3, 4), 1)], [L, X, X], "two_food"),
        # the last food loaded: terminated
        ([(3, 2), (0, 0), (6, 6)], [2, 1, 1], [((3, 3), 2)], [L, X, X], "last_food"),
    ],
)
def test_edge_cases_match_package(players, levels, food, actions, check):
    food = [f for f in food if f[1] > 0]
    native, env, rewards = _layout(EDGE, players, levels, food, actions)
    pos = native.get_state()["player_position"][0].tolist()
    assert pos == [list(p.position) for p in env.players]
    if check == "same_cell":
        assert pos[:2] == [[2, 2], [2, 4]] and pos[2] == [5, 5]
    elif check == "blocked":
        assert pos == [[0, 0], [3, 2], [6, 6]]
    elif check == "overlap":
        assert pos == [[1, 2], [1, 2], [1, 3]]
    elif check == "swap":
        assert pos[:2] == [[1, 2], [1, 1]]
    elif check in ("coop_loaded", "last_food"):
        assert rewards[0] > 0 and native.get_state()["food_level"].sum() == 0
    elif check in ("coop_failed", "coop_partial"):
        assert min(rewards) == -0.25
    elif check == "two_food":
        state = native.get_state()
        left = state["food_level"][0] > 0
        assert state["food_position"][0][left].tolist() == [[3, 4]]
    elif check == "two_sides":
        assert rewards[0] == rewards[1] == pytest.approx(0.5)  # 1 * 2 / (2 * 2)


# ----------------------------------------------------------------------------- API
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(field_size=(10, 10), players=3, max_num_food=3, sight=2),
        dict(field_size=(6, 9), players=4, max_num_food=3, force_coop=True, penalty=0.1),
        dict(players=3, group_map="one_per_agent", categorical_actions=False),
    ],
)
def test_check_env_specs(kwargs):
    check_env_specs(LBFEnv(num_envs=4, seed=0, **kwargs), steps=60)


def test_unbatched_and_from_id():
    env = LBFEnv.from_id("Foraging-2s-8x8-2p-2f-coop-v3", seed=0, max_episode_steps=7)
    assert env.batch_size == () and env.sight == 2 and env.force_coop
    check_env_specs(env, steps=10)
    td = env.rollout(7)
    assert td["next", "done"][-1].item() and td.batch_size == (7,)
    assert env.render().shape == (256, 256, 3) and env.render().dtype == np.uint8


def test_spawn_rules():
    env = LBFEnv(256, field_size=(8, 8), players=3, max_num_food=3, force_coop=True, seed=1)
    s = env.get_state()
    lvl = s["player_level"].sort(-1).values.sum(-1, keepdim=True)
    food, present = s["food_position"], s["food_level"] > 0
    assert ((s["food_level"] == lvl) | ~present).all()  # coop: sum of the 3 lowest
    assert ((food >= 1) & (food <= 6)).all(-1)[present].all()  # off the border
    cells = s["player_position"][..., 0] * 8 + s["player_position"][..., 1]
    assert (cells.sort(-1).values.diff(dim=-1) > 0).all()  # distinct cells
    d = (food.unsqueeze(1) - food.unsqueeze(2)).abs()
    both = present.unsqueeze(1) & present.unsqueeze(2) & ~torch.eye(3, dtype=torch.bool)
    close = (d.max(-1).values <= 1) | ((d.min(-1).values == 0) & (d.max(-1).values <= 2))
    assert not (close & both).any()
    assert set(s["player_level"].unique().tolist()) == {1, 2}


def test_spawn_distribution_matches_package():
    """Spawns are not the package's draws, but follow the same distribution."""
    kwargs = _kwargs(6, 3, 3)
    env, draws = _package(kwargs), 1500
    env.reset(seed=0)
    ref = {"player_level": [], "food_level": [], "food_count": [], "food_row": []}
    for _ in range(draws):
        env.reset()
        ref["player_level"] += [p.level for p in env.players]
        ref["food_level"] += env.field[env.field > 0].tolist()
        ref["food_count"].append(int((env.field > 0).sum()))
        ref["food_row"] += np.nonzero(env.field)[0].tolist()
    s = LBFEnv(draws, seed=0, **kwargs).get_state()
    present = s["food_level"] > 0
    ours = {
        "player_level": s["player_level"].flatten(),
        "food_level": s["food_level"][present],
        "food_count": present.sum(-1),
        "food_row": s["food_position"][..., 0][present],
    }
    for key, values in ref.items():
        for v in range(7):  # frequencies agree within about 4 standard deviations
            want, got = np.mean(np.asarray(values) == v), (ours[key] == v).float().mean()
            assert abs(got.item() - want) < 0.04, (key, v, got.item(), want)


def test_seeded_rollouts_repeat():
    a, b = (LBFEnv(8, seed=5, players=3) for _ in range(2))
    ra, rb = (e.rollout(80, break_when_any_done=False) for e in (a, b))
    assert (ra == rb).all()
    assert ra["next", "done"].sum() > 0  # the resets drew from the seeded generator too


def test_partial_reset_keeps_the_others():
    env = LBFEnv(6, seed=3)
    td = env.reset()
    for _ in range(3):
        td = env.step(env.rand_action(td))["next"].exclude(("agents", "reward"))
    before = env.get_state()
    mask = torch.tensor([True, False, True, False, False, False]).unsqueeze(-1)
    out = env.reset(td.set("_reset", mask))
    after = env.get_state()
    keep = ~mask[:, 0]
    for key in before.keys():
        assert torch.equal(after[key][keep], before[key][keep]), key
    assert (after["step_count"][mask[:, 0]] == 0).all()
    assert torch.equal(out["agents", "observation"][keep], td["agents", "observation"][keep])
    assert not out["done"].any()


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(num_envs=0), "num_envs"),
        (dict(field_size=(2, 8)), "field_size"),
        (dict(players=0), "players"),
        (dict(players=70), "players"),
        (dict(sight=0), "sight"),
        (dict(penalty=-1.0), "penalty"),
        (dict(min_player_level=3), "min_player_level"),
        (dict(max_player_level=[1, 2, 3]), "max_player_level"),
        (dict(min_food_level=5), "min_food_level"),
        (dict(max_food_level=0), "max_food_level"),
    ],
)
def test_bad_arguments(kwargs, words):
    with pytest.raises(ValueError, match=words):
        LBFEnv(**kwargs)


def test_bad_id_and_state():
    with pytest.raises(ValueError, match="env_id"):
        LBFEnv.from_id("Foraging-grid-8x8-2p-2f-v3")
    env = LBFEnv(2, max_num_food=1)
    state = env.get_state()
    with pytest.raises(ValueError, match="player_position"):
        env.set_state(state.exclude("player_position"))
    state["player_position"][0, 0] = torch.tensor([8, 0])
    with pytest.raises(ValueError, match="off the 8x8 grid"):
        env.set_state(state)
    field = torch.zeros(2, 8, 8, dtype=torch.long)
    field[0, 2, 2] = field[0, 5, 5] = 1
    with pytest.raises(ValueError, match="max_num_food"):
        env.set_state({**env.get_state().exclude("food_position", "food_level"), "field": field})


@pytest.mark.parametrize(
    "env_id", ["Foraging-8x8-2p-2f-coop-v3", "Foraging-2s-10x10-3p-3f-v3", "Foraging-5x5-2p-1f-v3"]
)
def test_specs_match_the_wrapper(env_id):
    from marl.envs.libs.lbforaging import LBForagingEnv

    wrapper, native = LBForagingEnv(env_id), LBFEnv.from_id(env_id)
    for name in ("observation_spec", "action_spec", "reward_spec", "done_spec"):
        ours, theirs = getattr(native, name), getattr(wrapper, name)
        assert sorted(ours.keys(True, True)) == sorted(theirs.keys(True, True)), name
        for key in theirs.keys(True, True):
            a, b = ours[key], theirs[key]
            assert (type(a), a.shape, a.dtype) == (type(b), b.shape, b.dtype), key
            if hasattr(b, "low"):
                assert torch.equal(a.low, b.low) and torch.equal(a.high, b.high), key


def test_group_map_splits_the_players():
    groups = {"red": ["agent_1"], "blue": ["agent_2", "agent_0"]}
    one, split = LBFEnv(4, players=3, seed=2), LBFEnv(4, players=3, seed=2, group_map=groups)
    a, b = one.reset(), split.reset()
    assert torch.equal(b["red", "observation"][:, 0], a["agents", "observation"][:, 1])
    assert torch.equal(b["blue", "observation"], a["agents", "observation"][:, [2, 0]])
    actions = torch.tensor([[1, 2, 5]] * 4)
    a["agents", "action"] = actions
    b["red", "action"], b["blue", "action"] = actions[:, [1]], actions[:, [2, 0]]
    a, b = one.step(a)["next"], split.step(b)["next"]
    assert torch.equal(b["blue", "reward"], a["agents", "reward"][:, [2, 0]])
    assert torch.equal(one.get_state()["player_position"], split.get_state()["player_position"])
