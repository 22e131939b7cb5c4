"""PQN: Q(lambda) targets from the current network, regressed on fresh rollouts.

Parallel Q-learning (Gallici et al., 2025) drops the replay buffer and the target
network: each rollout of many vectorized envs is used for a few epochs and then
discarded, as in PPO, and the regression targets are lambda-returns bootstrapped
on the *current* network's greedy values. Layer normalization in the Q-network
(:class:`marl.modules.MLP` with ``layer_norm=True``) is what keeps this stable.

- :class:`QLambda`: the estimator. On a ``[*B, T]`` rollout it computes
  ``V(s') = max_{a legal} Q(s', a)`` and writes the lambda-returns
  ``G_t = r_t + gamma (1 - term_t) ((1 - lambda) V(s_{t+1}) + lambda G_{t+1})``
  (``G_{t+1}`` replaced by ``V(s_{t+1})`` where a trajectory is cut) as
  ``value_target``, once per batch, before the epochs.
- :class:`PQNLoss`: ``l(Q(s, a), G)``. With ``team=True`` (PQN-VDN) the agents'
  chosen values are summed into ``Q_tot`` and the target is the team's
  lambda-return on the mean reward, bootstrapped on ``sum_i max_a Q_i(o_i', a)``.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey

from marl.objectives.common import (
    PER_AGENT_KEYS,
    LossModule,
    check_loss_kind,
    distance_loss,
    unique_keys,
)
from marl.objectives.dqn import ACTION_VALUE_KEYS, chosen_action_value, masked_max_action_value
from marl.objectives.estimators import ValueEstimator
from marl.objectives.settings import PQNSettings
from marl.objectives.value import td_lambda_return_estimate

__all__ = ["PQNLoss", "QLambda"]


def _team(x: torch.Tensor, agent_dim: int, reduce: str) -> torch.Tensor:
    """Reduce a per-agent ``[..., n, 1]`` tensor over the agents (kept as a size-1 dim)."""
    if reduce == "sum":
        return x.sum(agent_dim, keepdim=True)
    if reduce == "any":
        return x.any(agent_dim, keepdim=True)
    return (x if x.is_floating_point() else x.float()).mean(agent_dim, keepdim=True)


class QLambda(ValueEstimator):
    """Q(lambda) returns bootstrapped on the current Q-network's greedy values.

    ``value_target`` gets the lambda-returns (see the module docstring) and
    ``advantage`` the TD(lambda) errors ``G_t - Q(s_t, a_t)`` (diagnostics: PQN
    regresses on the targets). ``Q(s)`` and ``Q(s')`` come from one network call.

    Args:
        value_network: module writing ``action_value`` ``[*B, T, (n,) n_actions]``.
        gamma: discount factor.
        lmbda: lambda (0: one-step Q-learning targets; 1: Monte Carlo returns up to
            the rollout's end).
        team: PQN-VDN: the targets are the team's (mean reward, ``any`` termination,
            ``sum_i max_a Q_i(o_i', a)``), written once per agent so that they live
            with the group's entries.

    Examples:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> q = TensorDictModule(torch.nn.Linear(1, 2, bias=False), ["obs"], ["action_value"])
        >>> _ = q.module.weight.data.copy_(torch.tensor([[1.0], [2.0]]))  # max Q = 2 obs
        >>> td = TensorDict({"obs": torch.zeros(1, 3, 1), "action": torch.zeros(1, 3).long(),
        ...     "next": {"obs": torch.ones(1, 3, 1), "reward": torch.ones(1, 3, 1),
        ...              "done": torch.zeros(1, 3, 1, dtype=torch.bool)}}, batch_size=[1, 3])
        >>> est = QLambda(q, gamma=0.5, lmbda=0.0).set_keys(value="action_value")
        >>> est(td)["value_target"].flatten().tolist()  # 1 + 0.5 * 2
        [2.0, 2.0, 2.0]
    """

    default_keys: ClassVar[dict[str, NestedKey]] = {
        **ValueEstimator.default_keys,
        **ACTION_VALUE_KEYS,
    }

    def __init__(
        self,
        value_network: TensorDictModuleBase,
        *,
        gamma: float = 0.99,
        lmbda: float = 0.65,
        team: bool = False,
    ) -> None:
        super().__init__(gamma=gamma, value_network=value_network)
        if not 0.0 <= lmbda <= 1.0:
            raise ValueError(f"lmbda must be in [0, 1], got {lmbda}")
        self.lmbda = lmbda
        self.team = team

    def _action_values(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """``Q(s, .)`` and ``Q(s', .)`` from one call on the two inputs stacked."""
        net = self.value_network
        assert net is not None
        keys = list(net.in_keys)
        both = torch.stack([td.select(*keys, strict=False), td.get("next").select(*keys)], 0)
        values = net(both).get(self.tensor_keys.action_value)
        return values[0], values[1]

    def _estimate(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        k = self.tensor_keys
        t = self._time_dim(td)
        q, next_q = self._action_values(td)
        chosen = chosen_action_value(q, td.get(k.action))  # [*B, T, (n,) 1]
        next_value = masked_max_action_value(next_q, td.get(("next", *_tuple(k.action_mask)), None))
        reward = td.get(k.reward)
        done, term = self._flags(td)
        if self.team:
            agent_dim = td.batch_dims  # [*B, T, n, 1]: the agents right after time
            next_value = _team(next_value, agent_dim, "sum")
            chosen = _team(chosen, agent_dim, "sum")
            if reward.ndim > agent_dim + 1:
                reward = _team(reward, agent_dim, "mean")
            if done.ndim > agent_dim + 1:
                done, term = _team(done, agent_dim, "any"), _team(term, agent_dim, "any")
        target = td_lambda_return_estimate(
            self.gamma, self.lmbda, next_value, reward, done, term, time_dim=t
        )
        advantage = target - chosen
        if self.team:  # one copy per agent, in the group's [*B, T, n, 1] layout
            shape = (*q.shape[:-1], 1)
            target, advantage = target.expand(shape), advantage.expand(shape)
        return advantage, target


def _tuple(key: NestedKey) -> tuple[str, ...]:
    return key if isinstance(key, tuple) else (key,)


class PQNLoss(LossModule):
    """PQN's regression of ``Q(s, a)`` on the Q(lambda) targets of its :class:`QLambda`.

    The on-policy updater runs :attr:`value_estimator` once on each rollout (targets
    from the network as it was before the epochs), then this loss on each minibatch:
    ``loss_qvalue = mean(w * l(Q(s, a), G))``, ``w`` the agent mask when set. With
    ``team=True``: ``l(sum_i Q_i(o_i, a_i), G_team)``, masked-out agents removed from
    the sum by the network (``MaskedAgentValues``).

    Args:
        value_network: module writing ``action_value``.
        settings: ``gamma``, ``lmbda`` (of the returns) and ``loss_function``
            (:class:`~marl.objectives.settings.PQNSettings`; ``None``: its defaults).
        team: PQN-VDN (see :class:`QLambda`).

    Returns (``forward``):
        TensorDict with ``loss_qvalue`` and diagnostics ``q_mean`` and
        ``td_error_mean`` (``|Q(s, a) - G|``).

    Examples:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> q = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action_value"])
        >>> loss = PQNLoss(q)
        >>> td = TensorDict({"observation": torch.randn(4, 5, 3),
        ...     "action": torch.zeros(4, 5).long(),
        ...     "next": {"observation": torch.randn(4, 5, 3), "reward": torch.ones(4, 5, 1),
        ...              "done": torch.zeros(4, 5, 1, dtype=torch.bool)}}, batch_size=[4, 5])
        >>> minibatch = loss.value_estimator(td).reshape(-1)[:8]
        >>> loss(minibatch)["loss_qvalue"].shape
        torch.Size([])
    """

    default_keys: ClassVar[dict[str, NestedKey]] = {
        "action": "action",
        "action_value": "action_value",
        "action_mask": "action_mask",
        "advantage": "advantage",
        "value_target": "value_target",
        "truncated": ("next", "truncated"),
        **PER_AGENT_KEYS,
    }

    def __init__(
        self,
        value_network: TensorDictModuleBase,
        settings: PQNSettings | None = None,
        *,
        team: bool = False,
    ) -> None:
        settings = PQNSettings() if settings is None else settings
        super().__init__()
        self.value_network = value_network
        self.team = team
        self.loss_function = check_loss_kind(settings.loss_function)
        self.value_estimator: ValueEstimator | None = QLambda(
            value_network, gamma=settings.gamma, lmbda=settings.lmbda, team=team
        )
        self._keys_changed(self.tensor_keys.as_dict())

    def _keys_changed(self, keys: dict[str, NestedKey]) -> None:
        est = getattr(self, "value_estimator", None)
        if est is not None:
            est.set_keys(**{k: v for k, v in keys.items() if k in est.default_keys})

    @property
    def in_keys(self) -> list[NestedKey]:
        """The Q-network's inputs, the action, the target and the loss weights (the
        estimator has written the targets on the whole rollout first)."""
        k = self.tensor_keys
        weights = [k.priority_weight] if self.team else self._weight_keys()
        return unique_keys([*self.value_network.in_keys, k.action, k.value_target, *weights])

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        k = self.tensor_keys
        net = self.value_network
        values = net(tensordict.select(*net.in_keys, strict=False)).get(k.action_value)
        q = chosen_action_value(values, tensordict.get(k.action))
        target = tensordict.get(k.value_target)
        weight = None
        if self.team:  # [*B, n, 1] -> the team's [*B, 1]; the target is the same per agent
            q = q.sum(tensordict.batch_dims, keepdim=False)
            target = target.select(tensordict.batch_dims, 0)
            weight = tensordict.get(k.priority_weight, None)
        else:
            weight = self.loss_weight(tensordict)
        error = q - target
        loss = self._weighted_mean(distance_loss(q, target, self.loss_function), weight)
        return TensorDict(
            loss_qvalue=loss, q_mean=q.detach().mean(), td_error_mean=error.detach().abs().mean()
        )
