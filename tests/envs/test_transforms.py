import pytest
import torch

from marl.envs import (
    Compose,
    DoubleToFloat,
    ExcludeTransform,
    InitTracker,
    ObservationNorm,
    RenameTransform,
    RewardSum,
    StepCounter,
    TransformedEnv,
    check_env_specs,
)
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv

TRANSFORMS = {
    "RewardSum": lambda: RewardSum(),
    "StepCounter": lambda: StepCounter(5),
    "DoubleToFloat": lambda: DoubleToFloat(),
    "InitTracker": lambda: InitTracker(),
    "ObservationNorm": lambda: ObservationNorm(
        loc=0.5, scale=2.0, in_keys=[("walker", "observation")]
    ),
    "Exclude": lambda: ExcludeTransform("state"),
    "Rename": lambda: RenameTransform([("walker", "observation")], [("walker", "obs")]),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
@pytest.mark.parametrize("num_envs", [None, 3])
def test_each_transform_passes_check_env_specs(name, num_envs):
    env = TransformedEnv(MultiAgentFakeEnv(num_envs=num_envs), TRANSFORMS[name]())
    check_env_specs(env, steps=12)


def test_all_transforms_together_and_on_single_agent():
    env = TransformedEnv(
        SingleAgentFakeEnv(num_envs=2, dtype=torch.float64, p_terminate=0.0),
        [DoubleToFloat(), RewardSum(), StepCounter(4), InitTracker(), ObservationNorm(0.0, 1.0)],
    )
    check_env_specs(env, steps=10)
    td = env.rollout(3)
    assert td["observation"].dtype == torch.float32
    assert td["action"].dtype == torch.float32
    assert td["next", "episode_reward"].shape == (2, 3, 1)


def test_reward_sum_accumulates_per_agent_and_resets_on_done():
    env = TransformedEnv(
        MultiAgentFakeEnv(num_envs=4, min_steps=3, max_steps=4, seed=0), RewardSum()
    )
    td = env.rollout(12, break_when_any_done=False)
    r = td["next", "picker", "reward"]
    ep = td["next", "picker", "episode_reward"]
    done = td["next", "done"]
    expected = torch.zeros_like(r[:, 0])
    for t in range(12):
        expected = expected + r[:, t]
        assert torch.allclose(ep[:, t], expected)
        expected = torch.where(done[:, t, :, None], torch.zeros_like(expected), expected)
    assert done.any()
    # the root episode reward after a reset is zero
    assert (td["picker", "episode_reward"][:, 0] == 0).all()


def test_step_counter_truncates_root_and_groups():
    env = TransformedEnv(MultiAgentFakeEnv(num_envs=2, min_steps=50, max_steps=60), StepCounter(3))
    td = env.rollout(20)
    assert td.shape == (2, 3)
    assert td["next", "truncated"][:, -1].all() and td["next", "done"][:, -1].all()
    assert td["next", "walker", "truncated"][:, -1].all()
    assert td["next", "picker", "done"][:, -1].all()
    assert not td["next", "terminated"].any()
    assert td["next", "step_count"][:, -1].squeeze(-1).tolist() == [3, 3]
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        StepCounter(0)


def test_init_tracker_flags_first_step_after_partial_resets():
    env = TransformedEnv(
        SingleAgentFakeEnv(num_envs=3, max_steps=2, p_terminate=0.0), InitTracker()
    )
    td = env.rollout(6, break_when_any_done=False)
    assert td["is_init"].squeeze(-1).tolist() == [[True, False] * 3] * 3


def test_observation_norm_init_stats_and_error_without_stats():
    env = TransformedEnv(SingleAgentFakeEnv(num_envs=16, seed=0), ObservationNorm())
    with pytest.raises(RuntimeError, match="init_stats"):
        env.rollout(2)
    env.transform[0].init_stats(num_iter=40)
    obs = env.rollout(40, break_when_any_done=False)["observation"]
    assert obs.mean((0, 1)).abs().max() < 0.2
    assert (obs.std((0, 1)) - 1).abs().max() < 0.2


def test_parent_sees_env_before_transform():
    t1, t2 = RewardSum(), StepCounter(4)
    env = TransformedEnv(MultiAgentFakeEnv(num_envs=2), [t1, t2])
    assert t1.parent is env.base_env
    parent = t2.parent
    assert isinstance(parent, TransformedEnv)
    assert ("walker", "episode_reward") in parent.observation_spec
    assert "step_count" not in parent.observation_spec
    assert "step_count" in env.observation_spec
    with pytest.raises(RuntimeError, match="already belongs"):
        TransformedEnv(MultiAgentFakeEnv(), t1)


def test_append_and_insert_update_specs():
    env = TransformedEnv(SingleAgentFakeEnv(num_envs=2))
    assert "step_count" not in env.observation_spec
    env.append_transform(StepCounter(3))
    assert "step_count" in env.observation_spec
    env.insert_transform(0, InitTracker())
    assert [type(t).__name__ for t in env.transform] == ["InitTracker", "StepCounter"]
    check_env_specs(env)
    with pytest.raises(TypeError, match="expected a Transform"):
        env.append_transform(lambda td: td)


def test_rename_actions_inverse():
    env = TransformedEnv(
        SingleAgentFakeEnv(num_envs=2, p_terminate=0.0),
        RenameTransform(["observation"], ["obs"], in_keys_inv=["action"], out_keys_inv=["act"]),
    )
    assert "act" in env.action_spec and "action" not in env.action_spec
    td = env.rollout(3)
    assert "act" in td.keys() and "obs" in td.keys()
    check_env_specs(env)


def test_exclude_refuses_done_keys():
    env = TransformedEnv(SingleAgentFakeEnv(), ExcludeTransform("done"))
    with pytest.raises(ValueError, match="cannot drop 'done'"):
        _ = env.observation_spec


def test_transform_forward_on_offline_data():
    data = SingleAgentFakeEnv(num_envs=2, dtype=torch.float64).rollout(3)
    t = Compose(DoubleToFloat(in_keys=["observation"]))
    env = TransformedEnv(SingleAgentFakeEnv(dtype=torch.float64), t)
    _ = env.observation_spec
    out = t(data)
    assert out["observation"].dtype == torch.float32
    assert out["next", "observation"].dtype == torch.float32


def test_observation_norm_floors_the_scale_of_features_constant_in_the_sample():
    pytest.importorskip("vmas")
    from marl.envs import VmasEnv

    env = TransformedEnv(
        VmasEnv("navigation", num_envs=16, n_agents=3, max_steps=100, seed=0),
        ObservationNorm(in_keys=[("agent", "observation")]),
    )
    norm = env.transform[0]
    norm.init_stats(num_iter=50)
    obs = env.rollout(200, break_when_any_done=False)["agent", "observation"]
    assert obs.abs().max() < 100  # was 2.6e5 with a 1e-6 floor
    # the LIDAR features are constant (nothing in range) for some agents in the sample
    assert (norm.scale == 1e-2).any() and (norm.scale >= 1e-2).all()


def test_observation_norm_over_groups_of_different_shapes():
    keys = [("walker", "observation"), ("picker", "observation"), "state"]
    env = TransformedEnv(MultiAgentFakeEnv(num_envs=16, seed=0), ObservationNorm(in_keys=keys))
    norm = env.transform[0]
    norm.init_stats(num_iter=40)
    assert norm.stats_of(("walker", "observation"))[0].shape == (2, 6)
    assert norm.stats_of(("picker", "observation"))[1].shape == (3, 4)
    assert norm.stats_of("state")[0].shape == (8,)
    check_env_specs(env, steps=5)
    td = env.rollout(40, break_when_any_done=False)
    for key in keys:
        obs = td[key]
        assert obs.mean((0, 1)).abs().max() < 0.3, key
        assert (obs.std((0, 1)) - 1).abs().max() < 0.3, key
    # the stats are buffers: a fresh transform loads them from the state_dict
    state = norm.state_dict()
    assert sorted(state) == [f"stats.{i}.{s}" for i in range(3) for s in ("loc", "scale")]
    fresh = ObservationNorm(in_keys=keys)
    env2 = TransformedEnv(MultiAgentFakeEnv(num_envs=16, seed=0), fresh)
    fresh.load_state_dict(state)
    for key in keys:
        assert torch.equal(fresh.stats_of(key)[0], norm.stats_of(key)[0])
    torch.testing.assert_close(
        env2.rollout(3)["state"],
        TransformedEnv(
            MultiAgentFakeEnv(num_envs=16, seed=0),
            ObservationNorm(
                loc={k: norm.stats_of(k)[0] for k in keys},
                scale={k: norm.stats_of(k)[1] for k in keys},
                in_keys=keys,
            ),
        ).rollout(3)["state"],
    )


def test_observation_norm_shared_stats_that_do_not_fit_a_key_are_refused():
    keys = [("walker", "observation"), ("picker", "observation")]
    env = TransformedEnv(
        MultiAgentFakeEnv(num_envs=2), ObservationNorm(loc=torch.zeros(6), scale=1.0, in_keys=keys)
    )
    with pytest.raises(
        ValueError, match=r"loc of shape \(6,\).*\('picker', 'observation'\).*\(2, 3, 4\)"
    ):
        _ = env.observation_spec
    with pytest.raises(ValueError, match=r"loc.*keys not in in_keys.*'stat'"):
        ObservationNorm(loc={"stat": 0.0}, scale=1.0, in_keys=["state"])
    with pytest.raises(ValueError, match="min_scale must be > 0"):
        ObservationNorm(min_scale=0.0)


@pytest.mark.parametrize("seed_via", ["constructor", "set_seed"])
def test_random_actions_follow_the_env_seed_not_the_global_stream(seed_via):
    """A seeded env's random actions (off-policy warm-up, random baselines) repeat
    whatever torch's global generator did before, and the transforms do not change that."""

    def actions(env_seed, global_seed):
        torch.manual_seed(global_seed)
        if seed_via == "constructor":
            env = TransformedEnv(MultiAgentFakeEnv(num_envs=4, seed=env_seed), [StepCounter(9)])
        else:
            env = TransformedEnv(MultiAgentFakeEnv(num_envs=4), [StepCounter(9)])
            env.set_seed(env_seed)
        td = env.reset()
        return torch.cat([env.rand_action(td)[k].float().flatten() for k in env.action_keys])

    first = actions(3, global_seed=0)
    assert torch.equal(first, actions(3, global_seed=1))
    assert not torch.equal(first, actions(4, global_seed=0))
