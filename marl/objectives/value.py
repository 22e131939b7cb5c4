"""Functional value estimators: GAE, TD(0), TD(lambda) and V-trace.

Every function works on plain tensors whose time axis is ``time_dim`` (counted on
``state_value``/``next_state_value``; by default ``-2``, i.e. ``[*B, T, F]``).
Dims after the time axis are feature/agent dims. Rewards and flags that have
*fewer* dims than the values (e.g. an env-level ``done`` of shape ``[*B, T, 1]``
next to per-agent values ``[*B, T, n_agents, 1]``) are broadcast over the
missing dims, which are inserted right after the time axis.

Conventions: ``done = terminated | truncated`` cuts the recursion between
trajectories; ``terminated`` alone removes the bootstrap ``V(s_{t+1})``. On a
truncation the value of the final observation is still bootstrapped. The last
step of the batch is treated as a cut (bootstrapped from ``next_state_value``).

On CPU with float32/float64 inputs (and no autograd through them) the backward
recursions run in the C++ kernels of ``marl._C``; elsewhere (CUDA, other dtypes,
or when gradients are needed) a log-depth doubling scan in torch is used, which
launches O(log T) kernels rather than one per step.
"""

from __future__ import annotations

import torch

try:  # the compiled kernels are optional: the torch path covers everything
    from marl import _C
except ImportError:  # pragma: no cover - exercised only on broken builds
    _C = None

__all__ = [
    "discounted_scan",
    "generalized_advantage_estimate",
    "td0_advantage_estimate",
    "td0_return_estimate",
    "td_lambda_return_estimate",
    "vtrace_advantage_estimate",
]


def _time_pos(ref: torch.Tensor, time_dim: int) -> int:
    pos = time_dim + ref.ndim if time_dim < 0 else time_dim
    if not 0 <= pos < ref.ndim:
        raise ValueError(
            f"time_dim={time_dim} is out of range for a value tensor of shape {tuple(ref.shape)}"
        )
    return pos


def _align(tensors: dict[str, torch.Tensor], t: int) -> tuple[dict[str, torch.Tensor], torch.Size]:
    """Unsqueeze lower-rank tensors right after the time axis; return the broadcast shape."""
    ndim = max(x.ndim for x in tensors.values())
    out = {}
    for name, x in tensors.items():
        if x.ndim == 0:  # a scalar broadcasts everywhere
            out[name] = x
            continue
        if x.ndim <= t:
            raise ValueError(
                f"{name} of shape {tuple(x.shape)} has no time axis at position {t} "
                "(time is the last batch dim: expected [*B, T, *features])"
            )
        while x.ndim < ndim:
            x = x.unsqueeze(t + 1)
        out[name] = x
    # a plain-Python broadcast: torch.broadcast_shapes costs more than a small scan
    dims = [1] * ndim
    for x in out.values():
        for i, size in enumerate(x.shape, start=ndim - x.ndim):
            if size != 1:
                if dims[i] not in (1, size):
                    shapes = {k: tuple(v.shape) for k, v in tensors.items()}
                    raise ValueError(f"value-estimator inputs do not broadcast: {shapes}")
                dims[i] = size
    return out, torch.Size(dims)


def _use_kernel(*tensors: torch.Tensor) -> bool:
    if _C is None:
        return False
    grad = torch.is_grad_enabled() and any(x.requires_grad for x in tensors)
    return (
        not grad
        and tensors[0].dtype in (torch.float32, torch.float64)
        and all(x.device.type == "cpu" for x in tensors)
    )


def _as_rtf(x: torch.Tensor, shape: torch.Size, t: int, allow_f1: bool) -> torch.Tensor:
    """View (or, when it must broadcast, expand-copy) ``x`` as a contiguous [R, T, F]."""
    lead = shape[:t]
    feat = shape[t + 1 :]
    x_feat_is_one = all(s == 1 for s in x.shape[t + 1 :])
    if allow_f1 and x_feat_is_one and x.shape[: t + 1] == shape[: t + 1]:
        return x.contiguous().reshape(lead.numel(), shape[t], 1)
    x = x.expand(shape).contiguous()
    return x.reshape(lead.numel(), shape[t], feat.numel())


def _flags(x: torch.Tensor) -> torch.Tensor:
    return x if x.dtype == torch.bool else x != 0


def _shift_flags_last(done: torch.Tensor, t: int) -> torch.Tensor:
    """``done`` with the last time step forced True (the batch ends there)."""
    done = done.clone()
    done.narrow(t, done.shape[t] - 1, 1).fill_(True)
    return done


def discounted_scan(x: torch.Tensor, coef: torch.Tensor, time_dim: int = -2) -> torch.Tensor:
    """Solve ``out_t = x_t + coef_t * out_{t+1}`` backwards over ``time_dim`` (``out_T = 0``).

    Args:
        x: the per-step terms, ``[*B, T, *F]``.
        coef: the per-step carry coefficients, broadcastable to ``x``.
        time_dim: the time axis of ``x``.

    Returns:
        A tensor shaped like ``x``.

    Examples:
        >>> x = torch.ones(1, 3, 1)
        >>> discounted_scan(x, torch.full_like(x, 0.5)).flatten().tolist()
        [1.75, 1.5, 1.0]
    """
    t = _time_pos(x, time_dim)
    al, shape = _align({"x": x, "coef": coef}, t)
    x, coef = al["x"], al["coef"].to(x.dtype)
    if _use_kernel(x, coef):
        xs = _as_rtf(x, shape, t, allow_f1=False)
        cs = _as_rtf(coef, shape, t, allow_f1=True)
        out = torch.empty(xs.shape, dtype=x.dtype)
        _C.discounted_scan(xs, cs, out)
        return out.reshape(shape)
    return _doubling_scan(x.expand(shape), coef.expand(shape), t)


def _doubling_scan(x: torch.Tensor, coef: torch.Tensor, t: int) -> torch.Tensor:
    """Log-depth (Hillis-Steele) scan: after step s each entry holds 2s steps of the sum."""
    n = x.shape[t]
    s = 1  # out-of-place updates (cat), so the inputs are never modified
    while s < n:
        head_x, head_c = x.narrow(t, 0, n - s), coef.narrow(t, 0, n - s)
        tail_x, tail_c = x.narrow(t, s, n - s), coef.narrow(t, s, n - s)
        new_x = head_x + head_c * tail_x
        new_c = head_c * tail_c
        x = torch.cat([new_x, x.narrow(t, n - s, s)], dim=t)
        coef = torch.cat([new_c, coef.narrow(t, n - s, s)], dim=t)
        s *= 2
    return x


def _defaults(done: torch.Tensor, terminated: torch.Tensor | None) -> torch.Tensor:
    return done if terminated is None else terminated


def _align_steps(
    time_dim: int,
    done: torch.Tensor,
    terminated: torch.Tensor | None,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    state_value: torch.Tensor | None = None,
    extra: dict[str, torch.Tensor] | None = None,
) -> tuple[int, dict[str, torch.Tensor], torch.Size]:
    # the estimators' common start: the time position (read on ``V(s_t)``, else on
    # ``V(s_{t+1})``) and the step's tensors with its done/terminated flags, aligned by
    # ``_align`` (in this order)
    ref = next_state_value if state_value is None else state_value
    t = _time_pos(ref, time_dim)
    values = {"next_state_value": next_state_value, "reward": reward}
    if state_value is not None:
        values = {"state_value": state_value, **values}
    terminated = _defaults(done, terminated)
    flags = {"done": _flags(done), "terminated": _flags(terminated)}
    al, shape = _align({**values, **flags, **(extra or {})}, t)
    return t, al, shape


def generalized_advantage_estimate(
    gamma: float,
    lmbda: float,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    time_dim: int = -2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation (Schulman et al., 2016).

    ``delta_t = r_t + gamma * (1 - term_t) * V(s_{t+1}) - V(s_t)`` and
    ``A_t = delta_t + gamma * lmbda * (1 - done_t) * A_{t+1}``.

    Args:
        gamma: discount factor.
        lmbda: GAE lambda.
        state_value: ``V(s_t)``, ``[*B, T, *F]``.
        next_state_value: ``V(s_{t+1})``, same shape.
        reward: ``[*B, T, *F]`` or lower rank (broadcast after the time axis).
        done: end-of-trajectory flags (terminated or truncated).
        terminated: termination flags; defaults to ``done`` (no truncation info).
        time_dim: the time axis of ``state_value``.

    Returns:
        ``(advantage, value_target)``, both shaped like the broadcast inputs.

    Examples:
        >>> v = torch.zeros(1, 3, 1)
        >>> r = torch.ones(1, 3, 1)
        >>> d = torch.zeros(1, 3, 1, dtype=torch.bool)
        >>> adv, target = generalized_advantage_estimate(0.5, 1.0, v, v, r, d)
        >>> adv.flatten().tolist()
        [1.75, 1.5, 1.0]
    """
    t, al, shape = _align_steps(time_dim, done, terminated, next_state_value, reward, state_value)
    v, nv = al["state_value"], al["next_state_value"]
    r = al["reward"].to(v.dtype)
    if _use_kernel(v, nv, r):
        vs = _as_rtf(v, shape, t, allow_f1=False)
        nvs = _as_rtf(nv.to(v.dtype), shape, t, allow_f1=False)
        rs = _as_rtf(r, shape, t, allow_f1=True)
        ds = _as_rtf(al["done"], shape, t, allow_f1=True).view(torch.uint8)
        ts = _as_rtf(al["terminated"], shape, t, allow_f1=True).view(torch.uint8)
        adv = torch.empty(vs.shape, dtype=v.dtype)
        target = torch.empty(vs.shape, dtype=v.dtype)
        _C.gae_scan(vs, nvs, rs, ds, ts, adv, target, float(gamma), float(lmbda))
        return adv.reshape(shape), target.reshape(shape)
    not_term = (~al["terminated"]).to(v.dtype)
    not_done = (~al["done"]).to(v.dtype)
    delta = r + gamma * not_term * nv - v
    adv = _doubling_scan(delta.expand(shape), (gamma * lmbda * not_done).expand(shape), t)
    return adv, adv + v


def td0_return_estimate(
    gamma: float,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    terminated: torch.Tensor,
) -> torch.Tensor:
    """One-step target ``r_t + gamma * (1 - term_t) * V(s_{t+1})``.

    No time axis is needed. ``reward``/``terminated`` broadcast against the value
    by ordinary (right-aligned) broadcasting, so pass per-agent or already aligned
    tensors; :class:`marl.objectives.TD0` aligns env-level flags for you.

    Args:
        gamma: discount factor.
        next_state_value: ``V(s_{t+1})``.
        reward: the reward.
        terminated: termination flags (truncated steps are bootstrapped).

    Returns:
        The target, shaped like the broadcast inputs.

    Examples:
        >>> td0_return_estimate(0.5, torch.ones(2, 1), torch.ones(2, 1),
        ...                     torch.tensor([[False], [True]])).flatten().tolist()
        [1.5, 1.0]
    """
    not_term = (~_flags(terminated)).to(next_state_value.dtype)
    return reward + gamma * not_term * next_state_value


def td0_advantage_estimate(
    gamma: float,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    terminated: torch.Tensor,
) -> torch.Tensor:
    """One-step advantage ``r_t + gamma * (1 - term_t) * V(s_{t+1}) - V(s_t)``.

    Args:
        gamma: discount factor.
        state_value: ``V(s_t)``.
        next_state_value: ``V(s_{t+1})``.
        reward: the reward.
        terminated: termination flags.

    Returns:
        The advantage.

    Examples:
        >>> td0_advantage_estimate(1.0, torch.ones(1), torch.ones(1), torch.zeros(1),
        ...                        torch.zeros(1, dtype=torch.bool)).tolist()
        [0.0]
    """
    return td0_return_estimate(gamma, next_state_value, reward, terminated) - state_value


def td_lambda_return_estimate(
    gamma: float,
    lmbda: float,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(lambda) return, computed recursively backwards in time.

    ``G_t = r_t + gamma * (1 - term_t) * ((1 - lmbda) * V(s_{t+1}) + lmbda * B_t)``
    where ``B_t = V(s_{t+1})`` at a trajectory cut (``done_t``, or the last step)
    and ``G_{t+1}`` otherwise.

    Args:
        gamma: discount factor.
        lmbda: lambda.
        next_state_value: ``V(s_{t+1})``, ``[*B, T, *F]``.
        reward: the reward (broadcast after the time axis when lower rank).
        done: end-of-trajectory flags.
        terminated: termination flags; defaults to ``done``.
        time_dim: the time axis of ``next_state_value``.

    Returns:
        The lambda-returns.

    Examples:
        >>> nv = torch.zeros(1, 3, 1)
        >>> d = torch.zeros(1, 3, 1, dtype=torch.bool)
        >>> td_lambda_return_estimate(0.5, 1.0, nv, torch.ones(1, 3, 1), d).flatten().tolist()
        [1.75, 1.5, 1.0]
    """
    t, al, shape = _align_steps(time_dim, done, terminated, next_state_value, reward)
    nv = al["next_state_value"]
    r = al["reward"].to(nv.dtype)
    if _use_kernel(nv, r):
        nvs = _as_rtf(nv, shape, t, allow_f1=False)
        rs = _as_rtf(r, shape, t, allow_f1=True)
        ds = _as_rtf(al["done"], shape, t, allow_f1=True).view(torch.uint8)
        ts = _as_rtf(al["terminated"], shape, t, allow_f1=True).view(torch.uint8)
        out = torch.empty(nvs.shape, dtype=nv.dtype)
        _C.td_lambda_scan(nvs, rs, ds, ts, out, float(gamma), float(lmbda))
        return out.reshape(shape)
    # G_t = x_t + c_t * G_{t+1}: a linear recurrence, solved by the doubling scan.
    cut = _shift_flags_last(al["done"].expand(shape), t).to(nv.dtype)
    gnt = gamma * (~al["terminated"]).to(nv.dtype)
    x = r + gnt * ((1 - lmbda) * nv + lmbda * cut * nv)
    coef = gnt * lmbda * (1 - cut)
    return _doubling_scan(x.expand(shape), coef.expand(shape), t)


def vtrace_advantage_estimate(
    gamma: float,
    log_pi: torch.Tensor,
    log_mu: torch.Tensor,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    rho_thresh: float = 1.0,
    c_thresh: float = 1.0,
    lmbda: float = 1.0,
    time_dim: int = -2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace off-policy targets and advantages (Espeholt et al., 2018).

    With ``rho_t = min(rho_thresh, pi/mu)`` and ``c_t = lmbda * min(c_thresh, pi/mu)``:
    ``v_t - V_t = rho_t * delta_t + gamma * c_t * (1 - done_t) * (v_{t+1} - V_{t+1})`` and the
    policy-gradient advantage is ``rho_t * (r_t + gamma * (1 - term_t) * v_{t+1} - V_t)``,
    where ``v_{t+1}`` is replaced by ``V(s_{t+1})`` at a trajectory cut.

    Args:
        gamma: discount factor.
        log_pi: log-probabilities of the actions under the learner policy.
        log_mu: log-probabilities under the behaviour policy.
        state_value: ``V(s_t)``, ``[*B, T, *F]``.
        next_state_value: ``V(s_{t+1})``.
        reward: the reward.
        done: end-of-trajectory flags.
        terminated: termination flags; defaults to ``done``.
        rho_thresh: truncation of the importance weights in the targets.
        c_thresh: truncation of the traces.
        lmbda: extra trace decay.
        time_dim: the time axis of ``state_value``.

    Returns:
        ``(advantage, value_target)``.

    Examples:
        >>> v = torch.zeros(1, 2, 1); lp = torch.zeros(1, 2, 1)
        >>> d = torch.zeros(1, 2, 1, dtype=torch.bool)
        >>> adv, vs = vtrace_advantage_estimate(1.0, lp, lp, v, v, torch.ones(1, 2, 1), d)
        >>> vs.flatten().tolist()
        [2.0, 1.0]
    """
    logs = {"log_pi": log_pi, "log_mu": log_mu}
    t, al, shape = _align_steps(
        time_dim, done, terminated, next_state_value, reward, state_value, extra=logs
    )
    v, nv = al["state_value"], al["next_state_value"]
    ratio = (al["log_pi"] - al["log_mu"]).exp().to(v.dtype)
    rho = ratio.clamp(max=rho_thresh)
    c = lmbda * ratio.clamp(max=c_thresh)
    not_term = (~al["terminated"]).to(v.dtype)
    delta = rho * (al["reward"] + gamma * not_term * nv - v)
    coef = gamma * c * (~al["done"]).to(v.dtype)
    vs = v + discounted_scan(delta.expand(shape), coef.expand(shape), time_dim=t)
    # v_{t+1}: the next v-trace target inside a trajectory, V(s_{t+1}) at a cut.
    cut = _shift_flags_last(al["done"].expand(shape), t)
    n = shape[t]
    vs_next = torch.cat([vs.narrow(t, 1, n - 1), nv.expand(shape).narrow(t, n - 1, 1)], dim=t)
    vs_next = torch.where(cut, nv.expand(shape), vs_next)
    advantage = rho * (al["reward"] + gamma * not_term * vs_next - v)
    return advantage, vs
