"""VmasEnv: layout, groups, partial resets, errors."""

from __future__ import annotations

import copy
import sys

import pytest
import torch

pytest.importorskip("vmas")

from marl.envs import RewardSum, TransformedEnv, VmasEnv, check_env_specs


def _snapshot_rng():
    from vmas.simulator.environment import Environment

    return copy.deepcopy(list(Environment.vmas_random_state))


def _restore_rng(state) -> None:
    from vmas.simulator.environment import Environment

    Environment.vmas_random_state[:] = copy.deepcopy(state)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(scenario="navigation", n_agents=3),
        dict(scenario="navigation", n_agents=2, continuous_actions=False),
        dict(
            scenario="navigation", n_agents=2, continuous_actions=False, categorical_actions=False
        ),
        dict(scenario="simple_tag"),
        dict(scenario="balance", n_agents=2, group_map="one_per_agent"),
    ],
    ids=["nav", "nav-categorical", "nav-onehot", "simple_tag", "balance-one-per-agent"],
)
def test_check_env_specs(kwargs):
    env = VmasEnv(num_envs=3, max_steps=4, seed=0, **kwargs)
    check_env_specs(env, steps=6)
    check_env_specs(TransformedEnv(env, RewardSum()), steps=3)


def test_layout_and_shapes():
    env = VmasEnv("navigation", num_envs=4, n_agents=3, max_steps=3, seed=0)
    assert env.batch_size == torch.Size([4])
    assert env.group_map.to_dict() == {"agent": ["agent_0", "agent_1", "agent_2"]}
    td = env.rollout(3)
    assert td.batch_size == torch.Size([4, 3])
    assert td["agent", "observation"].shape == (4, 3, 3, 18)
    assert td["agent", "action"].shape == (4, 3, 3, 2)
    assert td["next", "agent", "reward"].shape == (4, 3, 3, 1)
    assert td["next", "done"].shape == (4, 3, 1)
    assert td["next", "agent", "done"].shape == (4, 3, 3, 1)
    assert td["next", "agent", "info", "pos_rew"].shape == (4, 3, 3)
    # max_steps truncates (not terminates), at the root and in the group
    assert td["next", "truncated"][:, -1].all() and not td["next", "terminated"].any()
    assert td["next", "agent", "truncated"][:, -1].all()
    assert not td["next", "done"][:, :-1].any()


def test_heterogeneous_groups():
    env = VmasEnv("simple_tag", num_envs=2, seed=0)
    assert list(env.group_map) == ["adversary", "agent"]
    td = env.rollout(2)
    assert td["adversary", "observation"].shape[-2:] == (3, 16)
    assert td["agent", "observation"].shape[-2:] == (1, 14)
    with pytest.raises(ValueError, match="agent_0"):
        VmasEnv("simple_tag", num_envs=2, group_map="all_in_one")
    custom = VmasEnv(
        "simple_tag",
        num_envs=2,
        group_map={"hunters": ["adversary_0", "adversary_1", "adversary_2"], "prey": ["agent_0"]},
    )
    assert custom.rollout(1)["hunters", "observation"].shape == (2, 1, 3, 16)


def test_dict_observations():
    from vmas.scenarios.navigation import Scenario

    class DictNav(Scenario):
        def observation(self, agent):
            obs = super().observation(agent)
            return {"own": obs[:, :4], "rest": obs[:, 4:]}

    env = VmasEnv(DictNav(), num_envs=2, n_agents=2, max_steps=3, seed=0)
    td = env.rollout(3)
    assert td["agent", "observation", "own"].shape == (2, 3, 2, 4)
    check_env_specs(env)


@pytest.mark.parametrize("scenario", ["navigation", "balance", "transport"])
def test_vectorized_partial_reset_matches_loop(scenario):
    """Resetting many sub-envs at once leaves the others exactly as a per-index reset does."""
    n = 12
    fast = VmasEnv(scenario, num_envs=n, seed=0, loop_reset_threshold=0)
    slow = VmasEnv(scenario, num_envs=n, seed=0, loop_reset_threshold=n)
    rng = _snapshot_rng()
    ta = fast.reset()
    _restore_rng(rng)
    tb = slow.reset()
    torch.manual_seed(0)
    actions = [fast.action_spec.rand() for _ in range(6)]
    for a in actions[:3]:
        ta = fast.step(ta.update(a))["next"]
        tb = slow.step(tb.update(a))["next"]
    mask = torch.zeros(n, 1, dtype=torch.bool)
    mask[::3] = True
    before = ta["agent", "observation"].clone()
    ta = fast.reset(ta.set("_reset", mask))
    tb = slow.reset(tb.set("_reset", mask))
    keep = ~mask[:, 0]
    assert torch.equal(ta["agent", "observation"][keep], before[keep])
    assert not torch.equal(ta["agent", "observation"][~keep], before[~keep])
    assert torch.equal(fast.vmas_env.steps, slow.vmas_env.steps)
    for a in actions[3:]:
        ta = fast.step(ta.update(a))["next"]
        tb = slow.step(tb.update(a))["next"]
        assert torch.equal(ta["agent", "observation"][keep], tb["agent", "observation"][keep])
        assert torch.equal(ta["agent", "reward"][keep], tb["agent", "reward"][keep])


def test_partial_reset_does_not_loop(monkeypatch):
    env = VmasEnv("navigation", num_envs=64, n_agents=2, seed=0)
    td = env.reset()
    calls = []
    original = env.vmas_env.scenario.env_reset_world_at

    def spy(env_index):
        calls.append(env_index)
        return original(env_index)

    monkeypatch.setattr(env.vmas_env.scenario, "env_reset_world_at", spy)
    mask = torch.rand(64, 1, generator=torch.Generator().manual_seed(0)) < 0.5
    env.reset(td.set("_reset", mask))
    assert calls == [None]


def test_actions_not_modified():
    env = VmasEnv("navigation", num_envs=2, n_agents=2, continuous_actions=False, seed=0)
    td = env.rand_action(env.reset())
    action = td["agent", "action"].clone()
    env.step(td)
    assert torch.equal(td["agent", "action"], action)


def test_errors():
    with pytest.raises(ValueError, match="bogus"):
        VmasEnv("navigation", num_envs=2, bogus=1)
    with pytest.raises(ValueError, match="navigation"):
        VmasEnv("navigaton", num_envs=2)
    with pytest.raises(ValueError, match="num_envs"):
        VmasEnv("navigation", num_envs=0)


def test_missing_vmas(monkeypatch):
    monkeypatch.setitem(sys.modules, "vmas", None)
    with pytest.raises(ImportError, match=r"marl\[vmas\]"):
        VmasEnv("navigation", num_envs=2)


def test_render_rgb_array():
    env = VmasEnv("navigation", num_envs=2, n_agents=2, seed=0)
    env.reset()
    try:
        frame = env.render(mode="rgb_array")
    except Exception as err:  # no OpenGL / pyglet display on this machine
        pytest.skip(f"VMAS rendering unavailable here: {err}")
    assert frame.ndim == 3 and frame.shape[-1] == 3
    env.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda():
    env = VmasEnv("navigation", num_envs=8, n_agents=2, device="cuda", seed=0)
    td = env.rollout(3)
    assert td["agent", "observation"].device.type == "cuda"
    check_env_specs(env)
