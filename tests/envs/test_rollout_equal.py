"""`EnvBase.rollout` stores what a step-by-step loop of `step` and `step_mdp` gives.

`rollout` takes shortcuts on its hot path (keys resolved once, host reads of
the done flags); these tests check, on seeded runs of every PettingZoo-based and
tuple-agent family installed, that its data equals, entry for entry, a plain
loop over the public API: `rand_action`, `step`, `step_mdp`, and `reset` when
an episode ends.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from marl.envs import SerialEnv, step_mdp


def _simple_spread():
    pytest.importorskip("mpe2")
    from marl.envs import PettingZooEnv

    return PettingZooEnv("simple_spread_v3", seed=3, max_cycles=7)


def _battle():
    pytest.importorskip("magent2")
    from marl.envs import magent2_env

    # 6 agents a team, [6, 13, 13, 5] views, agents that die
    return magent2_env("battle_v4", seed=3, map_size=16, max_cycles=6)


def _rware():
    pytest.importorskip("rware")
    from marl.envs import RwareEnv

    return RwareEnv("rware-tiny-2ag-v2", seed=3, max_steps=6)


def _lbf():
    pytest.importorskip("lbforaging")
    from marl.envs import LBForagingEnv

    return LBForagingEnv("Foraging-5x5-2p-1f-v3", seed=3, max_episode_steps=6)


def _serial_battle():
    pytest.importorskip("magent2")
    from marl.envs import magent2_env

    env = SerialEnv(2, magent2_env, dict(task="battle_v4", map_size=16, max_cycles=5))
    env.set_seed(3)
    return env


MAKERS = {
    "simple_spread": _simple_spread,
    "battle": _battle,
    "rware": _rware,
    "lbforaging": _lbf,
    "serial_battle": _serial_battle,
}


def _loop(env, steps: int, break_when_any_done: bool) -> TensorDict:
    """The rollout spelled out with the public step API (no shortcuts)."""
    td = env.reset()
    out = []
    for _ in range(steps):
        td = env.step(env.rand_action(td))
        out.append(td)
        done = td.get(("next", "done"))
        if break_when_any_done and done.any():
            break
        root = step_mdp(td, env.reward_keys)
        if done.any():
            reset = env.reset(TensorDict({"_reset": done.clone()}, batch_size=env.batch_size))
            for key in reset.keys(include_nested=True, leaves_only=True):
                root.set(key, reset.get(key))
        td = root
    return torch.stack(out, len(env.batch_size))


def _assert_same(a: TensorDict, b: TensorDict) -> None:
    assert a.batch_size == b.batch_size
    keys_a = set(a.keys(include_nested=True, leaves_only=True))
    assert keys_a == set(b.keys(include_nested=True, leaves_only=True))
    for key in keys_a:
        x, y = a.get(key), b.get(key)
        assert x.dtype == y.dtype and x.shape == y.shape, key
        assert torch.equal(x, y), key


@pytest.mark.parametrize("name", sorted(MAKERS))
@pytest.mark.parametrize("break_when_any_done", [False, True])
def test_rollout_equals_step_loop(name: str, break_when_any_done: bool) -> None:
    steps = 16  # several episodes (they last 5 to 7 steps) with auto-reset
    expected = _loop(MAKERS[name](), steps, break_when_any_done)
    env = MAKERS[name]()
    got = env.rollout(steps, break_when_any_done=break_when_any_done)
    _assert_same(got, expected)
    if not break_when_any_done:
        assert got.batch_size[-1] == steps
        # the episodes ended and restarted inside the rollout
        assert got.get(("next", "done")).any()
