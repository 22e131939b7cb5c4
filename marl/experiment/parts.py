"""The parts an :class:`~marl.experiment.Experiment` is built from: its algorithm (with the
model applied), its envs, its collector and its evaluator.

Each function reads only what it is given (the run's config, model and task), so what a
run builds is decided here, once, for ``marl-run``, ``marl-bench``, ``marl-tune`` and
Python users alike.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from marl.algorithms import Algorithm, AlgorithmSpec, Evaluator, get_algorithm, network_refusal
from marl.algorithms.settings import ReplaySettings
from marl.algorithms.spec import AlgorithmConfig
from marl.collectors import Collector, MultiAsyncCollector, MultiSyncCollector
from marl.envs import RewardSum, StepCounter, TransformedEnv, make_task
from marl.envs.common import EnvBase
from marl.envs.families import batched_family
from marl.envs.tasks import load_task_config
from marl.experiment.config import ExperimentConfig, ModelConfig, algorithm_label
from marl.league import VersusReference

__all__ = [
    "TaskFactory",
    "build_algorithm",
    "default_num_envs",
    "describe_algorithm",
    "evaluation_num_envs",
    "export_run",
    "make_collector",
    "make_evaluation_env",
    "make_task_env",
    "seed_everything",
    "task_evaluator",
]

log = logging.getLogger("marl.experiment")

TaskFactory = Callable[..., EnvBase]
"""``(num_envs=, seed=, device=) -> EnvBase``: a custom task instead of a catalogue name."""


def evaluation_num_envs(task_name: str, episodes: int, catalogue: bool = True) -> int:
    """How many envs a run's evaluation env has (it is seeded ``seed + 1``).

    One env per episode for VMAS (vectorized on one device); at most 8 for the
    families that step their envs one by one; 4 for a custom task factory.
    ``marl-bench`` builds its baseline evaluations with the same rule.

    Examples:
        >>> evaluation_num_envs("vmas/navigation", 20), evaluation_num_envs("gymnasium/cartpole", 20)
        (20, 8)
    """
    if task_name.startswith("vmas/"):
        return episodes
    return min(episodes, 8) if catalogue else 4


def task_evaluator(
    task: str | TaskFactory, task_name: str, eval_env: EnvBase | None
) -> Evaluator | None:
    """The evaluator a catalogue task's file declares (its ``evaluation`` key), checked
    against the task's evaluation env; ``None`` for the plain evaluation
    (:func:`~marl.algorithms.evaluate_episodes`, the policy on every agent).

    ``versus_random``: :class:`~marl.league.VersusReference` against a uniformly random
    player, from each seat equally often (tictactoe, connect_four).

    Raises:
        ValueError: naming the task, when its env cannot be evaluated the way its file
            declares (e.g. ``versus_random`` on a game that is not two seats of one group).

    Examples:
        >>> task_evaluator("vmas/navigation", "vmas/navigation", None) is None
        True
        >>> from marl.envs import make_task
        >>> env = make_task("pettingzoo/tictactoe", num_envs=2, seed=0)
        >>> task_evaluator("pettingzoo/tictactoe", "pettingzoo/tictactoe", env)
        VersusReference('random')
    """
    if eval_env is None or not isinstance(task, str):
        return None
    declared = load_task_config(task).get("evaluation")
    if declared is None:
        return None
    if declared != "versus_random":  # TASK_EVALUATIONS and this function go together
        raise ValueError(f"task {task_name!r}: no evaluator for evaluation: {declared!r}")
    evaluator = VersusReference("random")
    try:
        evaluator.seats(eval_env)
    except ValueError as err:
        raise ValueError(
            f"task {task_name!r} declares 'evaluation: {declared}' in its task file, but its "
            f"env cannot be evaluated that way: {err}"
        ) from err
    return evaluator


def make_evaluation_env(
    make_env: Callable[[int, int], EnvBase],
    task_name: str,
    config: ExperimentConfig,
    catalogue: bool,
    seed: int,
) -> EnvBase:
    """A run's evaluation env: ``make_env(num_envs, seed)`` with
    :func:`evaluation_num_envs` envs, its episodes cut after
    ``config.evaluation_max_steps`` steps where that is set (counted truncated there).

    The cut counts steps under its own key, ``"evaluation_step_count"``: a task may count
    its own (a ``step_counter`` transform).

    Examples:
        >>> from marl.testing import MultiAgentFakeEnv
        >>> make = lambda n, seed: MultiAgentFakeEnv(num_envs=n, seed=seed, min_steps=5)
        >>> config = ExperimentConfig(evaluation_episodes=2, evaluation_max_steps=3)
        >>> env = make_evaluation_env(make, "fake", config, catalogue=True, seed=1)
        >>> env.rollout(10, break_when_any_done=False)["next", "truncated"][0, :4, 0].tolist()
        [False, False, True, False]
    """
    env = make_env(evaluation_num_envs(task_name, config.evaluation_episodes, catalogue), seed)
    if config.evaluation_max_steps is None:
        return env
    return TransformedEnv(env, StepCounter(config.evaluation_max_steps, "evaluation_step_count"))


def default_num_envs(
    config: ExperimentConfig, task_name: str, catalogue: bool, on_policy: bool
) -> int:
    """``experiment.num_envs``, or its default: 60 envs for on-policy algorithms and 10 for
    off-policy ones, at most 8 for the families that step their envs one by one.

    Examples:
        >>> default_num_envs(ExperimentConfig(), "vmas/navigation", True, on_policy=True)
        60
        >>> default_num_envs(ExperimentConfig(), "gymnasium/cartpole", True, on_policy=False)
        8
    """
    if config.num_envs is not None:
        return config.num_envs
    n = 60 if on_policy else 10
    return n if batched_family(task_name.split("/")[0]) or not catalogue else min(n, 8)


def build_algorithm(
    algorithm: str | Mapping[str, str] | Algorithm,
    algorithm_config: AlgorithmConfig | Mapping[str, AlgorithmConfig],
    model: ModelConfig,
    config: ExperimentConfig,
) -> Algorithm:
    """The unbuilt :class:`~marl.algorithms.Algorithm` of a run: by name or one per group,
    each group's config with the model's sizes and network, the buffer device and the
    epochs cap (``config.max_epochs``) applied.

    Raises:
        ValueError: on an unknown algorithm, a model the algorithm cannot use (with why),
            or per-group configs that name no group.
        TypeError: on a flat config next to a per-group algorithm.
    """
    if isinstance(algorithm, Algorithm):
        if algorithm.built:
            raise ValueError("pass an unbuilt Algorithm; the experiment builds it on its env")
        if algorithm_config is not None:
            raise ValueError("algorithm_config is only for an algorithm given by name")
        return algorithm
    if isinstance(algorithm, Mapping):
        groups = dict(algorithm)
        if algorithm_config is not None and not isinstance(algorithm_config, Mapping):
            raise TypeError(
                f"with one algorithm per group ({groups}), algorithm_config must be "
                f"{{group: config}}, got {type(algorithm_config).__name__}"
            )
        configs = dict(algorithm_config or {})
        stray = [k for k in configs if k not in groups]
        if stray:
            example = {g: {k: configs[k] for k in stray} for g in groups}
            raise ValueError(
                f"algorithm_config has key(s) {stray} that name no group of the per-group "
                f"algorithm {groups}; give each group its own config, e.g. "
                f"algorithm_config={example!r}"
            )
        return Algorithm(
            groups,
            {
                g: _algorithm_config(name, configs.get(g), model, config)
                for g, name in groups.items()
            },
        )
    return Algorithm(algorithm, _algorithm_config(algorithm, algorithm_config, model, config))


def _algorithm_config(
    name: str, overrides: AlgorithmConfig, model: ModelConfig, experiment: ExperimentConfig
) -> object:
    """The algorithm config with the model, the buffer device and the epochs cap applied."""
    spec = get_algorithm(name)  # raises with the list of algorithms
    if isinstance(overrides, Mapping):  # YAML lists -> the dataclasses' tuples
        overrides = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}
    config = spec.make_config(overrides)
    if model.network is not None:
        why = network_refusal(name, model.network)
        if why is not None:  # refused now, not once the env is made
            raise ValueError(
                f"model.network={model.network!r}: algorithm {name!r} cannot use it: {why}"
            )
    config = model.apply_to(config, name)
    if isinstance(config, ReplaySettings):
        config = dataclasses.replace(config, buffer_device=experiment.buffer_device)
    cap = experiment.max_epochs
    epochs = getattr(config, "epochs", None)  # the on-policy configs' passes over a batch
    if cap is not None and epochs is not None and epochs > cap:
        log.info("experiment.max_epochs=%d: %s runs %d epoch(s), not %d", cap, name, cap, epochs)
        config = dataclasses.replace(config, epochs=cap)
    return config


def make_task_env(
    task: str | TaskFactory,
    task_name: str,
    task_overrides: Mapping[str, Any],
    config: ExperimentConfig,
    num_envs: int | None,
    seed: int,
    render: bool,
) -> EnvBase:
    """The task's env: a catalogue task with its overrides, or a custom factory's env.

    A factory's env gets a ``RewardSum`` when it logs no ``episode_reward`` (the logs'
    episode returns). ``render``: a one-env variant that renders frames (VMAS renders
    its batch).
    """
    device = config.sampling_device
    if not isinstance(task, str):
        env = task(num_envs=num_envs or 1, seed=seed, device=device)
        if not isinstance(env, EnvBase):
            raise TypeError(f"the task factory must return an EnvBase, got {type(env)}")
        leaves = env.observation_spec.keys(True, True)
        if not any((k[-1] if isinstance(k, tuple) else k) == "episode_reward" for k in leaves):
            env = TransformedEnv(env, RewardSum())  # episode returns for the logs
        if config.check_actions:
            env.check_actions = True  # the documented switch of every env
        return env
    overrides = dict(task_overrides)
    family = task_name.split("/")[0]
    if render and not batched_family(family):  # a batched env renders from its batch
        overrides["render_mode"] = "rgb_array"
        num_envs = None
    return make_task(
        task,
        num_envs=num_envs,
        seed=seed,
        device=device,
        check_actions=config.check_actions,
        **overrides,
    )


def make_collector(
    config: ExperimentConfig,
    env: EnvBase,
    policy: Any,
    make_env: Callable[[int], EnvBase],
    num_envs: int,
    seed: int,
) -> Any:
    """The collector ``experiment.collector`` names, running ``policy``.

    Args:
        config: the run's settings (collector, workers, batch, random frames, devices).
        env: the training env (the ``inline`` collector steps it).
        policy: the algorithm's collection policy.
        make_env: ``num_envs -> env`` for each worker process (forked, not pickled).
        num_envs: the run's env count (``sync`` splits it over the workers).
        seed: the run's seed.
    """
    c = config
    if c.collector == "inline":
        return Collector(
            env,
            policy,
            frames_per_batch=c.frames_per_batch,
            init_random_frames=c.init_random_frames,
            policy_device=c.sampling_device,
            storing_device=c.sampling_device,
        )
    workers = c.collector_workers
    if c.collector == "sync":
        if num_envs % workers:
            raise ValueError(
                f"experiment.collector=sync splits the {num_envs} envs evenly over "
                f"collector_workers={workers} processes: choose num_envs divisible by it"
            )
        num_envs //= workers
        cls: Any = MultiSyncCollector
    else:
        cls = MultiAsyncCollector
    return cls(
        lambda: make_env(num_envs),
        policy,
        num_workers=workers,
        frames_per_batch=c.frames_per_batch,
        total_frames=-1,  # the Trainer stops at experiment.total_frames
        init_random_frames=c.init_random_frames,
        seed=seed,
        timeout=c.collector_timeout,
    )


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators with ``seed``."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def describe_algorithm(algorithm: Algorithm) -> tuple[Any, Any]:
    """``(algorithm, algorithm_config)`` of a run's description: a name or ``{group: name}``,
    and every hyperparameter (model applied), flat or ``{group: {...}}`` alike."""
    choice, config = algorithm.choice, algorithm.config

    def resolved(algo: Any, cfg: Any) -> dict[str, Any]:
        spec = algo if isinstance(algo, AlgorithmSpec) else get_algorithm(algo)
        resolved = spec.make_config(cfg)
        settable = {f.name for f in dataclasses.fields(resolved) if f.init}
        return {k: v for k, v in dataclasses.asdict(resolved).items() if k in settable}

    if isinstance(choice, Mapping):
        cfgs = config if isinstance(config, Mapping) else {}
        names: Any = {g: algorithm_label(a) for g, a in choice.items()}
        return names, {g: resolved(a, cfgs.get(g)) for g, a in choice.items()}
    return algorithm_label(choice), resolved(choice, config)


def export_run(
    algorithm: Algorithm, folder: Path, formats: Sequence[str]
) -> dict[str, dict[str, Path]]:
    """Export every group's deterministic policy to ``folder`` (see
    :func:`marl.export.export_policies`), and log what was written."""
    from marl.export import export_policies

    start = time.time()
    written = export_policies(algorithm, folder, formats=formats)
    log.info(
        "exported %s as %s to %s (%.0f s, each checked on 1,000 random observations)",
        ", ".join(written),
        "/".join(formats),
        folder,
        time.time() - start,
    )
    return written
