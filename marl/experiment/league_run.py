"""A self-play league as a run: a run folder, logs, checkpoints, resume and Elo ratings.

:func:`run_league` trains a :class:`~marl.league.League` from a config (``marl-league``'s,
:mod:`marl.experiment.league_cli`) into a run folder laid out like ``marl-run``'s, with
the same pieces (:class:`~marl.experiment.checkpoint.CheckpointManager`, the loggers,
``status.json``)::

    config.yaml          the resolved config (task, seed, algorithm, model, league)
    scalars.csv          the league's training scalars (frames, score, losses, pool size)
    status.json          running / complete / failed / interrupted, and the frames reached
    checkpoints/         checkpoint_<frames>.pt and latest.pt (League.state_dict + RNG)
    elo.json elo.csv elo.png   every snapshot's Elo rating (League.rate), at the end

A run given ``league.restore_file`` (``marl-league --resume RUN_FOLDER``) continues from
that checkpoint, in its folder, with the checkpoint's config.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from marl.atomic import atomic_write_json
from marl.data.list_storage import LEGACY_GLOBALS as LIST_STORAGE_GLOBALS
from marl.experiment.checkpoint import (
    CheckpointManager,
    fault_point,
    rng_state,
    set_rng_state,
)
from marl.experiment.config import LeagueConfig, ModelConfig
from marl.experiment.lifecycle import (
    STOP_TIMEOUT_S,
    InterruptGuard,
    RunInterrupted,
    held_run,
    traceback_tail,
)
from marl.experiment.loggers import make_loggers
from marl.experiment.runlock import lock_run_folder
from marl.serialization import load

__all__ = ["CHANGEABLE_ON_RESUME", "LeagueConfig", "load_league_checkpoint", "run_league"]

log = logging.getLogger("marl.experiment")

CHANGEABLE_ON_RESUME = (
    "total_frames",
    "checkpoint_interval",
    "keep_checkpoints",
    "checkpoint_buffers",
    "rating_games",
    "loggers",
    "num_threads",
    "progress",
    "stop_timeout_s",
)
"""The ``league`` settings a resumed run may change: they do not change what was learned."""


def load_league_checkpoint(
    path: str | os.PathLike[str], *, trusted: bool = False
) -> dict[str, Any]:
    """Load a checkpoint written by :func:`run_league`, as data (``weights_only``).

    Args:
        path: the file.
        trusted: unpickle it in full (only a file you trust: it can run code; see
            :mod:`marl.serialization`); ``MARL_TRUST_CHECKPOINTS=1`` does the same.

    Raises:
        FileNotFoundError: naming the path.
        marl.serialization.CheckpointError: when it is damaged, or (its subclass
            ``UntrustedCheckpointError``) names globals that are not data.
        ValueError: when the file is not a league run's checkpoint (a ``marl-run``
            checkpoint, for instance).

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "latest.pt"
        >>> torch.save({"trainer": {}}, path)
        >>> load_league_checkpoint(path)
        Traceback (most recent call last):
        ...
        ValueError: ... is not a marl-league checkpoint (expected a dict with 'league' and 'config', got ['trainer']) (a marl-run checkpoint: resume it with marl-run)
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"league.restore_file: no checkpoint at {path}")
    state = load(
        path, trusted=trusted, what="league checkpoint", extra_globals=LIST_STORAGE_GLOBALS
    )
    if not isinstance(state, dict) or "league" not in state or "config" not in state:
        got = sorted(state)[:6] if isinstance(state, dict) else type(state).__name__
        hint = " (a marl-run checkpoint: resume it with marl-run)" if "trainer" in got else ""
        raise ValueError(
            f"{path} is not a marl-league checkpoint (expected a dict with 'league' and "
            f"'config', got {got}){hint}"
        )
    return state


def _algorithm(node: Mapping[str, Any], model: Mapping[str, Any] | None) -> Any:
    """The algorithm of the ``algorithm`` node (one for every group), the model applied."""
    from marl.algorithms import Algorithm, get_algorithm

    node = dict(node)
    if node.pop("groups", None):
        raise ValueError(
            "marl-league trains one algorithm for every group: algorithm.groups is not "
            "supported (use marl.league.League in Python for one algorithm per group)"
        )
    name = node.pop("name")
    spec = get_algorithm(name)
    overrides = {k: tuple(v) if isinstance(v, list) else v for k, v in node.items()}
    config = ModelConfig(**dict(model or {})).apply_to(spec.make_config(overrides), name)
    return Algorithm(name, config)


def _resumed_config(
    saved: Mapping[str, Any], current: Mapping[str, Any], given: list[tuple[str, ...]]
) -> dict[str, Any]:
    """The checkpoint's config with the command line's allowed changes applied.

    Raises:
        ValueError: for a given setting that differs from the checkpoint's and may not
            change on resume.
    """
    out = {**saved, "league": dict(saved["league"])}
    wrong = []
    for path in given:
        if path[0] == "hydra" or path == ("league", "restore_file"):
            continue
        if path[0] == "league" and len(path) > 1 and path[1] in CHANGEABLE_ON_RESUME:
            out["league"][path[1]] = current["league"][path[1]]
            continue
        if path == ("algorithm",):  # algorithm=<name>: the choice, not every default
            path = ("algorithm", "name")
        ours, theirs = current, saved
        for key in path:
            ours = ours.get(key) if isinstance(ours, Mapping) else None
            theirs = theirs.get(key) if isinstance(theirs, Mapping) else None
        if ours != theirs:
            wrong.append(
                f"{'.'.join(path)}: the checkpoint has {theirs!r}, the command line {ours!r}"
            )
    if wrong:
        raise ValueError(
            "these overrides contradict the checkpoint:\n  "
            + "\n  ".join(wrong)
            + "\nA resumed league keeps its task, seed, algorithm, model and league settings, "
            f"except league.{{{','.join(CHANGEABLE_ON_RESUME)}}}. Drop these overrides to "
            "continue the run, or start a new run."
        )
    return out


def run_league(
    config: Mapping[str, Any],
    folder: str | os.PathLike[str],
    given: list[tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """Train, checkpoint and rate a league into ``folder`` (or continue one).

    Args:
        config: ``task``, ``task_overrides``, ``seed``, ``algorithm`` (``name`` and its
            hyperparameters), ``model`` and ``league`` (:class:`LeagueConfig`'s fields).
        folder: the run folder.
        given: with ``league.restore_file``, the key paths the user set; those must agree
            with the checkpoint, except ``league.<CHANGEABLE_ON_RESUME>``. ``None``: every
            setting comes from the checkpoint but the changeable ones of ``config``.

    Returns:
        ``{"folder", "frames", "snapshots", "elo": {player: rating}}``.

    Raises:
        ValueError: for a checkpoint that is not a league's, or overrides that contradict
            it, before anything is written.
        FileExistsError: for a new run into a folder that holds a run, or any run into
            the folder of a live one (:class:`~marl.experiment.runlock.RunFolderInUse`).
        RunInterrupted: after SIGINT or SIGTERM (a checkpoint was saved first).

    Examples:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp()) / "league"
        >>> config = {
        ...     "task": "pettingzoo/tictactoe",
        ...     "seed": 0,
        ...     "algorithm": {"name": "iql", "learning_starts": 50, "batch_size": 32},
        ...     "league": {"frames_per_batch": 50, "total_frames": 100,
        ...                "snapshot_interval": 50, "rating_games": 1, "progress": False},
        ... }
        >>> summary = run_league(config, folder)
        >>> summary["snapshots"]
        ['snapshot_0', 'snapshot_50', 'snapshot_100']
        >>> sorted(p.name for p in folder.iterdir())
        ['checkpoints', 'config.yaml', 'elo.csv', 'elo.json', 'elo.png', 'scalars.csv', 'status.json']
    """
    # the folder's one live writer (marl.experiment.runlock), taken before anything is
    # written: a second league or a resume into a live league's folder is refused
    with lock_run_folder(folder):
        return _run_league(config, Path(folder), given)


def _run_league(
    config: Mapping[str, Any], folder: Path, given: list[tuple[str, ...]] | None
) -> dict[str, Any]:
    import yaml

    from marl.envs.tasks import make_task
    from marl.league import League

    lc = {**dataclasses.asdict(LeagueConfig()), **dict(config.get("league") or {})}
    config = {**config, "league": lc}
    restore = lc.get("restore_file")
    state = None
    if restore:
        state = load_league_checkpoint(restore)
        if given is None:
            given = [("league", k) for k in CHANGEABLE_ON_RESUME]
        config = _resumed_config(state["config"], config, given)
        config["league"]["restore_file"] = str(restore)
        lc = config["league"]
    elif held_run(folder) is not None:
        raise FileExistsError(
            f"{folder} already holds {held_run(folder)}: continue it with marl-league "
            f"--resume {folder}, or choose another folder"
        )
    guard = InterruptGuard(  # a checkpoint from before the setting has none
        lc.get("stop_timeout_s", STOP_TIMEOUT_S), setting="league.stop_timeout_s"
    )
    folder.mkdir(parents=True, exist_ok=True)
    _log_to_stderr()
    torch.set_num_threads(int(lc["num_threads"]))
    seed = int(config.get("seed", 0))
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    task = str(config["task"])
    overrides = dict(config.get("task_overrides") or {})
    env = make_task(task, num_envs=lc["num_envs"], seed=seed, **overrides)
    eval_env = make_task(task, num_envs=lc["num_envs"], seed=seed + 1, **overrides)
    algorithm = _algorithm(config["algorithm"], config.get("model"))
    league = League(
        algorithm,
        env,
        sides=lc["sides"],
        frames_per_batch=int(lc["frames_per_batch"]),
        total_frames=int(lc["total_frames"]),
        snapshot_interval=int(lc["snapshot_interval"]),
        strategy=lc["strategy"],
        pool_size=lc["pool_size"],
        opponent_exploration=bool(lc["opponent_exploration"]),
        reset_each_batch=bool(lc["reset_each_batch"]),
        seed=seed,
    )
    name = config["algorithm"]["name"]
    loggers = make_loggers(lc["loggers"], folder, run_name=folder.name, config=config)
    checkpoints = CheckpointManager(folder / "checkpoints", int(lc["keep_checkpoints"]))
    description = {k: v for k, v in config.items()}
    description["league"] = {k: v for k, v in lc.items() if k != "restore_file"}

    def status(value: str, **extra: Any) -> None:
        atomic_write_json(
            folder / "status.json",
            {
                "status": value,
                "frames": league.frames,
                "total_frames": league.total_frames,
                "algorithm": name,
                "task": task,
                "seed": seed,
                "kind": "league",
                **extra,
            },
        )

    def save() -> Path:
        checkpoint = {
            "league": league.state_dict(include_buffers=bool(lc["checkpoint_buffers"])),
            "rng": rng_state(),
            "loggers": {k: lg.state_dict() for k, lg in loggers.items()},
            "config": description,
        }
        path = checkpoints.save(checkpoint, league.frames)
        status("running")  # the frames a resume would start from
        return path

    if state is not None:
        league.load_state_dict(state["league"])
        set_rng_state(state["rng"])
        for key, logger in loggers.items():
            logger.load_state_dict(state["loggers"].get(key, {"frames": league.frames}))
        checkpoints.discard_after(league.frames)
        log.info("resumed from %s at %d frames", restore, league.frames)
    (folder / "config.yaml").write_text(yaml.safe_dump(description, sort_keys=False))
    last = league.frames
    status("running")
    try:
        with guard:
            for logs in league.train():
                scalars = {
                    k: float(v)
                    for k, v in logs.items()
                    if isinstance(v, int | float) and not isinstance(v, bool)
                }
                for logger in loggers.values():
                    logger.log_scalars(scalars, league.frames)
                fault_point("iteration", league.frames)  # tests: killed before a checkpoint
                if lc["progress"]:
                    log.info(
                        "%d/%d frames: %s vs %s, score %s",
                        league.frames,
                        league.total_frames,
                        logs["learner_side"],
                        logs["opponent"],
                        logs.get("train/score", "-"),
                    )
                interval = int(lc["checkpoint_interval"])
                if interval > 0 and league.frames - last >= interval:
                    save()
                    last = league.frames
                if guard.signum is not None:
                    guard.disarm()  # the final checkpoint is not cut short
                    save()
                    raise RunInterrupted(guard.signum)
            if last != league.frames or not checkpoints.checkpoints():
                save()
            ratings = league.rate(
                eval_env,
                games=int(lc["rating_games"]),
                meta={"task": task, "algorithm": name, "seed": seed},
            )
            ratings.write(folder, plot=_has_matplotlib())
    except KeyboardInterrupt as err:  # RunInterrupted too
        signame = signal.Signals(getattr(err, "signum", signal.SIGINT)).name
        status("interrupted", signal=signame)
        log.warning(
            "interrupted by %s at %d frames; continue with: marl-league --resume %s",
            signame,
            league.frames,
            folder,
        )
        raise
    except BaseException as err:
        status("failed", error=f"{type(err).__name__}: {err}", traceback=traceback_tail(err))
        raise
    finally:
        for logger in loggers.values():
            logger.close()
        league.collector.shutdown()
        for e in (env, eval_env):
            if not e.is_closed:
                e.close()
    status("complete")
    return {
        "folder": str(folder),
        "frames": league.frames,
        "snapshots": [s.name for s in league.snapshots],
        "elo": {p.name: p.rating for p in ratings.players},
    }


def _has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _log_to_stderr() -> None:
    if not logging.getLogger().handlers and not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(asctime)s] %(message)s", "%H:%M:%S"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
