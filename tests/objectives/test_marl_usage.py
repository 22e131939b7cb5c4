"""The MARL recipe: single-agent losses pointed at a group's keys, on [E, T, n] rollouts."""

from __future__ import annotations

import torch
from tensordict import TensorDict
from tensordict.nn import (
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import nn

from marl.modules import MultiAgentMLP, TanhNormal
from marl.objectives import PPOLoss, PPOSettings

E, T, N, OBS, ACT = 3, 6, 4, 5, 2
G = "agents"


def rollout():
    g = torch.Generator().manual_seed(0)
    done = torch.rand(E, T, 1, generator=g) < 0.2
    return TensorDict(
        {
            G: {"observation": torch.randn(E, T, N, OBS, generator=g)},
            "next": {
                G: {
                    "observation": torch.randn(E, T, N, OBS, generator=g),
                    "reward": torch.randn(E, T, N, 1, generator=g),
                },
                "done": done,
                "terminated": done & (torch.rand(E, T, 1, generator=g) < 0.5),
            },
        },
        batch_size=[E, T],
    )


def test_mappo_with_centralized_critic_and_env_level_done():
    actor_net = nn.Sequential(
        MultiAgentMLP(OBS, 2 * ACT, N, centralized=False, share_params=True, num_cells=16),
        NormalParamExtractor(),
    )
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(actor_net, [(G, "observation")], [(G, "loc"), (G, "scale")]),
        ProbabilisticTensorDictModule(
            [(G, "loc"), (G, "scale")],
            [(G, "action")],
            distribution_class=TanhNormal,
            return_log_prob=True,
            log_prob_key=(G, "action_log_prob"),
        ),
    )
    critic = TensorDictModule(
        MultiAgentMLP(OBS, 1, N, centralized=True, share_params=False, num_cells=16),
        [(G, "observation")],
        [(G, "state_value")],
    )
    loss = PPOLoss(
        actor,
        critic,
        PPOSettings(entropy_coef=0.01),  # an entropy bonus: loss_entropy is trained below
        normalize_advantage_exclude_dims=(-2,),
    ).set_keys(
        action=(G, "action"),
        sample_log_prob=(G, "action_log_prob"),
        value=(G, "state_value"),
        advantage=(G, "advantage"),
        value_target=(G, "value_target"),
        reward=("next", G, "reward"),
    )
    td = rollout()
    with torch.no_grad():
        actor(td)
    loss.value_estimator(td)
    assert td[G, "advantage"].shape == (E, T, N, 1)
    minibatch = td.reshape(-1)[torch.randperm(E * T)[:10]]  # flattened like a replay sample
    out = loss(minibatch)
    total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
    total.backward()
    assert all(p.grad is not None for p in actor.parameters())
    assert all(p.grad is not None for p in critic.parameters())
