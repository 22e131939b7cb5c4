"""What the runs of one process share (``experiment.runs``): their env batch and their update.

:class:`~marl.experiment.runs.ExperimentRuns` trains ``R`` ordinary
:class:`~marl.experiment.Experiment` objects in lockstep, one iteration of each per round.
Each one joins a :class:`RunsHub` explicitly (``Experiment.use_runs``), and takes from it
two parts of its trainer, and nothing else:

- its **collector**, where the task's env steps a batch itself (VMAS, the native envs):
  one env of ``R x num_envs`` sub-envs, stepped once per round with
  :class:`~marl.algorithms.runs.RunsPolicy` (run ``r``'s policy on its sub-envs), and each
  run's :class:`RunSlice` yields that round's ``[num_envs, T]`` slice of it. Other envs
  (PettingZoo, Gymnasium: stepped one by one on the host) keep a collector per run.
- its **learning step** (the :class:`~marl.algorithms.Trainer`'s ``learn``), where every
  group of every run learns with a plain :class:`~marl.algorithms.updates.OnPolicyUpdater`
  (no sequences) or :class:`~marl.algorithms.updates.OffPolicyUpdater` (no slice replay),
  without gradient sync or compile: one :class:`~marl.algorithms.updates.StackedOnPolicy`
  or :class:`~marl.algorithms.updates.StackedOffPolicy` per group processes and updates
  all runs' batches of the round at once, when the first run learns, and each run gets its
  own processed batch and logs. Otherwise (HAPPO's joint update, recurrent replay...)
  each run updates on its own.

Lockstep is what makes this exact: the runs' batches of a round are all collected
before any run updates, and every run updates once per round.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from tensordict import TensorDictBase

from marl.algorithms import Algorithm
from marl.algorithms.runs import RunsPolicy, split_runs
from marl.algorithms.trainer import Learn
from marl.algorithms.updates import (
    OffPolicyUpdater,
    OnPolicyUpdater,
    StackedOffPolicy,
    StackedOnPolicy,
)
from marl.collectors import Collector
from marl.data import SliceSampler
from marl.envs.common import EnvBase
from marl.experiment.config import ExperimentConfig

__all__ = ["RunSlice", "RunsHub"]


class RunSlice:
    """Run ``index``'s collector: its slice of each round of the hub's shared env batch.

    Keeps the :class:`~marl.collectors.BatchCollector` contract: ``frames`` counts this
    run's frames, its state is that count (the shared env restarts from a reset on a
    resume, as a single run's env does), and its policy is the run's own module, so
    there are no weights to send.

    Examples:
        >>> from marl.testing import SingleAgentFakeEnv
        >>> hub = RunsHub(2, lambda n: SingleAgentFakeEnv(num_envs=n, seed=0))
        >>> policy = lambda td: td.set("action", td["observation"][..., :2].clamp(-1, 1))
        >>> from marl.experiment import ExperimentConfig
        >>> c = ExperimentConfig(frames_per_batch=8)
        >>> first, second = (hub.collector(r, policy, c, num_envs=2) for r in range(2))
        >>> a, b = next(iter(first)), next(iter(second))  # one round: one env step for both
        >>> a.batch_size, first.frames, tuple(hub.env.batch_size)
        (torch.Size([2, 4]), 8, (4,))
    """

    def __init__(self, hub: RunsHub, index: int, frames_per_batch: int) -> None:
        self.hub = hub
        self.index = index
        self.frames_per_batch = frames_per_batch
        self.total_frames = -1  # the Trainer stops at experiment.total_frames
        self._frames = 0

    @property
    def frames(self) -> int:
        """This run's frames so far."""
        return self._frames

    def __iter__(self) -> Iterator[TensorDictBase]:
        while True:
            batch = self.hub.batch(self.index)
            self._frames += self.frames_per_batch
            yield batch

    def update_policy_weights_(self) -> None:
        """Nothing to do: the shared env's policy holds this run's own modules."""

    def state_dict(self) -> dict[str, Any]:
        return {"frames": self._frames}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._frames = int(state["frames"])

    def shutdown(self) -> None:
        """Nothing of its own to release: :meth:`RunsHub.close` closes the shared env."""


class RunsHub:
    """The shared env batch and stacked updates of ``runs`` runs trained in lockstep.

    Args:
        runs: the number of runs ``R``.
        make_env: ``num_envs -> env`` of the task (seeded, as the first run's), for the
            shared batch of ``R x num_envs`` sub-envs; ``None``: the task's envs step one
            by one, and each run keeps its own collector.

    Raises:
        ValueError: for fewer than 2 runs.

    Examples:
        >>> from marl.testing import SingleAgentFakeEnv
        >>> hub = RunsHub(3, lambda n: SingleAgentFakeEnv(num_envs=n, seed=0))
        >>> hub.shares_collection
        True
    """

    def __init__(self, runs: int, make_env: Callable[[int], EnvBase] | None) -> None:
        if runs < 2:
            raise ValueError(f"RunsHub: expected 2 runs or more, got {runs}")
        self.runs = runs
        self.shares_collection = make_env is not None
        self._make_env = make_env
        self._policies: dict[int, Any] = {}
        self._slices: dict[int, RunSlice] = {}
        # ((frames_per_batch, init_random_frames, sampling_device), num_envs): every run's
        self._setup: tuple[tuple[int, int, str], int] | None = None
        self.env: EnvBase | None = None
        self._batches: Iterator[TensorDictBase] | None = None
        self._round: list[TensorDictBase] = []
        self._taken: set[int] = set(range(runs))  # nothing collected yet
        self._algorithms: dict[int, Algorithm] = {}
        self._seeds: dict[int, int] = {}
        self._stacks: dict[str, StackedOnPolicy | StackedOffPolicy] | None = None
        self._learned: list[tuple[TensorDictBase, dict[str, float]]] | None = None
        self._learners_left: set[int] = set()

    @property
    def stacked(self) -> bool:
        """Whether the runs update as one stacked update (known after the first update)."""
        return self._stacks is not None

    @property
    def stacks(self) -> dict[str, StackedOnPolicy | StackedOffPolicy]:
        """The stacked update of each group, by label (empty before the first update, or
        where the runs update on their own)."""
        return dict(self._stacks or {})

    # -------------------------------------------------------------- collection
    def collector(
        self, index: int, policy: Any, config: ExperimentConfig, num_envs: int
    ) -> RunSlice:
        """Run ``index``'s collector, reading its slice of the shared env batch.

        Args:
            index: the run.
            policy: the run's collection policy (acts on its sub-envs alone).
            config: the run's settings (every run's must agree on the batch).
            num_envs: the run's env count.
        """
        if not self.shares_collection:
            raise RuntimeError("this hub's runs step their envs one by one: no shared batch")
        setup = (
            (config.frames_per_batch, config.init_random_frames, config.sampling_device),
            num_envs,
        )
        if self._setup is not None and self._setup != setup:
            raise ValueError(
                f"the runs differ in ((frames_per_batch, init_random_frames, sampling_device), "
                f"num_envs): {setup} against {self._setup}"
            )
        self._setup = setup
        self._policies[index] = policy
        frames = math.ceil(config.frames_per_batch / num_envs) * num_envs
        self._slices[index] = RunSlice(self, index, frames)
        return self._slices[index]

    def _start(self) -> None:
        """Build the shared env and its collector, once every run has joined."""
        if len(self._policies) != self.runs or self._setup is None or self._make_env is None:
            raise RuntimeError(
                f"the runs' shared env starts once all {self.runs} runs are set up; "
                f"{len(self._policies)} are"
            )
        (frames, random_frames, device), num_envs = self._setup
        self.env = env = self._make_env(self.runs * num_envs)
        if tuple(env.batch_size) != (self.runs * num_envs,):
            raise ValueError(
                f"the runs' shared env must be one batch of {self.runs} x {num_envs} "
                f"sub-envs, got batch_size {tuple(env.batch_size)}"
            )
        policy = RunsPolicy([self._policies[r] for r in range(self.runs)])
        steps = math.ceil(frames / num_envs)
        collector = Collector(
            env,
            policy,
            frames_per_batch=self.runs * num_envs * steps,
            init_random_frames=self.runs * random_frames,
            policy_device=device,
            storing_device=device,
        )
        # the runs' frames so far (restored from their checkpoints): a resumed run's random
        # warm-up (init_random_frames) is not collected again
        collector.load_state_dict({"frames": sum(s.frames for s in self._slices.values())})
        self._batches = iter(collector)

    def batch(self, index: int) -> TensorDictBase:
        """Run ``index``'s slice of this round's batch; the first run to ask for a new
        round's collects it for all.

        Raises:
            RuntimeError: when a run asks for a second batch before every run took its
                first (the runs fell out of lockstep).
        """
        if index in self._taken:
            if len(self._taken) != self.runs:
                raise RuntimeError(
                    f"run {index} asked for its next batch before runs "
                    f"{sorted(set(range(self.runs)) - self._taken)} took theirs: the runs "
                    "of one process must train in lockstep"
                )
            if self._batches is None:
                self._start()
            self._round = list(split_runs(next(self._batches), self.runs).unbind(0))
            self._taken = set()
            self._learned = None
        self._taken.add(index)
        return self._round[index]

    # ------------------------------------------------------------------ update
    def learner(self, index: int, algorithm: Algorithm, seed: int) -> Learn | None:
        """Run ``index``'s learning step: the runs' stacked update when it applies, else
        ``None`` (the trainer's default: the run updates on its own).

        Stacking applies when every run shares the env batch and every group of every
        run learns with an updater :func:`stackable` accepts.
        """
        self._algorithms[index] = algorithm
        self._seeds[index] = seed
        if not (self.shares_collection and stackable(algorithm)):
            return None

        def learn(batch: TensorDictBase) -> tuple[TensorDictBase, dict[str, float]]:
            return self._learn(index, batch)

        return learn

    def _learn(self, index: int, batch: TensorDictBase) -> tuple[TensorDictBase, dict[str, float]]:
        if batch is not self._round[index]:
            raise RuntimeError(f"run {index} learns from a batch that is not its slice")
        if self._learned is None:  # the round's first learner updates every run
            self._learned = self._update_all()
            self._learners_left = set(range(self.runs))
        if index not in self._learners_left:
            raise RuntimeError(f"run {index} learned twice from one round")
        self._learners_left.discard(index)
        processed, logs = self._learned[index]
        algorithm = self._algorithms[index]
        for _, learner in algorithm.group_learners():  # each run's schedules, per run
            learner.advance_exploration(processed.numel())
        return processed, logs

    def _update_all(self) -> list[tuple[TensorDictBase, dict[str, float]]]:
        algorithms = [self._algorithms[r] for r in range(self.runs)]
        if self._stacks is None:
            # built at the first update, after every run restored its checkpoint: the stacks
            # start from the runs' parameters and optimizer states
            # (their minibatch orders seeded by run, group and frames: a resumed run does
            # not replay the orders of its first updates)
            self._stacks = {}
            for g, (label, learner) in enumerate(algorithms[0].group_learners()):
                updaters = [a.learners[label].updater for a in algorithms]
                generators = [
                    torch.Generator().manual_seed(
                        _generator_seed(self._seeds[r], g, self._slices[r].frames)
                    )
                    for r in range(self.runs)
                ]
                # on-policy: the generators order each run's minibatches; off-policy: they
                # draw each run's replay samples (its buffer's sampler)
                stack_type = (
                    StackedOffPolicy
                    if isinstance(learner.updater, OffPolicyUpdater)
                    else StackedOnPolicy
                )
                self._stacks[label] = stack_type(updaters, generators)
        device = algorithms[0].device
        data = torch.stack(self._round).to(device)
        for stack in self._stacks.values():  # in group order, as Algorithm.process_batch
            data = stack.process(data)
        logs: list[dict[str, float]] = [{} for _ in range(self.runs)]
        for label, stack in self._stacks.items():
            prefix = "" if algorithms[0].learners[label].info.name is None else f"{label}/"
            for r, run_logs in enumerate(stack.update(data)):
                logs[r].update({prefix + k: v for k, v in run_logs.items()})
        return list(zip(data.unbind(0), logs))

    def close(self) -> None:
        """Close the shared env."""
        if self.env is not None and not self.env.is_closed:
            self.env.close()


def _generator_seed(seed: int, group: int, frames: int) -> int:
    return (seed * 1_000_003 + group * 10_007 + frames) % 2**63


def stackable(algorithm: Algorithm) -> bool:
    """Whether every group of ``algorithm`` learns with a plain on-policy updater that
    :class:`~marl.algorithms.updates.StackedOnPolicy` can stack, or a plain off-policy one
    that :class:`~marl.algorithms.updates.StackedOffPolicy` can (single transitions: no
    recurrent slice replay), without gradient sync or compile.

    Examples:
        >>> from marl.testing import MultiAgentFakeEnv
        >>> stackable(Algorithm("mappo").build(MultiAgentFakeEnv(num_envs=2), seed=0))
        True
        >>> from marl.testing import SingleAgentFakeEnv
        >>> stackable(Algorithm("sac").build(SingleAgentFakeEnv(num_envs=2), seed=0))
        True
        >>> stackable(Algorithm("happo").build(MultiAgentFakeEnv(num_envs=2), seed=0))
        False
    """
    for _, learner in algorithm.group_learners():
        u = learner.updater
        if type(u) is OnPolicyUpdater:
            if u.sequence_length is not None:
                return False
        elif type(u) is OffPolicyUpdater:
            if isinstance(u.buffer.sampler, SliceSampler):
                return False
        else:
            return False
        if u.gradient_step.sync is not None or u.gradient_step.compiled:
            return False
    return True
