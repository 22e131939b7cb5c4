"""Many runs' on-policy updates in one call: the runs' networks stacked over a run dim.

The first piece of "many runs in one process" (several seeds, or population members, of
one algorithm on one task): ``R`` learners of the same group, built alike (each from its
own seed), train as one. Their losses' parameters and buffers are stacked over a leading
run dim (:func:`torch.func.stack_module_state`), and every computation on them is one
:func:`torch.func.vmap` over the runs of a :func:`torch.func.functional_call` of the
loss, so each run's data meets only its own parameters. Everything that must stay per
run stays per run by construction, as in ``R`` separate processes:

- the advantages (GAE with each run's critic, run by each run's own loss) and their
  standardization (inside each run's loss call, over that run's minibatch alone);
- the minibatches: each run shuffles its own batch with its own generator;
- the gradients, and their clipping: each run's norm, per param group (role), as
  :func:`~marl.algorithms.updates.clip_grad_norm_per_group_` does for one run, with each
  run's own ``max_grad_norm`` (:func:`per_run_limit`);
- the optimizer: Adam (like every elementwise optimizer) on a stacked tensor is ``R``
  independent optimizers. Its state starts from the runs' own optimizers' (stacked, so a
  resumed run continues with its moments) and :meth:`StackedOnPolicy.copy_to_runs` gives
  each run its slice back (so each run's checkpoint holds its own exact moments). Runs
  whose rates differ get a :class:`~marl.algorithms.updates.StackedAdam`;
- the loss's hyperparameters (a population's members may differ in them): the one loss
  call of every run is a copy of run 0's loss, so the attributes in which the runs'
  losses differ (``entropy_coef``, ``clip_epsilon``, ``critic_coef``, ``clip_value``)
  are passed into the ``vmap`` as ``[R]`` tensors and set on that copy for the call, each
  run's slice seeing its own value (:class:`~marl.algorithms.updates.run_scalars.RunScalars`);
  those equal in every run (seeds) stay Python constants. The discount and GAE's lambda
  are each run's own already: each run's estimator writes its advantages. A difference
  no tensor can carry (``normalize_advantage``, ``loss_critic_type``, a ``clip_value`` of
  ``None`` against a number, a ``critic_coef`` of 0 against others) is refused by name.

So one :meth:`StackedOnPolicy.update` gives each run the parameters that run's own
:class:`~marl.algorithms.updates.OnPolicyUpdater` would give it on its own batch, with
the same minibatch order (``tests/algorithms/test_stacked_update.py`` checks it to
1e-6, with ``noise="shared"``). Random draws inside the loss (the Monte Carlo entropy of
a tanh-normal policy) are each run's own by default (``noise="independent"``:
``vmap(randomness="different")``), as runs trained apart draw theirs, so that runs
trained together stay independent samples; ``noise="shared"`` gives every run the one
draw its own updater would make from the same global generator state, which the
equivalence tests use (:func:`vmap_randomness`).

Not yet covered: recurrent (sequence) training, gradient sync and compile
(:class:`~marl.algorithms.updates.StackedOffPolicy` covers the replay-buffer families).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence

import torch
from tensordict import TensorDictBase
from torch import nn
from torch.func import functional_call, grad, stack_module_state, vmap

from marl.algorithms.updates.on_policy import OnPolicyUpdater
from marl.algorithms.updates.run_scalars import RunScalars
from marl.algorithms.updates.stacked_adam import StackedAdam

__all__ = [
    "NOISE_MODES",
    "PER_RUN_SETTINGS",
    "StackedOnPolicy",
    "check_run_dim",
    "per_run_limit",
    "vmap_randomness",
]

Stacked = dict[str, torch.Tensor]

PER_RUN_SETTINGS: frozenset[str] = frozenset(
    {
        # the optimizers' rates (StackedAdam)
        *("lr", "actor_lr", "critic_lr", "alpha_lr"),
        # the gradient clipping (None in some runs: inf there)
        "max_grad_norm",
        # the returns: each run's own estimator (on-policy), a per-run tensor (off-policy)
        *("gamma", "lmbda"),
        # the policy-gradient losses, per-run tensors in the call
        *("entropy_coef", "clip_epsilon"),
        # the off-policy ones: each run's target updates (tau), TD3's smoothing noise
        # (per-run tensors) and SAC's starting temperature (the log_alpha parameter)
        *("tau", "policy_noise", "noise_clip", "alpha_init"),
    }
)
"""The algorithm settings (config keys) in which runs trained together may differ, each
run training with its own value (a population's members): the stacked updates keep them
per run, whatever the values, for every algorithm that has the key and that the runs
stack (:func:`marl.experiment.runs_hub.stackable`).

The stacks take more per run from direct users: a ``critic_coef``, ``clip_value`` or SAC
``target_entropy`` that is a number in every run (and a ``critic_coef`` not 0 in some runs
only), or a hard target update's period. Those are not listed, since some values of them
(``None``, ``"auto"``, 0) cannot be per run: the stacks refuse, by name, any difference
between their runs that they cannot keep per run."""


def per_run_limit(limits: Sequence[float | None]) -> float | torch.Tensor | None:
    """The runs' gradient-norm limits (``max_grad_norm``) as the stacks clip with them.

    Returns:
        ``None`` when no run clips; the one limit when every run has it (a Python
        float, as each run's own updater clips with); else a ``[R]`` float64 tensor, with
        ``inf`` for a run that does not clip (its scale ``min(inf / norm, 1)`` is exactly 1).

    Examples:
        >>> per_run_limit([None, None]) is None, per_run_limit([0.5, 0.5])
        (True, 0.5)
        >>> per_run_limit([0.5, None])
        tensor([0.5000,    inf], dtype=torch.float64)
    """
    if all(limit is None for limit in limits):
        return None
    if all(limit == limits[0] for limit in limits):
        return float(limits[0])
    return torch.tensor(
        [math.inf if limit is None else float(limit) for limit in limits], dtype=torch.float64
    )


NOISE_MODES = ("independent", "shared")
"""How the runs of a stacked update draw the random numbers inside their losses."""


def vmap_randomness(noise: str) -> str:
    """The :func:`torch.func.vmap` randomness of a stacked update's ``noise`` mode.

    ``"independent"``: each run draws its own numbers inside the loss (SAC's sampled
    actions, TD3's smoothing noise, a tanh-normal's Monte Carlo entropy), as runs trained
    apart do, so runs trained together stay statistically independent (seeds are the
    unit of noise). ``"shared"``: one draw serves every run of a step, the one each
    run's own updater would make from the same global generator state; for checking a
    stacked update against separate ones number for number.

    Raises:
        ValueError: for another mode, naming the modes.

    Examples:
        >>> vmap_randomness("independent"), vmap_randomness("shared")
        ('different', 'same')
        >>> vmap_randomness("same")
        Traceback (most recent call last):
        ...
        ValueError: noise: expected one of ('independent', 'shared'), got 'same'
    """
    if noise not in NOISE_MODES:
        raise ValueError(f"noise: expected one of {NOISE_MODES}, got {noise!r}")
    return "different" if noise == "independent" else "same"


def check_run_dim(batches: TensorDictBase, runs: int) -> None:
    """Refuse ``batches`` whose leading dim is not the ``runs`` of a stacked update.

    Raises:
        ValueError: naming the expected run count and the shape given.

    Examples:
        >>> from tensordict import TensorDict
        >>> check_run_dim(TensorDict(batch_size=[3, 4]), 3)
        >>> check_run_dim(TensorDict(batch_size=[4]), 3)
        Traceback (most recent call last):
        ...
        ValueError: expected batches with a leading run dim of 3, got shape (4,)
    """
    if batches.batch_dims < 1 or batches.shape[0] != runs:
        raise ValueError(
            f"expected batches with a leading run dim of {runs}, got shape {tuple(batches.shape)}"
        )


class _Method(nn.Module):
    """``forward`` calls one method of ``loss``: :func:`functional_call` runs forwards only."""

    def __init__(self, loss: nn.Module, method: Callable[[nn.Module, TensorDictBase], object]):
        super().__init__()
        self.loss = loss
        self.method = method

    def forward(self, td: TensorDictBase) -> object:
        return self.method(self.loss, td)


def _loss_sum(loss: nn.Module, td: TensorDictBase) -> tuple[torch.Tensor, TensorDictBase]:
    out = loss(td)
    total = sum(v for k, v in out.items() if k.startswith("loss_"))
    return total, out.detach()


def _same(a: object, b: object) -> bool:
    if torch.is_tensor(a) and torch.is_tensor(b):
        return a.shape == b.shape and bool(torch.equal(a, b))
    return a == b


class StackedOnPolicy:
    """The on-policy updates of ``R`` runs of one group, as one vmapped update.

    Args:
        updaters: one :class:`~marl.algorithms.updates.OnPolicyUpdater` per run, of the
            same algorithm and group (the same network shapes and settings); their
            current parameters, optimizer settings and optimizer states (Adam's moments,
            stacked: a resumed run continues with its own) are the runs' starting point.
        generators: one ``torch.Generator`` per run, for its minibatch order (``None``:
            new generators seeded ``0..R-1``).
        noise: ``"independent"`` (each run its own random draws inside the loss) or
            ``"shared"`` (one draw for all runs of a step); see :func:`vmap_randomness`.

    Raises:
        ValueError: for fewer than one updater, updaters whose settings differ (epochs,
            minibatch size, optimizer type or hyperparameters besides the rates), losses
            that differ in an attribute that cannot be per run (naming it), optimizer
            states that differ in their entries or step counts, a recurrent (sequence)
            updater, or a gradient sync.
        TypeError: when the updaters' losses differ in structure.

    Examples:
        >>> import torch
        >>> from marl.algorithms import Algorithm
        >>> from marl.collectors import Collector
        >>> from marl.testing import SingleAgentFakeEnv
        >>> env = SingleAgentFakeEnv(num_envs=4, seed=0)
        >>> runs = [Algorithm("ppo", {"minibatch_size": 16, "epochs": 2}).build(env, seed=r)
        ...         for r in range(3)]
        >>> stack = StackedOnPolicy([a.learners["root"].updater for a in runs])
        >>> batches = torch.stack([Collector(env, a.policy, frames_per_batch=32).rollout()
        ...                        for a in runs])
        >>> logs = stack.update(stack.process(batches))
        >>> len(logs), "loss_objective" in logs[0]
        (3, True)
    """

    def __init__(
        self,
        updaters: Sequence[OnPolicyUpdater],
        generators: Sequence[torch.Generator] | None = None,
        *,
        noise: str = "independent",
    ) -> None:
        if not updaters:
            raise ValueError("StackedOnPolicy needs at least one updater")
        self.randomness = vmap_randomness(noise)
        first = updaters[0]
        for u in updaters:
            if not isinstance(u, OnPolicyUpdater):
                raise ValueError(f"expected OnPolicyUpdater objects, got {type(u).__name__}")
            if u.sequence_length is not None or u.gradient_step.sync is not None:
                raise ValueError("StackedOnPolicy trains single steps without gradient sync")
            if (u.epochs, u.minibatch_size) != (first.epochs, first.minibatch_size):
                raise ValueError(
                    "the runs' updaters differ in epochs or minibatch_size: "
                    f"{(u.epochs, u.minibatch_size)} against "
                    f"{(first.epochs, first.minibatch_size)}"
                )
            if type(u.loss) is not type(first.loss):
                raise TypeError(
                    f"the runs' losses differ: {type(u.loss).__name__} and "
                    f"{type(first.loss).__name__}"
                )
        self.runs = len(updaters)
        self.epochs = first.epochs
        self.minibatch_size = first.minibatch_size
        self.max_grad_norm = per_run_limit([u.gradient_step.max_grad_norm for u in updaters])
        self._keys = list(first.loss.in_keys)
        self._losses = [u.loss for u in updaters]
        self._optimizers = [u.optimizer for u in updaters]
        self._names = [{id(p): n for n, p in loss.named_parameters()} for loss in self._losses]
        # each run's own estimator writes its advantages (process): its gamma and lmbda
        # may differ per run without passing through the template
        self.scalars = RunScalars(self._losses, skip=("value_estimator",))
        self.params, self.buffers = stack_module_state(self._losses)
        template = copy.deepcopy(first.loss).to("meta")
        self._loss_sum = _Method(template, _loss_sum)
        self.optimizer, self._groups = self._stacked_optimizer(updaters)
        if generators is None:
            generators = [torch.Generator().manual_seed(r) for r in range(self.runs)]
        if len(generators) != self.runs:
            raise ValueError(f"expected {self.runs} generators, got {len(generators)}")
        self.generators = list(generators)

    def _stacked_optimizer(
        self, updaters: Sequence[OnPolicyUpdater]
    ) -> tuple[torch.optim.Optimizer, list[list[str]]]:
        """The first run's optimizer class and param groups, over the stacked parameters.

        Runs whose Adams differ in their groups' learning rates (a population's members)
        get a :class:`~marl.algorithms.updates.StackedAdam`, which steps each run with its
        own rate; runs with the same rates keep the first run's optimizer class (torch's
        fused Adam), whose one rate per group then is every run's.
        """
        opt = updaters[0].optimizer
        for u in updaters[1:]:
            if type(u.optimizer) is not type(opt) or u.optimizer.defaults != opt.defaults:
                raise ValueError("the runs' optimizers differ in type or hyperparameters")
            for g, (mine, first) in enumerate(zip(u.optimizer.param_groups, opt.param_groups)):
                differ = sorted(
                    k for k in first if k not in ("params", "lr") and mine.get(k) != first[k]
                )
                if differ:
                    raise ValueError(
                        f"the runs' optimizers differ in param group {g}'s {differ}: only the "
                        "learning rate may differ between stacked runs"
                    )
        if any(
            float(u.optimizer.param_groups[g]["lr"]) != float(group["lr"])
            for u in updaters[1:]
            for g, group in enumerate(opt.param_groups)
        ):
            adam = StackedAdam.from_runs(self._optimizers, self._names, self.params)
            return adam, [list(group["param_names"]) for group in adam.param_groups]
        names = self._names[0]
        groups, param_groups = [], []
        for group in opt.param_groups:
            group_names = [names[id(p)] for p in group["params"]]
            groups.append(group_names)
            options = {k: v for k, v in group.items() if k != "params"}
            param_groups.append({"params": [self.params[n] for n in group_names], **options})
        stacked = type(opt)(param_groups, **opt.defaults)
        for name in (n for group_names in groups for n in group_names):
            state = self._stacked_state(name)
            if state is not None:
                stacked.state[self.params[name]] = state
        return stacked, groups

    def _stacked_state(self, name: str) -> dict[str, object] | None:
        """The runs' optimizer states of parameter ``name``, stacked over the run dim (``None``
        when no run's optimizer has stepped yet)."""
        states = [
            opt.state.get(dict(loss.named_parameters())[name])
            for opt, loss in zip(self._optimizers, self._losses)
        ]
        if not any(states):
            return None
        if not all(states) or any(set(s) != set(states[0]) for s in states):
            raise ValueError(
                f"the runs' optimizer states of {name!r} differ in their entries: "
                f"{[sorted(s or {}) for s in states]} (every run must have stepped alike)"
            )
        stacked: dict[str, object] = {}
        shape = tuple(self.params[name].shape[1:])
        for key, first in states[0].items():
            values = [s[key] for s in states]
            if torch.is_tensor(first) and tuple(first.shape) == shape and shape:
                stacked[key] = torch.stack([v.detach() for v in values]).clone()
            elif all(_same(v, first) for v in values):  # a per-param scalar (Adam's step)
                stacked[key] = first.clone() if torch.is_tensor(first) else first
            else:
                raise ValueError(
                    f"the runs' optimizer states of {name!r} differ in {key!r}: "
                    f"{[float(v) if torch.is_tensor(v) else v for v in values]} (the runs must "
                    "have taken the same number of steps)"
                )
        return stacked

    def _call(self, module: nn.Module, td: TensorDictBase, params: Stacked) -> object:
        names = {f"loss.{k}": v for k, v in params.items()}
        buffers = {f"loss.{k}": v for k, v in self.buffers.items()}
        return functional_call(module, (names, buffers), (td,))

    @torch.no_grad()
    def process(self, batches: TensorDictBase) -> TensorDictBase:
        """Write each run's advantages and value targets on its ``[*B, T]`` batch.

        Each run's own loss (which holds that run's parameters since the last
        :meth:`update`) runs its value estimator on its own batch, as it would alone: a
        critic pass is cheap next to the update, and the GAE scan is a C++ kernel that
        ``vmap`` cannot enter.

        Args:
            batches: ``[R, *B, T]``, run ``r``'s batch at index ``r``.

        Returns:
            ``[R, *B, T]`` batches with the loss's advantage and value-target entries.
        """
        check_run_dim(batches, self.runs)
        out = []
        for loss, batch in zip(self._losses, batches.unbind(0)):
            loss.value_estimator(batch)
            out.append(batch)
        return torch.stack(out)

    def update(self, batches: TensorDictBase) -> list[dict[str, float]]:
        """``epochs`` passes of shuffled minibatches, every run at once.

        Args:
            batches: ``[R, *B, T]`` batches :meth:`process` prepared.

        Returns:
            One log per run: the means of its loss outputs over the steps.
        """
        check_run_dim(batches, self.runs)
        data = batches.select(*self._keys, strict=False).reshape(self.runs, -1)
        n = data.shape[1]
        size = min(self.minibatch_size, n)
        step = vmap(grad(self._loss_of, has_aux=True), randomness=self.randomness)
        scalars = self.scalars.values
        sums: dict[str, torch.Tensor] = {}
        steps = 0
        rows = torch.arange(self.runs).unsqueeze(1)
        for _ in range(self.epochs):
            perm = torch.stack([torch.randperm(n, generator=g) for g in self.generators])
            shuffled = data[rows, perm]
            for start in range(0, n - size + 1, size):
                grads, out = step(self.params, scalars, shuffled[:, start : start + size])
                self._step(grads)
                for key, value in out.items():
                    if value.shape == (self.runs,):
                        sums[key] = sums.get(key, 0) + value.float()
                steps += 1
        self.copy_to_runs()
        means = {k: (v / max(steps, 1)).tolist() for k, v in sums.items()}
        return [{k: v[r] for k, v in means.items()} for r in range(self.runs)]

    def _loss_of(
        self, params: Stacked, scalars: Stacked, td: TensorDictBase
    ) -> tuple[torch.Tensor, object]:
        """Run ``r``'s loss: its slice of the parameters and of the per-run settings."""
        with RunScalars.bound(self._loss_sum.loss, scalars):
            return self._call(self._loss_sum, td, params)

    def _step(self, grads: Stacked) -> None:
        """Each run's gradients clipped per param group by that run's norm; one step."""
        for group in self._groups:
            gs = [grads[name] for name in group]
            if self.max_grad_norm is not None:
                # [R]: each run's 2-norm over the group, as clip_grad_norm_ takes it
                norms = torch.stack([g.flatten(1).norm(dim=1) for g in gs]).norm(dim=0)
                limit = self.max_grad_norm
                limit = limit.to(norms) if torch.is_tensor(limit) else limit
                scale = (limit / (norms + 1e-6)).clamp(max=1.0)
                gs = [g * scale.reshape(-1, *([1] * (g.dim() - 1))) for g in gs]
            for name, g in zip(group, gs):
                self.params[name].grad = g
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    @torch.no_grad()
    def copy_to_runs(self) -> None:
        """Write each run's stacked parameters into its own loss (and so its policy and
        critic, which collect, evaluate and checkpoint that run), and its slice of the
        stacked optimizer state (Adam's ``exp_avg``, ``exp_avg_sq``, ``step``) into its own
        optimizer, so that a run's checkpoint holds what its own updater would. :meth:`update`
        ends with it; call it after changing :attr:`params` in place."""
        if isinstance(self.optimizer, StackedAdam):  # runs with their own rates
            for r, loss in enumerate(self._losses):
                for name, p in loss.named_parameters():
                    p.copy_(self.params[name][r])
            self.optimizer.write_to_runs(self._optimizers, self._names)
            return
        for r, (loss, opt) in enumerate(zip(self._losses, self._optimizers)):
            for name, p in loss.named_parameters():
                stacked = self.params[name]
                p.copy_(stacked[r])
                state = self.optimizer.state.get(stacked)
                if not state:
                    continue
                opt.state[p] = {
                    key: (
                        value[r].clone()
                        if torch.is_tensor(value) and value.shape == stacked.shape
                        else (value.clone() if torch.is_tensor(value) else value)
                    )
                    for key, value in state.items()
                }
