"""``TD3Loss``: twin delayed DDPG (Fujimoto et al., 2018)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey

from marl.objectives.common import (
    LossModule,
    distance_loss,
    next_keys,
    q_ensemble,
    unique_keys,
)
from marl.objectives.ddpg import DDPGLoss, q_frozen
from marl.objectives.settings import TD3Settings

__all__ = ["TD3Loss"]


class TD3Loss(LossModule):
    """Twin delayed deep deterministic policy gradient.

    - Target policy smoothing: ``a' = clip(mu'(s') + clip(N(0, policy_noise), -c, c), low, high)``.
    - Clipped double Q: ``y = r + gamma * (1 - terminated) * min_i Q'_i(s', a')``.
    - Delayed actor: ``loss_actor = -mean(Q_1(s, mu(s)))`` is computed on every
      ``policy_delay``-th call only (zero otherwise, and ``update_actor`` says which), so
      stepping the actor optimizer on each call updates it at the delayed rate.

    Args:
        actor: deterministic policy module writing ``action``.
        qvalue_network: module reading the observation and ``action``, writing
            ``state_action_value``; the twin is an independently re-initialised copy.
        settings: the number of Q-networks, ``gamma``, the smoothing noise and its clip,
            the actor's delay (in calls) and the Q regression loss
            (:class:`~marl.objectives.settings.TD3Settings`; ``None``: its defaults).
        action_spec: optional spec with ``.low``/``.high`` (else ``low``/``high``).
        low: lower action bound.
        high: upper action bound.

    Returns (``forward``):
        TensorDict with ``loss_actor``, ``loss_qvalue``, ``update_actor`` and diagnostics.

    Examples:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torch import nn
        >>> actor = TensorDictModule(nn.Sequential(nn.Linear(3, 2), nn.Tanh()),
        ...                          ["observation"], ["action"])
        >>> q = TensorDictModule(nn.Bilinear(3, 2, 1), ["observation", "action"],
        ...                      ["state_action_value"])
        >>> td = TensorDict({"observation": torch.randn(4, 3), "action": torch.rand(4, 2),
        ...     "next": {"observation": torch.randn(4, 3), "reward": torch.ones(4, 1),
        ...              "terminated": torch.zeros(4, 1, dtype=torch.bool)}}, batch_size=[4])
        >>> loss = TD3Loss(actor, q, TD3Settings(policy_delay=2))
        >>> [bool(loss(td)["update_actor"]) for _ in range(3)]
        [True, False, True]
    """

    # DDPG's entries: TD3 reads and writes the same keys
    default_keys: ClassVar[dict[str, NestedKey]] = DDPGLoss.default_keys
    per_run_scalars: ClassVar[tuple[str, ...]] = ("gamma", "policy_noise", "noise_clip")

    def __init__(
        self,
        actor: TensorDictModuleBase,
        qvalue_network: TensorDictModuleBase,
        settings: TD3Settings | None = None,
        *,
        action_spec: Any = None,
        low: float | torch.Tensor = -1.0,
        high: float | torch.Tensor = 1.0,
    ) -> None:
        settings = TD3Settings() if settings is None else settings
        policy_delay = settings.policy_delay
        super().__init__()
        if policy_delay < 1:
            raise ValueError(f"policy_delay must be >= 1, got {policy_delay}")
        self._with_targets(
            actor=actor, qvalue_networks=q_ensemble(qvalue_network, settings.num_qvalue_nets)
        )
        if action_spec is not None:
            low, high = getattr(action_spec, "low", low), getattr(action_spec, "high", high)
        self.register_buffer("low", torch.as_tensor(low, dtype=torch.float32))
        self.register_buffer("high", torch.as_tensor(high, dtype=torch.float32))
        self._q_regression(settings)
        # the settings give the noise in units of half the action range (a recipe's 0.2
        # means the same on every task); the loss adds it in action units
        half = float((self.high - self.low).max()) / 2
        self.policy_noise = settings.policy_noise * half
        self.noise_clip = settings.noise_clip * half
        self.policy_delay = policy_delay
        self._calls = 0

    @property
    def in_keys(self) -> list[NestedKey]:
        """The actor's and the Q-networks' inputs now and next, the reward, the done
        flags and the loss weights."""
        k = self.tensor_keys
        nets = [*self.actor.in_keys, *self.qvalue_networks[0].in_keys]
        return unique_keys(
            [*nets, *next_keys(nets), k.reward, k.done, k.terminated, *self._weight_keys()]
        )

    def get_extra_state(self) -> dict[str, int]:
        """The delayed-actor counter, saved in the module's ``state_dict``."""
        return {"calls": self._calls}

    def set_extra_state(self, state: dict[str, int]) -> None:
        """Restore :meth:`get_extra_state`."""
        self._calls = int(state["calls"])

    def _select(self, td: TensorDictBase) -> TensorDictBase:
        return td.select(*self.actor.in_keys, *self.qvalue_networks[0].in_keys, strict=False)

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        k = self.tensor_keys
        with torch.no_grad():
            next_td = self.target_actor(self._select(tensordict.get("next")))
            action = next_td.get(k.action)
            noise = (torch.randn_like(action) * self.policy_noise).clamp(
                -self.noise_clip, self.noise_clip
            )
            low, high = self.low.to(action.dtype), self.high.to(action.dtype)
            next_td.set(k.action, (action + noise).clamp(low, high))
            next_qs = [
                net(next_td.copy()).get(k.state_action_value) for net in self.target_qvalue_networks
            ]
            next_q = torch.stack(torch.broadcast_tensors(*next_qs)).amin(0)
            target = self._td_target(tensordict, next_q)
        data_td = self._select(tensordict)
        preds = [net(data_td.copy()).get(k.state_action_value) for net in self.qvalue_networks]
        preds = [torch.broadcast_tensors(p, target)[0] for p in preds]
        self._write_td_error(tensordict, torch.stack([p - target for p in preds]).abs().amax(0))
        loss_q = sum(distance_loss(p, target, self.loss_function) for p in preds)
        weight = self.loss_weight(tensordict)
        loss_qvalue = self._weighted_mean(loss_q, weight)
        update_actor = self._calls % self.policy_delay == 0
        self._calls += 1
        if update_actor:
            pi_td = self.actor(data_td)
            q_pi = q_frozen(self.qvalue_networks[0], pi_td, k.state_action_value)
            loss_actor = -self._weighted_mean(q_pi, weight)
        else:
            loss_actor = torch.zeros((), device=target.device)
        return TensorDict(
            loss_actor=loss_actor,
            loss_qvalue=loss_qvalue,
            update_actor=torch.tensor(update_actor),
            q_mean=torch.stack(preds).detach().mean(),
        )
