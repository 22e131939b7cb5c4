"""Actions checked at the env boundary: NaN/inf, non-integer, out-of-range, illegal."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from marl.envs import (
    InvalidActionError,
    RewardSum,
    TransformedEnv,
    check_env_specs,
    make_task,
)
from marl.envs.action_checks import check_action
from marl.specs import Binary, Categorical, MultiCategorical, OneHot
from marl.testing import MultiAgentFakeEnv


def _stepped(env, key, change):
    td = env.rand_action(env.reset())
    td.set(key, change(td.get(key)))
    return env.step(td)


def _with_nan(x):
    x = x.clone()
    x.view(-1)[-1] = float("nan")
    return x


# ------------------------------------------------------------------ the checker
def test_each_kind_of_bad_action_names_key_domain_values_and_count():
    env = MultiAgentFakeEnv(num_envs=2, seed=0)
    env.check_actions = True
    walker, picker = ("walker", "action"), ("picker", "action")
    with pytest.raises(
        InvalidActionError,
        match=r"action \('walker', 'action'\): expected finite values.*1 NaN/inf value\(s\) of 8: "
        r"nan at \(env 1, agent 1, 1\)",
    ):
        _stepped(env, walker, _with_nan)
    with pytest.raises(InvalidActionError, match=r"integers in \[0, 5\); got 6 non-integer.*1\.7"):
        _stepped(env, picker, lambda a: a.float() + 0.7)
    with pytest.raises(
        InvalidActionError,
        match=r"got 2 out-of-range value\(s\) of 6: 5 at \(env 0, agent 0\), -1 at \(env 1, agent 2\)",
    ):
        _stepped(env, picker, lambda a: torch.tensor([[5, 1, 1], [1, 1, -1]]).where(
            torch.tensor([[True, False, False], [False, False, True]]), a))  # fmt: skip
    # illegal under the group's ("picker", "action_mask")
    td = env.reset()
    illegal = (~td["picker", "action_mask"]).float().argmax(-1)
    td = env.rand_action(td)
    td["picker", "action"] = illegal
    with pytest.raises(InvalidActionError, match=r"legal choices under the action_mask; got 6 ill"):
        env.step(td)
    # whole numbers in a float tensor are integers
    env.step(env.rand_action(env.reset()).apply(lambda x: x))
    td = env.rand_action(env.reset())
    td["picker", "action"] = td["picker", "action"].float()
    env.step(td)


def test_without_the_check_bad_actions_go_through():
    env = MultiAgentFakeEnv(num_envs=2, seed=0)
    assert env.check_actions is False
    _stepped(env, ("walker", "action"), _with_nan)  # the fake env does not care: no error


@pytest.mark.parametrize(
    "spec, value, match",
    [
        (OneHot(3, (2, 3)), torch.tensor([[1, 1, 0], [0, 1, 0]]), r"one-hot rows.*\[1, 1, 0\] at \(0,\)"),
        (OneHot(3, (1, 3), mask=torch.tensor([True, False, True])), torch.tensor([[0, 1, 0]]),
         r"legal choices under the spec's mask"),
        (MultiCategorical([2, 3], (2,)), torch.tensor([1, 3]), r"nvec=\[2, 3\].*3 at \(1,\)"),
        (Binary(2), torch.tensor([1, 2], dtype=torch.int8), r"0 or 1.*2 at \(1,\)"),
        (Categorical(4, (30,)), torch.full((30,), 9), r"30 out-of-range.*\(and 25 more\)"),
    ],
)  # fmt: skip
def test_check_action_per_spec(spec, value, match):
    with pytest.raises(InvalidActionError, match=match):
        check_action("a", value, spec)


def test_check_env_specs_turns_the_check_on_and_restores_the_setting():
    class BadRandom(MultiAgentFakeEnv):
        def rand_action(self, td=None):
            td = super().rand_action(td)
            td["picker", "action"] = td["picker", "action"] + 0.5
            return td

    env = BadRandom(num_envs=2)
    with pytest.raises(InvalidActionError, match="non-integer"):
        check_env_specs(env)
    assert env.check_actions is False
    check_env_specs(MultiAgentFakeEnv(num_envs=2))  # legal random actions pass
    with pytest.raises(Exception, match="outside its spec"):
        check_env_specs(env, check_actions=False)


def test_a_transformed_env_checks_once_against_its_own_specs():
    base = MultiAgentFakeEnv(num_envs=2, seed=0)
    env = TransformedEnv(base, RewardSum())
    env.check_actions = True
    assert base.check_actions is True
    with pytest.raises(InvalidActionError, match="walker"):
        _stepped(env, ("walker", "action"), _with_nan)


# ------------------------------------------------------------------ the wrappers
def _needs(*modules):
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"missing {missing}")


@_needs("vmas")
def test_vmas_nan_action():
    # used to be an empty "AssertionError:" from inside VMAS
    env = make_task("vmas/navigation", num_envs=4, seed=0, check_actions=True)
    with pytest.raises(InvalidActionError, match=r"\('agent', 'action'\).*NaN/inf.*of 24"):
        _stepped(env, ("agent", "action"), _with_nan)


@_needs("vmas")
def test_vmas_one_hot_actions():
    env = make_task(
        "vmas/navigation", num_envs=2, seed=0, check_actions=True,
        continuous_actions=False, categorical_actions=False,
    )  # fmt: skip
    with pytest.raises(InvalidActionError, match=r"one-hot rows over 9 choices; got 6 bad row"):
        _stepped(env, ("agent", "action"), lambda a: torch.ones_like(a))


@_needs("gymnasium")
def test_pendulum_nan_action():
    # used to return NaN observations without a word
    env = make_task("gymnasium/pendulum", seed=0, check_actions=True)
    with pytest.raises(InvalidActionError, match=r"action 'action'.*nan at \(0,\)"):
        _stepped(env, "action", _with_nan)


@_needs("pettingzoo", "mpe2")
@pytest.mark.parametrize("num_envs", [None, 2])
def test_pettingzoo_non_integer_and_out_of_range_discrete_actions(num_envs):
    # PettingZoo used to accept 1.7 (cast to 1)
    env = make_task("pettingzoo/simple_spread", num_envs=num_envs, seed=0, check_actions=True)
    with pytest.raises(InvalidActionError, match=r"\('agent', 'action'\).*\[0, 5\).*1\.7"):
        _stepped(env, ("agent", "action"), lambda a: a.float() * 0 + 1.7)
    with pytest.raises(InvalidActionError, match="out-of-range value"):
        _stepped(env, ("agent", "action"), lambda a: a * 0 + 7)


@_needs("pettingzoo")
def test_tictactoe_illegal_move_under_the_mask():
    env = make_task("pettingzoo/tictactoe", seed=0, check_actions=True)
    td = env.reset()
    td["player", "action"] = torch.tensor([4, 4])
    td = env.step_and_maybe_reset(td)[1]
    td["player", "action"] = torch.tensor([4, 4])  # the square is taken
    with pytest.raises(InvalidActionError, match=r"illegal action\(s\) of 2: 4 at \(agent 1\)"):
        env.step(td)


# ------------------------------------------- with the check off (the default run)
@_needs("vmas")
def test_vmas_nan_action_is_named_per_agent_without_the_check():
    # the default check_actions=False: VMAS's bare AssertionError becomes the cause
    env = make_task("vmas/navigation", num_envs=4, seed=0)
    assert env.check_actions is False
    with pytest.raises(
        InvalidActionError, match=r"\('agent', 'action'\).*NaN/inf.*nan at \(env 3, agent 2, 1\)"
    ) as err:
        _stepped(env, ("agent", "action"), _with_nan)
    assert isinstance(err.value.__cause__, AssertionError)


@_needs("pettingzoo", "mpe2")
def test_pettingzoo_out_of_range_action_is_named_per_agent_without_the_check():
    env = make_task("pettingzoo/simple_spread", num_envs=1, seed=0)

    def bad(x):
        x = x.clone()
        x[..., 1] = 7
        return x

    with pytest.raises(InvalidActionError, match=r"out-of-range.*7 at \(env 0, agent 1\)"):
        _stepped(env, ("agent", "action"), bad)


def test_good_steps_are_not_checked_when_the_check_is_off(monkeypatch):
    import marl.envs.common as common

    calls = []
    monkeypatch.setattr(common, "_check_action_values", lambda *a: calls.append(a))
    env = MultiAgentFakeEnv(num_envs=2, seed=0)
    for _ in range(5):
        env.step(env.rand_action(env.reset()))
    assert calls == []  # nothing on the hot path


def test_an_env_error_that_is_not_about_the_action_propagates_unchanged():
    class Broken(MultiAgentFakeEnv):
        def _step(self, td):
            raise RuntimeError("the simulator crashed")

    env = Broken(num_envs=2, seed=0)
    with pytest.raises(RuntimeError, match="the simulator crashed"):
        env.step(env.rand_action(env.reset()))
