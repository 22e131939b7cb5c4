"""On-policy policy-gradient losses: ``PPOLoss`` (clipped) and ``A2CLoss``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey
from torch import distributions as D

from marl.objectives.common import (
    PER_AGENT_KEYS,
    ActorCritic,
    LossModule,
    check_loss_kind,
    distance_loss,
    match_log_prob,
    unique_keys,
)
from marl.objectives.estimators import GAE, TD0, TDLambda, ValueEstimator, VTrace
from marl.objectives.settings import A2CSettings, PolicyGradientSettings, PPOSettings
from marl.objectives.standardize import RankSum, standardize

__all__ = ["A2CLoss", "PPOLoss"]

_ESTIMATORS = {"gae": GAE, "td0": TD0, "td_lambda": TDLambda, "vtrace": VTrace}


def entropy(dist: D.Distribution) -> torch.Tensor:
    """Closed-form entropy when available, else a one-sample estimate ``-log pi(a)``."""
    try:
        return dist.entropy()
    except NotImplementedError:
        sample = dist.rsample() if dist.has_rsample else dist.sample()
        return -dist.log_prob(sample)


class _PolicyGradientLoss(LossModule):
    """Shared plumbing of PPO and A2C: keys, estimator, advantage, critic loss."""

    default_keys: ClassVar[dict[str, NestedKey]] = {
        "action": "action",
        "sample_log_prob": "action_log_prob",
        "value": "state_value",
        "advantage": "advantage",
        "value_target": "value_target",
        "truncated": ("next", "truncated"),
        **PER_AGENT_KEYS,
    }
    _estimator_keys = ("advantage", "value_target", "value", "reward", "done", "terminated")
    # the estimator's gamma and lmbda are not among them: each run's own estimator writes
    # its advantages before the (stacked) minibatch steps, which read them from the batch
    per_run_scalars: ClassVar[tuple[str, ...]] = ("entropy_coef", "critic_coef", "clip_value")

    def __init__(
        self,
        actor: TensorDictModuleBase,
        critic: TensorDictModuleBase | None,
        settings: PolicyGradientSettings,
        *,
        normalize_advantage_exclude_dims: Sequence[int] = (),
        value_from_actor: bool = False,
    ) -> None:
        super().__init__()
        if not hasattr(actor, "get_dist"):
            raise TypeError(
                "actor must expose get_dist(td) (e.g. a ProbabilisticTensorDictSequential), "
                f"got {type(actor).__name__}"
            )
        if value_from_actor and not isinstance(actor, ActorCritic):
            raise TypeError(
                "value_from_actor=True needs an actor with get_dist_and_value(td) (the "
                f"ActorCritic protocol), got {type(actor).__name__}"
            )
        self.actor = actor
        self.critic = critic
        self.value_from_actor = value_from_actor
        self.entropy_coef = settings.entropy_coef
        self.critic_coef = settings.critic_coef
        self.loss_critic_type = check_loss_kind(settings.loss_critic_type)
        self.normalize_advantage = settings.normalize_advantage
        self.clip_value: float | None = None  # PPO's critic clip; A2C has none
        self.normalize_advantage_exclude_dims = tuple(normalize_advantage_exclude_dims)
        # data-parallel: the advantage statistics summed over the ranks (see
        # share_advantage_statistics); None: this process's samples
        self.statistics_sync: RankSum | None = None
        self.value_estimator: ValueEstimator | None = None
        if critic is not None:
            self.make_value_estimator("gae", gamma=settings.gamma, lmbda=settings.lmbda)

    def per_run_refusal(self, name: str, values: list[Any]) -> str | None:
        """As :meth:`LossModule.per_run_refusal`; a ``critic_coef`` of 0 also cannot differ
        from the others' (0 switches the critic term off, which leaves the critic's
        parameters without a gradient, and its optimizer without a step, in that run alone).

        Examples:
            >>> from tensordict.nn import TensorDictModule, ProbabilisticTensorDictModule as P
            >>> from tensordict.nn import ProbabilisticTensorDictSequential as S
            >>> actor = S(TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["logits"]),
            ...           P(["logits"], ["action"], distribution_class=D.Categorical))
            >>> loss = PPOLoss(actor)
            >>> loss.per_run_refusal("clip_epsilon", [0.2, 0.1]) is None
            True
            >>> loss.per_run_refusal("critic_coef", [0.5, 0.0])
            'a critic_coef of 0 switches the critic term off: it must be 0 in every run or in none'
        """
        refusal = super().per_run_refusal(name, values)
        if refusal is None and name == "critic_coef" and 0 in values:
            return (
                "a critic_coef of 0 switches the critic term off: it must be 0 in every run "
                "or in none"
            )
        return refusal

    def make_value_estimator(self, kind: str = "gae", **params: float) -> ValueEstimator:
        """Build the estimator used when ``advantage`` is missing from the batch.

        Args:
            kind: ``"gae"``, ``"td0"``, ``"td_lambda"`` or ``"vtrace"``.
            **params: estimator arguments (``gamma``, ``lmbda``, ...).

        Returns:
            The estimator (also stored as ``self.value_estimator``).
        """
        self._check_not_fixed("value estimator and keys")
        if kind not in _ESTIMATORS:
            raise ValueError(f"unknown estimator {kind!r}; expected one of {sorted(_ESTIMATORS)}")
        extra = {"actor_network": self.actor} if kind == "vtrace" else {}
        est = _ESTIMATORS[kind](value_network=self.critic, **extra, **params)
        keys = self.tensor_keys.as_dict()
        est.set_keys(**{k: keys[k] for k in est.default_keys if k in keys})
        self.value_estimator = est
        return est

    def share_advantage_statistics(self, sync: RankSum | None) -> None:
        """Standardize the advantage with the statistics of every data-parallel rank.

        Each rank of a data-parallel run holds a share of each minibatch (and of each
        batch): with ``sync``, the count, sum and sum of squares of the advantages are
        summed over the ranks before standardizing, so that the ranks' update equals
        one process's on the union of their shares. Every rank must then call the loss
        alike (the synchronized updaters do). The builders of the policy-gradient
        learners pass the learner's ``GradientSync`` here.

        Args:
            sync: sums a tensor over the ranks (``all_sum``), e.g. a
                :class:`~marl.algorithms.updates.GradientSync`; ``None``: this
                process's samples only.

        Raises:
            TypeError: when ``sync`` has no ``all_sum`` method.
            RuntimeError: once the learner fixed the loss (parts are set at build).

        Examples:
            >>> from tensordict.nn import TensorDictModule, ProbabilisticTensorDictModule as P
            >>> from tensordict.nn import ProbabilisticTensorDictSequential as S
            >>> actor = S(TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["logits"]),
            ...           P(["logits"], ["action"], distribution_class=D.Categorical))
            >>> loss = PPOLoss(actor)
            >>> loss.share_advantage_statistics(object())
            Traceback (most recent call last):
            ...
            TypeError: share_advantage_statistics expects an object with all_sum(tensor) (e.g. a GradientSync) or None, got object
            >>> loss.share_advantage_statistics(None)
        """
        self._check_not_fixed("advantage statistics")
        if sync is not None and not isinstance(sync, RankSum):
            raise TypeError(
                "share_advantage_statistics expects an object with all_sum(tensor) (e.g. a "
                f"GradientSync) or None, got {type(sync).__name__}"
            )
        self.statistics_sync = sync

    def _keys_changed(self, keys: dict[str, NestedKey]) -> None:
        if self.value_estimator is not None:
            fwd = {k: v for k, v in keys.items() if k in self.value_estimator.default_keys}
            self.value_estimator.set_keys(**fwd)

    @property
    def in_keys(self) -> list[NestedKey]:
        """What :meth:`forward` reads once ``advantage`` and ``value_target`` are in the
        data (the on-policy updater writes them for the whole batch first): the actor's
        and the critic's inputs, the action and its log-probability, the advantage, the
        value target, the stored value and the loss weights."""
        k = self.tensor_keys
        critic = [] if self.critic is None else list(self.critic.in_keys)
        return unique_keys(
            [
                *self.actor.in_keys,
                k.action,
                k.sample_log_prob,
                k.advantage,
                k.value_target,
                k.value,
                *critic,
                *self._weight_keys(),
            ]
        )

    def _advantage(self, td: TensorDictBase, mask: torch.Tensor | None) -> torch.Tensor:
        """The advantage, standardized when ``normalize_advantage`` is on.

        With an agent ``mask``, the statistics are over the unmasked agents only and the
        masked agents' advantages are zeroed (their values are garbage: a dead agent's).
        With :attr:`statistics_sync`, they are over every data-parallel rank's samples.
        """
        adv = td.get(self.tensor_keys.advantage, None)
        if adv is None:
            if self.value_estimator is None:
                raise KeyError(
                    f"{self.tensor_keys.advantage!r} is missing and no critic was given "
                    "to estimate it"
                )
            self.value_estimator(td)
            adv = td.get(self.tensor_keys.advantage)
        if self.normalize_advantage:
            adv = standardize(
                adv, mask, self.normalize_advantage_exclude_dims, self.statistics_sync
            )
        return adv

    def _dist_and_value(self, td: TensorDictBase) -> tuple[D.Distribution, torch.Tensor | None]:
        """The policy's distribution at ``td``'s actions, and the value when the actor
        computes it in the same pass (``value_from_actor``; else ``None``: the critic's)."""
        if self.value_from_actor:
            return self.actor.get_dist_and_value(td)
        return self.actor.get_dist(td), None

    def _log_prob(
        self, td: TensorDictBase, like: torch.Tensor, dist: D.Distribution
    ) -> torch.Tensor:
        log_prob = dist.log_prob(td.get(self.tensor_keys.action))
        return match_log_prob(log_prob, like)

    def _entropy_terms(
        self, dist: D.Distribution, weight: torch.Tensor | None, out: dict[str, torch.Tensor]
    ) -> None:
        """``entropy`` (a diagnostic) and, with ``entropy_coef``, the ``loss_entropy`` bonus."""
        # a tensor coefficient is each run's own in a stacked update (0 in some runs
        # maybe): the term is computed for all, and weighs nothing where the coef is 0
        if torch.is_tensor(self.entropy_coef) or self.entropy_coef:
            ent = entropy(dist)
            out["loss_entropy"] = -self.entropy_coef * self._weighted_mean(ent, weight)
            out["entropy"] = ent.mean().detach()
        else:  # only logged: no graph for it
            with torch.no_grad():
                out["entropy"] = entropy(dist).mean()

    def _critic_terms(
        self,
        td: TensorDictBase,
        out: dict[str, torch.Tensor],
        weight: torch.Tensor | None,
        value: torch.Tensor | None = None,
    ) -> None:
        """``loss_critic`` and ``explained_variance``; ``value`` is the actor's (see
        ``value_from_actor``), else the critic's, computed here."""
        # a tensor coefficient (each run's own, in a stacked update) is never 0 in some
        # runs only (per_run_refusal)
        if self.critic is None or (not torch.is_tensor(self.critic_coef) and self.critic_coef == 0):
            return
        k = self.tensor_keys
        target = td.get(k.value_target)
        old_value = td.get(k.value, None)
        if value is None:
            # a shallow selection: the critic must not overwrite the stored (old) values
            value = self.critic(td.select(*self.critic.in_keys, strict=False)).get(k.value)
        loss = distance_loss(value, target, self.loss_critic_type)
        clip = self.clip_value
        if clip is not None and old_value is not None:
            clipped = old_value + (value - old_value).clamp(-clip, clip)
            loss = torch.maximum(loss, distance_loss(clipped, target, self.loss_critic_type))
        out["loss_critic"] = self.critic_coef * self._weighted_mean(loss, weight)
        out["explained_variance"] = (
            1 - (target - value).var() / target.var().clamp_min(1e-8)
        ).detach()


class PPOLoss(_PolicyGradientLoss):
    """Clipped PPO (Schulman et al., 2017), with entropy bonus and critic loss.

    ``ratio = exp(log pi(a|s) - log mu(a|s))``,
    ``loss_objective = -mean(min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A))``.
    If ``advantage`` is missing, it is computed with GAE from ``critic``.

    Args:
        actor: a probabilistic policy with ``get_dist(td)``.
        critic: a value module writing the ``value`` key (optional).
        settings: the clip ranges, the entropy and critic weights, the critic loss, the
            advantage standardization and the GAE's ``gamma``/``lmbda``
            (:class:`~marl.objectives.settings.PPOSettings`; ``None``: its defaults).
        normalize_advantage_exclude_dims: dims kept separate when standardizing (e.g.
            ``(-2,)`` for per-agent statistics of ``[*B, n_agents, 1]`` advantages).
        value_from_actor: the actor computes the critic's value in the same pass
            (:class:`~marl.objectives.ActorCritic`, e.g. MAT's transformer): each
            minibatch calls ``actor.get_dist_and_value`` once instead of ``get_dist``
            and ``critic``. ``critic`` still gives the values of the advantage
            estimate.

    Returns (``forward``):
        TensorDict with ``loss_objective``, ``loss_critic``, ``loss_entropy`` and the
        diagnostics ``entropy``, ``clip_fraction``, ``kl_approx``, ``explained_variance``.

    Examples:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule, ProbabilisticTensorDictModule as P
        >>> from tensordict.nn import ProbabilisticTensorDictSequential as S
        >>> actor = S(TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["logits"]),
        ...           P(["logits"], ["action"], distribution_class=D.Categorical,
        ...             return_log_prob=True))
        >>> td = actor(TensorDict(observation=torch.randn(8, 3), batch_size=[8]))
        >>> td["advantage"] = torch.randn(8, 1)
        >>> out = PPOLoss(actor, settings=PPOSettings(entropy_coef=0.01))(td)
        >>> sorted(k for k in out.keys() if k.startswith("loss"))
        ['loss_entropy', 'loss_objective']
    """

    per_run_scalars: ClassVar[tuple[str, ...]] = (
        *_PolicyGradientLoss.per_run_scalars,
        "clip_epsilon",
    )

    def __init__(
        self,
        actor: TensorDictModuleBase,
        critic: TensorDictModuleBase | None = None,
        settings: PPOSettings | None = None,
        *,
        normalize_advantage_exclude_dims: Sequence[int] = (),
        value_from_actor: bool = False,
    ) -> None:
        settings = PPOSettings() if settings is None else settings
        super().__init__(
            actor,
            critic,
            settings,
            normalize_advantage_exclude_dims=normalize_advantage_exclude_dims,
            value_from_actor=value_from_actor,
        )
        self.clip_epsilon = settings.clip_epsilon
        self.clip_value = settings.clip_value

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        mask = self._agent_mask(tensordict)
        weight = self.loss_weight(tensordict)
        adv = self._advantage(tensordict, mask)
        dist, value = self._dist_and_value(tensordict)
        log_prob = self._log_prob(tensordict, adv, dist)
        old_log_prob = match_log_prob(tensordict.get(self.tensor_keys.sample_log_prob), adv)
        log_ratio = log_prob - old_log_prob
        ratio = log_ratio.exp()
        eps = self.clip_epsilon
        surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
        out = {"loss_objective": -self._weighted_mean(surrogate, weight)}
        self._entropy_terms(dist, weight, out)
        with torch.no_grad():
            out["clip_fraction"] = ((ratio - 1).abs() > eps).float().mean()
            out["kl_approx"] = ((ratio - 1) - log_ratio).mean()
        self._critic_terms(tensordict, out, weight, value)
        return TensorDict(out)


class A2CLoss(_PolicyGradientLoss):
    """Advantage actor-critic: ``loss_objective = -mean(A * log pi(a|s))``.

    Args:
        actor: a probabilistic policy with ``get_dist(td)``.
        critic: a value module writing the ``value`` key (optional).
        settings: :class:`~marl.objectives.settings.A2CSettings` (``None``: its defaults).
        normalize_advantage_exclude_dims: dims kept separate when standardizing.
        value_from_actor: the actor computes the critic's value in the same pass (see
            :class:`PPOLoss`).

    Returns (``forward``):
        TensorDict with ``loss_objective``, ``loss_critic``, ``loss_entropy``, ``entropy``.

    Examples:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule, ProbabilisticTensorDictModule as P
        >>> from tensordict.nn import ProbabilisticTensorDictSequential as S
        >>> actor = S(TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["logits"]),
        ...           P(["logits"], ["action"], distribution_class=D.Categorical))
        >>> td = actor(TensorDict(observation=torch.randn(8, 3), batch_size=[8]))
        >>> td["advantage"] = torch.randn(8, 1)
        >>> A2CLoss(actor)(td)["loss_objective"].requires_grad
        True
    """

    def __init__(
        self,
        actor: TensorDictModuleBase,
        critic: TensorDictModuleBase | None = None,
        settings: A2CSettings | None = None,
        *,
        normalize_advantage_exclude_dims: Sequence[int] = (),
        value_from_actor: bool = False,
    ) -> None:
        super().__init__(
            actor,
            critic,
            A2CSettings() if settings is None else settings,
            normalize_advantage_exclude_dims=normalize_advantage_exclude_dims,
            value_from_actor=value_from_actor,
        )

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        mask = self._agent_mask(tensordict)
        weight = self.loss_weight(tensordict)
        adv = self._advantage(tensordict, mask)
        dist, value = self._dist_and_value(tensordict)
        log_prob = self._log_prob(tensordict, adv, dist)
        out = {"loss_objective": -self._weighted_mean(adv.detach() * log_prob, weight)}
        self._entropy_terms(dist, weight, out)
        self._critic_terms(tensordict, out, weight, value)
        return TensorDict(out)
