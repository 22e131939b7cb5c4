"""``network=``: which body an algorithm's networks use, and the pairs that are refused."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from marl.algorithms import NETWORKS, Algorithm, list_algorithms, network_table
from marl.experiment import Experiment, ModelConfig
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv


def fake_task(num_envs, seed=None, device="cpu"):
    return MultiAgentFakeEnv(num_envs=num_envs, seed=seed, device=device)


def test_the_table_covers_every_algorithm_and_network():
    table = network_table(list_algorithms())
    assert sorted(table) == sorted(list_algorithms())
    for name, row in table.items():
        assert list(row) == list(NETWORKS)
        config = get_config(name)
        if "network" in {f.name for f in dataclasses.fields(config)}:
            assert row["mlp"] == "yes", name
        else:  # mat: a transformer, no body to choose
            assert all(v != "yes" for v in row.values()), name


def get_config(name):
    from marl.algorithms import get_algorithm

    return get_algorithm(name).config_cls()


def test_mlp_by_name_is_the_default_network_bit_for_bit():
    env = MultiAgentFakeEnv(num_envs=2, seed=0)
    default = Algorithm("mappo").build(env, seed=3).state_dict()
    named = Algorithm("mappo", {"network": "mlp"}).build(env, seed=3).state_dict()
    assert default.keys() == named.keys()
    assert all(torch.equal(default[k], named[k]) for k in default)


@pytest.mark.parametrize(
    "algorithm,config,env,message",
    [
        (
            "ppo",
            {"network": "gnn"},
            SingleAgentFakeEnv(num_envs=2),
            r"algorithm 'ppo' cannot use network 'gnn' for group 'root': a single-agent env "
            r"\(its root group\) has no agents to pass messages between",
        ),
        (
            "dqn",
            {"network": "deepsets"},
            SingleAgentFakeEnv(num_envs=2, discrete=True),
            r"algorithm 'dqn' cannot use network 'deepsets' for group 'root': .* no agents "
            r"to pool over",
        ),
        (
            "ippo",
            {"network": "cnn"},
            MultiAgentFakeEnv(num_envs=2),
            r"algorithm 'ippo' cannot use network 'cnn' for group 'walker': a cnn reads one "
            r"image observation per agent, \[C, H, W\] or \[H, W, C\], but the group's "
            r"observations have per-agent shapes \{'observation': \(6,\)\}",
        ),
        (
            "mappo",
            {"network": "deepsets"},
            MultiAgentFakeEnv(num_envs=2),
            r"algorithm 'mappo' cannot use network 'deepsets' for group 'walker': the "
            r"centralized critic reads the env's global 'state'.*set use_state=False",
        ),
        (
            "masac",
            {"network": "gnn", "use_state": False, "critic_scope": "all"},
            MultiAgentFakeEnv(num_envs=2),
            r"algorithm 'masac' cannot use network 'gnn' for group 'walker': "
            r"critic_scope='all'.*set critic_scope='group'",
        ),
        (
            "happo",
            {"network": "deepsets"},
            MultiAgentFakeEnv(num_envs=2),
            r"algorithm 'happo' cannot use network 'deepsets' for group 'walker': happo "
            r"updates one agent's slice .* through the pool",
        ),
        (
            "happo",
            {"network": "cnn"},
            MultiAgentFakeEnv(num_envs=2),
            r"'happo' cannot use network 'cnn'.*grouped convolutions stack the agents",
        ),
        (
            "masac",
            {"network": "gru"},
            MultiAgentFakeEnv(num_envs=2),
            r"algorithm 'masac' cannot use network 'gru' for group 'walker': an off-policy "
            r"actor-critic replays single transitions.*Q-learners",
        ),
        (
            "td3",
            {"network": "lstm"},
            SingleAgentFakeEnv(num_envs=2),
            r"'td3' cannot use network 'lstm' for group 'root': an off-policy actor-critic",
        ),
        (
            "happo",
            {"network": "gru"},
            MultiAgentFakeEnv(num_envs=2),
            r"'happo' cannot use network 'gru'.*one cell shared by the group's agents",
        ),
        (
            "pqn",
            {"network": "gru"},
            SingleAgentFakeEnv(num_envs=2, discrete=True),
            r"'pqn' cannot use network 'gru'.*single steps",
        ),
        (
            "ippo",
            {"network": "lstm", "share_policy_params": False},
            MultiAgentFakeEnv(num_envs=2),
            r"'ippo' cannot use network 'lstm' for group 'walker': .*per-agent parameters are "
            r"not built: set share_policy_params=True",
        ),
        (
            "ippo",
            {"network": "transformer"},
            MultiAgentFakeEnv(num_envs=2),
            r"'ippo' cannot use network 'transformer' for group 'walker': unknown network "
            r"'transformer'; expected one of \['mlp', 'deepsets', 'gnn', 'cnn', 'gru', 'lstm'\]",
        ),
    ],
)
def test_a_pair_that_cannot_work_is_refused_with_the_reason(algorithm, config, env, message):
    with pytest.raises(ValueError, match=message):
        Algorithm(algorithm, config).build(env)


def test_model_network_reaches_the_algorithm_config():
    exp = Experiment(fake_task, "ippo", model={"network": "deepsets"}, task_name="fake/x")
    assert exp.algorithm.config.network == "deepsets"
    assert exp.describe()["model"]["network"] == "deepsets"


def test_model_network_on_mat_says_why_before_any_env_is_made():
    with pytest.raises(
        ValueError,
        match=r"model.network='gnn': algorithm 'mat' cannot use it: mat is a transformer over "
        r"the group's agents .* no MLP body to replace",
    ):
        Experiment(fake_task, "mat", model={"network": "gnn"}, task_name="fake/x")


def test_model_network_must_be_a_known_name():
    with pytest.raises(ValueError, match=r"model.network: expected one of \['mlp', 'deepsets'"):
        ModelConfig(network="graph").validate()
    for name in NETWORKS:
        assert ModelConfig(network=name).validate().network == name
