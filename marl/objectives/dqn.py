"""``DQNLoss``: (double) deep Q-learning with legal-action masks in the target."""

from __future__ import annotations

from typing import ClassVar

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey

from marl.objectives.common import (
    PER_AGENT_KEYS,
    LossModule,
    distance_loss,
    next_keys,
    unique_keys,
)
from marl.objectives.settings import DQNSettings

__all__ = ["ACTION_VALUE_KEYS", "DQNLoss", "chosen_action_value", "masked_max_action_value"]

ACTION_VALUE_KEYS: dict[str, NestedKey] = {
    "action": "action",
    "action_value": "action_value",
    "action_mask": "action_mask",
}
"""The entries a Q-learning loss reads from a batch (DQN's and PQN's; QMIX nests them under its agents): the taken
``action``, the Q-network's ``action_value`` and the optional ``action_mask``."""


def chosen_action_value(action_value: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """``Q(s, a)`` for index (``[*B]``/``[*B, 1]``) or one-hot (``[*B, n]``) actions.

    Args:
        action_value: ``[*B, n_actions]``.
        action: the taken actions.

    Returns:
        ``[*B, 1]``.
    """
    n = action_value.shape[-1]
    one_hot = action.dtype.is_floating_point or action.dtype == torch.bool
    if action.shape == action_value.shape and one_hot:
        return (action_value * action.to(action_value.dtype)).sum(-1, keepdim=True)
    if action.shape == action_value.shape[:-1]:
        action = action.unsqueeze(-1)
    if action.shape != (*action_value.shape[:-1], 1):
        raise ValueError(
            f"action of shape {tuple(action.shape)} does not index action values of shape "
            f"{tuple(action_value.shape)} (expected [*B], [*B, 1] or one-hot [*B, {n}])"
        )
    return action_value.gather(-1, action.long())


def masked_max_action_value(
    target_values: torch.Tensor,
    mask: torch.Tensor | None,
    select_values: torch.Tensor | None = None,
) -> torch.Tensor:
    """``max_a Q(s', a)`` over legal actions (double DQN: argmax of ``select_values``).

    Rows whose mask allows nothing (e.g. a dead agent) get 0 rather than ``-inf``.

    Args:
        target_values: ``[*B, n_actions]``, the values that are returned.
        mask: bool ``[*B, n_actions]``, True where legal, or ``None``.
        select_values: values whose argmax selects the action (online net for double DQN).

    Returns:
        ``[*B, 1]``.
    """
    select = target_values if select_values is None else select_values
    if mask is not None:
        select = select.masked_fill(~mask, float("-inf"))
    index = select.argmax(-1, keepdim=True)
    value = target_values.gather(-1, index)
    if mask is not None:
        value = value.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return value


class DQNLoss(LossModule):
    """Deep Q-learning (Mnih et al., 2015), double DQN (van Hasselt et al., 2016) by default.

    ``y = r + gamma * (1 - terminated) * Q_target(s', argmax_{a legal} Q(s', a))``;
    ``loss_qvalue = mean(w * l(Q(s, a), y))`` with priority weights ``w`` when present;
    ``|Q(s, a) - y|`` is written to ``td_error``.

    Args:
        value_network: module writing ``action_value`` (``[*B, n_actions]``) from the obs.
        settings: ``gamma``, ``double_dqn`` and ``loss_function``
            (:class:`~marl.objectives.settings.DQNSettings`; ``None``: its defaults).

    Returns (``forward``):
        TensorDict with ``loss_qvalue`` and diagnostics ``q_mean``, ``td_error_mean``.

    Examples:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> q = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action_value"])
        >>> td = TensorDict({"observation": torch.randn(4, 3), "action": torch.zeros(4, 1).long(),
        ...     "next": {"observation": torch.randn(4, 3), "reward": torch.ones(4, 1),
        ...              "done": torch.zeros(4, 1, dtype=torch.bool),
        ...              "terminated": torch.zeros(4, 1, dtype=torch.bool)}}, batch_size=[4])
        >>> DQNLoss(q)(td)["loss_qvalue"].shape
        torch.Size([])
    """

    default_keys: ClassVar[dict[str, NestedKey]] = {**ACTION_VALUE_KEYS, **PER_AGENT_KEYS}
    # double_dqn is not: it decides whether the online network's next values are computed
    per_run_scalars: ClassVar[tuple[str, ...]] = ("gamma",)

    def __init__(
        self,
        value_network: TensorDictModuleBase,
        settings: DQNSettings | None = None,
    ) -> None:
        settings = DQNSettings() if settings is None else settings
        super().__init__()
        self._with_targets(value_network=value_network)
        self._q_regression(settings)
        self.double_dqn = settings.double_dqn

    @property
    def in_keys(self) -> list[NestedKey]:
        """The Q-network's inputs now and next, the action, the next legal actions, the
        reward, the done flags and the loss weights."""
        k = self.tensor_keys
        net = list(self.value_network.in_keys)
        return unique_keys(
            [
                *net,
                k.action,
                *next_keys([*net, k.action_mask]),
                k.reward,
                k.done,
                k.terminated,
                *self._weight_keys(),
            ]
        )

    def _q(self, net: TensorDictModuleBase, td: TensorDictBase) -> torch.Tensor:
        return net(td.select(*net.in_keys, strict=False)).get(self.tensor_keys.action_value)

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        k = self.tensor_keys
        q_all, next_q_target, select = self._q_now_and_next(
            self.value_network, self.target_value_network, tensordict, self.double_dqn
        )
        q = chosen_action_value(q_all, tensordict.get(k.action))
        next_td = tensordict.get("next")
        with torch.no_grad():
            next_q = masked_max_action_value(
                next_q_target, next_td.get(k.action_mask, None), select
            )
            target = self._td_target(tensordict, next_q)
        q, target = torch.broadcast_tensors(q, target)
        self._write_td_error(tensordict, q - target)
        weight = self.loss_weight(tensordict)
        loss = self._weighted_mean(distance_loss(q, target, self.loss_function), weight)
        return TensorDict(
            loss_qvalue=loss,
            q_mean=q.detach().mean(),
            td_error_mean=(q - target).detach().abs().mean(),
        )
