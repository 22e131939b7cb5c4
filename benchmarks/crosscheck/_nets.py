"""Networks, a fixed-noise action distribution and random batches for the cross-check.

The networks are plain ``torch.nn`` modules wrapped in ``tensordict.nn`` modules: both losses
get the same kind of module, so parameter names line up one to one. A per-agent network is
the same MLP applied on the last dim (parameters shared across agents), so a grouped batch
``[*B, n_agents, obs]`` works unchanged.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict
from tensordict.nn import (
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import distributions as D
from torch import nn

from marl.modules import TanhNormal

OBS, ACT, N_ACTIONS, N_AGENTS = 5, 2, 4, 3
_EMPTY = torch.Size()


def mlp(n_in: int, n_out: int, hidden: int = 16) -> nn.Module:
    return nn.Sequential(nn.Linear(n_in, hidden), nn.Tanh(), nn.Linear(hidden, n_out))


class QNet(nn.Module):
    """``Q(s, a)`` from a concatenation of observation and action."""

    def __init__(self, n_obs: int, n_act: int) -> None:
        super().__init__()
        self.net = mlp(n_obs + n_act, 1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, action], -1))


class FixedNoiseTanhNormal(TanhNormal):
    """marl's ``TanhNormal`` whose draws use a noise tensor read from the batch.

    ``rsample()`` returns ``squash(loc + scale * noise)``: a re-parameterized sample, the same
    in both losses whatever order they draw in. ``entropy`` is left unimplemented at the class
    level (TorchRL checks the class for a closed form), so both fall back to ``-log pi(a)``
    of one such draw.
    """

    entropy = D.Distribution.entropy

    def __init__(self, loc, scale, noise, low=-1.0, high=1.0):
        super().__init__(loc, scale, low=low, high=high)
        self.noise = noise

    def rsample(self, sample_shape: torch.Size = _EMPTY) -> torch.Tensor:
        shape = torch.Size(sample_shape) + self.loc.shape
        x = self.loc + self.scale * self.noise.expand(shape)
        y = self._squash(x)
        self._cache = (y, x)
        return y


def key(group: str | None, name: str):
    return name if group is None else (group, name)


def nxt(group: str | None, name: str):
    return ("next", name) if group is None else ("next", group, name)


def categorical_actor(group: str | None = None) -> ProbabilisticTensorDictSequential:
    return ProbabilisticTensorDictSequential(
        TensorDictModule(mlp(OBS, N_ACTIONS), [key(group, "observation")], [key(group, "logits")]),
        ProbabilisticTensorDictModule(
            [key(group, "logits")],
            [key(group, "action")],
            distribution_class=D.Categorical,
            return_log_prob=True,
            log_prob_key=key(group, "action_log_prob"),
        ),
    )


def tanh_actor(group: str | None = None, low: float = -1.0, high: float = 1.0):
    """A TanhNormal policy (``FixedNoiseTanhNormal``: reads its noise at ``noise``)."""
    return ProbabilisticTensorDictSequential(
        TensorDictModule(
            nn.Sequential(mlp(OBS, 2 * ACT), NormalParamExtractor()),
            [key(group, "observation")],
            [key(group, "loc"), key(group, "scale")],
        ),
        ProbabilisticTensorDictModule(
            {"loc": key(group, "loc"), "scale": key(group, "scale"), "noise": key(group, "noise")},
            [key(group, "action")],
            distribution_class=FixedNoiseTanhNormal,
            distribution_kwargs={"low": low, "high": high},
            return_log_prob=True,
            log_prob_key=key(group, "action_log_prob"),
        ),
    )


def deterministic_actor(group: str | None = None) -> TensorDictModule:
    return TensorDictModule(
        nn.Sequential(mlp(OBS, ACT), nn.Tanh()),
        [key(group, "observation")],
        [key(group, "action")],
    )


def value_net(group: str | None = None) -> TensorDictModule:
    return TensorDictModule(mlp(OBS, 1), [key(group, "observation")], [key(group, "state_value")])


def q_net(group: str | None = None) -> TensorDictModule:
    return TensorDictModule(
        QNet(OBS, ACT),
        [key(group, "observation"), key(group, "action")],
        [key(group, "state_action_value")],
    )


def action_value_net(group: str | None = None) -> TensorDictModule:
    return TensorDictModule(
        mlp(OBS, N_ACTIONS), [key(group, "observation")], [key(group, "action_value")]
    )


def flags(shape: tuple[int, ...], g: torch.Generator) -> dict[str, torch.Tensor]:
    """terminated / truncated (exclusive, ~10% / ~7%) anywhere, done = either."""
    u = torch.rand(shape, generator=g)
    term = u < 0.10
    trunc = (u >= 0.10) & (u < 0.17)
    return {"terminated": term, "truncated": trunc, "done": term | trunc}


def transitions(
    batch: tuple[int, ...],
    group: str | None = None,
    *,
    seed: int,
    continuous: bool,
    n_agents: int = N_AGENTS,
    team_reward: bool = False,
    mask: bool = False,
) -> TensorDict:
    """A batch of transitions ``[*batch]`` with env-level flags ``("next", flag)`` ``[*batch, 1]``.

    With ``group`` the per-agent entries sit under it with an agent dim ``n_agents``; the
    reward is per agent ``("next", group, "reward")`` unless ``team_reward`` (then
    ``("next", "reward")``, ``[*batch, 1]``).
    """
    g = torch.Generator().manual_seed(seed)
    lead = batch if group is None else (*batch, n_agents)
    dtype = torch.get_default_dtype()

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=dtype)

    data: dict = {key(group, "observation"): randn(*lead, OBS)}
    nx: dict = {key(group, "observation"): randn(*lead, OBS)}
    if continuous:
        data[key(group, "action")] = (
            torch.rand(*lead, ACT, generator=g, dtype=dtype) * 2 - 1
        ) * 0.95
        data[key(group, "noise")] = randn(*lead, ACT)
        nx[key(group, "noise")] = randn(*lead, ACT)
    else:
        if mask:
            m = torch.rand(*lead, N_ACTIONS, generator=g) < 0.7
            m[..., 0] = True  # one legal action at least
            nm = torch.rand(*lead, N_ACTIONS, generator=g) < 0.7
            nm[..., 1] = True
            data[key(group, "action_mask")] = m
            nx[key(group, "action_mask")] = nm
            action = torch.multinomial(m.reshape(-1, N_ACTIONS).float(), 1, generator=g)
            data[key(group, "action")] = action.reshape(lead)
        else:
            data[key(group, "action")] = torch.randint(N_ACTIONS, lead, generator=g)
    if team_reward or group is None:
        nx["reward"] = randn(*batch, 1)
    else:
        nx[key(group, "reward")] = randn(*lead, 1)
    for name, value in flags((*batch, 1), g).items():
        nx[name] = value
    out = TensorDict(batch_size=batch)
    for k, v in data.items():
        out.set(k, v)
    for k, v in nx.items():
        out.set(("next", *(k if isinstance(k, tuple) else (k,))), v)
    return out


def expand_flags(td: TensorDict, group: str, n_agents: int = N_AGENTS) -> TensorDict:
    """TorchRL's layout: env-level flags (and a team reward) copied under the group, per agent."""
    td = td.clone()
    names = ["done", "terminated", "truncated"]
    if ("next", "reward") in td.keys(True) and ("next", group, "reward") not in td.keys(True):
        names.append("reward")
    for name in names:
        x = td.get(("next", name))
        td.set(("next", group, name), x.unsqueeze(-2).expand(*x.shape[:-1], n_agents, 1).clone())
    return td
