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


# --- every builder with every body it can take ----------------------------------------

B = 4  # envs


def group_info(n, obs_shape, action):
    """A group of ``n`` agents with observation ``obs_shape`` and ``action`` actions."""
    from marl.algorithms import GroupInfo
    from marl.specs import Bounded, Categorical, Composite, Unbounded

    obs = Unbounded((B, n, *obs_shape))
    act = Bounded(-1.0, 1.0, (B, n, 2)) if action == "continuous" else Categorical(5, (B, n))
    return GroupInfo(
        name="team",
        n_agents=n,
        batch_dims=1,
        observation_spec=obs,
        action_spec=act,
        action_space=action,
        has_action_mask=False,
        done_prefix=("team",),
        device=torch.device("cpu"),
        env_observation_spec=Composite({("team", "observation"): obs}, shape=(B,)),
        groups=("team",),
    )


def group_batch(info, continuous):
    from tensordict import TensorDict

    n = info.n_agents
    obs = torch.randn(info.observation_spec.shape)
    action = torch.rand(B, n, 2) * 2 - 1 if continuous else torch.randint(0, 5, (B, n))
    return TensorDict({"team": {"observation": obs, "action": action}}, batch_size=[B])


BUILDERS = {
    # name: (action space, build(info, network) -> module, output leaf, output shape per agent)
    "stochastic_actor_continuous": ("continuous", "actor", "action", (2,)),
    "stochastic_actor_discrete": ("discrete", "actor", "action", ()),
    "deterministic_actor": ("continuous", "deterministic", "action", (2,)),
    "state_value_critic": ("continuous", "value", "state_value", (1,)),
    "state_action_value_critic": ("continuous", "qsa", "state_action_value", (1,)),
    "q_value_network": ("discrete", "q", "action_value", (5,)),
    "centralized_value": ("continuous", "central_v", "state_value", (1,)),
    "centralized_q_with_action": ("continuous", "central_qsa", "state_action_value", (1,)),
    "centralized_discrete_q": ("discrete", "central_q", "action_value", (5,)),
}


def build(kind, info, network, share_params):
    from marl.algorithms._critics import centralized_critic
    from marl.algorithms._policies import (
        deterministic_actor,
        q_value_network,
        state_action_value_critic,
        state_value_critic,
        stochastic_actor,
    )

    kw = dict(network=network, share_params=share_params)
    central = dict(scope="group", use_state=False, **kw)
    return {
        "actor": lambda: stochastic_actor(info, [16], "tanh", **kw),
        "deterministic": lambda: deterministic_actor(info, [16], "tanh", **kw),
        "value": lambda: state_value_critic(info, [16], "tanh", **kw),
        "qsa": lambda: state_action_value_critic(info, [16], "tanh", **kw),
        "q": lambda: q_value_network(info, [16], "tanh", **kw),
        "central_v": lambda: centralized_critic(info, [16], "tanh", "state_value", **central),
        "central_qsa": lambda: centralized_critic(
            info, [16], "tanh", "state_action_value", with_action=True, **central
        ),
        "central_q": lambda: centralized_critic(
            info, [16], "tanh", "action_value", out_features=5, **central
        ),
    }[kind]()


@pytest.mark.parametrize("builder", sorted(BUILDERS))
@pytest.mark.parametrize("network", ["deepsets", "gnn", "cnn"])
@pytest.mark.parametrize("n", [1, 3, 16])
def test_every_builder_takes_every_body(builder, network, n):
    action, kind, leaf, per_agent = BUILDERS[builder]
    obs_shape = (6, 6, 2) if network == "cnn" else (7,)  # [H, W, C] as MAgent2's
    info = group_info(n, obs_shape, action)
    torch.manual_seed(0)
    for share_params in (True, False):
        module = build(kind, info, network, share_params)
        td = group_batch(info, action == "continuous")
        if leaf == "action":
            td.exclude(("team", "action"), inplace=True)
        out = module(td)["team", leaf]
        assert out.shape == (B, n, *per_agent), (builder, network, n, share_params)
        assert out.is_floating_point() == (leaf != "action" or action == "continuous")
        grads = [p for p in module.parameters() if p.requires_grad]
        assert grads, "the body has parameters to train"


def test_a_centralized_gnn_critic_sees_the_other_agents_and_an_actor_too():
    torch.manual_seed(0)
    info = group_info(3, (7,), "continuous")
    critic = build("central_v", info, "gnn", True)
    td = group_batch(info, True)
    values = critic(td.clone())["team", "state_value"]
    assert torch.allclose(values, values[:, :1].expand_as(values))  # one value for the group
    other = td.clone()
    other["team", "observation"][:, 2] += 1.0
    assert not torch.allclose(critic(other)["team", "state_value"], values)
    actor = build("deterministic", info, "deepsets", True)
    mine = actor(td.clone())["team", "action"][:, 0]
    assert not torch.allclose(actor(other)["team", "action"][:, 0], mine)


@pytest.mark.parametrize("network", ["deepsets", "gnn"])
def test_an_agent_mask_reaches_the_body(network):
    """PettingZoo-style groups: the body reads ``(group, "mask")`` and leaves absent agents
    out of what the others receive."""
    import dataclasses as dc

    from tensordict import TensorDict

    from marl.algorithms._policies import q_value_network

    info = dc.replace(group_info(3, (7,), "discrete"), has_agent_mask=True)
    torch.manual_seed(0)
    qnet = q_value_network(info, [16], "tanh", network=network)
    assert ("team", "mask") in qnet.in_keys
    obs = torch.randn(B, 3, 7)
    mask = torch.tensor([True, True, False]).expand(B, 3)
    td = TensorDict({"team": {"observation": obs, "mask": mask}}, batch_size=[B])
    q = qnet(td.clone())["team", "action_value"]
    td["team", "observation"][:, 2] = 100.0
    assert torch.allclose(qnet(td)["team", "action_value"][:, :2], q[:, :2], atol=1e-6)


def test_cnn_on_a_single_agent_image_and_its_refusals():
    from marl.algorithms import GroupInfo
    from marl.algorithms._policies import stochastic_actor
    from marl.specs import Categorical, Unbounded

    info = GroupInfo(
        name=None,
        n_agents=None,
        batch_dims=1,
        observation_spec=Unbounded((B, 3, 8, 8)),
        action_spec=Categorical(4, (B,)),
        action_space="discrete",
        has_action_mask=False,
        done_prefix=(),
        device=torch.device("cpu"),
    )
    from tensordict import TensorDict

    actor = stochastic_actor(info, [16], "relu", network="cnn")
    td = TensorDict({"observation": torch.randn(B, 3, 8, 8)}, batch_size=[B])
    assert actor(td)["action"].shape == (B,)


@pytest.mark.parametrize(
    "image,kernels,strides,features",
    [
        # 84x84 pixel frames: the 2013 Atari DQN's two conv layers (2,592 features, not
        # the 6,400 of two 3x3 stride-2 layers, at a sixth of the cost per frame)
        ((84, 84, 1), (8, 4), (4, 2), 32 * 9 * 9),
        ((88, 88, 3), (8, 4), (4, 2), 32 * 9 * 9),  # Melting Pot's frames
        ((42, 42, 1), (3, 3), (2, 2), 16 * 9 * 9),
        ((10, 10, 5), (3, 3), (1, 1), 16 * 6 * 6),  # MAgent2's views
    ],
)
def test_the_cnn_layers_follow_the_image_size(image, kernels, strides, features):
    from tensordict import TensorDict

    from marl.algorithms import GroupInfo
    from marl.algorithms._policies import stochastic_actor
    from marl.specs import Categorical, Unbounded

    info = GroupInfo(
        name="team",
        n_agents=2,
        batch_dims=1,
        observation_spec=Unbounded((B, 2, *image)),
        action_spec=Categorical(3, (B, 2)),
        action_space="discrete",
        has_action_mask=False,
        done_prefix=(),
        device=torch.device("cpu"),
    )
    actor = stochastic_actor(info, [16], "relu", network="cnn")
    convs = [m for m in actor.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [c.kernel_size[0] for c in convs] == list(kernels)
    assert [c.stride[0] for c in convs] == list(strides)
    heads = [m for m in actor.modules() if isinstance(m, torch.nn.Linear)]
    assert heads[0].in_features == features
    td = TensorDict({"team": {"observation": torch.rand(B, 2, *image)}}, batch_size=[B])
    assert actor(td)["team", "action"].shape == (B, 2)


@pytest.mark.parametrize(
    "config,message",
    [
        ({"network": "gnn", "gnn_radius": 0.0}, r"gnn_radius must be > 0"),
        (
            {"network": "gnn", "gnn_radius": 1.0, "gnn_position": (5, 8)},
            r"gnn_position must be \(start, stop\) within the group's 6 observation features",
        ),
    ],
)
def test_bad_gnn_options_are_refused_with_the_group(config, message):
    with pytest.raises(ValueError, match=r"'ippo' cannot use network 'gnn' for group 'walker'"):
        Algorithm("ippo", config).build(MultiAgentFakeEnv(num_envs=2))
    with pytest.raises(ValueError, match=message):
        Algorithm("ippo", config).build(MultiAgentFakeEnv(num_envs=2))


# --- model=X through Experiment ----------------------------------------------------------


def run_small(folder, algorithm, model, algorithm_config):
    return Experiment(
        fake_task,
        algorithm,
        seed=0,
        task_name="fake/multiagent",
        model=model,
        algorithm_config=algorithm_config,
        config=dict(
            num_envs=4,
            frames_per_batch=128,
            total_frames=256,
            evaluation_interval=256,
            evaluation_episodes=2,
            checkpoint_interval=0,
            render=False,
            progress=False,
            save_folder=str(folder),
        ),
    )


@pytest.mark.parametrize(
    "algorithm,network,algorithm_config,loss",
    [
        ("mappo", "gnn", {"use_state": False, "minibatch_size": 64, "epochs": 1}, "loss_critic"),
        (
            "masac",
            "deepsets",
            {"use_state": False, "buffer_size": 1000, "batch_size": 32, "learning_starts": 64},
            "loss_qvalue",
        ),
    ],
)
def test_model_network_trains_through_experiment(
    tmp_path, algorithm, network, algorithm_config, loss
):
    from marl.experiment import read_scalars
    from marl.modules import MultiAgentDeepSets, MultiAgentGNN

    exp = run_small(tmp_path, algorithm, {"network": network}, algorithm_config)
    summary = exp.run()
    assert summary["frames"] == 256
    body = {"gnn": MultiAgentGNN, "deepsets": MultiAgentDeepSets}[network]
    for label, learner in exp.algorithm.group_learners():
        bodies = [m for m in learner.loss.modules() if isinstance(m, body)]
        assert len(bodies) >= 2, label  # the actor's and the critic's
    scalars = read_scalars(tmp_path / "scalars.csv")
    trained = [k for k in scalars if k.endswith(f"/{loss}")]
    assert trained and all(len(scalars[k]) >= 1 for k in trained), sorted(scalars)


def network_table_markdown() -> str:
    """The table of ``docs/basic/models.md``: one row per algorithm, reasons numbered."""
    table = network_table(list_algorithms())
    reasons: dict[str, int] = {}

    def cell(value):
        if value == "yes":
            return "yes"
        reasons.setdefault(value, len(reasons) + 1)
        return f"no ({reasons[value]})"

    lines = ["| algorithm | " + " | ".join(NETWORKS) + " |", "|---|" + "---|" * len(NETWORKS)]
    for name, row in table.items():
        lines.append(f"| `{name}` | " + " | ".join(cell(row[n]) for n in NETWORKS) + " |")
    lines.append("")
    lines += [f"{i}. {why}" for why, i in reasons.items()]
    return "\n".join(lines)


def test_the_docs_table_is_the_algorithms_table():
    from pathlib import Path

    page = Path(__file__).parents[2] / "docs" / "basic" / "models.md"
    assert network_table_markdown() in page.read_text(), (
        "docs/basic/models.md's table is stale; replace it with network_table_markdown()"
    )


@pytest.mark.parametrize("network", ["mlp", "deepsets", "gnn", "cnn"])
def test_layer_norm_reaches_every_body(network):
    """PQN trains without a target network thanks to its layer norm: no body drops it."""
    from marl.algorithms._policies import q_value_network

    info = group_info(3, (6, 6, 2) if network == "cnn" else (7,), "discrete")
    for layer_norm in (False, True):
        qnet = q_value_network(info, [16], "relu", network=network, layer_norm=layer_norm)
        norms = [m for m in qnet.modules() if isinstance(m, torch.nn.LayerNorm)]
        assert bool(norms) == layer_norm, network
