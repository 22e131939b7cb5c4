"""The random and no-op baselines of ``marl.testing``."""

import torch

from marl.specs import Bounded, Categorical, OneHot
from marl.testing import MultiAgentFakeEnv, NoopPolicy, compare_with_baselines, random_policy
from marl.testing.baselines import _noop


def test_noop_is_zero_clamped_into_the_bounds():
    spec = Bounded(low=0.5, high=1.0, shape=(4, 2))
    assert torch.equal(_noop(spec, None), torch.full((4, 2), 0.5))
    assert torch.equal(_noop(Bounded(low=-1.0, high=1.0, shape=(3,)), None), torch.zeros(3))


def test_noop_discrete_is_index_zero_or_the_first_legal_choice():
    spec = Categorical(n=4, shape=(2, 3))
    assert torch.equal(_noop(spec, None), torch.zeros(2, 3, dtype=spec.dtype))
    mask = torch.tensor([[False, False, True, True]]).expand(2, 3, 4)
    assert torch.equal(_noop(spec, mask), torch.full((2, 3), 2, dtype=spec.dtype))
    one_hot = _noop(OneHot(n=4, shape=(5, 4)), None)
    assert one_hot.shape == (5, 4) and bool((one_hot[:, 0] == 1).all())


def test_policies_write_every_group_and_respect_masks():
    env = MultiAgentFakeEnv(num_envs=3, seed=0)
    for policy in (NoopPolicy(env), random_policy(env)):
        td = policy(env.reset())
        for key in env.action_keys:
            assert env.action_spec[key].is_in(td[key]), key
        legal = td["picker", "action_mask"].gather(-1, td["picker", "action"].long().unsqueeze(-1))
        assert bool(legal.all())


def test_compare_uses_the_same_episodes_for_each_policy():
    make = lambda: MultiAgentFakeEnv(num_envs=4, seed=0)  # noqa: E731
    same_as_noop = compare_with_baselines(make, NoopPolicy(make()), episodes=8)
    assert same_as_noop.trained == same_as_noop.noop  # same policy, same episodes
    assert same_as_noop.margin <= 0
    assert set(same_as_noop.group_returns["trained"]) == {"walker", "picker"}
    assert "random" in str(same_as_noop) and "no-op" in str(same_as_noop)


def test_random_score_does_not_depend_on_what_ran_before():
    """Seeded envs still draw from torch's global generator (Gymnasium, VMAS resets)."""
    import pytest

    pytest.importorskip("gymnasium")
    from marl.envs import make_task
    from marl.testing import baseline_returns

    make = lambda: make_task("gymnasium/pendulum", num_envs=2, seed=1000)  # noqa: E731
    first = baseline_returns(make, episodes=2)["random"]
    torch.rand(1000)  # the caller's stream moves on
    state = torch.get_rng_state()
    assert baseline_returns(make, episodes=2)["random"] == first
    assert torch.equal(torch.get_rng_state(), state)  # and is left as it was
