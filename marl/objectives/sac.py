"""Soft actor-critic: ``SACLoss`` (continuous) and ``DiscreteSACLoss``.

Both use twin Q-networks (min over ``num_qvalue_nets`` independently initialised
copies), target Q-networks, and an automatically tuned temperature ``alpha``
(``log_alpha`` is a parameter of the loss; ``fixed_alpha=True`` freezes it).
"""

from __future__ import annotations

import math
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
    match_log_prob,
    next_keys,
    q_ensemble,
    unique_keys,
)
from marl.objectives.dqn import chosen_action_value
from marl.objectives.settings import SACSettings

__all__ = ["DiscreteSACLoss", "SACLoss"]


class _SACBase(LossModule):
    default_keys: ClassVar[dict[str, NestedKey]] = {
        "action": "action",
        "state_action_value": "state_action_value",
        "action_value": "action_value",
        **PER_AGENT_KEYS,
    }
    # the temperature's start (alpha_init) is the log_alpha parameter's value: each run's
    # own in a stacked update without being listed
    per_run_scalars: ClassVar[tuple[str, ...]] = ("gamma", "target_entropy")

    def __init__(
        self,
        actor: TensorDictModuleBase,
        qvalue_network: TensorDictModuleBase,
        settings: SACSettings,
    ) -> None:
        super().__init__()
        if not hasattr(actor, "get_dist"):
            raise TypeError(f"actor must expose get_dist(td), got {type(actor).__name__}")
        self.actor = actor
        self._with_targets(qvalue_networks=q_ensemble(qvalue_network, settings.num_qvalue_nets))
        self._q_regression(settings)
        self.log_alpha = nn.Parameter(
            torch.tensor(math.log(settings.alpha_init)), requires_grad=not settings.fixed_alpha
        )
        self.target_entropy = settings.target_entropy

    @property
    def alpha(self) -> torch.Tensor:
        """The current temperature (detached)."""
        return self.log_alpha.detach().exp()

    @property
    def in_keys(self) -> list[NestedKey]:
        """The actor's and the Q-networks' inputs now and next, the action, the reward,
        the done flags and the loss weights."""
        k = self.tensor_keys
        nets = [*self.actor.in_keys, *self.qvalue_networks[0].in_keys]
        return unique_keys(
            [
                *nets,
                k.action,
                *next_keys(nets),
                k.reward,
                k.done,
                k.terminated,
                *self._weight_keys(),
            ]
        )

    def _select(self, td: TensorDictBase) -> TensorDictBase:
        keys = [*self.actor.in_keys, *self.qvalue_networks[0].in_keys]
        return td.select(*keys, strict=False)

    def _qvalue_loss(
        self,
        td: TensorDictBase,
        preds: list[torch.Tensor],
        target: torch.Tensor,
        weight: torch.Tensor | None,
    ) -> torch.Tensor:
        preds = [torch.broadcast_tensors(p, target)[0] for p in preds]
        errors = torch.stack([p - target for p in preds])
        self._write_td_error(td, errors.abs().amax(0))
        loss = sum(distance_loss(p, target, self.loss_function) for p in preds)
        return self._weighted_mean(loss, weight)

    def _target_entropy(self, auto: float) -> float | torch.Tensor:
        """The target entropy, ``auto`` where the settings said ``"auto"`` (kept from then
        on); a tensor (each run's own in a stacked update) as it is."""
        if isinstance(self.target_entropy, str):
            self.target_entropy = auto
        if torch.is_tensor(self.target_entropy):
            return self.target_entropy
        return float(self.target_entropy)

    def _alpha_loss(
        self, entropy: torch.Tensor, target_entropy: float | torch.Tensor
    ) -> torch.Tensor:
        # alpha grows when the entropy falls below its target
        return self.log_alpha * (entropy.detach() - target_entropy).mean()


class SACLoss(_SACBase):
    """Soft actor-critic for continuous actions (Haarnoja et al., 2018).

    - ``y = r + gamma * (1 - terminated) * (min_i Q'_i(s', a') - alpha * log pi(a'|s'))``,
      ``a' ~ pi(s')``; ``loss_qvalue = sum_i mean(l(Q_i(s, a), y))``.
    - ``loss_actor = mean(alpha * log pi(a~|s) - min_i Q_i(s, a~))`` (``a~`` re-parameterized;
      the Q parameters are detached there, so this term only trains the actor).
    - ``loss_alpha = log_alpha * mean(H_est - target_entropy)``; ``"auto"`` target entropy is
      ``-action_dim``.

    Args:
        actor: a probabilistic policy (e.g. with ``TanhNormal``) exposing ``get_dist``.
        qvalue_network: module reading observation and ``action``, writing
            ``state_action_value``; extra copies are re-initialised independently.
        settings: the number of Q-networks, ``gamma``, the temperature (``alpha_init``,
            ``fixed_alpha``, ``target_entropy``) and the Q regression loss
            (:class:`~marl.objectives.settings.SACSettings`; ``None``: its defaults).

    Returns (``forward``):
        TensorDict with ``loss_actor``, ``loss_qvalue``, ``loss_alpha`` and diagnostics
        ``alpha``, ``entropy``, ``q_mean``.

    Examples:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> from tensordict.nn import ProbabilisticTensorDictModule as P
        >>> from tensordict.nn import ProbabilisticTensorDictSequential as S
        >>> from marl.modules import TanhNormal
        >>> actor = S(TensorDictModule(nn.Sequential(nn.Linear(3, 4), NormalParamExtractor()),
        ...                            ["observation"], ["loc", "scale"]),
        ...           P(["loc", "scale"], ["action"], distribution_class=TanhNormal))
        >>> q = TensorDictModule(nn.Bilinear(3, 2, 1), ["observation", "action"],
        ...                      ["state_action_value"])
        >>> td = TensorDict({"observation": torch.randn(4, 3), "action": torch.rand(4, 2),
        ...     "next": {"observation": torch.randn(4, 3), "reward": torch.ones(4, 1),
        ...              "terminated": torch.zeros(4, 1, dtype=torch.bool)}}, batch_size=[4])
        >>> sorted(k for k in SACLoss(actor, q)(td).keys() if k.startswith("loss"))
        ['loss_actor', 'loss_alpha', 'loss_qvalue']
    """

    def __init__(
        self,
        actor: TensorDictModuleBase,
        qvalue_network: TensorDictModuleBase,
        settings: SACSettings | None = None,
    ) -> None:
        super().__init__(actor, qvalue_network, SACSettings() if settings is None else settings)

    def _min_q(self, nets: nn.ModuleList, td: TensorDictBase, detach_params: bool) -> torch.Tensor:
        key = self.tensor_keys.state_action_value
        qs = []
        for net in nets:
            if detach_params:
                params = {n: p.detach() for n, p in net.named_parameters()}
                qs.append(functional_call(net, params, (td,)).get(key))
            else:
                qs.append(net(td).get(key))
        return torch.stack(torch.broadcast_tensors(*qs)).amin(0)

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        k = self.tensor_keys
        alpha = self.alpha
        # -- critic: soft Bellman target from the next state --------------------------
        with torch.no_grad():
            next_td = self._select(tensordict.get("next"))
            next_dist = self.actor.get_dist(next_td)
            next_action = next_dist.sample()
            next_log_prob = next_dist.log_prob(next_action)
            next_td.set(k.action, next_action)
            next_q = self._min_q(self.target_qvalue_networks, next_td, detach_params=False)
            next_v = next_q - alpha * match_log_prob(next_log_prob, next_q)
            target = self._td_target(tensordict, next_v)
        weight = self.loss_weight(tensordict)
        data_td = self._select(tensordict)
        preds = [net(data_td.copy()).get(k.state_action_value) for net in self.qvalue_networks]
        loss_qvalue = self._qvalue_loss(tensordict, preds, target, weight)
        # -- actor: re-parameterized action through the (frozen) critics ---------------
        dist = self.actor.get_dist(data_td)
        action = dist.rsample()
        log_prob = dist.log_prob(action)
        pi_td = data_td.copy().set(k.action, action)
        q_pi = self._min_q(self.qvalue_networks, pi_td, detach_params=True)
        log_prob = match_log_prob(log_prob, q_pi)
        loss_actor = self._weighted_mean(alpha * log_prob - q_pi, weight)
        # -- temperature --------------------------------------------------------------
        target_entropy = self._target_entropy(-float(action.shape[-1]))
        loss_alpha = self._alpha_loss(-log_prob, target_entropy)
        return TensorDict(
            loss_actor=loss_actor,
            loss_qvalue=loss_qvalue,
            loss_alpha=loss_alpha,
            alpha=alpha,
            entropy=-log_prob.detach().mean(),
            q_mean=torch.stack(preds).detach().mean(),
        )


class DiscreteSACLoss(_SACBase):
    """Soft actor-critic for discrete actions (Christodoulou, 2019).

    The policy's full distribution is used in expectations instead of samples:
    ``V(s') = sum_a pi(a|s') * (min_i Q'_i(s', a) - alpha * log pi(a|s'))`` and
    ``loss_actor = mean(sum_a pi(a|s) * (alpha * log pi(a|s) - min_i Q_i(s, a)))``.
    Masked (illegal) actions have probability 0 and contribute nothing.

    Args:
        actor: a categorical policy (``Categorical``/``MaskedCategorical``) with ``get_dist``.
        qvalue_network: module writing ``action_value`` ``[*B, n_actions]`` from the obs.
        settings: :class:`~marl.objectives.settings.SACSettings` (an ``"auto"`` target
            entropy is ``0.98 * log(num_actions)`` here).
        num_actions: number of discrete actions (for the ``"auto"`` target entropy).

    Returns (``forward``):
        TensorDict with ``loss_actor``, ``loss_qvalue``, ``loss_alpha`` and diagnostics.

    Examples:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from tensordict.nn import ProbabilisticTensorDictModule as P
        >>> from tensordict.nn import ProbabilisticTensorDictSequential as S
        >>> from marl.modules import MaskedCategorical
        >>> actor = S(TensorDictModule(nn.Linear(3, 4), ["observation"], ["logits"]),
        ...           P({"logits": "logits", "mask": "action_mask"}, ["action"],
        ...             distribution_class=MaskedCategorical))
        >>> q = TensorDictModule(nn.Linear(3, 4), ["observation"], ["action_value"])
        >>> mask = torch.tensor([True, True, False, True]).expand(5, 4)
        >>> td = TensorDict({"observation": torch.randn(5, 3), "action": torch.zeros(5).long(),
        ...     "action_mask": mask, "next": {"observation": torch.randn(5, 3), "action_mask": mask,
        ...     "reward": torch.ones(5, 1), "terminated": torch.zeros(5, 1, dtype=torch.bool)}},
        ...     batch_size=[5])
        >>> out = DiscreteSACLoss(actor, q)(td)
        >>> bool(torch.isfinite(out["loss_actor"]))
        True
    """

    def __init__(
        self,
        actor: TensorDictModuleBase,
        qvalue_network: TensorDictModuleBase,
        settings: SACSettings | None = None,
        *,
        num_actions: int | None = None,
    ) -> None:
        super().__init__(actor, qvalue_network, SACSettings() if settings is None else settings)
        self.num_actions = num_actions

    def _all_q(self, nets: nn.ModuleList, td: TensorDictBase) -> list[torch.Tensor]:
        return [net(td.copy()).get(self.tensor_keys.action_value) for net in nets]

    @staticmethod
    def _probs(td: TensorDictBase, actor: TensorDictModuleBase):
        dist = actor.get_dist(td)
        probs = dist.probs
        # p * log p is 0 for illegal actions (p = 0), never nan
        log_probs = torch.where(probs > 0, dist.logits, torch.zeros_like(probs))
        return probs, log_probs

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        k = self.tensor_keys
        alpha = self.alpha
        with torch.no_grad():
            next_td = self._select(tensordict.get("next"))
            next_p, next_logp = self._probs(next_td, self.actor)
            next_q = torch.stack(self._all_q(self.target_qvalue_networks, next_td)).amin(0)
            next_v = (next_p * (next_q - alpha * next_logp)).sum(-1, keepdim=True)
            target = self._td_target(tensordict, next_v)
        weight = self.loss_weight(tensordict)
        data_td = self._select(tensordict)
        all_q = self._all_q(self.qvalue_networks, data_td)
        action = tensordict.get(k.action)
        preds = [chosen_action_value(q, action) for q in all_q]
        loss_qvalue = self._qvalue_loss(tensordict, preds, target, weight)
        # the Q-values do not depend on the actor: detached outputs train only the actor
        q_min = torch.stack(all_q).amin(0).detach()
        probs, log_probs = self._probs(data_td, self.actor)
        per_state = (probs * (alpha * log_probs - q_min)).sum(-1, keepdim=True)
        loss_actor = self._weighted_mean(per_state, weight)
        entropy = -(probs * log_probs).sum(-1)
        auto = 0.98 * math.log(self.num_actions or probs.shape[-1])
        loss_alpha = self._alpha_loss(entropy, self._target_entropy(auto))
        return TensorDict(
            loss_actor=loss_actor,
            loss_qvalue=loss_qvalue,
            loss_alpha=loss_alpha,
            alpha=alpha,
            entropy=entropy.detach().mean(),
            q_mean=torch.stack(preds).detach().mean(),
        )
