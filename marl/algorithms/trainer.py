"""The ``Trainer`` loop: collect -> process -> update -> sync weights -> log -> evaluate.

The evaluation loop is :mod:`marl.algorithms.evaluation`'s (its names are importable
from here too).

It is deliberately small: checkpoint files, loggers, progress bars and videos
belong to the experiment runner, which plugs in through :class:`TrainerCallback`
hooks and ``log_fn``, and saves :meth:`Trainer.state_dict`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from marl.algorithms._recurrent import check_init_tracker
from marl.algorithms.base import Algorithm
from marl.algorithms.evaluation import (
    EvalEpisodes,
    Evaluator,
    Logs,
    episode_outcomes,
    evaluate,
    evaluate_episodes,
    put_log,
    reward_prefixes,
)
from marl.collectors import BatchCollector, Collector
from marl.envs.common import EnvBase

__all__ = [
    "EvalEpisodes",
    "Learn",
    "Trainer",
    "TrainerCallback",
    "TrainingRun",
    "evaluate",
    "evaluate_episodes",
]


Learn = Callable[[TensorDictBase], tuple[TensorDictBase, Logs]]
"""``batch -> (processed batch, update logs)``: the :class:`Trainer`'s ``learn`` seam."""


class TrainingRun(Iterator[Logs]):
    """The iterator :meth:`Trainer.train` returns: each ``next`` trains one iteration.

    It warns when it is dropped before its first item, because that is almost
    always a ``trainer.train()`` statement that was meant to train: iterate it,
    or call ``list(trainer.train())``.

    Examples:
        >>> from marl.algorithms import Algorithm, Trainer
        >>> from marl.testing import SingleAgentFakeEnv
        >>> env = SingleAgentFakeEnv(num_envs=4, discrete=True, seed=0)
        >>> run = Trainer(Algorithm("ppo"), env, frames_per_batch=64, total_frames=128,
        ...               seed=0).train()
        >>> next(run)["frames"]  # the first batch is collected and learned from here
        64
        >>> [logs["frames"] for logs in run]
        [128]
    """

    def __init__(self, logs: Iterator[Logs]) -> None:
        self._logs = logs
        self._started = False

    def __iter__(self) -> TrainingRun:
        return self

    def __next__(self) -> Logs:
        self._started = True
        return next(self._logs)

    def close(self) -> None:
        """Stop here: the callbacks' ``on_train_end`` runs now, and the run trains no further.

        The trainer keeps its state, so a later :meth:`Trainer.train` continues from it.
        """
        self._started = True  # closing is deliberate: no "dropped unused" warning
        close = getattr(self._logs, "close", None)
        if close is not None:
            close()

    def __del__(self) -> None:
        if not self._started:
            warnings.warn(
                "Trainer.train() returned an iterator that trains as it is consumed, and it "
                "was dropped unused: nothing was trained. Iterate it (for logs in "
                "trainer.train(): ...) or call list(trainer.train()).",
                RuntimeWarning,
                stacklevel=2,
            )


class TrainerCallback:
    """Hooks into :class:`Trainer`; override what you need (each default does nothing)."""

    def on_train_start(self, trainer: Trainer) -> None:
        """Called once when :meth:`Trainer.train` starts (after a resume, too)."""

    def on_iteration_end(self, trainer: Trainer, logs: Logs) -> None:
        """Called after every batch with that iteration's logs (evaluation included)."""

    def on_evaluation(self, trainer: Trainer, logs: Logs) -> None:
        """Called after each evaluation with its logs."""

    def on_train_end(self, trainer: Trainer) -> None:
        """Called once when training stops."""


class Trainer:
    """Drive an :class:`Algorithm` on an env until ``total_frames`` are collected.

    Each iteration: collect a ``[*B, T]`` batch with the collection policy,
    ``algorithm.process_batch``, ``algorithm.update`` (buffers and optimizer steps),
    sync the collector's weights, log, and evaluate every ``eval_interval`` frames.

    Logs per iteration: ``frames``, ``iteration``, ``train/episode_reward`` (and
    ``train/<group>/episode_reward``) from ``RewardSum``'s ``episode_reward`` at the
    steps where an episode ended, ``train/<loss terms>``, ``time/collect``,
    ``time/update``, ``time/eval``, ``time/total``, ``fps`` and the ``eval/`` entries.

    Args:
        algorithm: the algorithm; built on ``env`` (with ``seed``) if not built yet.
        env: the training env (use ``make_task``, which adds ``RewardSum``).
        frames_per_batch: frames per collected batch (env steps x env batch size).
        total_frames: stop once this many frames were collected.
        init_random_frames: the first frames use uniformly random actions.
        eval_env: a separate env for evaluation (``None``: no evaluation).
        eval_interval: frames between evaluations (``None``: only at the end).
        eval_episodes: episodes per evaluation.
        eval_deterministic: evaluate the policy's mode (no exploration).
        evaluator: plays the evaluation episodes (``None``:
            :func:`~marl.algorithms.evaluate_episodes`, the policy on every agent); e.g.
            :class:`marl.league.VersusReference` for a zero-sum game, whose headline return
            is then the policy's against a fixed opponent.
        callbacks: :class:`TrainerCallback` objects.
        log_fn: called with each iteration's logs.
        seed: seeds torch's global generator (before the networks are built).
        collector: a ready :class:`~marl.collectors.BatchCollector` running
            ``algorithm.policy`` (e.g. a ``MultiSyncCollector``; check one of your own with
            :func:`~marl.collectors.check_collector`); default: a
            :class:`~marl.collectors.Collector` on ``env``.
        world_size: frames counted per collected frame: in a data-parallel run, the
            number of ranks, each collecting an equal share, so that :attr:`frames`
            (logs, ``total_frames``, ``eval_interval``) counts the whole run's frames.
        learn: how a collected batch is learned from: ``batch -> (processed batch, update
            logs)``, the logs keyed as :meth:`Algorithm.update` keys them. ``None`` (the
            default): ``algorithm.process_batch`` then ``algorithm.update``. Several runs
            trained in one process (:mod:`marl.experiment.runs`) pass one that updates all
            runs at once, as one stacked update, and hands each run its share.

    Examples:
        >>> from marl.algorithms import Algorithm, Trainer
        >>> from marl.testing import SingleAgentFakeEnv
        >>> env = SingleAgentFakeEnv(num_envs=4, discrete=True, seed=0)
        >>> trainer = Trainer(Algorithm("ppo"), env, frames_per_batch=64, total_frames=128,
        ...                   seed=0)
        >>> [logs["frames"] for logs in trainer.train()]
        [64, 128]
    """

    def __init__(
        self,
        algorithm: Algorithm,
        env: EnvBase,
        *,
        frames_per_batch: int,
        total_frames: int,
        init_random_frames: int = 0,
        eval_env: EnvBase | None = None,
        eval_interval: int | None = None,
        eval_episodes: int = 10,
        eval_deterministic: bool = True,
        evaluator: Evaluator | None = None,
        callbacks: Sequence[TrainerCallback] = (),
        log_fn: Callable[[Logs], None] | None = None,
        seed: int | None = None,
        collector: BatchCollector | None = None,
        world_size: int = 1,
        learn: Learn | None = None,
    ) -> None:
        if total_frames < 1 or frames_per_batch < 1:
            raise ValueError(
                f"frames_per_batch and total_frames must be >= 1, got {frames_per_batch}, "
                f"{total_frames}"
            )
        if seed is not None:
            torch.manual_seed(seed)
        if not algorithm.built:
            algorithm.build(env)
        if algorithm.recurrent:
            check_init_tracker(env, "env")
            if eval_env is not None:
                check_init_tracker(eval_env, "eval_env")
        self.algorithm = algorithm
        self.env = env
        self.total_frames = total_frames
        self.eval_env = eval_env
        self.eval_interval = eval_interval
        self.eval_episodes = eval_episodes
        self.eval_deterministic = eval_deterministic
        self.evaluator: Evaluator = evaluate_episodes if evaluator is None else evaluator
        self.last_evaluation: EvalEpisodes | None = None
        self.callbacks = list(callbacks)
        self.log_fn = log_fn
        self.collector: BatchCollector = (
            collector
            if collector is not None
            else Collector(
                env,
                algorithm.policy,
                frames_per_batch=frames_per_batch,
                init_random_frames=init_random_frames,
            )
        )
        self.world_size = world_size
        self.learn = learn
        self.frames = 0
        self.iteration = 0
        self._last_eval_frames = 0
        self._stop = False
        self._batches: Any = None
        self.history: list[Logs] = []

    def _next_batch(self) -> TensorDictBase | None:
        # iterating works for every collector (in-process, multi-process, Ray)
        if self._batches is None:
            self._batches = iter(self.collector)
        return next(self._batches, None)

    def stop(self) -> None:
        """Ask :meth:`train` to stop after the current iteration (e.g. from a callback)."""
        self._stop = True

    def evaluate(self) -> Logs:
        """Evaluate the deterministic policy on ``eval_env`` with :attr:`evaluator` and
        notify the callbacks."""
        if self.eval_env is None:
            raise RuntimeError("Trainer.evaluate needs an eval_env")
        start = time.perf_counter()
        result = self.evaluator(
            self.eval_env,
            self.algorithm.eval_policy(),
            self.eval_episodes,
            deterministic=self.eval_deterministic,
        )
        self.last_evaluation = result
        logs = result.logs()
        logs["time/eval"] = time.perf_counter() - start
        self._last_eval_frames = self.frames
        for cb in self.callbacks:
            cb.on_evaluation(self, logs)
        return logs

    def mark_evaluated(self) -> None:
        """Count the current weights as evaluated: no evaluation is due at these frames.

        For a run restored at frames it had already evaluated (its evaluation is on
        record): the restored trainer then does not evaluate the same weights again.
        """
        self._last_eval_frames = self.frames

    def _episode_logs(self, batch: TensorDictBase, logs: Logs) -> None:
        done = batch.get(("next", "done"), None)
        if done is None or not bool(done.any()):
            return
        done = done.reshape(batch.batch_size)
        values = []
        for prefix in reward_prefixes(self.env):
            ret = batch.get(("next", *prefix, "episode_reward"), None)
            if ret is None:
                continue
            # mean over the group's agents of each ended episode's return
            value = float(ret[done].float().mean())
            values.append(value)
            if prefix:
                put_log(logs, "train", prefix, "episode_reward", value)
        if values:
            logs["train/episode_reward"] = sum(values) / len(values)
        for name, outcome in episode_outcomes(self.env, batch).items():
            logs[f"train/{name}"] = float(outcome[done].mean())

    def _eval_due(self) -> bool:
        if self.eval_env is None:
            return False
        if self.frames >= self.total_frames or self._stop:
            return self._last_eval_frames != self.frames
        interval = self.eval_interval
        return interval is not None and self.frames - self._last_eval_frames >= interval

    def train(self) -> TrainingRun:
        """Train until ``total_frames`` frames (continuing from a loaded state), lazily.

        Training advances as the returned iterator is consumed, one collected batch
        per item, so ``for logs in trainer.train(): print(logs)`` shows each
        iteration as it ends. ``list(trainer.train())`` runs to the end and keeps
        every iteration's logs. A returned run dropped before it started trains
        nothing and warns.

        Returns:
            A :class:`TrainingRun`: an iterator over each iteration's logs, then, when
            a final evaluation is due, the final evaluation's logs.
        """
        return TrainingRun(self._iterate())

    def _iterate(self) -> Iterator[Logs]:
        self._stop = False
        for cb in self.callbacks:
            cb.on_train_start(self)
        try:
            yield from self._iterations()
        finally:  # also when the consumer stops early or an iteration raises
            for cb in self.callbacks:
                cb.on_train_end(self)

    def _iterations(self) -> Iterator[Logs]:
        algo, collector = self.algorithm, self.collector
        while self.frames < self.total_frames and not self._stop:
            start = time.perf_counter()
            batch = self._next_batch()
            if batch is None:  # a collector given with its own total_frames ran out
                break
            collected = time.perf_counter()
            if self.learn is None:
                batch = algo.process_batch(batch)
                update_logs = algo.update(batch)
            else:
                batch, update_logs = self.learn(batch)
            collector.update_policy_weights_()
            updated = time.perf_counter()
            self.frames += batch.numel() * self.world_size
            self.iteration += 1
            logs: Logs = {"frames": self.frames, "iteration": self.iteration}
            self._episode_logs(batch, logs)
            logs.update({f"train/{k}": v for k, v in update_logs.items()})
            logs["time/collect"] = collected - start
            logs["time/update"] = updated - collected
            if self._eval_due():
                logs.update(self.evaluate())
            logs["time/total"] = time.perf_counter() - start
            logs["fps"] = batch.numel() * self.world_size / max(logs["time/total"], 1e-9)
            self._emit(logs)
            for cb in self.callbacks:
                cb.on_iteration_end(self, logs)
            yield logs
        if self.eval_env is not None and self._last_eval_frames != self.frames:
            logs = self.evaluate()
            logs.update(frames=self.frames, iteration=self.iteration)
            self._emit(logs)
            yield logs

    def _emit(self, logs: Logs) -> None:
        self.history.append(logs)
        if self.log_fn is not None:
            self.log_fn(logs)

    def state_dict(self, include_buffers: bool = False) -> dict[str, Any]:
        """Everything needed to resume: networks, optimizers, counters, RNG, collector.

        Args:
            include_buffers: also save the replay buffers (can be large; without them
                an off-policy run refills its buffer after a resume).

        Returns:
            A dict for ``torch.save``.
        """
        state: dict[str, Any] = {
            "algorithm": self.algorithm.state_dict_full(),
            "frames": self.frames,
            "iteration": self.iteration,
            "last_eval_frames": self._last_eval_frames,
            "torch_rng": torch.get_rng_state(),
        }
        state["collector"] = self.collector.state_dict()
        if include_buffers:
            state["buffers"] = self.algorithm.buffers_state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; :meth:`train` then continues counting frames."""
        self.algorithm.load_state_dict_full(state["algorithm"])
        self.frames = int(state["frames"])
        self.iteration = int(state["iteration"])
        self._last_eval_frames = int(state.get("last_eval_frames", 0))
        if "torch_rng" in state:
            torch.set_rng_state(state["torch_rng"])
        if "collector" in state:
            self.collector.load_state_dict(state["collector"])
        if "buffers" in state:
            self.algorithm.load_buffers_state_dict(state["buffers"])
        self.collector.update_policy_weights_()
