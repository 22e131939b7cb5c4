"""Value estimators as modules: ``GAE``, ``TD0``, ``TDLambda`` and ``VTrace``.

An estimator reads ``V(s_t)`` at the ``value`` key and ``V(s_{t+1})`` at
``("next", *value)`` (computing both with one call of ``value_network`` when one is given),
the reward and the done/terminated flags, and writes ``advantage`` and
``value_target``. Time is the last batch dim of the TensorDict (``[*B, T]``); data
dims after it (an agent dim, features) broadcast, so an env-level ``done`` or team
reward ``[*B, T, 1]`` next to per-agent values ``[*B, T, n, 1]`` just works.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey
from torch import nn

from marl.objectives.common import KeyedModule, expand_after_batch, match_log_prob
from marl.objectives.value import (
    generalized_advantage_estimate,
    td0_return_estimate,
    td_lambda_return_estimate,
    vtrace_advantage_estimate,
)

__all__ = ["GAE", "TD0", "TDLambda", "VTrace", "ValueEstimator"]


def _next(key: NestedKey) -> tuple[str, ...]:
    return ("next", *(key if isinstance(key, tuple) else (key,)))


class ValueEstimator(KeyedModule):
    """Base class: key handling, value computation and done/terminated resolution.

    Args:
        gamma: discount factor.
        value_network: optional module writing the ``value`` key, run once on the
            TensorDict's and its ``"next"`` sub-TensorDict's inputs stacked together
            (``V(s)`` and ``V(s')`` in one call). Without it the values must be present.
        differentiable: keep the autograd graph (default: computed under ``no_grad``).
    """

    default_keys: ClassVar[dict[str, NestedKey]] = {
        "advantage": "advantage",
        "value_target": "value_target",
        "value": "state_value",
        "reward": ("next", "reward"),
        "done": ("next", "done"),
        "terminated": ("next", "terminated"),
        "truncated": ("next", "truncated"),
    }
    needs_time: ClassVar[bool] = True

    def __init__(
        self,
        *,
        gamma: float = 0.99,
        value_network: TensorDictModuleBase | None = None,
        differentiable: bool = False,
    ) -> None:
        super().__init__()
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.gamma = gamma
        self.value_network = value_network
        self.differentiable = differentiable

    def _run_value_network(self, td: TensorDictBase) -> None:
        """Write ``V(s)`` and ``V(s')`` with one call of the value network.

        The network's inputs at ``s`` and at ``s'`` (``"next"``) are stacked along a new
        leading dim, so one forward covers both (one pass of the MLP, not two).
        """
        net = self.value_network
        key = self.tensor_keys.value
        in_keys = list(net.in_keys)
        nxt = td.get("next")
        both = torch.stack([td.select(*in_keys), nxt.select(*in_keys)], 0)
        values = net(both).get(key)
        td.set(key, values[0])
        nxt.set(key, values[1])

    def _values(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        key = self.tensor_keys.value
        if self.value_network is not None:
            self._run_value_network(td)
        value, next_value = td.get(key, None), td.get(_next(key), None)
        if value is None or next_value is None:
            missing = key if value is None else _next(key)
            raise KeyError(
                f"{type(self).__name__} needs {missing!r} in the TensorDict: pass "
                "value_network= or compute the values first"
            )
        return value, next_value

    def _flags(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        k = self.tensor_keys
        done, term = td.get(k.done, None), td.get(k.terminated, None)
        if done is None and term is None:
            raise KeyError(f"{type(self).__name__} needs {k.done!r} or {k.terminated!r}")
        if done is None:
            trunc = td.get(k.truncated, None)
            done = term if trunc is None else term | trunc
        if term is None:
            term = done  # no termination info: every end is treated as terminal
        return done, term

    def _time_dim(self, td: TensorDictBase) -> int:
        if td.batch_dims < 1:
            raise ValueError(
                f"{type(self).__name__} needs a time dim: time is the last batch dim "
                f"([*B, T]), got batch_size={tuple(td.batch_size)}"
            )
        return td.batch_dims - 1

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Compute and write ``advantage`` and ``value_target``.

        Args:
            tensordict: data of batch size ``[*B, T]``.

        Returns:
            The same TensorDict, with the two entries set.
        """
        with torch.set_grad_enabled(self.differentiable and torch.is_grad_enabled()):
            advantage, target = self._estimate(tensordict)
        tensordict.set(self.tensor_keys.advantage, advantage)
        tensordict.set(self.tensor_keys.value_target, target)
        return tensordict

    def _estimate(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError


class _LambdaEstimator(ValueEstimator):
    """The constructor GAE and TD(lambda) share: ``gamma`` and their ``lmbda``."""

    def __init__(
        self,
        *,
        gamma: float = 0.99,
        lmbda: float = 0.95,
        value_network: TensorDictModuleBase | None = None,
        differentiable: bool = False,
    ) -> None:
        super().__init__(gamma=gamma, value_network=value_network, differentiable=differentiable)
        self.lmbda = lmbda


class GAE(_LambdaEstimator):
    """Generalized advantage estimation; see :func:`marl.objectives.value.generalized_advantage_estimate`.

    Args:
        gamma: discount factor.
        lmbda: GAE lambda.
        value_network: optional value module.
        differentiable: keep the autograd graph.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"state_value": torch.zeros(2, 3, 4, 1),
        ...     "next": {"state_value": torch.zeros(2, 3, 4, 1), "reward": torch.ones(2, 3, 1),
        ...              "done": torch.zeros(2, 3, 1, dtype=torch.bool)}}, batch_size=[2, 3])
        >>> GAE(gamma=0.5, lmbda=1.0)(td)["advantage"][0, :, 0, 0].tolist()
        [1.75, 1.5, 1.0]
    """

    def _estimate(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        t = self._time_dim(td)
        value, next_value = self._values(td)
        done, term = self._flags(td)
        return generalized_advantage_estimate(
            self.gamma,
            self.lmbda,
            value,
            next_value,
            td.get(self.tensor_keys.reward),
            done,
            term,
            time_dim=t,
        )


class TD0(ValueEstimator):
    """One-step TD: ``target = r + gamma * (1 - terminated) * V(s')``. No time dim needed.

    Args:
        gamma: discount factor.
        value_network: optional value module.
        differentiable: keep the autograd graph.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"state_value": torch.zeros(2, 3, 1),
        ...     "next": {"state_value": torch.ones(2, 3, 1), "reward": torch.ones(2, 1),
        ...              "terminated": torch.tensor([[False], [True]])}}, batch_size=[2])
        >>> TD0(gamma=0.5)(td)["value_target"][:, 0, 0].tolist()
        [1.5, 1.0]
    """

    def _estimate(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        value, next_value = self._values(td)
        _, term = self._flags(td)
        reward = td.get(self.tensor_keys.reward)
        ndim = max(value.ndim, next_value.ndim, reward.ndim, term.ndim)
        b = td.batch_dims
        target = td0_return_estimate(
            self.gamma,
            expand_after_batch(next_value, ndim, b),
            expand_after_batch(reward, ndim, b),
            expand_after_batch(term, ndim, b),
        )
        return target - expand_after_batch(value, ndim, b), target


class TDLambda(_LambdaEstimator):
    """TD(lambda) returns; see :func:`marl.objectives.value.td_lambda_return_estimate`.

    Args:
        gamma: discount factor.
        lmbda: lambda.
        value_network: optional value module.
        differentiable: keep the autograd graph.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"state_value": torch.zeros(1, 3, 1),
        ...     "next": {"state_value": torch.zeros(1, 3, 1), "reward": torch.ones(1, 3, 1),
        ...              "done": torch.zeros(1, 3, 1, dtype=torch.bool)}}, batch_size=[1, 3])
        >>> TDLambda(gamma=0.5, lmbda=1.0)(td)["value_target"].flatten().tolist()
        [1.75, 1.5, 1.0]
    """

    def _estimate(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        t = self._time_dim(td)
        value, next_value = self._values(td)
        done, term = self._flags(td)
        target = td_lambda_return_estimate(
            self.gamma,
            self.lmbda,
            next_value,
            td.get(self.tensor_keys.reward),
            done,
            term,
            time_dim=t,
        )
        return target - expand_after_batch(value, target.ndim, t + 1), target


class VTrace(ValueEstimator):
    """V-trace targets and advantages; see :func:`marl.objectives.value.vtrace_advantage_estimate`.

    The behaviour log-probabilities are read at ``sample_log_prob``; the learner's are
    computed with ``actor_network.get_dist(td).log_prob(action)`` (a
    ``ProbabilisticTensorDictSequential``), or read at ``log_prob`` when no actor is given.

    Args:
        gamma: discount factor.
        actor_network: optional learner policy.
        value_network: optional value module.
        rho_thresh: importance-weight truncation for the targets.
        c_thresh: trace truncation.
        lmbda: extra trace decay.
        differentiable: keep the autograd graph.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"state_value": torch.zeros(1, 2, 1),
        ...     "action_log_prob": torch.zeros(1, 2), "learner_log_prob": torch.zeros(1, 2),
        ...     "next": {"state_value": torch.zeros(1, 2, 1), "reward": torch.ones(1, 2, 1),
        ...              "done": torch.zeros(1, 2, 1, dtype=torch.bool)}}, batch_size=[1, 2])
        >>> VTrace(gamma=1.0)(td)["value_target"].flatten().tolist()
        [2.0, 1.0]
    """

    default_keys: ClassVar[dict[str, NestedKey]] = {
        **ValueEstimator.default_keys,
        "action": "action",
        "sample_log_prob": "action_log_prob",
        "log_prob": "learner_log_prob",
    }

    def __init__(
        self,
        *,
        gamma: float = 0.99,
        actor_network: nn.Module | None = None,
        value_network: TensorDictModuleBase | None = None,
        rho_thresh: float = 1.0,
        c_thresh: float = 1.0,
        lmbda: float = 1.0,
        differentiable: bool = False,
    ) -> None:
        super().__init__(gamma=gamma, value_network=value_network, differentiable=differentiable)
        self.actor_network = actor_network
        self.rho_thresh, self.c_thresh, self.lmbda = rho_thresh, c_thresh, lmbda

    def _estimate(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        t = self._time_dim(td)
        k = self.tensor_keys
        value, next_value = self._values(td)
        done, term = self._flags(td)
        if self.actor_network is not None:
            log_pi = self.actor_network.get_dist(td).log_prob(td.get(k.action))
        else:
            log_pi = td.get(k.log_prob)
        log_mu = td.get(k.sample_log_prob)
        return vtrace_advantage_estimate(
            self.gamma,
            match_log_prob(log_pi, value),
            match_log_prob(log_mu, value),
            value,
            next_value,
            td.get(k.reward),
            done,
            term,
            rho_thresh=self.rho_thresh,
            c_thresh=self.c_thresh,
            lmbda=self.lmbda,
            time_dim=t,
        )
