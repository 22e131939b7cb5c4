"""`marl.envs.native.RwareEnv` against the ``rware`` 2.0.0 package, step by step.

The package's ``Warehouse`` is the specification. The native env draws its random
numbers with torch, so each test copies the package's state into it (``set_state``)
after every package reset, applies the same actions to both and compares the
observations (exactly), rewards and flags at every step. After a delivery the package
draws the new request with numpy: the test checks that the native env replaced the
same queue slots with shelves that were not requested, then copies the package's
queue into it before comparing the observations (their "requested" bits).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

rware = pytest.importorskip("rware")
from rware.warehouse import Direction, RewardType, Warehouse  # noqa: E402

from marl.envs.checks import check_env_specs  # noqa: E402
from marl.envs.native import RwareEnv  # noqa: E402
from marl.envs.native.rware_core import parse_env_id  # noqa: E402

MINI = "xgx\n..."


def _pkg_kwargs(env_id: str, **over) -> dict:
    kw = parse_env_id(env_id)
    kw.update(over)
    kw["reward_type"] = RewardType[kw["reward_type"].upper()]
    return kw


def pkg_state(env: Warehouse) -> dict:
    """The package env's state in ``RwareEnv.get_state``'s layout (numpy)."""
    return {
        "agent_pos": np.array([(a.x, a.y) for a in env.agents], dtype=np.int64),
        "agent_dir": np.array([a.dir.value for a in env.agents], dtype=np.int64),
        "carrying": np.array(
            [a.carrying_shelf.id - 1 if a.carrying_shelf else -1 for a in env.agents]
        ),
        "has_delivered": np.array([a.has_delivered for a in env.agents]),
        "shelf_pos": np.array([(s.x, s.y) for s in env.shelfs], dtype=np.int64),
        "request_queue": np.array([s.id - 1 for s in env.request_queue], dtype=np.int64),
        "steps": np.array(env._cur_steps),
        "inactive_steps": np.array(env._cur_inactive_steps),
    }


def pkg_set_state(env: Warehouse, st: dict) -> tuple:
    """Put a ``get_state``-style state (numpy, one env) into the package env."""
    env.reset(seed=0)
    for a, (x, y), d, c, h in zip(
        env.agents, st["agent_pos"], st["agent_dir"], st["carrying"], st["has_delivered"]
    ):
        a.x, a.y, a.dir = int(x), int(y), Direction(int(d))
        a.carrying_shelf = env.shelfs[c] if c >= 0 else None
        a.has_delivered = bool(h)
    for s, (x, y) in zip(env.shelfs, st["shelf_pos"]):
        s.x, s.y = int(x), int(y)
    env.request_queue = [env.shelfs[k] for k in st["request_queue"]]
    env._cur_steps, env._cur_inactive_steps = int(st["steps"]), int(st["inactive_steps"])
    env._recalc_grid()
    return tuple(env._make_obs(a) for a in env.agents)


def stack(states: list[dict]) -> TensorDict:
    return TensorDict(
        {k: torch.as_tensor(np.stack([s[k] for s in states])) for k in states[0]},
        batch_size=[len(states)],
    )


class Pair:
    """``N`` package envs and one native env with ``num_envs=N``, kept in lockstep."""

    def __init__(self, env_id: str, n_envs: int, seed: int = 0, **kw) -> None:
        self.pkg = [Warehouse(**_pkg_kwargs(env_id, **kw)) for _ in range(n_envs)]
        self.nat = RwareEnv(env_id, num_envs=n_envs, seed=seed, **kw)
        self.n, self.seed, self.deliveries, self.ends = n_envs, seed, 0, 0
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        for i, env in enumerate(self.pkg):
            self.seed += 1
            env.reset(seed=self.seed * 100 + i)
        self.sync()

    def sync(self, obs_check: bool = True) -> None:
        out = self.nat.set_state(stack([pkg_state(e) for e in self.pkg]))
        if obs_check:
            ref = np.stack([np.stack([e._make_obs(a) for a in e.agents]) for e in self.pkg])
            assert torch.equal(out["agents", "observation"], torch.as_tensor(ref))

    def set(self, states: list[dict]) -> None:
        for env, st in zip(self.pkg, states):
            pkg_set_state(env, st)
        self.sync()

    def step(self, actions: np.ndarray) -> None:
        before = [pkg_state(e) for e in self.pkg]
        res = [env.step(list(map(int, a))) for env, a in zip(self.pkg, actions)]
        td = TensorDict({"agents": {"action": torch.as_tensor(actions)}}, batch_size=[self.n])
        out = self.nat.step(td)["next"]
        ref_obs = torch.as_tensor(np.stack([np.stack(r[0]) for r in res]))
        ref_rew = torch.as_tensor(np.array([r[1] for r in res]), dtype=torch.float32)
        ref_done = torch.tensor([r[2] or r[3] for r in res])
        assert torch.equal(out["agents", "reward"][..., 0], ref_rew), (ref_rew, before)
        assert torch.equal(out["done"][:, 0], ref_done)
        assert torch.equal(out["truncated"][:, 0], ref_done)
        assert not out["terminated"].any()
        nat = self.nat.get_state()
        after = [pkg_state(e) for e in self.pkg]
        for i, (b, a) in enumerate(zip(before, after)):
            for key in a:
                if key != "request_queue":
                    assert np.array_equal(nat[key][i].numpy(), a[key]), (key, i, b, a, actions)
            # the same slots replaced, by shelves not requested (distinct requests)
            changed = a["request_queue"] != b["request_queue"]
            q = nat["request_queue"][i].numpy()
            assert np.array_equal(q != b["request_queue"], changed), (i, b, a, q)
            assert len(set(q.tolist())) == len(q)
            if changed.any():
                self.deliveries += int(changed.sum())
            else:
                assert np.array_equal(out["agents", "observation"][i].numpy(), ref_obs[i].numpy())
        # copy the package's state (its new requests) and compare the observations
        obs = self.nat.set_state(stack(after))["agents", "observation"]
        assert torch.equal(obs, ref_obs)
        for i, r in enumerate(res):
            if r[2]:
                self.ends += 1
                self.seed += 1
                self.pkg[i].reset(seed=self.seed * 100 + i)
        if ref_done.any():
            self.sync()

    def random_actions(self) -> np.ndarray:
        n = self.pkg[0].n_agents
        p = [0.1, 0.45, 0.15, 0.15, 0.15] if self.rng.random() < 0.5 else None
        return self.rng.choice(5, size=(self.n, n), p=p)


def test_check_env_specs() -> None:
    check_env_specs(RwareEnv("rware-tiny-2ag-v2", num_envs=4, seed=0))
    check_env_specs(RwareEnv("rware-tiny-4ag-v2", num_envs=3, group_map="one_per_agent"))
    check_env_specs(RwareEnv("rware-tiny-2ag-v2", layout=MINI, request_queue_size=1, max_steps=50))


@pytest.mark.parametrize(
    "env_id, kw, steps",
    [
        ("rware-tiny-2ag-v2", {"max_steps": 60}, 150),
        ("rware-tiny-4ag-v2", {"max_steps": 80, "max_inactivity_steps": 25}, 200),
        ("rware-small-4ag-v2", {"max_steps": 50}, 100),
        ("rware-tiny-2ag-hard-v2", {"max_steps": 40, "reward_type": "global"}, 120),
        (
            "rware-tiny-2ag-v2",
            {
                "layout": MINI,
                "request_queue_size": 1,
                "max_steps": 50,
                "max_inactivity_steps": None,
            },
            300,
        ),
        (
            "rware-tiny-4ag-v2",
            {
                "layout": MINI + "\n...",
                "request_queue_size": 1,
                "reward_type": "two_stage",
                "max_steps": 100,
            },
            250,
        ),
        ("rware-tiny-4ag-v2", {"sensor_range": 2, "max_steps": 30}, 120),
        (
            "rware-tiny-2ag-v2",
            {"sensor_range": 3, "normalised_coordinates": True, "max_steps": 20},
            60,
        ),
    ],
)
@pytest.mark.filterwarnings("ignore:.*precision lowered")  # the package's Box spaces
def test_matches_package_random(env_id: str, kw: dict, steps: int) -> None:
    pair = Pair(env_id, 8, **kw)
    pair.reset()
    for _ in range(steps):
        pair.step(pair.random_actions())
    assert pair.ends > 0
    if kw.get("layout"):
        assert pair.deliveries >= 5  # the mini layouts deliver under random actions


def _state(pos, dirs, carrying=None, queue=(0, 1), base=None) -> dict:
    st = dict(base)
    n = len(pos)
    st["agent_pos"] = np.array(pos, dtype=np.int64)
    st["agent_dir"] = np.array(dirs, dtype=np.int64)
    st["carrying"] = np.array(carrying if carrying is not None else [-1] * n, dtype=np.int64)
    st["has_delivered"] = np.zeros(n, dtype=bool)
    st["request_queue"] = np.array(queue, dtype=np.int64)
    for r, c in zip(st["agent_pos"], st["carrying"]):
        if c >= 0:
            st["shelf_pos"] = st["shelf_pos"].copy()
            st["shelf_pos"][c] = r
    return st


U, D, L, R = 0, 1, 2, 3


def test_edge_cases() -> None:
    """Collisions, chains, swaps, cycles, loads and deliveries set up on purpose."""
    pair = Pair("rware-tiny-4ag-v2", 1)
    pair.reset()
    base = pkg_state(pair.pkg[0])
    f = [1, 1, 1, 1]
    cases = [
        # two robots into one empty cell, the others idle / moving elsewhere (set order)
        ([(1, 0), (3, 0), (0, 5), (9, 5)], [R, L, D, D], None, f),
        ([(1, 0), (3, 0), (0, 5), (9, 5)], [R, L, D, D], None, [1, 1, 0, 0]),
        ([(5, 1), (5, 3), (4, 2), (6, 2)], [D, U, R, L], None, f),  # four into one cell
        ([(0, 0), (1, 0), (2, 0), (9, 9)], [R, R, R, U], None, f),  # a chain
        ([(0, 0), (1, 0), (9, 0), (9, 9)], [R, L, U, U], None, f),  # a swap
        ([(0, 0), (1, 0), (1, 1), (0, 1)], [R, D, L, U], None, f),  # a 4-cycle
        ([(0, 0), (1, 0), (2, 0), (9, 9)], [R, R, U, U], None, f),  # a chain into a wall
        ([(0, 1), (3, 1), (6, 1), (9, 1)], [R, L, R, L], [0, 2, -1, -1], f),  # loaded into shelves
        ([(0, 1), (1, 1), (6, 0), (9, 1)], [R, R, U, L], [0, 1, -1, -1], f),  # loaded follow loaded
        ([(1, 1), (4, 9), (2, 1), (4, 10)], [U, U, U, U], [-1, 5, 1, 3], [4, 4, 4, 4]),  # toggles
        ([(4, 9), (5, 9), (3, 5), (0, 0)], [D, D, U, U], [0, 1, -1, -1], f),  # deliveries
    ]
    for pos, dirs, carrying, actions in cases:
        for rot in range(4):  # every robot order, so that ties go both ways
            perm = np.roll(np.arange(4), rot)
            st = _state(
                [pos[k] for k in perm],
                [dirs[k] for k in perm],
                None if carrying is None else [carrying[k] for k in perm],
                base=base,
            )
            pair.set([st])
            pair.step(np.array([[actions[k] for k in perm]]))
    assert pair.deliveries >= 8


def test_dense_collisions() -> None:
    """Crowded robots moving mostly forward: chains, merges, cycles, ties, set order."""
    for n_agents in (3, 5):
        pair = Pair("rware-tiny-2ag-v2", 64, seed=n_agents, n_agents=n_agents, max_steps=400)
        pair.reset()
        rng = np.random.default_rng(n_agents)
        for _ in range(3):
            states = []
            for env in pair.pkg:
                st = pkg_state(env)
                cells = rng.choice(16, size=n_agents, replace=False)  # a 4x4 corner
                st["agent_pos"] = np.stack([cells % 4, cells // 4 + 6], 1)
                st["agent_dir"] = rng.integers(0, 4, n_agents)
                states.append(_state(st["agent_pos"], st["agent_dir"], queue=(0, 1), base=st))
            pair.set(states)
            for _ in range(5):
                pair.step(rng.choice(5, size=(64, n_agents), p=[0.05, 0.8, 0.05, 0.05, 0.05]))


def test_scripted_deliveries() -> None:
    """A robot loads a requested shelf, carries it to a goal (reward), fails to unload
    it there (a highway), carries it back and unloads it (the second half, two-stage)."""
    pair = Pair("rware-tiny-2ag-v2", 1, reward_type="two_stage", max_steps=400)
    pair.reset()
    base = pkg_state(pair.pkg[0])
    for _ in range(6):
        queue = pair.nat.get_state()["request_queue"][0].numpy()
        shelf = int(queue[0])
        sx, sy = (int(v) for v in base["shelf_pos"][shelf])
        left = sx % 3 == 1  # the highway column beside the shelf
        st = _state([(sx, sy), (0, 0)], [L if left else R, U], queue=queue, base=base)
        st["shelf_pos"] = base["shelf_pos"]
        pair.set([st])
        hx = sx - 1 if left else sx + 1
        gx = 4 if hx <= 3 else 5
        down = [2 if left else 3]  # turn to face down
        to_goal = [2 if gx > hx else 3]  # from facing down, face the goal along the row
        acts = [4, 1] + down + [1] * (10 - sy) + to_goal + [1] * abs(gx - hx)
        before = pair.deliveries
        for a in acts:
            pair.step(np.array([[a, 0]]))
        assert pair.deliveries == before + 1
        # unloading on the goal fails; back up the queue lane and unload on a shelf cell
        back = [4, 2, 2] + [1] * abs(gx - hx) + [3 if gx > hx else 2] + [1] * (10 - sy)
        back += [3 if left else 2, 1, 4]
        for a in back:
            pair.step(np.array([[a, 0]]))
    assert pair.deliveries >= 6


@pytest.mark.parametrize("size", ["tiny", "small", "medium", "large"])
def test_layouts_match(size: str) -> None:
    for height in (2, 5, 8):
        kw = _pkg_kwargs(f"rware-{size}-2ag-v2", column_height=height)
        ref = Warehouse(**kw)
        kw["reward_type"] = "individual"
        env = RwareEnv(**kw)
        assert env.grid_size == ref.grid_size and env.goals == ref.goals
        assert env._highways.reshape(ref.grid_size).numpy().tolist() == ref.highways.tolist()
    ref = Warehouse(**_pkg_kwargs("rware-tiny-2ag-v2", layout=MINI))
    env = RwareEnv("rware-tiny-2ag-v2", layout=MINI)
    assert env.goals == ref.goals and env.grid_size == ref.grid_size


def test_state_round_trip() -> None:
    env = RwareEnv("rware-tiny-4ag-v2", num_envs=3, seed=2)
    env.reset()
    for _ in range(4):
        env.step(env.rand_action())
    state = env.get_state()
    first = env.step(env.rand_action())["next", "agents", "observation"]
    env.set_state(state)
    assert (env.get_state() == state).all()
    env.step(env.rand_action())
    back = env.set_state(state)
    assert (env.get_state() == state).all() and back["agents", "observation"].shape == first.shape


def test_partial_reset() -> None:
    env = RwareEnv("rware-tiny-2ag-v2", num_envs=4, seed=1)
    env.reset()
    for _ in range(5):
        env.step(env.rand_action())
    before = env.get_state()
    mask = torch.tensor([[True], [False], [True], [False]])
    td = env.reset(TensorDict({"_reset": mask}, batch_size=[4]))
    after = env.get_state()
    for key in before.keys():
        assert torch.equal(after[key][1], before[key][1]) and torch.equal(
            after[key][3], before[key][3]
        )
    assert (after["steps"][[0, 2]] == 0).all() and (after["steps"][[1, 3]] == 5).all()
    assert not td["done"].any()


def test_bad_arguments() -> None:
    cases = [
        ({"env_id": "rware-huge-2ag-v2"}, "env_id"),
        ({"env_id": "rware-tiny-2ag-v2", "shelf_columns": 2}, "shelf_columns"),
        ({"n_agents": 0}, "n_agents"),
        ({"msg_bits": 2}, "msg_bits"),
        ({"reward_type": "team"}, "reward_type"),
        ({"observation_type": "image"}, "observation_type"),
        ({"num_envs": 0}, "num_envs"),
        ({"sensor_range": 0}, "sensor_range"),
        ({"request_queue_size": 100}, "request_queue_size"),
        ({"layout": "xgx\n.."}, "rectangular"),
        ({"layout": "xx\n.."}, "goal"),
        ({"max_steps": -1}, "max_steps"),
    ]
    for kw, word in cases:
        with pytest.raises(ValueError, match=word):
            RwareEnv(**kw)


def test_render_and_unbatched() -> None:
    env = RwareEnv("rware-tiny-2ag-v2", seed=0)
    td = env.rollout(3)
    assert td["agents", "observation"].shape == (3, 2, 71)
    img = env.render()
    assert img.shape == (220, 200, 3) and img.dtype == np.uint8
    assert env.get_state()["agent_pos"].shape == (2, 2)
