"""Envs and policies shared by the collector tests."""

from __future__ import annotations

import os

import torch
from tensordict import TensorDictBase
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
)
from torch import nn

from marl.testing import SingleAgentFakeEnv


class CrashingEnv(SingleAgentFakeEnv):
    """Raises ``ValueError`` at its ``crash_at``-th step."""

    def __init__(self, crash_at: int = 3, **kwargs):
        super().__init__(**kwargs)
        self.crash_at = crash_at
        self.n_steps = 0

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        self.n_steps += 1
        if self.n_steps >= self.crash_at:
            raise ValueError(f"boom at step {self.n_steps}")
        return super()._step(td)


class DyingEnv(SingleAgentFakeEnv):
    """Kills its process (exit code 3, no Python cleanup) at its ``die_at``-th step."""

    def __init__(self, die_at: int = 3, **kwargs):
        super().__init__(**kwargs)
        self.die_at = die_at
        self.n_steps = 0

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        self.n_steps += 1
        if self.n_steps >= self.die_at:
            os._exit(3)
        return super()._step(td)


def linear_policy(bias: float = 0.0) -> TensorDictModule:
    """A deterministic ``observation [4] -> action [2]`` policy: zero weights, constant bias."""
    net = nn.Linear(4, 2)
    with torch.no_grad():
        net.weight.zero_()
        net.bias.fill_(bias)
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


class _LocScale(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(4, 2)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.net(obs).tanh() * 0.5, torch.ones(*obs.shape[:-1], 2)


def gaussian_policy() -> ProbabilisticTensorDictSequential:
    """A Normal policy over the single-agent continuous action (scale 1)."""
    return ProbabilisticTensorDictSequential(
        TensorDictModule(_LocScale(), in_keys=["observation"], out_keys=["loc", "scale"]),
        ProbabilisticTensorDictModule(
            in_keys=["loc", "scale"],
            out_keys=["action"],
            distribution_class=torch.distributions.Normal,
            return_log_prob=True,
        ),
    )


def multi_agent_policy(td: TensorDictBase) -> TensorDictBase:
    """A plain callable for MultiAgentFakeEnv: walkers copy their target, pickers its index."""
    td.set(("walker", "action"), td.get(("walker", "observation"))[..., :2].clamp(-1, 1))
    td.set(("picker", "action"), td.get(("picker", "observation")).argmax(-1))
    return td


class ListBuffer:
    """The smallest replay buffer: a list of what ``extend`` received."""

    def __init__(self) -> None:
        self.data: list[TensorDictBase] = []

    def extend(self, td: TensorDictBase) -> None:
        self.data.append(td.clone())


def zombie_children() -> list[int]:
    """Pids of this process's children that are zombies (exited but not reaped)."""
    me, out = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z" and int(fields[1]) == me:
            out.append(int(name))
    return out


class _Argmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.argmax(-1)


def multi_agent_module(bias: float = 0.0) -> TensorDictSequential:
    """An ``nn.Module`` policy for MultiAgentFakeEnv: walkers output ``bias``, pickers argmax."""
    walker = nn.Linear(6, 2)
    with torch.no_grad():
        walker.weight.zero_()
        walker.bias.fill_(bias)
    return TensorDictSequential(
        TensorDictModule(
            walker, in_keys=[("walker", "observation")], out_keys=[("walker", "action")]
        ),
        TensorDictModule(
            _Argmax(), in_keys=[("picker", "observation")], out_keys=[("picker", "action")]
        ),
    )
