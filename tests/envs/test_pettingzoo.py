"""PettingZooEnv: parallel and AEC APIs, masks, groups, agents leaving."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")

from gymnasium.spaces import Box, Discrete
from pettingzoo.utils.env import ParallelEnv

from marl.envs import PettingZooEnv, RewardSum, TransformedEnv, check_env_specs


def _mpe_available() -> bool:
    try:
        import mpe2  # noqa: F401
    except ImportError:
        return False
    return True


needs_mpe = pytest.mark.skipif(not _mpe_available(), reason="mpe2 is not installed")


@needs_mpe
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(task="simple_spread_v3", max_cycles=5),
        dict(task="simple_adversary_v3", max_cycles=5),
        dict(task="simple_tag_v3", max_cycles=5),
        dict(task="simple_spread_v3", max_cycles=5, return_state=True, continuous_actions=True),
        dict(task="simple_spread_v3", max_cycles=5, categorical_actions=False),
        dict(task="simple_spread_v3", max_cycles=5, parallel=False),
    ],
    ids=["spread", "adversary", "tag", "spread-state-continuous", "spread-onehot", "spread-aec"],
)
def test_mpe_check_env_specs(kwargs):
    env = PettingZooEnv(seed=0, **kwargs)
    check_env_specs(env, steps=7)
    check_env_specs(TransformedEnv(env, RewardSum()), steps=3)


def test_sisl_check_env_specs():
    pytest.importorskip("pettingzoo.sisl")
    try:
        env = PettingZooEnv("multiwalker_v9", seed=0, max_cycles=5)
    except ImportError as err:
        pytest.skip(f"sisl dependencies missing: {err}")
    assert env.observation_spec["walker", "observation"].shape == (3, 31)
    check_env_specs(env, steps=7)


@pytest.mark.parametrize("task", ["tictactoe_v3", "connect_four_v3"])
def test_classic_aec_check_env_specs(task):
    pytest.importorskip("pettingzoo.classic")
    env = PettingZooEnv(task, parallel=False, seed=0)
    assert "action_mask" in env.observation_spec["player"]
    check_env_specs(env, steps=12)


@needs_mpe
def test_simple_tag_groups_and_custom_maps():
    env = PettingZooEnv("simple_tag_v3", seed=0, max_cycles=5)
    assert env.group_map.to_dict() == {
        "adversary": ["adversary_0", "adversary_1", "adversary_2"],
        "agent": ["agent_0"],
    }
    td = env.rollout(3)
    assert td["adversary", "observation"].shape == (3, 3, 16)
    assert td["agent", "observation"].shape == (3, 1, 14)
    assert td["next", "adversary", "reward"].shape == (3, 3, 1)
    assert td["next", "agent", "done"].shape == (3, 1, 1)
    assert td["next", "done"].shape == (3, 1)
    with pytest.raises(ValueError, match="agent_0"):
        PettingZooEnv("simple_tag_v3", group_map="all_in_one")
    spread = PettingZooEnv(
        "simple_spread_v3", group_map={"left": ["agent_0"], "right": ["agent_1", "agent_2"]}
    )
    td = spread.rollout(2)
    assert td["left", "observation"].shape == (2, 1, 18)
    assert td["right", "observation"].shape == (2, 2, 18)


@needs_mpe
def test_return_state_and_truncation():
    env = PettingZooEnv("simple_spread_v3", return_state=True, seed=0, max_cycles=4)
    td = env.rollout(10)
    assert td["state"].shape == (4, 54)
    assert td["next", "truncated"][-1].all() and not td["next", "terminated"].any()


def test_random_masked_policy_plays_legal_tictactoe():
    pytest.importorskip("pettingzoo.classic")
    env = PettingZooEnv("tictactoe_v3", parallel=False, seed=0)
    td = env.reset()
    games = moves = 0
    while games < 10:
        acting = td["player", "mask"]
        assert int(acting.sum()) == 1
        td = env.rand_action(td)
        who = int(acting.nonzero())
        action = int(td["player", "action"][who])
        assert bool(td["player", "action_mask"][who, action]), "illegal move sampled"
        td, root = env.step_and_maybe_reset(td)
        moves += 1
        if bool(td["next", "done"]):
            games += 1
            rewards = td["next", "player", "reward"].flatten()
            # a win scores +1/-1, a draw 0/0; an illegal move would be punished without a win
            assert float(rewards.sum()) == 0.0
            assert moves >= 5
            moves = 0
        td = root
    assert games == 10


def test_aec_mask_alternates_and_observations_refresh():
    pytest.importorskip("pettingzoo.classic")
    env = PettingZooEnv("tictactoe_v3", parallel=False, seed=1)
    td = env.rollout(4)
    masks = td["player", "mask"].int().tolist()
    assert masks == [[1, 0], [0, 1], [1, 0], [0, 1]]
    # after every move both players see the same number of occupied squares
    board = td["next", "player", "observation"].sum(dim=(-1, -2, -3))
    assert torch.equal(board[:, 0], board[:, 1])
    assert board[:, 0].tolist() == [1, 2, 3, 4]


def test_turn_based_is_declared_through_transforms_and_batches():
    """AEC games declare ``turn_based`` (what off-policy learners relink turns on), and
    a batch of them keeps it: ``marl-run`` always trains on a ``SerialEnv``."""
    pytest.importorskip("pettingzoo.classic")
    from marl.envs import ParallelEnv as ParallelBatch
    from marl.envs import SerialEnv

    def aec():
        return PettingZooEnv("tictactoe_v3", parallel=False)

    assert aec().turn_based and not PettingZooEnv(env=_LeavingEnv()).turn_based
    serial = SerialEnv(2, aec)
    assert serial.turn_based and TransformedEnv(serial, RewardSum()).turn_based
    with ParallelBatch(1, aec) as parallel:
        assert TransformedEnv(parallel, RewardSum()).turn_based
    assert not SerialEnv(1, PettingZooEnv, {"env": _LeavingEnv()}).turn_based


class _LeavingEnv(ParallelEnv):
    """A parallel env whose agents end at different steps."""

    metadata = {"name": "leaving_v0"}

    def __init__(self) -> None:
        self.possible_agents = ["a_0", "a_1", "b_0"]
        self.horizon = {"a_0": 2, "a_1": 4, "b_0": 3}
        self._obs = Box(-1.0, 1.0, (3,), np.float32)
        self._act = Discrete(2)
        self.render_mode = None

    def observation_space(self, agent):
        return self._obs

    def action_space(self, agent):
        return self._act

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.t = 0
        return {a: np.full(3, 0.5, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        if set(actions) != set(self.agents):
            raise RuntimeError(f"actions for {sorted(actions)}, live agents {self.agents}")
        self.t += 1
        obs = {a: np.full(3, 0.5, np.float32) for a in self.agents}
        rew = dict.fromkeys(self.agents, 1.0)
        term = {a: self.t >= self.horizon[a] for a in self.agents}
        trunc = dict.fromkeys(self.agents, False)
        infos = {a: {} for a in self.agents}
        self.agents = [a for a in self.agents if not term[a]]
        return obs, rew, term, trunc, infos


def test_agents_leaving_mid_episode():
    env = PettingZooEnv(env=_LeavingEnv(), seed=0)
    check_env_specs(env, steps=9)
    td = env.rollout(10)
    assert td.batch_size == torch.Size([4])  # runs until every agent is done
    assert td["a", "mask"].tolist() == [[True, True], [True, True], [False, True], [False, True]]
    assert td["b", "mask"].flatten().tolist() == [True, True, True, False]
    # entries of agents that left are zeros, their flags stay done
    assert torch.all(td["next", "a", "observation"][2:, 0] == 0)
    assert td["next", "a", "done"][2:, 0].all()
    assert td["next", "a", "reward"][2:, 0].eq(0).all()
    assert td["next", "done"].flatten().tolist() == [False, False, False, True]
    any_env = PettingZooEnv(env=_LeavingEnv(), done_on_any=True)
    assert any_env.rollout(10).batch_size == torch.Size([2])


def test_errors():
    with pytest.raises(ValueError, match="exactly one"):
        PettingZooEnv()
    with pytest.raises(ValueError, match="closest"):
        PettingZooEnv("simple_sprad_v3")
    if _mpe_available():
        with pytest.raises(ValueError, match="bogus"):
            PettingZooEnv("simple_spread_v3", bogus=1)
    pytest.importorskip("pettingzoo.classic")
    with pytest.raises(ValueError, match="parallel=False"):
        PettingZooEnv("tictactoe_v3")
    with pytest.raises(ValueError, match="state"):
        PettingZooEnv("tictactoe_v3", parallel=False, return_state=True)


def test_missing_pettingzoo(monkeypatch):
    monkeypatch.setitem(sys.modules, "pettingzoo", None)
    with pytest.raises(ImportError, match=r"marl\[pettingzoo\]"):
        PettingZooEnv("simple_spread_v3")


class _ReservedNamesEnv(_LeavingEnv):
    """Agents named like root keys of the layout: ``by_prefix`` would make a group "state"."""

    def __init__(self) -> None:
        super().__init__()
        self.possible_agents = ["state_0", "state_1", "b_0"]
        self.horizon = {"state_0": 2, "state_1": 4, "b_0": 3}


def test_reserved_group_names_from_agent_names_are_refused():
    with pytest.raises(ValueError, match=r"'state' is reserved.*Reserved names: \[.*'next'"):
        PettingZooEnv(env=_ReservedNamesEnv())
    with pytest.raises(ValueError, match="'next' is reserved"):
        PettingZooEnv(env=_LeavingEnv(), group_map={"next": ["a_0", "a_1"], "b": ["b_0"]})
    # renaming the group through a dict works
    env = PettingZooEnv(
        env=_ReservedNamesEnv(), group_map={"s": ["state_0", "state_1"], "b": ["b_0"]}
    )
    check_env_specs(env, steps=5)


def test_step_outputs_share_no_memory_across_steps():
    # the done flags are cached between steps; each step must still hand out fresh tensors
    env = PettingZooEnv("simple_spread_v3", seed=0, max_cycles=5)
    td = env.rand_action(env.reset())
    first, root = env.step_and_maybe_reset(td)
    second, _ = env.step_and_maybe_reset(env.rand_action(root))
    first["next", "agent", "done"].fill_(True)
    first["next", "agent", "terminated"].fill_(True)
    first["next", "done"].fill_(True)
    assert not second["next", "agent", "done"].any()
    assert not second["next", "agent", "terminated"].any()
    assert not second["next", "done"].any()
    rollout = env.rollout(12, break_when_any_done=False)
    # max_cycles=5: truncated at steps 4 and 9 (and only there), with the cache in use
    assert rollout["next", "truncated"].squeeze(-1).nonzero().flatten().tolist() == [4, 9]
    per_agent = rollout["next", "agent", "truncated"].squeeze(-1).all(-1)
    assert per_agent.nonzero().flatten().tolist() == [4, 9]
