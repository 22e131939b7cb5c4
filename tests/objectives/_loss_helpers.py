"""Small hand-made batches and modules shared by the loss tests."""

from __future__ import annotations

import torch
from tensordict import TensorDict
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import distributions as D


def categorical_actor(obs_key, action_key, n_obs=3, n_act=4, logits_key="logits"):
    net = TensorDictModule(torch.nn.Linear(n_obs, n_act), [obs_key], [logits_key])
    prob = ProbabilisticTensorDictModule(
        [logits_key], [action_key], distribution_class=D.Categorical, return_log_prob=True
    )
    return ProbabilisticTensorDictSequential(net, prob)


def batch(B=6, n=None, n_obs=3, seed=0, group=None, reward_per_agent=True):
    """A transition batch; with ``group`` the per-agent data sits under that key."""
    g = torch.Generator().manual_seed(seed)
    lead = (B,) if n is None else (B, n)
    obs = torch.randn(*lead, n_obs, generator=g)
    nobs = torch.randn(*lead, n_obs, generator=g)
    term = torch.tensor([i % 3 == 0 for i in range(B)]).unsqueeze(-1)
    trunc = torch.tensor([i % 3 == 1 for i in range(B)]).unsqueeze(-1)
    reward_shape = (*lead, 1) if reward_per_agent else (B, 1)
    reward = torch.randn(reward_shape, generator=g)
    data = {"observation": obs}
    nxt = {"observation": nobs}
    if group is None:
        nxt["reward"] = reward
    else:
        data = {group: data}
        nxt = {group: nxt}
        nxt[group]["reward"] = reward
    nxt.update(terminated=term, truncated=trunc, done=term | trunc)
    data["next"] = nxt
    return TensorDict(data, batch_size=[B])
