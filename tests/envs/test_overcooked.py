"""`OvercookedEnv`: specs, the horizon, the rewards of a served soup, errors, the catalogue."""

from __future__ import annotations

import sys

import pytest
import torch

pytest.importorskip("overcooked_ai_py")

from marl.envs import OvercookedEnv, check_env_specs, make_task
from marl.envs.libs.overcooked import layouts
from marl.envs.tasks import install_hints, task_available

N, S, E, W, STAY, INTERACT = range(6)  # Action.ALL_ACTIONS order
_ONION = [W, INTERACT, E, N, INTERACT]  # from (1, 1): take an onion, put it in the pot
# agent_0 cooks and serves one onion soup on cramped_room alone (agent_1 stays put):
# three onions, start the cooking, wait 20 steps, take a dish, plate the soup, serve it
SOUP = [N, *_ONION, *_ONION, *_ONION, INTERACT, *[STAY] * 20, S, W, S, INTERACT]
SOUP += [N, E, N, INTERACT, S, E, S, INTERACT]
SERVED = len(SOUP) - 1


def _mdp_rewards(actions):
    """The package's own per-step (sparse, shaped) rewards by agent for ``actions``."""
    from overcooked_ai_py.mdp.actions import Action
    from overcooked_ai_py.mdp.overcooked_mdp import OvercookedGridworld

    mdp = OvercookedGridworld.from_layout_name("cramped_room")
    state = mdp.get_standard_start_state()
    out = []
    for a in actions:
        state, info = mdp.get_state_transition(state, (Action.ALL_ACTIONS[a], Action.STAY))
        out.append((info["sparse_reward_by_agent"], info["shaped_reward_by_agent"]))
    return out


def _play(env, actions):
    td = env.reset()
    rewards = []
    for a in actions:
        td["agent", "action"] = torch.tensor([a, STAY])
        td = env.step(td)
        rewards.append(td["next", "agent", "reward"].clone())
        td = td["next"].exclude(("agent", "reward"))  # an episode never ends within SOUP
    return torch.stack(rewards)


@pytest.mark.parametrize(
    "layout, shape",
    [
        ("cramped_room", (5, 4)),
        ("asymmetric_advantages", (9, 5)),
        ("coordination_ring", (5, 5)),
        ("forced_coordination", (5, 5)),
        ("counter_circuit_o_1order", (8, 5)),
    ],
)
def test_specs(layout, shape):
    env = OvercookedEnv(layout, horizon=6)
    check_env_specs(env, steps=6)
    assert env.group_map.to_dict() == {"agent": ["agent_0", "agent_1"]}
    obs = env.observation_spec["agent", "observation"]
    assert obs.shape == (2, *shape, 26) and obs.dtype == torch.float32
    action = env.action_spec["agent", "action"]
    assert action.shape == (2,) and action.n == 6
    assert env.reward_spec["agent", "reward"].shape == (2, 1)
    td = env.rollout(6)
    assert td["agent", "observation"].dtype == torch.float32
    assert td["next", "agent", "reward"].dtype == torch.float32
    # each player's own view: its own position is channel 0, its partner's channel 1
    first = td["agent", "observation"][0]
    assert torch.equal(first[0, ..., 0], first[1, ..., 1])
    assert not torch.equal(first[0, ..., 0], first[1, ..., 0])


def test_one_hot_actions_and_other_group_maps():
    env = OvercookedEnv("cramped_room", horizon=3, categorical_actions=False)
    assert env.action_spec["agent", "action"].shape == (2, 6)
    check_env_specs(env, steps=3)
    env = OvercookedEnv("cramped_room", horizon=3, group_map="one_per_agent")
    assert env.group_map.to_dict() == {"agent_0": ["agent_0"], "agent_1": ["agent_1"]}
    td = env.rollout(3)
    assert td["agent_1", "observation"].shape == (3, 1, 5, 4, 26)
    check_env_specs(env, steps=3)


def test_rollout_is_truncated_at_the_horizon_not_terminated():
    env = OvercookedEnv("cramped_room")  # the standard 400 steps
    td = env.rollout(1000, break_when_any_done=True)
    assert td.shape == (400,)
    done = td["next", "done"][:, 0]
    assert done[-1] and not done[:-1].any()
    assert torch.equal(td["next", "truncated"], td["next", "done"])
    assert not td["next", "terminated"].any()
    # the next episode starts over from the standard start state
    assert torch.equal(env.reset()["agent", "observation"], td["agent", "observation"][0])
    env = OvercookedEnv("cramped_room", horizon=7)
    assert env.rollout(100, break_when_any_done=True).shape == (7,)


def test_serving_a_soup_pays_both_players_the_mdps_reward():
    env = OvercookedEnv("cramped_room", horizon=len(SOUP) + 1)
    rewards = _play(env, SOUP)[..., 0]  # [steps, 2]
    assert rewards[SERVED].tolist() == [20.0, 20.0]  # the team's soup, to each player
    assert rewards[:SERVED].abs().sum() == 0  # reward_shaping=0: the score only
    assert rewards.sum() == 40.0
    # with shaping, each player also gets its own shaped reward, as the MDP gives it
    shaped = OvercookedEnv("cramped_room", horizon=len(SOUP) + 1, reward_shaping=0.5)
    got = _play(shaped, SOUP)[..., 0]
    expected = torch.tensor(
        [[sum(sparse) + 0.5 * s for s in shaping] for sparse, shaping in _mdp_rewards(SOUP)]
    )
    assert torch.equal(got, expected)
    # 3 for each of the three onions put in the pot, 3 for the dish, 5 for the soup
    assert got[:, 0].sum() == 40.0 / 2 + 0.5 * 17 and got[:, 1].sum() == 20.0


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match=r"unknown Overcooked layout 'cramped'.*cramped_room"):
        OvercookedEnv("cramped")
    assert {"cramped_room", "counter_circuit_o_1order"} <= set(layouts())
    with pytest.raises(ValueError, match=r"horizon must be a positive int.*0"):
        OvercookedEnv("cramped_room", horizon=0)
    with pytest.raises(ValueError, match=r"reward_shaping must be a number.*'a'"):
        OvercookedEnv("cramped_room", reward_shaping="a")
    with pytest.raises(ValueError, match="bogus"):
        make_task("overcooked/cramped_room", bogus=1)


def test_missing_package_names_the_extra(monkeypatch):
    for name in [m for m in sys.modules if m.split(".")[0] == "overcooked_ai_py"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "overcooked_ai_py", None)
    with pytest.raises(ImportError, match=r'pip install "marl\[overcooked\]"'):
        OvercookedEnv("cramped_room")
    assert not task_available("overcooked/cramped_room")
    names, command = install_hints()["overcooked"]
    assert len(names) == 5 and command == 'pip install "marl[overcooked]"'
    from marl.experiment.cli import _tasks  # marl-run --help's task list

    text = _tasks()
    assert "overcooked/cramped_room" not in text.split("\n")[0]
    assert '5 overcooked tasks (pip install "marl[overcooked]")' in text


def test_make_task_stacks_envs_in_a_serial_env():
    env = make_task("overcooked/counter_circuit", num_envs=2, seed=0, horizon=3)
    td = env.rollout(3)
    assert td["agent", "observation"].shape == (2, 3, 2, 8, 5, 26)
    assert td["next", "agent", "episode_reward"].shape == (2, 3, 2, 1)
    assert td["next", "truncated"][:, -1].all()


@pytest.mark.parametrize("task, cells", [("cramped_room", 5 * 4), ("counter_circuit", 4 * 1)])
def test_the_cnn_body_reads_the_kitchen_channels_last(task, cells):
    """26 channels over a 5x4 grid: the channels are the last dim, not the smaller end
    one, and cramped_room's grid is padded rather than used up by two 3x3 convs."""
    from marl.algorithms import Algorithm

    env = make_task(f"overcooked/{task}", num_envs=2, seed=0, horizon=3)
    algo = Algorithm("mappo", {"network": "cnn"}).build(env, seed=0)
    net = algo.learners["agent"].policy[0].module.net
    assert net.channels_last and net.conv.in_channels == 26
    td = env.reset()
    feats = net.conv(td["agent", "observation"].movedim(-1, -3))
    assert feats.shape == (2, 2, 16 * cells)
    assert algo.learners["agent"].policy(td)["agent", "action"].shape == (2, 2)
