"""``StackedAdam``: ``R`` runs' Adams over parameters stacked over a leading run dim.

Adam is elementwise, so ``torch.optim.Adam`` on a stacked ``[R, ...]`` tensor already is
``R`` independent Adams, as long as every run has the same hyperparameters: torch takes
one scalar learning rate per param group. A population (``marl-tune``'s PBT members
sharing one process) needs each member's own rate, so here a param group's ``lr`` may
be a tensor of shape ``[R]``: run ``r``'s slice steps with ``lr[r]``. Step counts are
kept per run too (``[R]``), so runs whose optimizers were restored at different steps
keep their own bias corrections.

:meth:`StackedAdam.from_runs` builds one from the runs' own ``torch.optim.Adam``
optimizers (their param groups, rates and moments), and
:meth:`StackedAdam.write_to_runs` writes each
run's slice of the moments back into its own optimizer, so that each run checkpoints
and resumes as if it had trained alone. Both are what a stacked updater needs
(:class:`~marl.algorithms.updates.StackedOffPolicy` uses them;
:class:`~marl.algorithms.updates.StackedOnPolicy` too, for runs whose rates differ).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch

__all__ = ["StackedAdam"]

# the hyperparameters every run must share (the rate may differ per run)
_SHARED = ("betas", "eps", "weight_decay")


class StackedAdam(torch.optim.Optimizer):
    """Adam (Kingma & Ba, 2015) on parameters stacked over ``runs``, a learning rate per run.

    Every parameter has a leading run dim of ``runs``; run ``r``'s slice ``p[r]`` steps
    exactly as ``torch.optim.Adam`` (no amsgrad, not maximizing, L2 ``weight_decay``)
    would step that run's own parameter, with that run's rate: a param group's ``lr``
    is a float (every run) or a tensor of shape ``[runs]``. Parameters without a
    gradient (``grad is None``) are skipped entirely, as torch's Adam skips them.

    Args:
        params: stacked parameters or param groups (dicts).
        runs: the size of the leading run dim.
        lr: learning rate: a float, or one per run (a sequence or a ``[runs]`` tensor).
        betas: the moments' decay rates.
        eps: added to the denominator.
        weight_decay: L2 penalty added to the gradient, as in ``torch.optim.Adam``.

    Raises:
        ValueError: for a negative rate or ``eps``, betas outside ``[0, 1)``, a rate
            tensor that is not ``[runs]``, or a parameter whose leading dim is not ``runs``.

    Examples:
        >>> w = torch.nn.Parameter(torch.ones(2, 3))  # 2 runs' weights, stacked
        >>> opt = StackedAdam([w], runs=2, lr=[0.1, 0.2])
        >>> w.sum().backward()
        >>> opt.step()
        >>> w.detach()
        tensor([[0.9000, 0.9000, 0.9000],
                [0.8000, 0.8000, 0.8000]])
        >>> opt.state[w]["step"]
        tensor([1., 1.])
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        *,
        runs: int,
        lr: float | Sequence[float] | torch.Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        if runs < 1:
            raise ValueError(f"runs must be >= 1, got {runs}")
        if eps < 0 or weight_decay < 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(
                f"expected eps >= 0, weight_decay >= 0 and betas in [0, 1), got {eps}, "
                f"{weight_decay}, {betas}"
            )
        self.runs = runs
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)
        for group in self.param_groups:
            group["lr"] = self.run_rates(group["lr"])
            for p in group["params"]:
                if p.ndim == 0 or p.shape[0] != runs:
                    raise ValueError(
                        f"param group {group.get('name', '?')!r} holds a parameter of shape "
                        f"{tuple(p.shape)}; expected a leading run dim of {runs}"
                    )

    def run_rates(self, lr: float | Sequence[float] | torch.Tensor) -> torch.Tensor:
        """``lr`` as a float64 ``[runs]`` tensor (a float is every run's rate).

        Raises:
            ValueError: for a negative rate or a shape other than ``[runs]``.
        """
        rates = torch.as_tensor(lr, dtype=torch.float64).detach().cpu()
        if rates.ndim == 0:
            rates = rates.expand(self.runs).clone()
        if rates.shape != (self.runs,):
            raise ValueError(
                f"expected a learning rate per run (shape [{self.runs}]) or one float, got "
                f"shape {tuple(rates.shape)}"
            )
        if bool((rates < 0).any()):
            raise ValueError(f"learning rates must be >= 0, got {rates.tolist()}")
        return rates

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:  # type: ignore[override]
        """One Adam step of every run's slice of every parameter that has a gradient.

        Args:
            closure: re-evaluates the loss (as for any torch optimizer).

        Returns:
            The closure's loss, or ``None``.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            rates = group["lr"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.zeros(self.runs, dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                self._update(p, state, rates, beta1, beta2, group["eps"], group["weight_decay"])
        return loss

    @staticmethod
    def _update(
        p: torch.Tensor,
        state: dict[str, torch.Tensor],
        rates: torch.Tensor,
        beta1: float,
        beta2: float,
        eps: float,
        weight_decay: float,
    ) -> None:
        """``torch.optim.Adam``'s single-tensor step, with per-run rates and step counts."""
        grad = p.grad if weight_decay == 0 else p.grad.add(p, alpha=weight_decay)
        state["exp_avg"].lerp_(grad, 1 - beta1)
        state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        state["step"] += 1
        # the bias corrections in float64, as torch computes them from a Python float
        step = state["step"].double()
        shape = (-1,) + (1,) * (p.ndim - 1)
        step_size = (rates / (1 - beta1**step)).to(p.dtype).to(p.device).reshape(shape)
        bias2_sqrt = (1 - beta2**step).sqrt().to(p.dtype).to(p.device).reshape(shape)
        denom = (state["exp_avg_sq"].sqrt() / bias2_sqrt).add_(eps)
        p.sub_(step_size * (state["exp_avg"] / denom))

    @classmethod
    def from_runs(
        cls,
        optimizers: Sequence[torch.optim.Optimizer],
        names: Sequence[Mapping[int, str]],
        params: Mapping[str, torch.Tensor],
    ) -> StackedAdam:
        """The runs' Adams as one: their param groups, per-run rates and moments.

        Args:
            optimizers: run ``r``'s ``torch.optim.Adam`` at index ``r``.
            names: per run, ``{id(parameter): name}`` of the parameters it optimizes.
            params: the stacked parameters by name (``[R, ...]`` leaves).

        Returns:
            A :class:`StackedAdam` whose groups are the first run's (in order, with their
            other entries such as ``"name"``), each group's ``lr`` the runs' rates.

        Raises:
            ValueError: for optimizers that are not plain Adams, or whose groups differ
                in their parameters or in anything but the rate.

        Examples:
            >>> from torch.func import stack_module_state
            >>> nets = [torch.nn.Linear(2, 1) for _ in range(2)]
            >>> opts = [torch.optim.Adam(n.parameters(), lr=lr) for n, lr in zip(nets, [1e-3, 2e-3])]
            >>> names = [{id(p): k for k, p in n.named_parameters()} for n in nets]
            >>> params, _ = stack_module_state(nets)
            >>> StackedAdam.from_runs(opts, names, params).param_groups[0]["lr"].tolist()
            [0.001, 0.002]
        """
        runs = len(optimizers)
        first = optimizers[0]
        layouts = [_group_layout(opt, n) for opt, n in zip(optimizers, names)]
        for r, opt in enumerate(optimizers):
            if type(opt) is not torch.optim.Adam:
                raise ValueError(
                    f"a stacked update steps torch.optim.Adam optimizers; run {r} has "
                    f"{type(opt).__name__}"
                )
            for group in opt.param_groups:
                if group.get("amsgrad") or group.get("maximize"):
                    raise ValueError(f"run {r}'s Adam uses amsgrad or maximize, not supported")
            if layouts[r] != layouts[0]:
                raise ValueError(
                    f"the runs' optimizers differ in their param groups: run {r} has "
                    f"{layouts[r]}, run 0 has {layouts[0]}"
                )
        groups = []
        for g, group in enumerate(first.param_groups):
            for r, opt in enumerate(optimizers):
                mine = {k: opt.param_groups[g][k] for k in _SHARED}
                theirs = {k: group[k] for k in _SHARED}
                if mine != theirs:
                    raise ValueError(
                        f"the runs' optimizers may differ only in lr; param group {g} of run "
                        f"{r} has {mine}, run 0's has {theirs}"
                    )
            rates = [float(opt.param_groups[g]["lr"]) for opt in optimizers]
            # the role's name ("actor", "critic"...) carries over; torch's own entries
            # (fused, foreach...) do not apply to this optimizer
            extra = {"name": group["name"]} if "name" in group else {}
            groups.append(
                {
                    "params": [params[n] for n in layouts[0][g]],
                    "param_names": list(layouts[0][g]),
                    "lr": rates,
                    **{k: group[k] for k in _SHARED},
                    **extra,
                }
            )
        stacked = cls(groups, runs=runs)
        stacked.read_runs(optimizers, names)
        return stacked

    @torch.no_grad()
    def read_runs(
        self, optimizers: Sequence[torch.optim.Optimizer], names: Sequence[Mapping[int, str]]
    ) -> None:
        """Stack the runs' rates, moments and step counts into this optimizer.

        A run with no state for a parameter (never stepped) starts it at zero, which is
        what its own Adam would do. Each group's rates are read from the runs' groups at
        the same position, so a rate changed on a run's own optimizer (a population
        member's explore) takes effect here.
        """
        for g, group in enumerate(self.param_groups):
            group["lr"] = self.run_rates([float(opt.param_groups[g]["lr"]) for opt in optimizers])
        owns = [
            {run_names[id(q)]: q for group in opt.param_groups for q in group["params"]}
            for opt, run_names in zip(optimizers, names)
        ]
        for name, p in self._by_name().items():
            states = [opt.state.get(own[name], {}) for opt, own in zip(optimizers, owns)]
            if not any(states):
                self.state.pop(p, None)
                continue
            self.state[p] = {
                "step": torch.tensor(
                    [float(s["step"]) if s else 0.0 for s in states], dtype=torch.float32
                ),
                "exp_avg": torch.stack(
                    [s["exp_avg"] if s else torch.zeros_like(p[0]) for s in states]
                ).to(p.device),
                "exp_avg_sq": torch.stack(
                    [s["exp_avg_sq"] if s else torch.zeros_like(p[0]) for s in states]
                ).to(p.device),
            }

    @torch.no_grad()
    def write_to_runs(
        self, optimizers: Sequence[torch.optim.Optimizer], names: Sequence[Mapping[int, str]]
    ) -> None:
        """Write each run's slice of the moments and step counts into its own Adam.

        Each run's optimizer then holds what it would hold had it taken the same steps
        alone (its ``state_dict`` checkpoints that run). The rates stay each run's own.
        """
        by_name = self._by_name()
        for r, (opt, run_names) in enumerate(zip(optimizers, names)):
            for group in opt.param_groups:
                on_device = bool(group.get("fused") or group.get("capturable"))
                for q in group["params"]:
                    p = by_name[run_names[id(q)]]
                    state = self.state.get(p)
                    if not state:
                        continue
                    opt.state[q] = {
                        "step": torch.tensor(
                            float(state["step"][r]),
                            dtype=torch.float32,
                            device=q.device if on_device else "cpu",
                        ),
                        "exp_avg": state["exp_avg"][r].clone().to(q.device),
                        "exp_avg_sq": state["exp_avg_sq"][r].clone().to(q.device),
                    }

    def _by_name(self) -> dict[str, torch.Tensor]:
        """The stacked parameters by the name each group lists them under."""
        out = {}
        for group in self.param_groups:
            out.update(zip(group["param_names"], group["params"]))
        return out

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """torch's ``add_param_group``, keeping the names :meth:`from_runs` gives the
        parameters (``"param_names"``; positions when none are given)."""
        param_group = dict(param_group)
        params = param_group["params"]
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        param_group["params"] = params
        if "param_names" not in param_group:
            start = sum(len(g["params"]) for g in self.param_groups)
            param_group["param_names"] = [str(start + i) for i in range(len(params))]
        super().add_param_group(param_group)


def _group_layout(opt: torch.optim.Optimizer, names: Mapping[int, str]) -> list[list[str]]:
    """The names of each param group's parameters, in order."""
    try:
        return [[names[id(p)] for p in group["params"]] for group in opt.param_groups]
    except KeyError as err:
        raise ValueError("an optimizer holds a parameter that is not among the named ones") from err
