"""Many runs' off-policy updates in one call: the runs' networks stacked over a run dim.

The off-policy counterpart of :class:`~marl.algorithms.updates.StackedOnPolicy`: ``R``
learners of one group, built alike (seeds, or population members), whose
:class:`~marl.algorithms.updates.OffPolicyUpdater` updates run as one. Every family that
trains through an ``OffPolicyUpdater`` is covered: SAC/MASAC/ISAC (continuous and
discrete), DDPG/TD3/MADDPG/IDDPG and DQN/IQL/VDN/QMIX. Each run keeps what is its own,
as ``R`` separate updaters would:

- its replay buffer: each batch goes into its run's own buffer, and every step samples
  each run's buffer in turn with that buffer's own sampler and generator (the samples
  are then stacked), so run ``r``'s minibatches are those its own updater would draw;
  with prioritized replay, each run's priorities are updated from its own TD errors;
- its gradients and their clipping: the runs' losses are one
  :func:`torch.func.vmap` of a :func:`torch.func.functional_call` over the stacked
  parameters, whose backward (of the sum over the runs, which are independent) gives
  each run's slice its own gradient; each run's norm is clipped per param group (role),
  with that run's ``max_grad_norm`` (``inf`` for a run that does not clip);
- its loss's hyperparameters: the call is a copy of run 0's loss, so the attributes in
  which the runs' losses differ (``gamma``, TD3's ``policy_noise`` and ``noise_clip``,
  SAC's numeric ``target_entropy``) go into the ``vmap`` as ``[R]`` tensors and are set
  on that copy for the call, each run's slice seeing its own
  (:class:`~marl.algorithms.updates.run_scalars.RunScalars`); SAC's starting temperature
  is each run's ``log_alpha`` parameter. A difference no tensor can carry (DQN's
  ``double_dqn``, TD3's ``policy_delay``, a ``loss_function``, SAC's ``fixed_alpha`` or an
  ``"auto"`` target entropy against a number) is refused by name;
- its optimizer: a :class:`~marl.algorithms.updates.StackedAdam` with each run's
  rates (runs may differ in ``lr``, a population's members) and moments;
- its target networks: soft (Polyak, each run's ``tau``) or hard (each run's counter
  and period) updates on its own slice;
- each family's schedule: TD3's delayed actor steps on the calls its loss counts, and a
  param group no term trains on a step (the delayed actor) gets no gradient, so Adam
  skips it as it would alone.

After each :meth:`StackedOffPolicy.update`, each run's loss (so its policy, critic and
targets), optimizer state, target-updater counter and fractional-update debt hold that
run's own values, so each run collects, evaluates and checkpoints as usual.

Random draws inside a loss (SAC's sampled next actions and reparameterized actions,
TD3's target smoothing noise) are each run's own by default (``noise="independent"``,
``vmap(randomness="different")``), as runs trained apart draw theirs. With
``noise="shared"`` they are drawn once per step from torch's global generator and shared
by every run: each run's draw on a step is then the one its own updater would make on
that step from the same global generator state, so
``tests/algorithms/test_stacked_off_policy.py`` checks every family to 1e-6 against
separate updaters whose global generator is seeded as the stacked update's was.

Not covered: recurrent Q-networks (slice replay), gradient sync and compile.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from marl.algorithms.updates.off_policy import OffPolicyUpdater
from marl.algorithms.updates.run_scalars import RunScalars
from marl.algorithms.updates.stacked import check_run_dim, per_run_limit, vmap_randomness
from marl.algorithms.updates.stacked_adam import StackedAdam
from marl.data import PrioritizedSampler, SliceSampler
from marl.objectives import HardUpdate, SoftUpdate

__all__ = ["StackedOffPolicy", "StackedTargets"]

Stacked = dict[str, torch.Tensor]


def _run_shape(x: torch.Tensor, ndim: int) -> torch.Tensor:
    """A ``[R]`` tensor shaped to broadcast over ``[R, ...]`` tensors of ``ndim`` dims."""
    return x.reshape(-1, *([1] * (ndim - 1)))


class StackedTargets:
    """The runs' target-network updates on stacked parameters, each run's on its slice.

    Args:
        updaters: each run's :class:`~marl.objectives.SoftUpdate` or
            :class:`~marl.objectives.HardUpdate` (all of one kind); their ``tau`` or
            ``period`` may differ per run.
        pairs: ``(online name, target name)`` of every stacked tensor the updates copy.
        tensors: the stacked parameters and buffers, by name.

    Raises:
        TypeError: for updaters of different or unknown kinds.

    Examples:
        >>> online, target = torch.zeros(2, 3), torch.ones(2, 3)
        >>> upd = [SoftUpdate([(nn.Linear(1, 1), nn.Linear(1, 1))], tau=t) for t in (0.5, 1.0)]
        >>> StackedTargets(upd, [("w", "t")], {"w": online, "t": target}).step()
        >>> target[:, 0].tolist()
        [0.5, 0.0]
    """

    def __init__(
        self,
        updaters: Sequence[SoftUpdate | HardUpdate],
        pairs: Sequence[tuple[str, str]],
        tensors: Stacked,
    ) -> None:
        kinds = {type(u) for u in updaters}
        if len(kinds) != 1 or not kinds <= {SoftUpdate, HardUpdate}:
            raise TypeError(
                "the runs' target updaters must all be SoftUpdate or all HardUpdate, got "
                f"{sorted(k.__name__ for k in kinds)}"
            )
        self.updaters = list(updaters)
        self.soft = isinstance(updaters[0], SoftUpdate)
        self.pairs = [(tensors[a], tensors[b]) for a, b in pairs]
        if self.soft:
            self.tau = torch.tensor([u.tau for u in updaters], dtype=torch.float64)

    @torch.no_grad()
    def step(self) -> None:
        """One target update of every run (a hard update copies only the runs whose
        counter reaches their period)."""
        if self.soft:
            same = bool((self.tau == self.tau[0]).all())
            for src, dst in self.pairs:
                if not dst.is_floating_point():
                    dst.copy_(src)
                elif same:  # torch's scalar lerp, bit for bit as SoftUpdate steps alone
                    dst.lerp_(src, float(self.tau[0]))
                else:
                    dst.lerp_(src, _run_shape(self.tau.to(dst), dst.ndim))
            return
        due = []
        for u in self.updaters:
            u.counter += 1  # each run's own HardUpdate keeps its phase (its state_dict)
            due.append(u.counter % u.period == 0)
        if not any(due):
            return
        runs = torch.tensor(due).nonzero().squeeze(-1)
        for src, dst in self.pairs:
            dst[runs.to(dst.device)] = src[runs.to(src.device)]


class _LossCall(nn.Module):
    """``forward`` runs the loss and returns its outputs and the TD errors it wrote:
    :func:`functional_call` runs forwards only, and a write into a ``vmap``'s input does
    not reach the caller."""

    def __init__(self, loss: nn.Module, priority_key: Any) -> None:
        super().__init__()
        self.loss = loss
        self.priority_key = priority_key

    def forward(self, td: TensorDictBase) -> dict[str, Any]:
        out = self.loss(td)
        error = td.get(self.priority_key, None)
        return {"out": out} if error is None else {"out": out, "td_error": error}


def _extra_states(loss: nn.Module) -> dict[str, Any]:
    """The extra state (``get_extra_state``, e.g. TD3's delayed-actor counter) of every
    submodule that keeps one."""
    return {
        name: m.get_extra_state()
        for name, m in loss.named_modules()
        if type(m).get_extra_state is not nn.Module.get_extra_state
    }


def _set_extra_states(loss: nn.Module, states: dict[str, Any]) -> None:
    modules = dict(loss.named_modules())
    for name, state in states.items():
        modules[name].set_extra_state(copy.deepcopy(state))


class StackedOffPolicy:
    """The off-policy updates of ``R`` runs of one group, as one vmapped update.

    Args:
        updaters: one :class:`~marl.algorithms.updates.OffPolicyUpdater` per run, of the
            same algorithm and group (the same networks, loss and schedule); their
            parameters, optimizer states, buffers and target-updater counters are the
            runs' starting point. Their optimizers may differ in the learning rates.
        generators: one ``torch.Generator`` per run, given to that run's buffer's sampler
            (``None``: each buffer keeps its own; one that draws from the global
            generator gets a new generator seeded from it, since samplers sharing the
            global generator would take each other's draws).
        noise: ``"independent"`` (each run its own random draws inside the loss) or
            ``"shared"`` (one draw for all runs of a step); see
            :func:`~marl.algorithms.updates.stacked.vmap_randomness`.

    Raises:
        ValueError: for no updater, updaters whose schedules differ (``utd_ratio``,
            ``learning_starts``, batch size, sampler kind), optimizers that differ in
            anything but the rates, losses that differ in an attribute that cannot be per
            run (naming it), a recurrent (slice-replay) updater, gradient sync, or a
            wrong number of generators.
        TypeError: when the updaters' losses or target updaters differ in kind.

    Examples:
        >>> import torch
        >>> from marl.algorithms import Algorithm
        >>> from marl.collectors import Collector
        >>> from marl.testing import SingleAgentFakeEnv
        >>> env = SingleAgentFakeEnv(num_envs=4, seed=0)
        >>> config = {"batch_size": 16, "learning_starts": 0}
        >>> runs = [Algorithm("sac", config).build(env, seed=r) for r in range(3)]
        >>> stack = StackedOffPolicy([a.learners["root"].updater for a in runs])
        >>> batches = torch.stack([Collector(env, a.policy, frames_per_batch=16).rollout()
        ...                        for a in runs])
        >>> logs = stack.update(batches)
        >>> len(logs), "loss_actor" in logs[0]
        (3, True)
    """

    def __init__(
        self,
        updaters: Sequence[OffPolicyUpdater],
        generators: Sequence[torch.Generator] | None = None,
        *,
        noise: str = "independent",
    ) -> None:
        if not updaters:
            raise ValueError("StackedOffPolicy needs at least one updater")
        self.randomness = vmap_randomness(noise)
        self._check(updaters)
        first = updaters[0]
        self.runs = len(updaters)
        self.updaters = list(updaters)
        self.utd_ratio = first.utd_ratio
        # each run's own replay buffer (its updater's), the one its batches go into
        self.replay = [u.buffer for u in updaters]
        self._losses = [u.loss for u in updaters]
        self._keys = list(first.loss.in_keys)
        # before stacking, which would refuse a parameter frozen in some runs less clearly
        self.scalars = RunScalars(self._losses)
        self.params, self.buffers = stack_module_state(self._losses)
        self.priority_key = first.loss.tensor_keys.get("priority", "td_error")
        template = copy.deepcopy(first.loss).to("meta")
        self._call = _LossCall(template, self.priority_key)
        self._names = [{id(p): n for n, p in loss.named_parameters()} for loss in self._losses]
        self.optimizer = StackedAdam.from_runs(
            [u.optimizer for u in updaters], self._names, self.params
        )
        limit = per_run_limit([u.gradient_step.max_grad_norm for u in updaters])
        # [R] (a run that does not clip: inf), or None when no run clips
        self.max_grad_norm = (
            None if limit is None else torch.as_tensor(limit, dtype=torch.float64).expand(self.runs)
        )
        self.targets = self._stacked_targets(updaters)
        self._set_generators(generators)

    def _check(self, updaters: Sequence[OffPolicyUpdater]) -> None:
        first = updaters[0]

        def schedule(u: OffPolicyUpdater) -> tuple:
            return (
                u.utd_ratio,
                u.state_dict()["debt"],
                u.buffer.batch_size,
                type(u.buffer.sampler),
                type(u.target_updater),
            )

        for r, u in enumerate(updaters):
            if not isinstance(u, OffPolicyUpdater):
                raise ValueError(f"expected OffPolicyUpdater objects, got {type(u).__name__}")
            if isinstance(u.buffer.sampler, SliceSampler):
                raise ValueError(
                    "StackedOffPolicy trains on single transitions; run "
                    f"{r} replays slices (a recurrent Q-network)"
                )
            if u.gradient_step.sync is not None:
                raise ValueError("StackedOffPolicy runs without gradient sync")
            if type(u.loss) is not type(first.loss):
                raise TypeError(
                    f"the runs' losses differ: {type(u.loss).__name__} and "
                    f"{type(first.loss).__name__}"
                )
            if schedule(u) != schedule(first):
                raise ValueError(
                    "the runs' updaters differ in utd_ratio, pending updates, batch size, "
                    f"sampler or target updater: run {r} has {schedule(u)}, run 0 has "
                    f"{schedule(first)}"
                )
        starts = {u.learning_starts for u in updaters}
        if len(starts) > 1:
            raise ValueError(f"the runs' learning_starts differ: {sorted(starts)}")

    def _stacked_targets(self, updaters: Sequence[OffPolicyUpdater]) -> StackedTargets | None:
        if updaters[0].target_updater is None:
            return None
        loss = self._losses[0]
        module_names = {id(m): n for n, m in loss.named_modules()}
        pairs = []
        for online, target in loss.target_pairs():
            a, b = module_names[id(online)], module_names[id(target)]
            for kind in ("named_parameters", "named_buffers"):
                src = [n for n, _ in getattr(online, kind)()]
                dst = [n for n, _ in getattr(target, kind)()]
                pairs.extend((f"{a}.{s}", f"{b}.{d}") for s, d in zip(src, dst))
        tensors = {**self.params, **self.buffers}
        return StackedTargets([u.target_updater for u in updaters], pairs, tensors)

    def _set_generators(self, generators: Sequence[torch.Generator] | None) -> None:
        if generators is not None and len(generators) != self.runs:
            raise ValueError(f"expected {self.runs} generators, got {len(generators)}")
        for r, u in enumerate(self.updaters):
            sampler = u.buffer.sampler
            if generators is not None:
                sampler.generator = generators[r]
            elif sampler.generator is None:
                seed = int(torch.randint(2**62, ()))
                sampler.generator = torch.Generator().manual_seed(seed)

    @property
    def prioritized(self) -> bool:
        """Whether the runs replay with priorities."""
        return isinstance(self.updaters[0].buffer.sampler, PrioritizedSampler)

    def process(self, batches: TensorDictBase) -> TensorDictBase:
        """Each run's updater's ``process`` on its batch (turn-based relinking).

        Args:
            batches: ``[R, *B, T]``, run ``r``'s batch at index ``r``.

        Returns:
            The processed ``[R, *B, T]`` batches.
        """
        check_run_dim(batches, self.runs)
        return torch.stack([u.process(b) for u, b in zip(self.updaters, batches.unbind(0))])

    def update(self, batches: TensorDictBase) -> list[dict[str, float]]:
        """Store each run's batch in its buffer, then run the due steps, every run at once.

        Args:
            batches: ``[R, *B, T]``, run ``r``'s batch at index ``r``.

        Returns:
            One log per run: the means of its loss outputs over the steps (``{}`` while
            the buffers hold too few transitions).

        Raises:
            ValueError: for batches without a leading run dim of ``R``, or runs whose
                buffers hold different numbers of transitions.
        """
        check_run_dim(batches, self.runs)
        for buffer, batch in zip(self.replay, batches.unbind(0)):
            buffer.extend(batch.select(*self._keys, strict=False).reshape(-1))
        sizes = {len(buffer) for buffer in self.replay}
        if len(sizes) != 1:
            raise ValueError(f"the runs' buffers hold different numbers of transitions: {sizes}")
        first = self.updaters[0]
        start = max(first.learning_starts, first.buffer.batch_size or 1)
        if sizes.pop() < start:
            return [{} for _ in range(self.runs)]
        # the runs' debts are equal (checked when built, and all take the same steps)
        debt = first.state_dict()["debt"] + self.utd_ratio * batches[0].numel()
        steps = int(debt)
        for u in self.updaters:
            u.load_state_dict({"debt": debt - steps})
        self._sync_extra_state()
        sums: dict[str, torch.Tensor] = {}
        for _ in range(steps):
            out = self._step()
            for key, value in out.items():
                if value.shape == (self.runs,):
                    sums[key] = sums.get(key, 0) + value.detach().float()
        self.copy_to_runs()
        means = {k: (v / max(steps, 1)).tolist() for k, v in sums.items()}
        return [{k: v[r] for k, v in means.items()} for r in range(self.runs)]

    def _step(self) -> TensorDictBase:
        """One sample of each run's buffer, one gradient step and target update of all."""
        samples = [buffer.sample() for buffer in self.replay]
        minibatch = torch.stack(samples)
        result = vmap(self._forward, randomness=self.randomness)(
            self.params, self.buffers, self.scalars.values, minibatch
        )
        out = result["out"]
        total = None
        for key, value in out.items():
            if key.startswith("loss_") and value.requires_grad:
                total = value.sum() if total is None else total + value.sum()
        if total is not None:
            # the runs are independent, so the gradient of the sum over runs is each
            # run's own gradient on its slice; a parameter no term reaches gets none
            total.backward()
            self._clip()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        if self.targets is not None:
            self.targets.step()
        if self.prioritized:
            errors = result["td_error"].detach()
            for buffer, sample, error in zip(self.replay, samples, errors.unbind(0)):
                sample.set(self.priority_key, error)
                buffer.update_tensordict_priority(sample)
        return out.detach()

    def _forward(
        self, params: Stacked, buffers: Stacked, scalars: Stacked, td: TensorDictBase
    ) -> dict[str, Any]:
        """Run ``r``'s loss: its slice of the parameters, buffers and per-run settings."""
        names = {f"loss.{k}": v for k, v in params.items()}
        names.update({f"loss.{k}": v for k, v in buffers.items()})
        with RunScalars.bound(self._call.loss, scalars):
            return functional_call(self._call, names, (td,))

    @torch.no_grad()
    def _clip(self) -> None:
        """Each run's gradients clipped per param group by that run's norm and limit."""
        if self.max_grad_norm is None:
            return
        for group in self.optimizer.param_groups:
            grads = [p.grad for p in group["params"] if p.grad is not None]
            if not grads:
                continue
            # [R]: each run's 2-norm over the group, as clip_grad_norm_ takes it
            norms = torch.stack([g.reshape(self.runs, -1).norm(dim=1) for g in grads]).norm(dim=0)
            limit = self.max_grad_norm.to(norms)
            scale = (limit / (norms + 1e-6)).clamp(max=1.0)
            for g in grads:
                g.mul_(_run_shape(scale, g.ndim))

    def _sync_extra_state(self) -> None:
        """The template loss takes the runs' extra state (TD3's call counter): the runs
        step in lockstep, so it must be the same for all."""
        states = [_extra_states(loss) for loss in self._losses]
        if any(s != states[0] for s in states[1:]):
            raise ValueError(f"the runs' losses are at different phases: {states}")
        _set_extra_states(self._call.loss, states[0])

    @torch.no_grad()
    def copy_to_runs(self) -> None:
        """Write each run's slice into its own loss (parameters, targets and buffers),
        optimizer state and loss phase (TD3's counter). :meth:`update` ends with it."""
        extra = _extra_states(self._call.loss)
        for r, loss in enumerate(self._losses):
            for name, p in loss.named_parameters():
                p.copy_(self.params[name][r])
            for name, b in loss.named_buffers():
                b.copy_(self.buffers[name][r])
            _set_extra_states(loss, extra)
        self.optimizer.write_to_runs([u.optimizer for u in self.updaters], self._names)

    @torch.no_grad()
    def copy_from_runs(self) -> None:
        """Read every run's parameters, buffers and optimizer state back into the stack,
        after a run was changed on its own (restored from a checkpoint, or a population
        member's slice copied into another's)."""
        for r, loss in enumerate(self._losses):
            for name, p in loss.named_parameters():
                self.params[name][r] = p
            for name, b in loss.named_buffers():
                self.buffers[name][r] = b
        self.optimizer.read_runs([u.optimizer for u in self.updaters], self._names)
