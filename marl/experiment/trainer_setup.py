"""How an :class:`~marl.experiment.Experiment` builds its trainer: seeds, envs, algorithm,
collector, then the :class:`~marl.algorithms.Trainer` that drives them.

A run of a data-parallel group (``Experiment.use_data_parallel``) seeds and collects its
rank's share; a run of several runs in one process (``Experiment.use_runs``) takes its
collector and its learning step from the runs' hub (:mod:`marl.experiment.runs_hub`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from marl.algorithms import Trainer, TrainerCallback
from marl.collectors import BatchCollector
from marl.envs.common import EnvBase
from marl.experiment.parts import (
    default_num_envs,
    make_collector,
    make_evaluation_env,
    seed_everything,
    task_evaluator,
)

__all__ = ["build_trainer"]


def build_trainer(
    exp: Any,
    evaluate: bool,
    callbacks: list[TrainerCallback],
    envs: list[EnvBase],
    collectors: list[BatchCollector],
) -> Trainer:
    """Seed, build the envs, the algorithm, the collector and the trainer of ``exp``.

    Args:
        exp: the :class:`~marl.experiment.Experiment` (its config, seed, task,
            algorithm, and any data-parallel group or runs' hub it joined; typed ``Any``:
            this module is the experiment's, which it must not import back).
        evaluate: build an evaluation env.
        callbacks: the trainer's callbacks.
        envs: every env built is appended (the experiment closes them at the end), as
            soon as it is built.
        collectors: collectors with worker processes are appended (shut down at the end).
    """
    c, dp = exp.config, exp.data_parallel
    if c.num_threads is not None:
        torch.set_num_threads(c.num_threads)
    seed = exp.seed if dp is None else dp.rank_seed(exp.seed)
    seed_everything(seed)
    catalogue = isinstance(exp.task, str)
    num_envs = default_num_envs(c, exp.task_name, catalogue, exp.algorithm_on_policy())
    env = exp.make_env(num_envs, seed)
    envs.append(env)
    eval_env = None
    if evaluate:
        eval_env = make_evaluation_env(exp.make_env, exp.task_name, c, catalogue, exp.seed + 1)
        envs.append(eval_env)
    sync = dp.sync if dp is not None else None
    exp.algorithm.build(
        env, seed=seed, device=c.train_device, compile=c.compile, gradient_sync=sync
    )
    if dp is not None:  # this rank's share of every batch; the trainer counts them all
        share = dp.rank_frames(c.frames_per_batch, c.total_frames, env.batch_size.numel())
        c = dataclasses.replace(c, frames_per_batch=share)
    hub = exp.runs_hub
    if hub is not None and hub.shares_collection:  # this run's slice of the shared env
        collector = hub.collector(exp.run_index, exp.algorithm.policy, c, num_envs)
    else:
        collector = make_collector(
            c, env, exp.algorithm.policy, lambda n: exp.make_env(n, seed), num_envs, seed
        )
    if c.collector != "inline":  # worker processes: shut down at the end
        collectors.append(collector)
    return Trainer(
        exp.algorithm,
        env,
        frames_per_batch=collector.frames_per_batch,
        total_frames=c.total_frames,
        eval_env=eval_env,
        eval_interval=c.evaluation_interval,
        eval_episodes=c.evaluation_episodes,
        eval_deterministic=c.evaluation_deterministic,
        # the task file's evaluation (tictactoe: against a random player, both seats)
        evaluator=task_evaluator(exp.task, exp.task_name, eval_env),
        callbacks=callbacks,
        collector=collector,
        world_size=dp.world_size if dp is not None else 1,
        # several runs in one process: the hub's stacked update, where it applies
        learn=hub.learner(exp.run_index, exp.algorithm, seed) if hub is not None else None,
    )
