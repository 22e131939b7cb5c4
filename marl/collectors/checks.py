"""`check_collector`: run a collector and check the :class:`BatchCollector` contract.

Every built-in collector passes it (``tests/collectors/test_contracts.py``),
as every env passes :func:`marl.envs.check_env_specs`; run it on a collector
of your own before handing it to a ``Trainer``.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import InteractionType, set_interaction_type
from torch import nn

from marl.collectors.contracts import BatchCollector
from marl.collectors.utils import MASK_KEY, TRAJ_IDS_KEY

__all__ = ["CHECKS", "CollectorContractError", "check_collector"]

CHECKS = (
    "protocol",
    "batch_size",
    "frames",
    "layout",
    "traj_ids",
    "state_dict",
    "weights",
    "total_frames",
    "shutdown",
)
"""The names of the checks of :func:`check_collector`, in the order they run."""

_FLAGS = ("done", "terminated", "truncated")


class CollectorContractError(AssertionError):
    """Raised by :func:`check_collector`: a collector broke its contract.

    Attributes:
        check: the name of the failed check, one of :data:`CHECKS`.
    """

    def __init__(self, check: str, message: str) -> None:
        super().__init__(message)
        self.check = check


def check_collector(
    collector: BatchCollector | Callable[[], BatchCollector],
    *,
    check_weights: bool = True,
    max_weight_lag: int | None = None,
    atol: float = 1e-5,
) -> list[str]:
    """Run a collector and check that it keeps the :class:`BatchCollector` contract.

    Like PettingZoo's ``api_test``, it exercises the collector as the trainer
    does, and checks, in this order:

    - ``protocol``: it has every member of :class:`BatchCollector`;
      ``frames_per_batch`` is a positive int, ``total_frames`` is ``-1`` or a
      positive multiple of it, ``frames`` an int ``>= 0``.
    - ``batch_size``: every batch is a TensorDict of ``frames_per_batch``
      frames (its numel, or the count of its ``("collector", "mask")`` for
      split trajectories) with a time dim.
    - ``frames``: ``frames`` grows by ``frames_per_batch`` with every batch.
    - ``layout``: every batch has ``("next", "done")`` of shape ``[*batch, 1]``;
      every ``done``/``terminated``/``truncated`` flag is bool; an env-level
      ``("next", "terminated")`` or ``("next", "truncated")`` implies
      ``("next", "done")``.
    - ``traj_ids``: ``("collector", "traj_ids")`` is an int64 ``[*batch]``
      tensor of ids ``>= 0``; along time it changes exactly after the steps
      that are done, and no two sub-envs (no two padded rows) share an id.
    - ``state_dict``: after ``load_state_dict`` of a state saved a batch
      earlier, ``frames`` is back at the saved count, and iteration goes on
      from there; with a factory, a second collector it builds loads the
      state too. That second collector runs beside the first, so the resources
      must allow two at once (a Ray cluster needs CPUs for both sets of actors,
      or actors that ask for less: ``remote_config={"num_cpus": 0.5}``).
    - ``weights``: when the collector has a ``policy`` that is an
      ``nn.Module`` with parameters, its floating parameters are shifted by
      0.5 and sent with ``update_policy_weights_(weights)``; the next batch
      (or one of the next ``max_weight_lag + 1``) must hold the actions the
      shifted policy computes from the batch's own inputs, and none may hold
      actions that neither weights give. The original weights are sent back
      afterwards. Only deterministic ``"action"`` leaves that the shift
      changes are compared, and the check is skipped (it is then missing from
      the returned list) when there are none, or when the policy does not
      reproduce the actions of a batch collected before the update
      (stochastic or recurrent policies, random ``init_random_frames`` steps).
    - ``total_frames``: with ``total_frames >= 0``, iteration stops exactly
      when ``frames`` reaches it, and a new iterator yields nothing more.
    - ``shutdown``: ``shutdown()`` can be called twice.

    The collector is used up: it is iterated to ``total_frames`` (a few
    batches are enough with ``-1``) and shut down at the end, whether the
    checks pass or not. It must yield its batches (no ``replay_buffer``) in
    the default layout (a ``postproc`` must keep it).

    Args:
        collector: the collector, or a callable with no argument that builds
            one (then called once more for the ``state_dict`` check).
        check_weights: run the ``weights`` check.
        max_weight_lag: how many batches after an update may still come from
            the old weights. Default: the collector's ``num_workers`` (or
            ``num_collectors``) for collectors with workers, which may be
            collecting ahead, else 0; pass 0 to demand on-policy batches.
        atol: tolerance on the compared actions (the collector's policy may
            run on another device).

    Returns:
        The names of the checks that ran and passed, in :data:`CHECKS` order.

    Raises:
        CollectorContractError: naming the failed check, with what was
            expected and what was found.
        ValueError: when the collector cannot be checked: it yields ``None``
            (a replay buffer), or its ``total_frames`` leaves too few batches
            (about 4 are needed, more with ``max_weight_lag``).

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from marl.collectors import Collector, check_collector
        >>> from marl.testing import SingleAgentFakeEnv
        >>> policy = TensorDictModule(torch.nn.Linear(4, 2), ["observation"], ["action"])
        >>> passed = check_collector(lambda: Collector(
        ...     SingleAgentFakeEnv(num_envs=2), policy, frames_per_batch=16, total_frames=128))
        >>> passed == list(CHECKS)
        True

        With ``policy=None`` (random actions) there are no weights to check:

        >>> "weights" in check_collector(Collector(
        ...     SingleAgentFakeEnv(num_envs=2), None, frames_per_batch=16, total_frames=128))
        False
    """
    factory = None
    if callable(collector) and not isinstance(collector, BatchCollector):
        factory = collector
        collector = factory()
    checker = _Checker(collector, factory, check_weights, max_weight_lag, atol)
    try:
        checker.run()
    finally:
        if "shutdown" not in checker.passed:
            with contextlib.suppress(Exception):
                collector.shutdown()
    return [name for name in CHECKS if name in checker.passed]


class _Checker:
    def __init__(
        self,
        collector: Any,
        factory: Callable[[], Any] | None,
        check_weights: bool,
        max_weight_lag: int | None,
        atol: float,
    ) -> None:
        self.c = collector
        self.factory = factory
        self.check_weights = check_weights
        self.atol = atol
        if max_weight_lag is None:
            workers = getattr(collector, "num_workers", getattr(collector, "num_collectors", 0))
            max_weight_lag = workers if isinstance(workers, int) else 0
        self.max_weight_lag = max_weight_lag
        self.who = type(collector).__name__
        self.passed: set[str] = set()
        self.batches = 0
        self._iter: Iterator[Any] | None = None

    # ------------------------------------------------------------ reporting
    def fail(self, check: str, what: str, expected: Any, found: Any) -> None:
        raise CollectorContractError(
            check,
            f"check_collector: {self.who} fails the {check!r} check: {what}; "
            f"expected {expected}, found {found}",
        )

    # ------------------------------------------------------------ driving
    def run(self) -> None:
        self.check_protocol()
        self._iter = iter(self.c)
        batch = self.next_batch()
        self.passed.update(("batch_size", "frames", "layout", "traj_ids"))
        self.check_state(batch)
        if self.check_weights:
            self.check_policy_weights()
        self.check_total_frames()
        self.check_shutdown()

    def next_batch(self) -> TensorDictBase:
        """The next batch, after the per-batch checks (size, frames, layout, ids)."""
        before = self.c.frames
        total = self.c.total_frames
        try:
            batch = next(self._iter)
        except StopIteration:
            if 0 <= total <= before:
                raise ValueError(
                    f"check_collector: {self.who} stopped at total_frames={total} after "
                    f"{self.batches} batches, before the checks were done; give it a larger "
                    "total_frames (at least 4 batches, more with max_weight_lag) or -1"
                ) from None
            self.fail(
                "total_frames",
                "iteration stopped before total_frames was reached",
                f"batches until frames == total_frames ({total})",
                f"StopIteration at frames={before}",
            )
        self.batches += 1
        if batch is None:
            raise ValueError(
                f"check_collector: {self.who} yielded None (it extends a replay buffer): "
                "check a collector built without replay_buffer="
            )
        self.check_batch_size(batch)
        got = self.c.frames - before
        if got != self.c.frames_per_batch:
            self.fail(
                "frames",
                f"frames did not grow by frames_per_batch with batch {self.batches}",
                f"frames {before} -> {before + self.c.frames_per_batch}",
                f"frames {before} -> {self.c.frames}",
            )
        self.check_layout(batch)
        self.check_traj_ids(batch)
        return batch

    # ------------------------------------------------------------ checks
    def check_protocol(self) -> None:
        c = self.c
        missing = [
            name
            for name in (
                "frames_per_batch",
                "total_frames",
                "frames",
                "__iter__",
                "update_policy_weights_",
                "state_dict",
                "load_state_dict",
                "shutdown",
            )
            if not hasattr(c, name)
        ]
        if missing or not isinstance(c, BatchCollector):
            self.fail("protocol", "members of BatchCollector are missing", "none", missing)
        fpb, total, frames = c.frames_per_batch, c.total_frames, c.frames
        if not _is_int(fpb) or fpb < 1:
            self.fail("protocol", "bad frames_per_batch", "a positive int", repr(fpb))
        if not _is_int(total) or not (total == -1 or (total > 0 and total % fpb == 0)):
            self.fail(
                "protocol",
                "bad total_frames",
                f"-1 or a positive multiple of frames_per_batch ({fpb})",
                repr(total),
            )
        if not _is_int(frames) or frames < 0:
            self.fail("protocol", "bad frames", "an int >= 0", repr(frames))
        self.passed.add("protocol")

    def check_batch_size(self, batch: Any) -> None:
        if not isinstance(batch, TensorDictBase):
            self.fail("batch_size", "a batch is not a TensorDict", "a TensorDict", type(batch))
        if batch.batch_dims < 1:
            self.fail(
                "batch_size",
                "a batch has no time dim",
                "batch dims [*env_batch, T]",
                tuple(batch.batch_size),
            )
        mask = batch.get(MASK_KEY, None)
        frames = int(mask.sum()) if mask is not None else batch.numel()
        if frames != self.c.frames_per_batch:
            how = "masked steps" if mask is not None else "numel"
            self.fail(
                "batch_size",
                f"batch {self.batches} does not hold frames_per_batch frames ({how})",
                self.c.frames_per_batch,
                f"{frames} (batch size {tuple(batch.batch_size)})",
            )

    def check_layout(self, batch: TensorDictBase) -> None:
        nxt = batch.get("next", None)
        if not isinstance(nxt, TensorDictBase):
            self.fail(
                "layout", 'a batch has no "next" sub-TensorDict', '"next"', sorted(batch.keys())
            )
        done = nxt.get("done", None)
        if done is None:
            self.fail("layout", 'a batch has no ("next", "done")', "the env-level flag", "none")
        shape = (*batch.batch_size, 1)
        if tuple(done.shape) != shape:
            self.fail("layout", '("next", "done") has the wrong shape', shape, tuple(done.shape))
        for key in batch.keys(True, True):
            leaf = key if isinstance(key, str) else key[-1]
            if leaf in _FLAGS:
                dtype = batch.get(key).dtype
                if dtype != torch.bool:
                    self.fail("layout", f"flag {key!r} is not boolean", torch.bool, dtype)
        for name in ("terminated", "truncated"):
            flag = nxt.get(name, None)
            if flag is not None and bool((flag & ~done).any()):
                self.fail(
                    "layout",
                    f'("next", "{name}") is set on steps that are not done',
                    f'{name} implies ("next", "done")',
                    f"{int((flag & ~done).sum())} such steps",
                )

    def check_traj_ids(self, batch: TensorDictBase) -> None:
        ids = batch.get(TRAJ_IDS_KEY, None)
        if ids is None:
            self.fail("traj_ids", f"a batch has no {TRAJ_IDS_KEY}", "trajectory ids", "none")
        if ids.dtype != torch.long or ids.shape != batch.batch_size:
            self.fail(
                "traj_ids",
                f"{TRAJ_IDS_KEY} has the wrong dtype or shape",
                f"torch.int64 {tuple(batch.batch_size)}",
                f"{ids.dtype} {tuple(ids.shape)}",
            )
        if bool((ids < 0).any()):
            self.fail("traj_ids", "negative trajectory ids", "ids >= 0", int(ids.min()))
        steps = batch.batch_size[-1]
        rows = ids.reshape(-1, steps)
        mask = batch.get(MASK_KEY, None)
        if mask is not None:  # split trajectories: one id per padded row
            mask = mask.reshape(-1, steps)
            first = rows[:, :1].expand_as(rows)
            if bool(((rows != first) & mask).any()):
                self.fail(
                    "traj_ids",
                    "a padded trajectory holds several ids",
                    "one id per row",
                    "rows with several ids",
                )
            if rows[:, 0].unique().numel() != rows.shape[0]:
                self.fail("traj_ids", "two padded rows share an id", "unique ids", "duplicates")
            return
        done = batch.get(("next", "done")).reshape(-1, steps)
        changes = rows[:, 1:] != rows[:, :-1]
        if not torch.equal(changes, done[:, :-1]):
            bad = (changes != done[:, :-1]).nonzero()[0].tolist()
            self.fail(
                "traj_ids",
                f"in batch {self.batches}, the id of sub-env {bad[0]} between steps {bad[1]} "
                f"and {bad[1] + 1} does not follow its done flag",
                f"a new id after a done step and only then (done={bool(done[bad[0], bad[1]])})",
                f"ids {rows[bad[0], bad[1]].item()} -> {rows[bad[0], bad[1] + 1].item()}",
            )
        rows_of = torch.arange(rows.shape[0], device=rows.device).unsqueeze(1).expand_as(rows)
        pairs = torch.stack([rows.reshape(-1), rows_of.reshape(-1)], 1).unique(dim=0)
        if pairs.shape[0] != rows.unique().numel():
            self.fail(
                "traj_ids",
                "two sub-envs share a trajectory id",
                "ids unique across sub-envs",
                f"{pairs.shape[0] - rows.unique().numel()} shared ids",
            )

    def check_state(self, batch: TensorDictBase) -> None:
        saved_frames = self.c.frames
        state = copy.deepcopy(self.c.state_dict())
        if not isinstance(state, dict):
            self.fail("state_dict", "state_dict() is not a dict", "a dict", type(state))
        self.next_batch()
        self.c.load_state_dict(copy.deepcopy(state))
        if self.c.frames != saved_frames:
            self.fail(
                "state_dict",
                "load_state_dict did not restore the frame counter saved a batch earlier",
                f"frames == {saved_frames}",
                f"frames == {self.c.frames}",
            )
        self.next_batch()  # iteration goes on from the restored counter
        if self.factory is not None:
            other = self.factory()
            try:
                other.load_state_dict(copy.deepcopy(state))
                if other.frames != saved_frames:
                    self.fail(
                        "state_dict",
                        "a collector from the factory did not load the saved frame counter",
                        f"frames == {saved_frames}",
                        f"frames == {other.frames}",
                    )
            finally:
                other.shutdown()
        self.passed.add("state_dict")

    def check_policy_weights(self) -> None:
        policy = getattr(self.c, "policy", None)
        if not isinstance(policy, nn.Module) or not any(True for _ in policy.parameters()):
            return
        old = TensorDict.from_module(policy).data.detach().cpu().clone()
        new = old.apply(lambda p: p + 0.5 if p.is_floating_point() else p.clone())
        old_probe = _probe(policy, old)
        new_probe = _probe(policy, new)
        batch = _real_steps(self.next_batch())
        keys = self._action_keys(batch, old_probe, new_probe)
        if not keys:
            return
        self.c.update_policy_weights_(new)
        try:
            self._expect_new_weights(keys, old_probe, new_probe)
        except BaseException:
            with contextlib.suppress(Exception):
                self.c.update_policy_weights_(old)
            raise
        self.c.update_policy_weights_(old)  # the caller's policy may be the one updated
        self.passed.add("weights")

    def _expect_new_weights(
        self, keys: list[Any], old_probe: nn.Module, new_probe: nn.Module
    ) -> None:
        for lag in range(self.max_weight_lag + 1):
            batch = _real_steps(self.next_batch())
            got = batch.select(*keys)
            if self._matches(got, _run(new_probe, batch), keys):
                return
            if not self._matches(got, _run(old_probe, batch), keys):
                self.fail(
                    "weights",
                    f"the actions {keys} of batch {lag + 1} after update_policy_weights_ "
                    "match neither the new nor the old weights",
                    "the actions of the updated policy",
                    "other actions",
                )
        self.fail(
            "weights",
            "update_policy_weights_(weights) did not reach the policy",
            f"the actions of the new weights within {self.max_weight_lag + 1} batch(es)",
            "the actions of the old weights in every one",
        )

    def _action_keys(
        self, batch: TensorDictBase, old_probe: nn.Module, new_probe: nn.Module
    ) -> list[Any]:
        """The deterministic action leaves the shift changes, if the probe reproduces the batch."""
        try:
            first, second, shifted = (
                _run(old_probe, batch),
                _run(old_probe, batch),
                _run(new_probe, batch),
            )
        except Exception:  # the policy does not run on a whole batch (e.g. recurrent)
            return []
        present = set(batch.keys(True, True))
        keys = []
        for key in first.keys(True, True):
            leaf = key if isinstance(key, str) else key[-1]
            if leaf != "action" or key not in present:
                continue
            if not torch.equal(first.get(key), second.get(key)):
                continue  # sampled: cannot be compared
            if not self._close(batch.get(key), first.get(key)):
                return []  # the probe does not reproduce what the collector stored
            if not self._close(shifted.get(key), first.get(key)):
                keys.append(key)
        return keys

    def _close(self, a: torch.Tensor, b: torch.Tensor) -> bool:
        a, b = a.cpu(), b.cpu()
        if a.shape != b.shape:
            return False
        if a.is_floating_point() or b.is_floating_point():
            return torch.allclose(a.double(), b.double(), atol=self.atol, rtol=0.0)
        return torch.equal(a, b)

    def _matches(self, got: TensorDictBase, want: TensorDictBase, keys: list[Any]) -> bool:
        return all(self._close(got.get(k), want.get(k)) for k in keys)

    def check_total_frames(self) -> None:
        total = self.c.total_frames
        if total < 0:
            return
        left = (total - self.c.frames) // self.c.frames_per_batch
        for _ in range(max(left, 0)):
            self.next_batch()
        extra = next(self._iter, None)
        if extra is not None or self.c.frames != total:
            self.fail(
                "total_frames",
                "iteration did not stop when frames reached total_frames",
                f"StopIteration at frames == {total}",
                f"another batch (frames == {self.c.frames})"
                if extra is not None
                else f"StopIteration at frames == {self.c.frames}",
            )
        again = next(iter(self.c), None)
        if again is not None:
            self.fail(
                "total_frames",
                "a new iterator yielded a batch after total_frames",
                "an empty iterator",
                "a batch",
            )
        self.passed.add("total_frames")

    def check_shutdown(self) -> None:
        self.c.shutdown()
        try:
            self.c.shutdown()
        except Exception as err:
            self.fail(
                "shutdown",
                "a second shutdown() raised",
                "no-op",
                f"{type(err).__name__}: {err}",
            )
        self.passed.add("shutdown")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _real_steps(batch: TensorDictBase) -> TensorDictBase:
    """The batch, or its real (unpadded) steps when it holds split trajectories."""
    mask = batch.get(MASK_KEY, None)
    return batch if mask is None else batch[mask]


def _probe(policy: nn.Module, weights: TensorDictBase) -> nn.Module:
    """A CPU copy of ``policy`` with ``weights``."""
    probe = copy.deepcopy(policy).cpu()
    with torch.no_grad():
        TensorDict.from_module(probe).update_(weights)
    return probe


def _run(probe: nn.Module, batch: TensorDictBase) -> TensorDictBase:
    """The probe's outputs on the batch's inputs (its root keys), sampling if it samples."""
    inputs = batch.exclude("next", "collector").cpu().clone()
    with torch.no_grad(), set_interaction_type(InteractionType.RANDOM):
        out = probe(inputs)
    return inputs if out is None else out
