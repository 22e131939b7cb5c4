"""Unit tests of the MARL algorithms on the fake multi-agent env (fast)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tensordict.nn import InteractionType, set_interaction_type

from marl.algorithms import Algorithm, Trainer, get_algorithm, group_infos
from marl.algorithms.vdn import MaskedAgentValues
from marl.envs import RewardSum, TransformedEnv
from marl.modules import MLP, MultiAgentMLP
from marl.specs import Unbounded
from marl.testing import MultiAgentFakeEnv

MARL = [
    "happo",
    "iddpg",
    "ippo",
    "iql",
    "isac",
    "maddpg",
    "mappo",
    "masac",
    "mat",
    "pqn",
    "pqn_vdn",
    "qmix",
    "vdn",
]
ON_SMALL = {"actor_cells": (16,), "critic_cells": (16,), "minibatch_size": 16, "epochs": 2}
OFF_SMALL = {"actor_cells": (16,), "critic_cells": (16,), "learning_starts": 0, "batch_size": 16}
Q_SMALL = {"cells": (16,), "learning_starts": 0, "batch_size": 16}
PQN_SMALL = {"cells": (16,), "minibatch_size": 16, "epochs": 2}
MAT_SMALL = {"embed_dim": 16, "minibatch_size": 16, "epochs": 2}


def small(name: str, **extra) -> dict:
    """Small networks and immediate updates, so one iteration trains."""
    if name in ("iql", "vdn", "qmix"):
        base = Q_SMALL
    elif name in ("pqn", "pqn_vdn"):
        base = PQN_SMALL
    elif name == "mat":
        base = MAT_SMALL
    else:
        base = ON_SMALL if get_algorithm(name).on_policy else OFF_SMALL
    return {**base, **extra}


class MaskedFakeEnv(MultiAgentFakeEnv):
    """The fake env plus PettingZoo's per-group ``"mask"`` (False once an agent is done)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        b = self.batch_size
        for g, n in (("walker", self.N_WALKERS), ("picker", self.N_PICKERS)):
            self.observation_spec[g, "mask"] = Unbounded((*b, n), dtype=torch.bool)

    def _observe(self):
        out = super()._observe()
        alive = self._alive()
        out.set(("walker", "mask"), alive[..., : self.N_WALKERS].clone())
        out.set(("picker", "mask"), alive[..., self.N_WALKERS :].clone())
        return out


def _multi(num_envs: int = 4, env_cls=MultiAgentFakeEnv) -> TransformedEnv:
    return TransformedEnv(env_cls(num_envs=num_envs, seed=0), RewardSum())


def _supported(name: str) -> list[str]:
    spaces = get_algorithm(name).action_spaces
    return [g for g, s in (("walker", "continuous"), ("picker", "discrete")) if s in spaces]


def _params(learner) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in learner.named_parameters()}


def _batch(algo: Algorithm, env, steps: int = 10):
    with torch.no_grad():
        td = env.rollout(steps, algo.policy, break_when_any_done=False)
    return algo.process_batch(td)


# ------------------------------------------------------------------ build + one update
@pytest.mark.parametrize("name", MARL)
def test_builds_trains_and_changes_parameters(name):
    groups = _supported(name)
    algorithm = {g: (name if g in groups else "ippo") for g in ("walker", "picker")}
    config = {g: small(algorithm[g]) for g in algorithm}
    algo = Algorithm(algorithm, config=config).build(_multi(), seed=0)
    before = {g: _params(algo.learners[g]) for g in groups}
    logs = list(Trainer(algo, _multi(), frames_per_batch=40, total_frames=80, seed=0).train())[-1]
    for g in groups:
        assert algo.learners[g].algorithm == name
        terms = [k for k in logs if k.startswith(f"train/{g}/loss_")]
        assert terms, sorted(logs)
        assert all(torch.isfinite(torch.tensor(logs[k])) for k in terms)
        after = _params(algo.learners[g])
        changed = [k for k in before[g] if not torch.equal(before[g][k], after[k])]
        assert changed, f"{name} did not update {g}"
        assert f"train/{g}/episode_reward" in logs


# MAT has no per-agent parameters to share or not: one transformer over the group's agents
@pytest.mark.parametrize("name", [n for n in MARL if n != "mat"])
def test_unshared_parameters_are_vectorized_per_agent(name):
    group = _supported(name)[0]
    extra = {"share_policy_params": False}
    if name not in ("iql", "vdn", "qmix", "pqn", "pqn_vdn"):
        extra["share_critic_params"] = False
    algo = Algorithm(
        {group: name, **{g: "ippo" for g in {"walker", "picker"} - {group}}},
        config={group: small(name, **extra)},
    ).build(_multi(), seed=0)
    n = group_infos(_multi())[group].n_agents
    stacked = [p for p in algo.learners[group].parameters() if p.ndim == 3]
    assert stacked and all(p.shape[0] == n for p in stacked)


def test_unsupported_action_space_names_algorithm_and_group():
    for name in ("maddpg", "iddpg"):
        with pytest.raises(ValueError, match=rf"'{name}' supports \['continuous'\].*'picker'"):
            Algorithm(name).build(MultiAgentFakeEnv(num_envs=2))
    for name in ("qmix", "vdn", "iql"):
        with pytest.raises(
            ValueError, match=rf"'{name}' supports \['discrete'\].*'walker' has cont"
        ):
            Algorithm(name).build(MultiAgentFakeEnv(num_envs=2))


def test_share_params_is_refused_with_its_new_names_and_bad_scope_raises():
    cfg = get_algorithm("mappo").make_config({"share_policy_params": False})
    assert cfg.share_policy_params is False and cfg.share_critic_params is True
    for name in ("ppo", "dqn", "iql"):
        with pytest.raises(ValueError, match="share_params is now share_policy_params"):
            get_algorithm(name).make_config({"share_params": False})
    with pytest.raises(ValueError, match="critic_scope"):
        get_algorithm("masac").make_config({"critic_scope": "world"})
    for name in MARL:
        for f in dataclasses.fields(get_algorithm(name).config_cls):
            assert f.default is not dataclasses.MISSING, (name, f.name)


def test_value_decomposition_needs_groups():
    from marl.testing import SingleAgentFakeEnv

    with pytest.raises(ValueError, match="single-agent"):
        Algorithm("vdn").build(SingleAgentFakeEnv(num_envs=2, discrete=True))


# ------------------------------------------------------------------ mixed algorithms
def test_mixed_algorithms_per_group_on_and_off_policy():
    algo = Algorithm(
        {"walker": "maddpg", "picker": "ippo"},
        config={"walker": small("maddpg"), "picker": small("ippo")},
    )
    history = list(Trainer(algo, _multi(), frames_per_batch=40, total_frames=120, seed=0).train())
    logs = history[-1]
    assert "train/walker/loss_actor" in logs and "train/picker/loss_objective" in logs
    assert "train/walker/episode_reward" in logs and "train/picker/episode_reward" in logs
    assert algo.learners["walker"].algorithm == "maddpg"
    assert algo.learners["picker"].algorithm == "ippo"


# ------------------------------------------------------------------ centralized critics
def test_centralized_critic_reads_state_or_group():
    env = _multi()
    algo = Algorithm("mappo", config=small("mappo")).build(env, seed=0)
    assert algo.learners["walker"].loss.critic.in_keys == ["state"]
    algo = Algorithm("mappo", config=small("mappo", use_state=False)).build(env, seed=0)
    assert algo.learners["walker"].loss.critic.in_keys == [("walker", "observation")]
    ippo = Algorithm("ippo", config=small("ippo")).build(env, seed=0)
    assert ippo.learners["walker"].loss.critic.in_keys == [("walker", "observation")]


def _net_inputs(critic) -> list[tuple[int, ...]]:
    """Record the input shapes of the MLP inside a centralized critic."""
    shapes = []
    critic.module.net.register_forward_pre_hook(lambda _, a: shapes.append(tuple(a[0].shape)))
    return shapes


@pytest.mark.parametrize("use_state", [True, False])
@pytest.mark.parametrize("name", ["mappo", "maddpg", "masac"])
def test_shared_centralized_critic_runs_its_mlp_once_not_once_per_agent(name, use_state):
    env = _multi()
    cfg = {"walker": small(name, use_state=use_state)}
    algo = Algorithm({"walker": name, "picker": "ippo"}, config=cfg).build(env, seed=0)
    loss = algo.learners["walker"].loss
    critic = {"mappo": "critic", "maddpg": "value_network"}.get(name)
    critic = getattr(loss, critic) if critic else loss.qvalue_networks[0]
    assert isinstance(critic.module.net, MLP)
    shapes = _net_inputs(critic)
    td = algo.policy(env.reset())
    out = critic(td.clone())[critic.out_keys[0]]
    # the MLP saw [B, F] rows, one per env, not [B, n_agents, F]
    assert len(shapes) == 1 and len(shapes[0]) == 2 and shapes[0][0] == 4, shapes
    assert out.shape == (4, 2, 1)
    assert (out == out[:, :1]).all()  # shared parameters, same input: one value per env
    # the same values as the old way: the MLP on the input expanded to every agent
    central = critic.module
    xs = [td.get(k) for k in critic.in_keys]
    parts = [
        x.reshape(*x.shape[: x.ndim - nd], -1).float() for x, nd in zip(xs, central.flat_ndims)
    ]
    h = torch.cat(parts, -1)
    old = central.net(h.unsqueeze(-2).expand(4, 2, h.shape[-1]))
    torch.testing.assert_close(out, old)


def test_per_agent_centralized_critic_keeps_one_mlp_per_agent():
    env = _multi()
    cfg = small("mappo", share_critic_params=False)
    critic = Algorithm("mappo", config=cfg).build(env, seed=0).learners["walker"].loss.critic
    assert isinstance(critic.module.net, MultiAgentMLP) and not critic.module.net.share_params
    out = critic(env.reset())["walker", "state_value"]
    assert out.shape == (4, 2, 1) and not torch.allclose(out[:, 0], out[:, 1])


@pytest.mark.parametrize("name", ["mappo", "maddpg", "masac"])
def test_critic_scope_all_sees_other_groups(name):
    env = _multi()
    group = "walker"
    cfg = small(name, critic_scope="all")
    algo = Algorithm({group: name, "picker": "ippo"}, config={group: cfg}).build(env, seed=0)
    loss = algo.learners[group].loss
    critic = {"mappo": "critic", "maddpg": "value_network"}.get(name)
    critic = getattr(loss, critic) if critic else loss.qvalue_networks[0]
    assert ("picker", "observation") in critic.in_keys
    assert ("walker", "observation") in critic.in_keys
    td = algo.policy(env.reset())
    out_key = critic.out_keys[0]
    v1 = critic(td.clone())[out_key]
    td2 = td.clone()
    td2["picker", "observation"] = td2["picker", "observation"] + 1.0  # [4, 3, 4] vs [4, 2, 6]
    v2 = critic(td2)[out_key]
    assert v1.shape[:-1] == (4, 2) and not torch.allclose(v1, v2)


# ------------------------------------------------------------------ action masks
@pytest.mark.parametrize(
    "name", ["mappo", "ippo", "mat", "masac", "isac", "qmix", "vdn", "iql", "pqn", "pqn_vdn"]
)
def test_discrete_actions_respect_masks_when_sampling_and_in_mode(name):
    env = MultiAgentFakeEnv(num_envs=16, seed=0)
    q_learning = ("qmix", "vdn", "iql", "pqn", "pqn_vdn")
    cfg = small(name, **({"eps_init": 1.0} if name in q_learning else {}))
    algo = Algorithm({"picker": name, "walker": "ippo"}, config={"picker": cfg}).build(env, seed=0)
    for _ in range(5):
        td = env.reset()
        with set_interaction_type(InteractionType.RANDOM):
            sampled = algo.policy(td.clone())["picker", "action"]
        mode = algo.eval_policy()(td.clone())["picker", "action"]
        mask = td["picker", "action_mask"]
        assert mask.gather(-1, sampled.unsqueeze(-1)).all(), name
        assert mask.gather(-1, mode.unsqueeze(-1)).all(), name


@pytest.mark.parametrize("name", ["iql", "vdn", "qmix"])
def test_target_maximum_is_over_legal_actions(name):
    env = _multi(8)
    algo = Algorithm({"picker": name, "walker": "ippo"}, config={"picker": small(name)})
    algo.build(env, seed=0)
    learner = algo.learners["picker"]
    assert learner.loss.tensor_keys.action_mask == ("picker", "action_mask")
    batch = _batch(algo, env).reshape(-1)
    # only action 4 (never legal in the fake env, hence never trained) is allowed next
    only = torch.zeros_like(batch["next", "picker", "action_mask"])
    only[..., 4] = True
    masked = batch.clone()
    masked["next", "picker", "action_mask"] = only
    with torch.no_grad():
        err_all = learner.loss(batch.clone())["td_error_mean"]
        err_masked = learner.loss(masked)["td_error_mean"]
    assert not torch.allclose(err_all, err_masked)


# ------------------------------------------------------------------ agent masks
def _zero_agent_grads(learner, agent: int) -> list[str]:
    """Names of per-agent (vectorized) parameters whose slice for ``agent`` got a gradient."""
    bad = []
    for name, p in learner.named_parameters():
        if p.ndim == 3 and p.grad is not None and p.grad[agent].abs().sum() > 0:
            bad.append(name)
    return bad


@pytest.mark.parametrize(
    ("name", "group"),
    [
        ("ippo", "walker"),
        ("mappo", "picker"),
        ("iddpg", "walker"),
        ("isac", "walker"),
        ("isac", "picker"),
        ("iql", "picker"),
        ("vdn", "picker"),
        ("qmix", "picker"),
        ("pqn", "picker"),
        ("pqn_vdn", "picker"),
    ],
)
def test_masked_out_agents_do_not_reach_the_gradients(name, group):
    env = _multi(8, MaskedFakeEnv)
    extra = {"share_policy_params": False}
    if name not in ("iql", "vdn", "qmix", "pqn", "pqn_vdn"):
        extra["share_critic_params"] = False
    if name == "mappo":
        extra["use_state"] = False
    other = {"walker": "ippo", "picker": "ippo"}
    algo = Algorithm({**other, group: name}, config={group: small(name, **extra)})
    algo.build(env, seed=0)
    learner = algo.learners[group]
    assert group_infos(env)[group].has_agent_mask
    if name in ("vdn", "qmix"):  # the loss is on Q_tot: masked agents' Qs are zeroed instead
        assert isinstance(learner.loss.local_value_network, MaskedAgentValues)
    elif name == "pqn_vdn":
        assert isinstance(learner.loss.value_network, MaskedAgentValues)
    else:  # the loss masks its own per-agent terms
        assert learner.loss.tensor_keys.agent_mask == (group, "mask")
    batch = _batch(algo, env).reshape(-1)
    batch[group, "mask"][:, 0] = False  # agent 0 never acts
    batch["next", group, "mask"][:, 0] = False
    out = learner.loss(batch.clone())
    learner.optimizer.zero_grad()
    sum(v for k, v in out.items() if k.startswith("loss_") and v.requires_grad).backward()
    bad = _zero_agent_grads(learner, 0)
    assert not bad, bad
    # the other agents do learn
    assert any(
        p.grad is not None and p.grad[1].abs().sum() > 0
        for p in learner.parameters()
        if p.ndim == 3
    )


@pytest.mark.parametrize("name", ["ippo", "mappo"])
def test_masked_advantage_normalization_ignores_masked_agents(name):
    env = _multi(8, MaskedFakeEnv)
    algo = Algorithm(name, config=small(name)).build(env, seed=0)
    loss = algo.learners["walker"].loss
    assert loss.normalize_advantage and loss.tensor_keys.agent_mask == ("walker", "mask")
    batch = _batch(algo, env).reshape(-1)
    mask = batch["walker", "mask"]
    assert mask.any() and not mask.all()

    def objective(adv_masked: float, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
        td = batch.clone()
        adv = td["walker", "advantage"]
        adv[mask] = adv[mask] * scale + shift
        adv[~mask] = adv_masked  # garbage where masked (a dead agent's advantage)
        return loss(td)["loss_objective"].detach()

    reference = objective(0.0)
    # masked agents count neither in the standardization nor in the objective
    assert torch.allclose(objective(1e6), reference) and torch.allclose(objective(-1e6), reference)
    # standardized: an affine change of the unmasked advantages changes nothing
    assert torch.allclose(objective(1e6, scale=3.0, shift=5.0), reference, atol=1e-6)
    # the loss weights: 0 for masked agents, mean 1
    weight = loss.loss_weight(batch)
    assert (weight[~mask] == 0).all() and torch.isclose(weight.mean(), torch.tensor(1.0))


# ------------------------------------------------------------------ turn-based (AEC) data
def test_turn_transitions_link_each_agents_turns():
    from tensordict import TensorDict

    from marl.algorithms._turns import turn_transitions

    steps, n = 6, 2
    acting = torch.tensor([[t % 2 == j for j in range(n)] for t in range(steps)])
    obs = torch.arange(steps * n, dtype=torch.float32).reshape(steps, n, 1)
    reward = torch.zeros(steps, n, 1)
    reward[3, 1], reward[3, 0] = 1.0, -1.0  # agent 1 wins on its move at t=3
    done = torch.zeros(steps, 1, dtype=torch.bool)
    done[3] = True
    batch = TensorDict(
        {
            "g": {"observation": obs, "mask": acting},
            "next": {
                "g": {"observation": obs + 100, "reward": reward},
                "done": done,
                "terminated": done.clone(),
            },
        },
        batch_size=[steps],
    )
    info = dataclasses.replace(
        group_infos(MultiAgentFakeEnv(num_envs=2))["picker"],
        name="g",
        n_agents=n,
        batch_dims=0,
        has_agent_mask=True,
        turn_based=True,
    )
    turn_transitions(batch, info)
    nxt = batch["next", "g"]
    assert nxt["observation"][0, 0] == obs[2, 0] and nxt["observation"][1, 1] == obs[3, 1]
    assert nxt["reward"][2, 0] == -1.0 and nxt["terminated"][2, 0]  # the loser's last turn
    assert nxt["reward"][3, 1] == 1.0 and nxt["done"][3, 1]
    assert not nxt["done"][0, 0] and nxt["reward"][0, 0] == 0
    # turns whose next turn lies beyond the batch are dropped, off-turn steps stay masked
    assert batch["g", "mask"].tolist() == [
        [True, False],
        [False, True],
        [True, False],
        [False, True],
        [False, False],
        [False, False],
    ]


def test_checkpoint_round_trip_of_marl_learners():
    algorithm = {"walker": "maddpg", "picker": "qmix"}
    config = {g: small(a) for g, a in algorithm.items()}
    algo = Algorithm(algorithm, config=config).build(_multi(), seed=0)
    list(Trainer(algo, _multi(), frames_per_batch=40, total_frames=80, seed=0).train())
    state = algo.state_dict_full()
    fresh = Algorithm(algorithm, config=config).build(_multi(), seed=1)
    fresh.load_state_dict_full(state)
    for (k, a), b in zip(algo.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), k


def test_an_in_memory_state_is_a_snapshot_and_loading_it_links_nothing():
    """``state_dict_full`` copies the live tensors, and loading copies them again.

    Without the copies, a kept state followed the live parameters (every snapshot of
    a pool the same policy), and two algorithms loaded from one state shared their
    Adam moments, since torch optimizers keep state tensors whose device and dtype fit.
    """
    algorithm = {"walker": "mappo", "picker": "qmix"}
    config = {g: small(a) for g, a in algorithm.items()}
    algo = Algorithm(algorithm, config=config).build(_multi(), seed=0)
    trainer = Trainer(algo, _multi(), frames_per_batch=40, total_frames=80, seed=0)
    list(trainer.train())
    state = algo.state_dict_full()
    kept = {k: v.clone() for k, v in state["modules"].items()}
    copies = []
    for seed in (1, 2):
        copies.append(Algorithm(algorithm, config=config).build(_multi(), seed=seed))
        copies[-1].load_state_dict_full(state)
    trainer.total_frames = 160
    list(trainer.train())  # the source trains on
    assert all(torch.equal(kept[k], v) for k, v in state["modules"].items())
    first, second = copies
    list(Trainer(first, _multi(), frames_per_batch=40, total_frames=80, seed=3).train())
    # the second copy is still exactly the state it loaded: nothing of it moved
    for (k, a), b in zip(second.state_dict().items(), kept.values()):
        assert torch.equal(a, b), k
    moments = [lr.optimizer.state_dict()["state"] for _, lr in second.group_learners()]
    before = [
        {i: {n: t.clone() for n, t in st.items() if torch.is_tensor(t)} for i, st in m.items()}
        for m in moments
    ]
    list(Trainer(first, _multi(), frames_per_batch=40, total_frames=120, seed=3).train())
    after = [lr.optimizer.state_dict()["state"] for _, lr in second.group_learners()]
    for b, a in zip(before, after):
        for i, st in b.items():
            for n, t in st.items():
                assert torch.equal(t, a[i][n]), (i, n)


def test_agent_mask_weight_combines_with_priority_weights():
    env = _multi(8, MaskedFakeEnv)
    algo = Algorithm({"walker": "isac", "picker": "iql"}, config={"walker": small("isac")})
    algo.build(env, seed=0)
    loss = algo.learners["walker"].loss
    assert loss.tensor_keys.agent_mask == ("walker", "mask")
    batch = _batch(algo, env).reshape(-1)
    batch["priority_weight"] = torch.linspace(0.5, 1.5, batch.numel())
    mask = batch["walker", "mask"].float()
    expected = mask / mask.mean() * batch["priority_weight"][:, None]
    assert torch.allclose(loss.loss_weight(batch), expected)


@pytest.mark.parametrize("name", ["mappo", "qmix"])
def test_runs_on_pettingzoo_groups_with_agent_masks(name):
    pytest.importorskip("pettingzoo")
    pytest.importorskip("mpe2")
    from marl.envs.tasks import make_task

    env = make_task("pettingzoo/simple_spread", seed=0, max_cycles=10)
    algo = Algorithm(name, config=small(name))
    logs = list(Trainer(algo, env, frames_per_batch=50, total_frames=100, seed=0).train())[-1]
    assert group_infos(env)["agent"].has_agent_mask
    assert any(k.startswith("train/agent/loss_") for k in logs), sorted(logs)


@pytest.mark.parametrize("name", ["mappo", "happo"])
def test_update_of_selected_groups_leaves_the_others_alone(name):
    """``Algorithm.update(batch, groups=...)`` (a league trains one side's group) trains
    those groups only, joint updates (HAPPO) included; an unknown group is named."""
    algo = Algorithm(name, config=small(name)).build(_multi(), seed=0)
    with torch.no_grad():
        td = _multi().rollout(20, algo.policy, break_when_any_done=False)
    before = {g: _params(algo.learners[g]) for g in ("walker", "picker")}
    batch = algo.process_batch(td, groups=["walker"])
    logs = algo.update(batch, groups=["walker"])
    assert logs and all(k.startswith("walker/") for k in logs), sorted(logs)
    for g, changed_expected in (("walker", True), ("picker", False)):
        after = _params(algo.learners[g])
        changed = any(not torch.equal(before[g][k], after[k]) for k in after)
        assert changed == changed_expected, g
    with pytest.raises(ValueError, match=r"unknown group\(s\) \['blue'\]"):
        algo.update(batch, groups=["blue"])


def test_a_built_learners_loss_cannot_be_rewired():
    """The loss's keys and value estimator are fixed when its learner is built."""
    algo = Algorithm("mappo", config=small("mappo")).build(_multi(), seed=0)
    loss = algo.learners["walker"].loss
    with pytest.raises(RuntimeError, match="PPOLoss is part of a built learner"):
        loss.set_keys(advantage=("walker", "other"))
    with pytest.raises(RuntimeError, match="fixed"):
        loss.make_value_estimator("td0", gamma=0.9)
    with pytest.raises(RuntimeError, match="fixed"):
        loss.value_estimator.set_keys(value=("walker", "other"))
    assert loss.tensor_keys.advantage == ("walker", "advantage")
