"""The public algorithm checkers (marl/algorithms/checks.py), run on every built-in."""

from __future__ import annotations

import pytest

from marl.algorithms import Algorithm, get_algorithm, list_algorithms
from marl.algorithms.checks import AlgorithmContractError, check_algorithm, check_learner
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv

from .test_contracts import MARL, _small


def _unbuilt(name: str) -> tuple[Algorithm, object]:
    """An unbuilt, small algorithm and an env it fits (MARL ones on both action spaces)."""
    spec = get_algorithm(name)
    if name in MARL:
        groups = {"walker": "continuous", "picker": "discrete"}
        choice = {g: (name if s in spec.action_spaces else "ippo") for g, s in groups.items()}
        config = {g: _small(a) for g, a in choice.items()}
        return Algorithm(choice, config=config), MultiAgentFakeEnv(num_envs=4, seed=0)
    discrete = "discrete" in spec.action_spaces
    env = SingleAgentFakeEnv(num_envs=4, discrete=discrete, seed=0)
    return Algorithm(name, config=_small(name)), env


@pytest.mark.parametrize("name", list_algorithms())
def test_every_builtin_passes_check_algorithm(name):
    algorithm, env = _unbuilt(name)
    check_algorithm(algorithm, env)


def test_check_learner_refuses_a_learner_whose_updater_trains_another_loss():
    algorithm, env = _unbuilt("mappo")
    learner = algorithm.build(env, seed=0).learners["walker"]
    other = algorithm.learners["picker"]
    # GroupLearner refuses this at construction; bypass it to reach the checker
    object.__setattr__(learner, "_frozen", False)
    learner.__dict__["updater"] = other.updater
    with pytest.raises(AlgorithmContractError, match="its updater must train"):
        check_learner(learner, "walker")


def test_check_learner_refuses_replaceable_parts():
    algorithm, env = _unbuilt("iql")
    learner = algorithm.build(env, seed=0).learners["picker"]
    object.__setattr__(learner, "_frozen", False)
    with pytest.raises(AlgorithmContractError, match="can be replaced after construction"):
        check_learner(learner)


def test_check_learner_names_what_is_missing():
    with pytest.raises(AlgorithmContractError, match="not a Learner"):
        check_learner(object(), "mine")


def test_check_algorithm_refuses_an_update_that_changes_nothing():
    _, env = _unbuilt("dqn")
    with pytest.raises(AlgorithmContractError, match="no parameter changed"):
        check_algorithm(Algorithm("dqn", config=_small("dqn", lr=0.0)), env)


def test_check_algorithm_refuses_a_state_that_does_not_restore():
    algorithm, env = _unbuilt("ppo")

    def forgetful(state):
        pass  # loads nothing: the restored algorithm keeps its own seed-1 weights

    original = Algorithm.load_state_dict_full
    try:
        Algorithm.load_state_dict_full = lambda self, state: forgetful(state)
        with pytest.raises(AlgorithmContractError, match="acts differently"):
            check_algorithm(algorithm, env)
    finally:
        Algorithm.load_state_dict_full = original
