"""The HostArrayEnv path of SerialEnv: one TensorDict a step from the copies' numpy arrays.

``check_serial_arrays`` (the public checker) runs on every built-in HostArrayEnv family:
the arrays path must give exactly the TensorDict path's outputs, resets included.
"""

from __future__ import annotations

import numpy as np
import pytest

from marl.envs import (
    EnvSpecError,
    HostArrayEnv,
    PettingZooEnv,
    SerialEnv,
    check_serial_arrays,
    make_task,
)
from marl.envs.tasks import task_available
from marl.testing import MultiAgentFakeEnv

# one task per wrapper family, and the PettingZoo variants the arrays path must keep
TASKS = [
    "pettingzoo/simple_spread",
    "pettingzoo/simple_tag",
    "pettingzoo/knights_archers_zombies",
    "pettingzoo/pursuit",
    "lbforaging/8x8-2p-2f-coop",
    "lbforaging/10x10-3p-3f-2s",
    "rware/tiny-2ag",
    "overcooked/cramped_room",
    "magent2/battle_small",
    "mamujoco/halfcheetah_2x3",
]


def _unbatched(name: str):
    """An unbatched env of the task, without the task's transforms."""
    env = make_task(name)
    return getattr(env, "base_env", env)


@pytest.mark.parametrize("name", TASKS)
def test_every_host_array_family_passes_the_checker(name: str) -> None:
    if not task_available(name):
        pytest.skip(f"{name}: its package is not installed")
    env = _unbatched(name)
    assert isinstance(env, HostArrayEnv)
    # episodes of 25-50 steps end inside 60 steps on the MPE and LBF tasks: resets checked
    check_serial_arrays(lambda: _unbatched(name), steps=60, seed=1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"task": "tictactoe_v3", "parallel": False},  # AEC, action masks, turns
        {"task": "simple_tag_v3", "max_cycles": 10, "return_state": True},  # state
        {"task": "simple_adversary_v3", "max_cycles": 10, "categorical_actions": False},
        {"task": "simple_spread_v3", "max_cycles": 10, "use_mask": False},
    ],
    ids=["aec_masks", "state", "one_hot", "no_mask"],
)
def test_pettingzoo_options_pass_the_checker(kwargs: dict) -> None:
    pytest.importorskip("mpe2")
    check_serial_arrays(PettingZooEnv, kwargs, steps=40)


def test_serial_env_takes_the_arrays_path_only_for_host_array_envs() -> None:
    pytest.importorskip("mpe2")
    kwargs = {"task": "simple_spread_v3", "max_cycles": 5}
    assert SerialEnv(2, PettingZooEnv, kwargs).use_arrays
    assert not SerialEnv(2, PettingZooEnv, kwargs, use_arrays=False).use_arrays
    assert not SerialEnv(2, MultiAgentFakeEnv).use_arrays  # no arrays: TensorDicts, stacked


class _ScaledReward(PettingZooEnv):
    """A broken HostArrayEnv: its arrays double the reward its TensorDicts hold."""

    def step_arrays(self, inputs):
        arrays = super().step_arrays(inputs)
        arrays["agent"]["reward"] = arrays["agent"]["reward"] * np.float32(2.0)
        return arrays

    def _step(self, td):
        return self.arrays_to_tensordict(PettingZooEnv.step_arrays(self, td), ())


def test_checker_names_what_differs() -> None:
    pytest.importorskip("mpe2")
    with pytest.raises(EnvSpecError, match=r"rollout: key \('next', 'agent', 'reward'\)"):
        check_serial_arrays(_ScaledReward, {"task": "simple_spread_v3", "max_cycles": 5})


def test_checker_refuses_an_env_without_arrays() -> None:
    with pytest.raises(TypeError, match="not a HostArrayEnv"):
        check_serial_arrays(MultiAgentFakeEnv)
    with pytest.raises(ValueError, match="num_envs must be >= 2"):
        check_serial_arrays(MultiAgentFakeEnv, num_envs=1)
