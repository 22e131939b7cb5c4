"""HAPPO's loss (Kuba et al., 2022): one agent's clipped objective, weighted by ``M``.

HAPPO updates the agents one after another. Agent ``i_m``'s objective is PPO's, with the
advantage ``A`` replaced by ``M * A``, ``M`` the product of the probability ratios
``pi_new(a_j|o_j) / pi_old(a_j|o_j)`` of the agents ``j`` updated before it (on each
sample, detached):

``L = -E[min(r * M * A, clip(r, 1 - eps, 1 + eps) * M * A)]``, ``r = pi(a_i|o_i) / pi_old(a_i|o_i)``.

:class:`HAPPOLoss` is :class:`~marl.objectives.PPOLoss` (its ``forward`` is PPO's: every
agent at once, ``M = 1``) plus the three pieces a sequential update calls:
:meth:`~HAPPOLoss.actor_terms` (one agent's objective given ``M``),
:meth:`~HAPPOLoss.agent_ratio` (that agent's ratio, to update ``M``) and
:meth:`~HAPPOLoss.critic_terms` (the critic's regression alone).
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from marl.objectives.common import match_log_prob
from marl.objectives.ppo import PPOLoss, entropy

__all__ = ["HAPPOLoss"]

_INDEX_DTYPES = (torch.int64, torch.int32)


def _check_agent(agent: int | torch.Tensor, n: int) -> None:
    """Refuse an agent index outside ``[0, n)``, or a tensor that is not a 0-d integer."""
    if not isinstance(agent, torch.Tensor):
        if not 0 <= agent < n:
            raise IndexError(f"agent {agent} is out of range for a group of {n} agents")
        return
    if agent.ndim != 0 or agent.dtype not in _INDEX_DTYPES:
        raise TypeError(
            "agent must be an int or a 0-d int64/int32 tensor, got a tensor of shape "
            f"{tuple(agent.shape)} and dtype {agent.dtype}"
        )
    in_range = (agent >= 0) & (agent < n)
    if torch.compiler.is_compiling():
        # a host check would break the compiled graph: the same check, kept in the graph
        torch._assert_async(in_range, f"the agent index is out of range for a group of {n} agents")
    elif not bool(in_range):
        raise IndexError(f"agent {int(agent)} is out of range for a group of {n} agents")


def _agent_slice(x: torch.Tensor, agent: int | torch.Tensor, dim: int) -> torch.Tensor:
    """``x`` at index ``agent`` of dim ``dim`` (that dim dropped).

    An int selects a view, as ``x[..., agent, :]`` does; a 0-d tensor gathers the same
    values (``index_select``), so that a compiled actor turn reads the agent as a graph
    input: one graph serves every agent of a group instead of one recompilation per index.
    """
    if isinstance(agent, torch.Tensor):
        return x.index_select(dim, agent.reshape(1)).squeeze(dim)
    return x.select(dim, agent)


class HAPPOLoss(PPOLoss):
    """PPO's loss with the per-agent pieces of HAPPO's sequential update.

    The data are a group's ``[*B, n_agents, ...]`` entries; the advantage is read as it
    is (:meth:`standardized_advantage` standardizes a whole batch once, before the
    agents' turns, so that every agent sees the same ``A``). The constructor is
    :class:`~marl.objectives.PPOLoss`'s.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule, ProbabilisticTensorDictModule as P
        >>> from tensordict.nn import ProbabilisticTensorDictSequential as S
        >>> from torch import distributions as D
        >>> actor = S(TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["logits"]),
        ...           P(["logits"], ["action"], distribution_class=D.Categorical,
        ...             return_log_prob=True))
        >>> td = actor(TensorDict(observation=torch.randn(8, 2, 3), batch_size=[8]))
        >>> td["advantage"] = torch.randn(8, 2, 1)
        >>> loss = HAPPOLoss(actor)
        >>> out = loss.actor_terms(td, agent=1, factor=torch.ones(8))
        >>> out["loss_objective"].requires_grad, loss.agent_ratio(td, agent=1).shape
        (True, torch.Size([8]))
    """

    def standardized_advantage(self, tensordict: TensorDictBase) -> torch.Tensor:
        """The advantage of ``tensordict``, standardized over it when ``normalize_advantage``
        is on (over the unmasked agents, whose advantages are then zeroed)."""
        return self._advantage(tensordict, self._agent_mask(tensordict))

    def _agent_log_ratio(
        self, td: TensorDictBase, agent: int | torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.distributions.Distribution]:
        """``log pi(a_i|o_i) - log pi_old(a_i|o_i)`` ``[*B, 1]``, the advantage ``[*B, n, 1]``
        and the distribution (every agent's: the vectorized actor computes them together)."""
        adv = td.get(self.tensor_keys.advantage, None)
        if adv is None:
            raise KeyError(
                f"{self.tensor_keys.advantage!r} is missing: HAPPO's advantages are written "
                "on the whole batch (the updater's process) before the agents' turns"
            )
        if adv.ndim < td.batch_dims + 2:
            raise ValueError(
                "HAPPOLoss expects per-agent advantages [*B, n_agents, 1], got shape "
                f"{tuple(adv.shape)} for batch dims {tuple(td.batch_size)}"
            )
        _check_agent(agent, adv.shape[td.batch_dims])
        # a shallow selection: the actor must not write its outputs (logits, loc...) into
        # the caller's data: HAPPO's updater reads its whole batch again (agent_ratio)
        # and cuts the next turns' minibatches from it, and a compiled turn would see
        # one more entry after the first turn (a recompilation)
        dist = self.actor.get_dist(td.select(*self.actor.in_keys, strict=False))
        log_prob = self._log_prob(td, adv, dist)
        old = match_log_prob(td.get(self.tensor_keys.sample_log_prob), adv)
        return _agent_slice(log_prob - old, agent, -2), adv, dist

    def _agent_weight(self, td: TensorDictBase, agent: int | torch.Tensor) -> torch.Tensor | None:
        """Agent ``agent``'s mask over the samples, divided by its mean (``None``: no mask)."""
        mask = self._agent_mask(td)
        if mask is None:
            return None
        weight = _agent_slice(mask, agent, -1).to(torch.get_default_dtype())
        return weight / weight.mean().clamp_min(1e-8)

    def actor_terms(
        self,
        tensordict: TensorDictBase,
        agent: int | torch.Tensor,
        factor: torch.Tensor | None = None,
    ) -> TensorDict:
        """Agent ``agent``'s clipped objective with the advantage ``factor * A``.

        Args:
            tensordict: the group's samples ``[*B]`` (entries ``[*B, n_agents, ...]``).
            agent: the agent whose objective this is (the others get no gradient): an
                int, or a 0-d integer tensor (what the compiled update passes, so that
                one graph serves every agent; the values are the same).
            factor: ``M`` per sample ``[*B]`` (``None``: ones), detached.

        Returns:
            ``loss_objective``, ``loss_entropy`` (with ``entropy_coef``) and the diagnostics
            ``entropy``, ``clip_fraction`` and ``kl_approx``, all of agent ``agent``.
        """
        log_ratio, adv, dist = self._agent_log_ratio(tensordict, agent)
        adv = _agent_slice(adv, agent, -2)
        if factor is not None:
            factor = factor.detach()
            adv = adv * factor.reshape(factor.shape + (1,) * (adv.ndim - factor.ndim))
        ratio = log_ratio.exp()
        eps = self.clip_epsilon
        surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
        weight = self._agent_weight(tensordict, agent)
        out = {"loss_objective": -self._weighted_mean(surrogate, weight)}
        # a tensor coefficient (PPOLoss.per_run_scalars, inherited): computed for all runs
        if torch.is_tensor(self.entropy_coef) or self.entropy_coef:
            ent = _agent_slice(entropy(dist), agent, -1)
            out["loss_entropy"] = -self.entropy_coef * self._weighted_mean(ent, weight)
            out["entropy"] = ent.mean().detach()
        else:
            with torch.no_grad():
                out["entropy"] = _agent_slice(entropy(dist), agent, -1).mean()
        with torch.no_grad():
            out["clip_fraction"] = ((ratio - 1).abs() > eps).float().mean()
            out["kl_approx"] = ((ratio - 1) - log_ratio).mean()
        return TensorDict(out)

    @torch.no_grad()
    def agent_ratio(self, tensordict: TensorDictBase, agent: int | torch.Tensor) -> torch.Tensor:
        """``pi(a_i|o_i) / pi_old(a_i|o_i)`` per sample ``[*B]`` (1 where the agent is masked).

        Read after agent ``agent``'s turn, it is the factor by which ``M`` grows.
        """
        log_ratio, _, _ = self._agent_log_ratio(tensordict, agent)
        ratio = log_ratio.squeeze(-1).exp()
        mask = self._agent_mask(tensordict)
        if mask is not None:
            ratio = torch.where(_agent_slice(mask, agent, -1), ratio, torch.ones_like(ratio))
        return ratio

    def critic_terms(self, tensordict: TensorDictBase) -> TensorDict:
        """The critic's terms alone: ``loss_critic`` and ``explained_variance``."""
        out: dict[str, torch.Tensor] = {}
        self._critic_terms(tensordict, out, self.loss_weight(tensordict))
        return TensorDict(out)
