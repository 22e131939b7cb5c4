import pytest
import torch
from tensordict import TensorDict

from marl.envs import EnvSpecError, check_env_specs, step_mdp
from marl.specs import Unbounded
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv


@pytest.mark.parametrize(
    "make",
    [
        lambda: MultiAgentFakeEnv(num_envs=3, seed=0),
        lambda: MultiAgentFakeEnv(seed=0),
        lambda: SingleAgentFakeEnv(num_envs=4, seed=0),
        lambda: SingleAgentFakeEnv(seed=0, discrete=True),
    ],
)
def test_fake_envs_pass_check_env_specs(make):
    check_env_specs(make(), steps=12)


def test_multiagent_layout_and_keys():
    env = MultiAgentFakeEnv(num_envs=4, seed=1)
    assert env.group_map.to_dict() == {
        "walker": ["walker_0", "walker_1"],
        "picker": ["picker_0", "picker_1", "picker_2"],
    }
    assert set(env.action_keys) == {("walker", "action"), ("picker", "action")}
    assert set(env.reward_keys) == {("walker", "reward"), ("picker", "reward")}
    assert "done" in env.done_keys and ("picker", "terminated") in env.done_keys
    td = env.rollout(6, break_when_any_done=False)
    assert td.batch_size == (4, 6)
    assert td["walker", "observation"].shape == (4, 6, 2, 6)
    assert td["picker", "observation"].shape == (4, 6, 3, 4)
    assert td["picker", "action_mask"].shape == (4, 6, 3, 5)
    assert td["state"].shape == (4, 6, 8)
    assert td["next", "walker", "reward"].shape == (4, 6, 2, 1)
    assert td["next", "done"].shape == (4, 6, 1)
    assert td["next", "picker", "done"].shape == (4, 6, 3, 1)
    # random actions honour the action mask: never the illegal reward
    assert (td["next", "picker", "reward"] >= 0).all()
    with pytest.raises(KeyError, match="2 action keys"):
        _ = env.action_key


def test_per_agent_done_and_env_done():
    env = MultiAgentFakeEnv(num_envs=16, min_steps=2, max_steps=6, seed=3)
    td = env.rollout(6, break_when_any_done=False)
    agent_done = torch.cat([td["next", "walker", "done"], td["next", "picker", "done"]], -2)
    env_done = td["next", "done"]
    assert torch.equal(env_done, agent_done.all(-2))
    # some agent finishes before its env does
    assert (agent_done.any(-2) & ~env_done).any()


def test_step_checks_action_shape_and_presence():
    env = MultiAgentFakeEnv(num_envs=2)
    td = env.rand_action(env.reset())
    td["walker", "action"] = torch.zeros(2, 2, 3)
    with pytest.raises(
        ValueError, match=r"\('walker', 'action'\) has shape \(2, 2, 3\), expected \(2, 2, 2\)"
    ):
        env.step(td)
    td = env.reset()
    with pytest.raises(KeyError, match="needs the action"):
        env.step(td)


def test_partial_reset_only_touches_masked_envs():
    env = SingleAgentFakeEnv(num_envs=4, seed=0)
    td = env.reset()
    td = env.rand_action(td)
    td = step_mdp(env.step(td), env.reward_keys)
    before = td["observation"].clone()
    td["_reset"] = torch.tensor([[True], [False], [True], [False]])
    out = env.reset(td)
    assert torch.equal(out["observation"][[1, 3]], before[[1, 3]])
    assert not torch.equal(out["observation"][[0, 2]], before[[0, 2]])
    assert "_reset" not in out.keys()
    with pytest.raises(ValueError, match='"_reset" has shape'):
        env.reset(TensorDict({"_reset": torch.ones(4, 2, dtype=torch.bool)}, [4]))
    with pytest.raises(ValueError, match="must be a bool"):
        env.reset(TensorDict({"_reset": torch.ones(4, 1)}, [4]))


def test_step_and_maybe_reset_resets_only_ended_envs():
    env = SingleAgentFakeEnv(num_envs=3, max_steps=3, p_terminate=0.0, seed=0)
    root = env.reset()
    for _ in range(3):
        td, root = env.step_and_maybe_reset(env.rand_action(root))
    assert td["next", "done"].all()  # all truncated at step 3
    assert not root["done"].any()  # and reset for the next step
    assert torch.equal(td["next", "truncated"], td["next", "done"])
    assert not td["next", "terminated"].any()


def test_rollout_break_and_continue():
    env = SingleAgentFakeEnv(num_envs=2, max_steps=4, p_terminate=0.0, seed=0)
    assert env.rollout(10).shape == (2, 4)
    assert env.rollout(10, break_when_any_done=False).shape == (2, 10)
    start = env.reset()
    td = env.rollout(2, auto_reset=False, tensordict=start)
    assert torch.equal(td["observation"][:, 0], start["observation"])
    with pytest.raises(ValueError, match="needs a starting tensordict"):
        env.rollout(2, auto_reset=False)
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        env.rollout(0)


def test_rollout_with_policy():
    env = SingleAgentFakeEnv(num_envs=5, seed=0)

    def policy(td):
        td["action"] = td["observation"][..., :2].clamp(-1, 1)
        return td

    td = env.rollout(8, policy, break_when_any_done=False)
    assert torch.allclose(td["next", "reward"], torch.zeros(5, 8, 1), atol=1e-6)


def test_seeding_is_reproducible():
    a = MultiAgentFakeEnv(num_envs=3)
    b = MultiAgentFakeEnv(num_envs=3)
    a.set_seed(7)
    b.set_seed(7)
    ta, tb = a.rollout(5), b.rollout(5)
    assert (ta == tb).all()


def test_check_env_specs_reports_mismatch():
    env = SingleAgentFakeEnv(num_envs=2)
    env.observation_spec["observation"] = Unbounded((2, 5))
    with pytest.raises(EnvSpecError, match=r"'observation': shape \(2, 4\) != spec \(2, 5\)"):
        check_env_specs(env)


def test_closed_env_raises():
    env = SingleAgentFakeEnv()
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


def test_key_lists_follow_specs_changed_in_place():
    # EnvBase caches the (key, spec) leaves it reads at every step; an entry set into
    # or deleted from a composite (nested included) must show at once
    env = MultiAgentFakeEnv(seed=0)
    env.rollout(2)
    assert ("walker", "extra") not in env.action_keys
    env.action_spec["walker"]["extra"] = Unbounded((2, 3))
    assert ("walker", "extra") in env.action_keys
    td = env.rand_action(env.reset())
    assert td["walker", "extra"].shape == (2, 3)
    del env.action_spec["walker", "extra"]
    assert ("walker", "extra") not in env.action_keys
    env.reward_spec["walker"]["bonus"] = Unbounded((2, 1))
    assert ("walker", "bonus") in env.reward_keys
