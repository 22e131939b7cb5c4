"""Typed configs of an experiment: how long, where, what to log, when to save.

The hydra CLI (``marl-run``; ``marl-league`` for :class:`LeagueConfig`) fills these
dataclasses from the YAML files shipped in ``marl/conf/``; the Python API takes them
directly. They import no torch, so that ``--help`` is quick. Every field has one
docstring, and :meth:`ExperimentConfig.validate` turns a bad value into an error
that names the field, what was expected and what was given.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.util import find_spec
from typing import Any

from marl.algorithms.settings import NETWORKS, NetworkSettings
from marl.experiment.lifecycle import STOP_TIMEOUT_S

__all__ = [
    "ExperimentConfig",
    "LeagueConfig",
    "ModelConfig",
    "algorithm_label",
    "check_types",
    "config_from_dict",
]

LOGGERS = ("csv", "wandb", "tensorboard")
COLLECTORS = ("inline", "sync", "async")


def _matches(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits the annotation ``hint`` (the few forms the configs use)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin in (list, tuple):
        (item, *_rest) = typing.get_args(hint) or (Any,)
        return isinstance(value, (list, tuple)) and all(_matches(v, item) for v in value)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _type_name(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("NoneType", "None")


def check_types(config: Any, where: str) -> None:
    """Check every field of dataclass ``config`` against its annotation.

    ``marl-run`` gets the same checks from hydra (the dataclasses are its structured
    configs); this is the Python API's boundary.

    Raises:
        TypeError: naming the field, the expected type and the given value.

    Examples:
        >>> check_types(ModelConfig(actor_cells=[64, "x"]), "model")
        Traceback (most recent call last):
        ...
        TypeError: model.actor_cells: expected list[int] | None, got [64, 'x']
    """
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name in hints and not _matches(value, hints[f.name]):
            raise TypeError(
                f"{where}.{f.name}: expected {_type_name(hints[f.name])}, got {value!r}"
            )


@dataclass
class ExperimentConfig:
    """How an :class:`~marl.experiment.Experiment` runs: devices, frames, evaluation,
    logging and checkpoints.

    Examples:
        >>> ExperimentConfig(total_frames=12_000).validate().frames_per_batch
        6000
        >>> ExperimentConfig(loggers=["csv", "mlflow"]).validate()
        Traceback (most recent call last):
        ...
        ValueError: experiment.loggers: unknown logger 'mlflow'; available: ['csv', 'wandb', 'tensorboard']
    """

    # --- devices -------------------------------------------------------------
    sampling_device: str = "cpu"
    """Device the env steps and the collection policy run on (``"cuda"`` for VMAS on a GPU)."""
    train_device: str = "cpu"
    """Device the networks are trained on; batches are moved there before the update."""
    buffer_device: str = "cpu"
    """Device of the off-policy replay buffers (on-policy batches stay on ``train_device``)."""
    num_threads: int | None = 1
    """torch intra-op CPU threads (``None``: torch's default, one per core). The small networks
    of RL gain little from more threads and lose a lot when cores are shared: the default
    ``marl-run`` trained at 4,675 frames/s with 1 thread and 385 with 2 on a busy 2-core machine."""
    compile: bool | None = None
    """Compile each learner's loss and backward and the collection policy with
    ``torch.compile`` (``None``: the algorithm's default, off for every algorithm today;
    the measurements are in ``docs/advanced/compile.md``). The first batches pay the
    compilation (seconds to a minute a graph on a small CPU)."""

    # --- collection ----------------------------------------------------------
    collector: str = "inline"
    """Where the envs step. ``"inline"``: in this process, between updates. ``"sync"``: in
    ``collector_workers`` worker processes that each step their share of the envs, while the
    learner waits (for envs that step one by one on the CPU, e.g. PettingZoo). ``"async"``:
    ``collector_workers`` worker processes collect the next batches while the learner
    updates on the current one, so on a machine with a free core the collection's time hides
    behind the update's. An async batch was collected with the weights of the update before
    the current one (one update of policy lag): PPO's ratio is taken to the log-probabilities
    stored at collection, and off-policy learners replay old data anyway. Worker processes
    are forked, so ``"sync"``/``"async"`` need ``sampling_device="cpu"``."""
    collector_workers: int = 1
    """Worker processes of the ``"sync"`` and ``"async"`` collectors. ``"sync"`` splits
    ``num_envs`` evenly over them; each ``"async"`` worker steps ``num_envs`` envs and
    yields whole batches of ``frames_per_batch``."""
    collector_timeout: float | None = 600.0
    """Seconds the ``"sync"`` and ``"async"`` collectors wait for a worker's batch before
    the run fails with an error naming the worker (a stopped or stuck worker would
    otherwise hang a sync run, or silently leave an async run one worker short). A worker
    that crashes is noticed at once, whatever this is. ``None``: wait forever."""

    # --- frames --------------------------------------------------------------
    num_envs: int | None = None
    """Vectorized envs for collection (``None``: 60 for on-policy, 10 for off-policy algorithms;
    PettingZoo and Gymnasium tasks use ``min(that, 8)`` since they step on the CPU one by one)."""
    frames_per_batch: int = 6_000
    """Frames (env steps x envs) collected per training iteration."""
    total_frames: int = 600_000
    """Stop after this many frames; a resumed run continues counting toward it."""
    init_random_frames: int = 0
    """The first frames are collected with uniformly random actions (off-policy warm-up)."""
    max_epochs: int | None = None
    """At most this many passes over each collected batch for every on-policy learner of an
    algorithm given by name (its ``epochs``; HAPPO's per agent turn): a cap, logged when it
    lowers an algorithm's own (``None``: each algorithm's ``epochs``). ``experiment=debug``
    sets 1: a smoke run checks that every part runs, and a second pass over the same batch
    checks nothing the first does not (MAPPO's 10 passes over pistonball's 20 pixel views
    were 60 of its debug run's 105 s)."""
    runs: int = 1
    """Runs trained together in one process (:mod:`marl.experiment.runs`): ``runs=R`` with
    ``seed=S`` trains seeds ``S, S+1, ..., S+R-1``, each in its own ordinary run folder
    ``<save_folder>/seed_<s>/``. On a batched env (VMAS, the native envs) one env of
    ``R x num_envs`` sub-envs collects for all of them, and the learners (on-policy: MAPPO,
    IPPO, PPO...; off-policy: SAC, DDPG, TD3, DQN, QMIX...) update as one vmapped update
    over the runs' stacked parameters; everything else
    (seeds, evaluation, logs, checkpoints, ``results.json``) stays per run. ``frames_per_batch``,
    ``num_envs`` and ``total_frames`` are each run's. Needs ``collector=inline``; not with
    ``--nproc``, recurrent networks, ``marl-league`` or ``marl-tune``. Resume the whole group
    with ``marl-run --resume <save_folder>``. See ``docs/advanced/distributed.md``."""

    # --- evaluation ----------------------------------------------------------
    evaluation: bool = True
    """Evaluate on a separate env before, during and at the end of training."""
    evaluation_interval: int = 100_000
    """Frames between evaluations."""
    evaluation_episodes: int = 32
    """Episodes per evaluation, exactly: 32, the protocol most MARL papers follow (Gorsane
    et al., 2022; ten were too few to rank a run's policies). They run in parallel: over
    ``evaluation_episodes`` envs on VMAS, over at most 8 elsewhere, each env running its
    fixed share (10 over 8 envs: 2 on two envs, 1 on the others), so short episodes are
    not favoured. The absolute metric re-evaluates the best policy on 10 times as many."""
    evaluation_max_steps: int | None = None
    """Cut every evaluation episode (the absolute metric's too) after this many steps,
    counting it truncated there (``None``: episodes run to their own end). A smoke run
    (``experiment=debug``) caps them so that an untrained policy on a task of long
    episodes (cooperative_pong's 900 steps, pistonball's 125 pixel steps) does not spend
    the run evaluating; the returns are then those of the episodes' first steps."""
    evaluation_deterministic: bool = True
    """Evaluate the mode of the policy (no exploration noise)."""
    render: bool = True
    """Record one evaluation episode per evaluation to ``videos/*.mp4`` where the env renders."""
    check_actions: bool = False
    """Check every action the envs receive (NaN/inf, non-integer, out-of-range or illegal
    discrete actions raise ``InvalidActionError`` naming the key and the values). On in
    ``experiment=debug``; off by default because it runs on every env step."""

    # --- logging -------------------------------------------------------------
    loggers: list[str] = field(default_factory=lambda: ["csv"])
    """Any of ``csv`` (always cheap), ``wandb`` (honours ``WANDB_MODE=offline``), ``tensorboard``."""
    project_name: str = "marl"
    """wandb project name (and tensorboard run prefix)."""
    save_folder: str | None = None
    """Output folder; ``None``: the current directory (``marl-run`` changes into hydra's run dir)."""
    progress: bool = True
    """Show a progress bar when stderr is a terminal. Without a bar (``false``, or not a terminal)
    a status line is logged every ``log_interval_s`` instead."""
    log_interval_s: float | None = 30.0
    """Seconds between status lines when there is no progress bar (``None``: no status lines; the
    lines at the start, on a resume and at the end are still logged)."""

    # --- checkpoints ---------------------------------------------------------
    checkpoint_interval: int = 100_000
    """Frames between checkpoints (0: none during training)."""
    keep_checkpoints: int = 3
    """Keep only the newest N ``checkpoint_<frames>.pt`` files (``latest.pt`` is always kept)."""
    checkpoint_at_end: bool = True
    """Write a checkpoint when training ends."""
    checkpoint_buffers: bool = False
    """Also save replay buffers (large; without them an off-policy run refills after a resume)."""
    restore_file: str | None = None
    """A checkpoint to resume from: training continues from its frame count, not from zero."""
    stop_timeout_s: float | None = STOP_TIMEOUT_S
    """After SIGINT or SIGTERM, seconds to wait for the current iteration to end and write a
    final checkpoint before stopping at once without one, the last checkpoint kept
    (``None``: wait as long as it takes). The default, 20 s, is under the 30 s SLURM and
    Kubernetes give a job between SIGTERM and SIGKILL."""
    peer_timeout_s: float | None = 30.0
    """Data-parallel runs (torchrun): seconds without a heartbeat after which another rank
    counts as lost (hung, or its machine unreachable), and this rank stops with an error
    naming it (:mod:`marl.experiment.peers`). A rank that dies is noticed at once, when its
    connection closes. ``None``: no heartbeats (a rank then waits for the process
    group's own timeout, 30 minutes with gloo)."""

    # --- export --------------------------------------------------------------
    export: list[str] = field(default_factory=list)
    """Export every group's deterministic policy when training ends, to ``export/`` in the
    run folder: any of ``pt2`` (``torch.export``) and ``onnx`` (needs ``marl[export]``), each
    checked against the eager policy on 1,000 random observations (see ``marl.export``). A
    finished run exports with ``marl-run --resume RUN_DIR experiment.export=[onnx]``."""

    def validate(self) -> ExperimentConfig:
        """Check every field; return ``self``.

        Raises:
            ValueError: naming the field, the expected values and the given one.
        """

        if isinstance(self.loggers, str):
            self.loggers = [self.loggers]
        check_types(self, "experiment")

        def need(ok: bool, name: str, expected: str) -> None:
            if not ok:
                raise ValueError(
                    f"experiment.{name}: expected {expected}, got {getattr(self, name)!r}"
                )

        need(self.frames_per_batch >= 1, "frames_per_batch", "an integer >= 1")
        need(self.total_frames >= 1, "total_frames", "an integer >= 1")
        need(self.init_random_frames >= 0, "init_random_frames", "an integer >= 0")
        need(self.max_epochs is None or self.max_epochs >= 1, "max_epochs", "None or >= 1")
        need(self.runs >= 1, "runs", "an integer >= 1")
        if self.runs > 1 and self.collector != "inline":
            raise ValueError(
                f"experiment.runs={self.runs} trains its runs in this process and needs "
                f"experiment.collector='inline', got {self.collector!r}: drop one of them"
            )
        need(self.num_envs is None or self.num_envs >= 1, "num_envs", "None or an integer >= 1")
        need(self.evaluation_interval >= 1, "evaluation_interval", "an integer >= 1")
        need(self.evaluation_episodes >= 1, "evaluation_episodes", "an integer >= 1")
        need(
            self.evaluation_max_steps is None or self.evaluation_max_steps >= 1,
            "evaluation_max_steps",
            "None or an integer >= 1",
        )
        need(self.checkpoint_interval >= 0, "checkpoint_interval", "an integer >= 0")
        need(self.keep_checkpoints >= 1, "keep_checkpoints", "an integer >= 1")
        for name in ("stop_timeout_s", "collector_timeout", "peer_timeout_s"):  # seconds
            seconds = getattr(self, name)
            need(seconds is None or seconds > 0, name, "None or a number of seconds > 0")
        need(
            self.log_interval_s is None or self.log_interval_s > 0, "log_interval_s", "None or > 0"
        )
        need(self.num_threads is None or self.num_threads >= 1, "num_threads", "None or >= 1")
        need(self.collector in COLLECTORS, "collector", f"one of {list(COLLECTORS)}")
        need(self.collector_workers >= 1, "collector_workers", "an integer >= 1")
        need(
            self.collector == "inline" or self.sampling_device == "cpu",
            "collector",
            '"inline" with sampling_device other than "cpu" (worker processes are forked, and '
            "a forked process cannot use CUDA)",
        )
        if isinstance(self.export, str):
            self.export = [self.export]
        if self.export:  # marl.export imports torch: only when a format is asked for
            from marl.export import FORMATS as EXPORT_FORMATS
        for fmt in self.export:
            if fmt not in EXPORT_FORMATS:
                raise ValueError(
                    f"experiment.export: unknown format {fmt!r}; expected any of "
                    f"{list(EXPORT_FORMATS)}"
                )
        if "onnx" in self.export:
            # found now, not after hours of training
            missing = [m for m in ("onnx", "onnxscript", "onnxruntime") if not find_spec(m)]
            if missing:
                raise ImportError(
                    f'experiment.export=[onnx] needs {missing}: pip install "marl[export]"'
                )
        for name in self.loggers:
            if name not in LOGGERS:
                raise ValueError(
                    f"experiment.loggers: unknown logger {name!r}; available: {list(LOGGERS)}"
                )
        return self


@dataclass
class ModelConfig:
    """Network sizes shared by every algorithm; ``None`` keeps the algorithm's own default.

    The fields map onto the algorithm config's network settings (:meth:`apply_to`):
    ``actor_cells``/``critic_cells`` (``cells`` for the Q-network of value-based
    algorithms), ``activation``, the network body (``network``), and the parameter
    sharing of actors and critics across a group's agents.

    Examples:
        >>> from marl.algorithms.dqn import DQNConfig
        >>> from marl.algorithms.ppo import PPOConfig
        >>> ModelConfig(actor_cells=[128, 128]).apply_to(PPOConfig(), "ppo").actor_cells
        (128, 128)
        >>> ModelConfig(actor_cells=[32], critic_cells=[8]).apply_to(DQNConfig(), "dqn").cells
        (32,)
        >>> ModelConfig(network="transformer").validate()
        Traceback (most recent call last):
        ...
        ValueError: model.network: expected one of ['mlp', 'deepsets', 'gnn', 'cnn', 'gru', 'lstm'] or None, got 'transformer'
    """

    actor_cells: list[int] | None = None
    """Hidden sizes of the policy (and of the Q-network of DQN, IQL, VDN and QMIX)."""
    critic_cells: list[int] | None = None
    """Hidden sizes of the value or Q critic."""
    activation: str | None = None
    """``"tanh"``, ``"relu"``, ``"elu"``, ...; ``None``: the algorithm's default."""
    share_policy_params: bool | None = None
    """One set of policy parameters for all agents of a group (``False``: one per agent)."""
    share_critic_params: bool | None = None
    """One set of critic parameters for all agents of a group."""
    network: str | None = None
    """The body of every actor, critic and Q-network: ``"mlp"``, ``"deepsets"``, ``"gnn"``,
    ``"cnn"``, ``"gru"`` or ``"lstm"`` (``None``: the algorithm's default, ``"mlp"``). Which
    algorithm and env take which is in ``docs/basic/models.md``; a pair that cannot work is
    refused when the algorithm is built, with the reason."""
    gnn_radius: float | None = None
    """``network=gnn``: connect the agents within this distance of each other (a distance
    graph; ``None``: the algorithm's default, a complete graph)."""
    gnn_position: list[int] | None = None
    """``network=gnn`` with ``gnn_radius``: ``[start, stop]``, the observation features that
    hold each agent's position (``None``: the algorithm's default, ``[0, 2]``, VMAS's)."""

    def validate(self) -> ModelConfig:
        """Check the types of every field and the network name; return ``self``.

        Raises:
            TypeError: naming the field, the expected type and the given value.
            ValueError: for a network name that is not one of ``NETWORKS``.
        """
        check_types(self, "model")
        if self.network is not None and self.network not in NETWORKS:
            raise ValueError(
                f"model.network: expected one of {list(NETWORKS)} or None, got {self.network!r}"
            )
        return self

    def apply_to(self, config: Any, algorithm: str) -> Any:
        """``config`` (an algorithm config) with the settings this model gives applied.

        Each ``model.<key>`` sets the field the algorithm's network settings name for it
        (:attr:`~marl.algorithms.settings.NetworkSettings.MODEL_KEYS`): the Q-learners'
        ``cells`` take ``actor_cells``, and a key that means nothing to an algorithm
        (a critic's width for a Q-learner) is left out.

        Raises:
            ValueError: for model settings given to an algorithm without network settings
                (``mat``: a transformer sized by its own fields).
        """
        given = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not None
        }
        if not given:
            return config
        if not isinstance(config, NetworkSettings):
            fields = sorted(f.name for f in dataclasses.fields(config) if f.init)
            raise ValueError(
                f"model: algorithm {algorithm!r} does not take these model settings: "
                f"{sorted(given)}; it has no network settings to apply them to (its fields "
                f"are {fields})"
            )
        keys = type(config).MODEL_KEYS
        changes = {keys[k]: _model_value(v) for k, v in given.items() if keys[k] is not None}
        return dataclasses.replace(config, **changes)


def _model_value(value: Any) -> Any:
    """A model value as the algorithm configs hold it (YAML lists -> tuples of ints)."""
    return tuple(int(v) for v in value) if isinstance(value, (list, tuple)) else value


def config_from_dict(cls: type, values: Mapping[str, Any] | None, where: str) -> Any:
    """Build dataclass ``cls`` from a mapping, rejecting unknown keys with the valid ones.

    Examples:
        >>> config_from_dict(ModelConfig, {"activation": "relu"}, "model").activation
        'relu'
        >>> config_from_dict(ModelConfig, {"cellz": [1]}, "model")
        Traceback (most recent call last):
        ...
        ValueError: model: unknown field(s) ['cellz']; valid: ['activation', 'actor_cells', 'critic_cells', 'gnn_position', 'gnn_radius', 'network', 'share_critic_params', 'share_policy_params']
    """
    if values is None:
        return cls()
    if isinstance(values, cls):
        return values
    if not isinstance(values, Mapping):
        raise TypeError(f"{where}: expected a mapping or {cls.__name__}, got {type(values)}")
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; valid: {sorted(names)}")
    return cls(**{k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in values.items()})


def algorithm_label(algorithm: Any) -> str:
    """The plain name of an algorithm choice, as used in folder names and ``results.json``.

    Args:
        algorithm: a name (or anything with a ``name``), or ``{group: name}``.

    Examples:
        >>> algorithm_label("mappo")
        'mappo'
        >>> algorithm_label({"agent": "iql", "adversary": "mappo"})
        'adversary-mappo_agent-iql'
    """
    if isinstance(algorithm, Mapping):
        return "_".join(f"{g}-{algorithm_label(a)}" for g, a in sorted(algorithm.items()))
    return str(getattr(algorithm, "name", algorithm))


@dataclass
class LeagueConfig:
    """How ``marl-league`` trains, checkpoints and rates a league (the ``league`` node).

    Examples:
        >>> LeagueConfig().strategy, LeagueConfig(total_frames=4000).total_frames
        ('uniform', 4000)
    """

    frames_per_batch: int = 500
    """Frames per batch; each batch: one side for the learner, one opponent."""
    total_frames: int = 20_000
    """Stop once this many frames were collected."""
    snapshot_interval: int = 5000
    """Frames between snapshots joining the pool."""
    strategy: str = "uniform"
    """How opponents are drawn: latest, uniform or prioritized."""
    pool_size: int | None = None
    """Keep at most this many snapshots for training (null: all); all are rated."""
    opponent_exploration: bool = True
    """Opponents act as the learner did when snapshotted (false: deterministically)."""
    reset_each_batch: bool = True
    """Every batch starts new games (frames_per_batch must hold whole games)."""
    sides: list[str] | None = None
    """The two sides as group names (null: the env's two groups, or its one group split)."""
    num_envs: int | None = None
    """Vectorized envs for training (null: the task's default; VMAS needs a number)."""
    rating_games: int = 10
    """Games per pairing and seat assignment when rating the snapshots at the end."""
    checkpoint_interval: int = 5000
    """Frames between checkpoints (0: only at the end)."""
    keep_checkpoints: int = 3
    """How many numbered checkpoints to keep."""
    checkpoint_buffers: bool = False
    """Also save replay buffers (a resumed off-policy learner then continues exactly)."""
    loggers: list[str] = field(default_factory=lambda: ["csv"])
    """csv, tensorboard, wandb."""
    num_threads: int = 1
    """torch threads."""
    progress: bool = True
    """Log a line per batch."""
    restore_file: str | None = None
    """A checkpoint to continue (marl-league --resume RUN_FOLDER sets it)."""
    stop_timeout_s: float | None = STOP_TIMEOUT_S
    """After SIGINT or SIGTERM, seconds to wait for the current game batch and update to end
    and write a final checkpoint before stopping at once without one (``None``: no bound)."""
