"""``QMixLoss``: value-decomposition Q-learning (VDN or QMIX, chosen by the mixer)."""

from __future__ import annotations

from typing import ClassVar

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey
from torch import nn

from marl.objectives.common import (
    TRANSITION_KEYS,
    LossModule,
    distance_loss,
    next_keys,
    td_target,
    unique_keys,
)
from marl.objectives.dqn import chosen_action_value, masked_max_action_value
from marl.objectives.settings import DQNSettings

__all__ = ["QMixLoss"]


class QMixLoss(LossModule):
    """Centralized training of per-agent Q-networks through a mixer (Rashid et al., 2018).

    The chosen per-agent values ``Q_i(o_i, a_i)`` (``[*B, n_agents, 1]``) are mixed into
    ``Q_tot = mixer(Q, state)`` (``[*B, 1]``) and regressed on
    ``y = r + gamma * (1 - terminated) * mixer_target(max_{a legal} Q_target(o', a), s')``
    (double-Q: the online agents pick ``a``). A per-agent reward ``[*B, n, 1]`` is
    averaged into the team reward and per-agent flags are reduced with ``any``.

    Args:
        local_value_network: module writing the per-agent ``action_value``
            ``[*B, n_agents, n_actions]``.
        mixer: ``VDNMixer``/``QMixer`` (any module ``(agent_qs, state) -> [*B, 1]``).
        settings: ``gamma``, ``double_dqn`` (the online agents select the next actions)
            and ``loss_function`` (:class:`~marl.objectives.settings.DQNSettings`).

    Returns (``forward``):
        TensorDict with ``loss_qvalue`` and diagnostics ``q_tot_mean``, ``td_error_mean``.

    Examples:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from marl.modules import VDNMixer
        >>> q = TensorDictModule(nn.Linear(3, 4), [("agents", "observation")],
        ...                      [("agents", "action_value")])
        >>> td = TensorDict({
        ...     "agents": {"observation": torch.randn(8, 2, 3), "action": torch.zeros(8, 2).long()},
        ...     "next": {"agents": {"observation": torch.randn(8, 2, 3)},
        ...              "reward": torch.ones(8, 1), "done": torch.zeros(8, 1, dtype=torch.bool)},
        ... }, batch_size=[8])
        >>> QMixLoss(q, VDNMixer(2))(td)["loss_qvalue"].shape
        torch.Size([])
    """

    default_keys: ClassVar[dict[str, NestedKey]] = {
        "action": ("agents", "action"),
        "action_value": ("agents", "action_value"),
        "action_mask": ("agents", "action_mask"),
        "state": "state",
        **TRANSITION_KEYS,
    }
    per_run_scalars: ClassVar[tuple[str, ...]] = ("gamma",)

    def __init__(
        self,
        local_value_network: TensorDictModuleBase,
        mixer: nn.Module,
        settings: DQNSettings | None = None,
    ) -> None:
        settings = DQNSettings() if settings is None else settings
        super().__init__()
        self._with_targets(local_value_network=local_value_network, mixer=mixer)
        self._q_regression(settings)
        self.double_dqn = settings.double_dqn

    @property
    def in_keys(self) -> list[NestedKey]:
        """The agents' Q-network inputs now and next, the action, the mixer's state now
        and next, the next legal actions, the reward, the done flags and the priority weight."""
        k = self.tensor_keys
        net = list(self.local_value_network.in_keys)
        return unique_keys(
            [
                *net,
                k.action,
                k.state,
                *next_keys([*net, k.state, k.action_mask]),
                k.reward,
                k.done,
                k.terminated,
                *self._weight_keys(),
            ]
        )

    def _q(self, net: TensorDictModuleBase, td: TensorDictBase) -> torch.Tensor:
        return net(td.select(*net.in_keys, strict=False)).get(self.tensor_keys.action_value)

    def _team(self, x: torch.Tensor, batch_dims: int, reduce: str) -> torch.Tensor:
        """Reduce a per-agent ``[*B, n, 1]`` reward/flag to the team ``[*B, 1]``."""
        if x.ndim <= batch_dims + 1:
            return x
        flat = x.flatten(batch_dims)
        if reduce == "any":
            return flat.any(-1, True)
        # keep a floating reward's dtype (a float64 reward must not be rounded to float32)
        return (flat if flat.is_floating_point() else flat.float()).mean(-1, keepdim=True)

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        k = self.tensor_keys
        b = tensordict.batch_dims
        q_all, next_q_target, select = self._q_now_and_next(
            self.local_value_network, self.target_local_value_network, tensordict, self.double_dqn
        )
        agent_q = chosen_action_value(q_all, tensordict.get(k.action))
        q_tot = self.mixer(agent_q, tensordict.get(k.state, None))
        next_td = tensordict.get("next")
        with torch.no_grad():
            next_q = masked_max_action_value(
                next_q_target, next_td.get(k.action_mask, None), select
            )
            next_q_tot = self.target_mixer(next_q, next_td.get(k.state, None))
            reward = self._team(tensordict.get(k.reward), b, "mean")
            terminated = self._team(self._terminated(tensordict), b, "any")
            target = td_target(self.gamma, reward, terminated, next_q_tot, b)
        self._write_td_error(tensordict, q_tot - target)
        weight = self.loss_weight(tensordict)
        loss = self._weighted_mean(distance_loss(q_tot, target, self.loss_function), weight)
        return TensorDict(
            loss_qvalue=loss,
            q_tot_mean=q_tot.detach().mean(),
            td_error_mean=(q_tot - target).detach().abs().mean(),
        )
