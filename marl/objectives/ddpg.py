"""``DDPGLoss``: deterministic policy gradient with target actor and critic."""

from __future__ import annotations

from typing import ClassVar

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey
from torch import nn
from torch.func import functional_call

from marl.objectives.common import (
    PER_AGENT_KEYS,
    LossModule,
    distance_loss,
    next_keys,
    unique_keys,
)
from marl.objectives.settings import DDPGSettings

__all__ = ["DDPGLoss", "q_frozen"]


def q_frozen(net: nn.Module, td: TensorDictBase, key: NestedKey) -> torch.Tensor:
    """Evaluate ``net`` with detached parameters: gradients reach only its inputs (the action)."""
    params = {n: p.detach() for n, p in net.named_parameters()}
    return functional_call(net, params, (td,)).get(key)


class DDPGLoss(LossModule):
    """Deep deterministic policy gradient (Lillicrap et al., 2016).

    ``y = r + gamma * (1 - terminated) * Q'(s', mu'(s'))``; ``loss_value = mean(l(Q(s, a), y))``;
    ``loss_actor = -mean(Q(s, mu(s)))`` with the critic's parameters frozen in that term.
    Multi-agent (MADDPG): point ``action`` at a group key; a centralized critic may read
    other keys too, and the group's actor output replaces its action.

    Args:
        actor: deterministic policy module writing ``action``.
        value_network: module reading the observation(s) and ``action``, writing
            ``state_action_value``.
        settings: ``gamma`` and ``loss_function``
            (:class:`~marl.objectives.settings.DDPGSettings`; ``None``: its defaults).

    Returns (``forward``):
        TensorDict with ``loss_actor``, ``loss_value`` and diagnostics.

    Examples:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> actor = TensorDictModule(nn.Sequential(nn.Linear(3, 2), nn.Tanh()),
        ...                          ["observation"], ["action"])
        >>> class Q(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.lin = nn.Linear(5, 1)
        ...     def forward(self, obs, act):
        ...         return self.lin(torch.cat([obs, act], -1))
        >>> q = TensorDictModule(Q(), ["observation", "action"], ["state_action_value"])
        >>> td = TensorDict({"observation": torch.randn(4, 3), "action": torch.rand(4, 2),
        ...     "next": {"observation": torch.randn(4, 3), "reward": torch.ones(4, 1),
        ...              "terminated": torch.zeros(4, 1, dtype=torch.bool)}}, batch_size=[4])
        >>> sorted(k for k in DDPGLoss(actor, q)(td).keys() if k.startswith("loss"))
        ['loss_actor', 'loss_value']
    """

    default_keys: ClassVar[dict[str, NestedKey]] = {
        "action": "action",
        "state_action_value": "state_action_value",
        **PER_AGENT_KEYS,
    }
    per_run_scalars: ClassVar[tuple[str, ...]] = ("gamma",)

    def __init__(
        self,
        actor: TensorDictModuleBase,
        value_network: TensorDictModuleBase,
        settings: DDPGSettings | None = None,
    ) -> None:
        settings = DDPGSettings() if settings is None else settings
        super().__init__()
        self._with_targets(actor=actor, value_network=value_network)
        self._q_regression(settings)

    @property
    def in_keys(self) -> list[NestedKey]:
        """The actor's and the critic's inputs now and next, the reward, the done flags
        and the loss weights."""
        k = self.tensor_keys
        nets = [*self.actor.in_keys, *self.value_network.in_keys]
        return unique_keys(
            [*nets, *next_keys(nets), k.reward, k.done, k.terminated, *self._weight_keys()]
        )

    def _select(self, td: TensorDictBase) -> TensorDictBase:
        return td.select(*self.actor.in_keys, *self.value_network.in_keys, strict=False)

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        k = self.tensor_keys
        with torch.no_grad():
            next_td = self.target_actor(self._select(tensordict.get("next")))
            next_q = self.target_value_network(next_td).get(k.state_action_value)
            target = self._td_target(tensordict, next_q)
        data_td = self._select(tensordict)
        q = self.value_network(data_td.copy()).get(k.state_action_value)
        q, target = torch.broadcast_tensors(q, target)
        self._write_td_error(tensordict, q - target)
        weight = self.loss_weight(tensordict)
        loss_value = self._weighted_mean(distance_loss(q, target, self.loss_function), weight)
        pi_td = self.actor(data_td)
        loss_actor = -self._weighted_mean(
            q_frozen(self.value_network, pi_td, k.state_action_value), weight
        )
        return TensorDict(
            loss_actor=loss_actor,
            loss_value=loss_value,
            q_mean=q.detach().mean(),
            target_mean=target.mean(),
        )
