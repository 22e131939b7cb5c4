"""What a resumed run keeps from its checkpoint, and what it may change.

A checkpoint holds the run's resolved config (:meth:`Experiment.describe
<marl.experiment.Experiment.describe>`). A resumed run takes its task, algorithm and
hyperparameters, model and seed from there, and continues in the run's own folder
(the one that holds ``checkpoints/``). Settings that change what is learned or how
it is measured cannot change on a resume (:data:`FIXED_ON_RESUME`); the others
(``total_frames``, evaluation, logging and checkpoint intervals, devices, ...) can,
and are recorded in the run's ``config.yaml`` and its next checkpoints.

Run identity: a run's folder holds ``run.json`` (``{"run_id": <uuid4 hex>, ...}``),
written when the run first starts there and never changed, and every checkpoint holds
the same ``run_id``. Resuming a folder accepts only its own run's checkpoints: one with
another id is refused, naming both. A checkpoint or folder written before ids existed
(marl commit 2619eaf) is accepted when its task, algorithm and seed agree with the
folder's ``config.yaml``. A checkpoint that is a symbolic link, or lies outside the
folder's ``checkpoints/``, is refused: a resume never writes into another folder.

A damaged newest checkpoint (empty, truncated, corrupt) does not stop a resume of the
folder: :func:`load_resumable` logs it, renames it ``checkpoint_<frames>.pt.damaged``
and takes the newest intact one.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from marl.atomic import atomic_write_text, replace

__all__ = [
    "FIXED_ON_RESUME",
    "RUN_FILE",
    "algorithm_from_description",
    "check_run_identity",
    "checkpoint_path",
    "describe_path",
    "differences",
    "load_resumable",
    "new_run_id",
    "normalize_description",
    "plain",
    "read_run_id",
    "resume_arguments",
    "run_folder_of",
    "write_run_id",
]

log = logging.getLogger("marl.experiment")

RUN_FILE = "run.json"
"""The file of a run folder that holds its ``run_id`` (written once, when the run starts)."""

FIXED_ON_RESUME = (
    "num_envs",
    "frames_per_batch",
    "init_random_frames",
    "evaluation_deterministic",
    "evaluation_max_steps",
)
"""``experiment`` fields a resumed run keeps from its checkpoint (they shape the training
data or the meaning of the evaluations); every other ``experiment`` field may change."""

_NOT_COMPARED = ("save_folder", "restore_file")
_NUMBERED = re.compile(r"^checkpoint_(\d+)\.pt$")

_SECTIONS = ("task", "task_overrides", "algorithm", "algorithm_config", "seed")


def _refuse_link(file: Path, folder: Path) -> None:
    """Refuse a checkpoint of run folder ``folder`` that is a link or lies outside it."""
    from marl.serialization import CheckpointError

    own = (folder / "checkpoints").resolve()
    if file.is_symlink():
        raise CheckpointError(
            f"{file} is a symbolic link (to {os.readlink(file)}): a run folder's checkpoints "
            "must be its own files, so a resume never writes into another folder. Remove "
            "the link, or resume the run that the checkpoint belongs to",
            file,
        )
    if file.resolve().parent != own:
        raise CheckpointError(
            f"{file} resolves to {file.resolve()}, outside {own}: refused (a resume never "
            "writes into another folder)",
            file,
        )


def _candidates(folder: Path) -> list[Path]:
    """A run folder's checkpoints, newest first: the numbered ones, else ``latest.pt``."""
    directory = folder / "checkpoints"
    numbered = sorted(
        (int(m.group(1)), f)
        for f in (directory.iterdir() if directory.is_dir() else [])
        if (m := _NUMBERED.match(f.name))
    )
    if numbered:
        return [f for _, f in reversed(numbered)]
    latest = directory / "latest.pt"
    if not (latest.is_file() or latest.is_symlink()):
        raise FileNotFoundError(
            f"{folder} holds no checkpoint: expected {latest} (a run stopped before its first "
            "checkpoint cannot be resumed; start it again in a new folder)"
        )
    return [latest]


def checkpoint_path(path: str | os.PathLike[str]) -> Path:
    """The checkpoint file of ``path``: a checkpoint file, or a run folder's newest checkpoint.

    For a run folder that is its ``checkpoints/checkpoint_<frames>.pt`` with the most
    frames (each is complete once it has its name), else ``checkpoints/latest.pt``. They
    differ only when a run was killed between writing a checkpoint and pointing
    ``latest.pt`` at it. A checkpoint in a run folder's ``checkpoints/`` that is a
    symbolic link, or resolves elsewhere, is refused.

    Raises:
        FileNotFoundError: naming what was looked for.
        marl.serialization.CheckpointError: for a link.

    Examples:
        >>> import tempfile
        >>> checkpoint_path(tempfile.mkdtemp())
        Traceback (most recent call last):
        ...
        FileNotFoundError: ... holds no checkpoint: expected .../checkpoints/latest.pt (a run stopped before its first checkpoint cannot be resumed; start it again in a new folder)
    """
    p = Path(path).expanduser()
    if p.is_dir():
        folder = p.resolve()
        newest = _candidates(folder)[0]
        _refuse_link(newest, folder)
        return newest.resolve()
    if not p.is_file():
        raise FileNotFoundError(
            f"no checkpoint at {p}: expected a run folder or a checkpoints/<name>.pt file"
        )
    p = p.parent.resolve() / p.name
    if p.parent.name == "checkpoints":
        _refuse_link(p, p.parent.parent)
    return p.resolve()


def load_resumable(
    path: str | os.PathLike[str], *, trusted: bool = False
) -> tuple[Path, dict[str, Any]]:
    """The checkpoint to resume ``path`` from, and its content.

    For a checkpoint file: that file (see :func:`checkpoint_path`). For a run folder:
    its newest intact checkpoint. A damaged one (empty, truncated, corrupt) is logged,
    renamed ``<name>.damaged`` (kept for a look, never deleted) and skipped. A link, or
    a checkpoint refused as unsafe, stops the resume.

    Raises:
        FileNotFoundError: when ``path`` holds no checkpoint.
        marl.serialization.CheckpointError: when none is intact, or one is refused.
    """
    from marl.experiment.checkpoint import load_checkpoint
    from marl.serialization import CheckpointError, UntrustedCheckpointError

    p = Path(path).expanduser()
    if not p.is_dir():
        checkpoint = checkpoint_path(p)
        return checkpoint, load_checkpoint(checkpoint, trusted=trusted)
    folder = p.resolve()
    damaged: list[str] = []
    for candidate in _candidates(folder):
        _refuse_link(candidate, folder)
        try:
            state = load_checkpoint(candidate, trusted=trusted)
        except UntrustedCheckpointError:
            raise
        except CheckpointError as err:
            if not err.damaged:
                raise
            aside = _set_aside(candidate)
            damaged.append(f"{candidate.name} (now {aside.name})")
            log.warning(
                "%s is damaged (%s); kept as %s; trying the previous checkpoint",
                candidate,
                str(err).split(": ", 1)[-1].split(". Intact", 1)[0],
                aside.name,
            )
            continue
        if damaged:
            log.warning(
                "resuming %s from %s: the newer %s %s damaged",
                folder,
                candidate.name,
                ", ".join(damaged),
                "is" if len(damaged) == 1 else "are",
            )
            _repoint_latest(folder / "checkpoints", candidate)
        return candidate.resolve(), state
    raise CheckpointError(
        f"{folder} holds no intact checkpoint: {', '.join(damaged)} damaged; the run "
        "cannot be resumed (start it again in a new folder)",
        folder / "checkpoints",
        damaged=True,
    )


def _set_aside(file: Path) -> Path:
    """Rename a damaged checkpoint ``<name>.damaged`` (``.damaged-<k>`` if that is taken);
    ``latest.pt``, when it is a hard link to it, goes too."""
    aside = file.with_name(file.name + ".damaged")
    k = 1
    while aside.exists():
        aside = file.with_name(f"{file.name}.damaged-{k}")
        k += 1
    latest = file.parent / "latest.pt"
    if file.name != "latest.pt" and latest.is_file() and not latest.is_symlink():
        try:
            if os.path.samefile(latest, file):
                latest.unlink()
        except OSError:
            pass
    replace(file, aside)
    return aside


def _repoint_latest(directory: Path, checkpoint: Path) -> None:
    latest = directory / "latest.pt"
    if checkpoint.name == "latest.pt" or (latest.exists() and not latest.is_symlink()):
        return
    from marl.experiment.checkpoint import CheckpointManager

    manager = CheckpointManager.__new__(CheckpointManager)
    manager.folder = directory
    manager._link_latest(checkpoint)


# ------------------------------------------------------------------ run identity
def new_run_id() -> str:
    """A new run id (``uuid4().hex``)."""
    return uuid.uuid4().hex


def read_run_id(folder: str | os.PathLike[str]) -> str | None:
    """The ``run_id`` of ``<folder>/run.json``; ``None`` for a folder without one.

    Raises:
        ValueError: when ``run.json`` is there but unreadable.
    """
    file = Path(folder) / RUN_FILE
    if not file.exists():
        return None
    try:
        run_id = json.loads(file.read_text())["run_id"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{file} is not a run file (JSON with a run_id): {err}") from err
    if not isinstance(run_id, str) or not run_id:
        raise ValueError(f"{file}: run_id must be a non-empty string, got {run_id!r}")
    return run_id


def write_run_id(folder: str | os.PathLike[str], run_id: str) -> None:
    """Write ``<folder>/run.json`` for ``run_id`` (atomically); a folder that already has
    one keeps it (an id never changes).

    Raises:
        ValueError: when the folder's ``run.json`` names another run.
    """
    import time

    existing = read_run_id(folder)
    if existing is not None:
        if existing != run_id:
            raise ValueError(f"{Path(folder) / RUN_FILE} names run {existing}, not {run_id}")
        return
    file = Path(folder) / RUN_FILE
    created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    text = json.dumps({"run_id": run_id, "created": created}, indent=1) + "\n"
    atomic_write_text(file, text, fsync=False)


def check_run_identity(
    folder: str | os.PathLike[str], checkpoint: Path, state: Mapping[str, Any]
) -> str | None:
    """Refuse ``checkpoint`` when it is not a checkpoint of the run that ``folder`` holds.

    With ids on both sides (``run.json``, the checkpoint's ``run_id``), they must be
    equal. Where one side predates ids, the checkpoint's task, algorithm and seed must
    agree with the folder's ``config.yaml`` (when it has one).

    Returns:
        The run id the folder continues with (the folder's, else the checkpoint's;
        ``None``: a new one is to be made).

    Raises:
        ValueError: naming both runs.
    """
    folder = Path(folder)
    folder_id = read_run_id(folder)
    checkpoint_id = state.get("run_id")
    if folder_id is not None and checkpoint_id is not None:
        if folder_id != checkpoint_id:
            raise ValueError(
                f"{checkpoint} is a checkpoint of run {checkpoint_id}, but {folder} holds run "
                f"{folder_id} ({folder / RUN_FILE}): a folder resumes only from its own "
                "run's checkpoints. Resume the other run in its own folder, or continue it "
                "in a new one with Experiment.resume(checkpoint, folder=<new folder>)"
            )
        return folder_id
    config_file = folder / "config.yaml"
    if config_file.is_file():
        import yaml

        try:
            config = yaml.safe_load(config_file.read_text()) or {}
        except yaml.YAMLError as err:
            raise ValueError(f"{config_file} cannot be read: {err}") from err
        saved = state.get("config") or {}
        if isinstance(config, Mapping) and "task" in config:
            lines = differences(
                saved,
                config,
                [("task",), ("algorithm",), ("seed",)],
                given=f"this folder's {config_file.name}",
            )
            if lines:
                raise ValueError(
                    f"{checkpoint} is not a checkpoint of the run in {folder} (written before "
                    "run ids, so compared with its config.yaml):\n  " + "\n  ".join(lines)
                )
    return folder_id if folder_id is not None else checkpoint_id


def run_folder_of(checkpoint: str | os.PathLike[str]) -> Path | None:
    """``<run>/checkpoints/<name>.pt`` -> ``<run>``; ``None`` for a file elsewhere.

    Examples:
        >>> run_folder_of("/runs/a/checkpoints/latest.pt").as_posix()
        '/runs/a'
        >>> run_folder_of("/tmp/weights.pt") is None
        True
    """
    p = Path(checkpoint)
    return p.parent.parent if p.parent.name == "checkpoints" else None


def plain(value: Any) -> Any:
    """Tuples to lists, recursively, so configs from YAML, pickles and dataclasses compare."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def normalize_description(description: Mapping[str, Any]) -> dict[str, Any]:
    """A checkpoint's config in the current form (version 1 wrote ``algorithm_config``
    as ``{"all": {...}}`` and per-group algorithms as ``"a=x+b=y"``)."""
    out = plain(dict(description))
    if isinstance(out.get("experiment"), dict):  # runs from before the field: whole episodes
        out["experiment"].setdefault("evaluation_max_steps", None)
    algorithm, configs = out.get("algorithm"), out.get("algorithm_config")
    if isinstance(algorithm, str) and "=" in algorithm:  # version 1, per group
        out["algorithm"] = dict(part.split("=", 1) for part in algorithm.split("+"))
    elif isinstance(configs, Mapping) and set(configs) == {"all"}:  # version 1, one algorithm
        out["algorithm_config"] = configs["all"]
    # version 1 also wrote fields that are derived, not set (e.g. PPO's share_params)
    algorithm, configs = out.get("algorithm"), out.get("algorithm_config")
    if isinstance(algorithm, Mapping) and isinstance(configs, Mapping):
        out["algorithm_config"] = {
            g: _settable(algorithm.get(g), c) if isinstance(c, Mapping) else c
            for g, c in configs.items()
        }
    elif isinstance(configs, Mapping):
        out["algorithm_config"] = _settable(algorithm, configs)
    return out


def _settable(name: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` without the fields that algorithm ``name``'s dataclass derives itself."""
    import dataclasses

    from marl.algorithms import get_algorithm, list_algorithms

    if not isinstance(name, str) or name not in list_algorithms():
        return dict(config)
    derived = {f.name for f in dataclasses.fields(get_algorithm(name).config_cls) if not f.init}
    return {k: v for k, v in config.items() if k not in derived}


def algorithm_from_description(description: Mapping[str, Any]) -> tuple[Any, Any]:
    """``(algorithm, algorithm_config)`` to rebuild a described run's algorithm."""
    d = normalize_description(description)
    return d["algorithm"], d.get("algorithm_config")


def describe_path(description: Mapping[str, Any], path: tuple[str, ...]) -> str:
    """The command-line key of a path in a description.

    Examples:
        >>> describe_path({"algorithm": "mappo"}, ("algorithm_config", "lr"))
        'algorithm.lr'
        >>> describe_path({"algorithm": {"agent": "iql"}}, ("algorithm_config", "agent", "lr"))
        'algorithm.groups.agent.lr'
        >>> describe_path({"algorithm": {"agent": "iql"}}, ("algorithm", "agent"))
        'algorithm.groups.agent'
    """
    per_group = isinstance(description.get("algorithm"), Mapping)
    head, *rest = path
    if head == "algorithm_config":
        return ".".join(["algorithm", *(["groups"] if per_group and rest else []), *rest])
    if head == "algorithm" and rest:
        return ".".join(["algorithm", "groups", *rest])
    return ".".join(path)


_ABSENT = object()


def _get(data: Any, path: Iterable[str]) -> Any:
    for key in path:
        if not isinstance(data, Mapping) or key not in data:
            return _ABSENT
        data = data[key]
    return data


def _leaves(
    saved: Any, current: Any, path: tuple[str, ...]
) -> list[tuple[tuple[str, ...], Any, Any]]:
    if isinstance(saved, Mapping) and isinstance(current, Mapping):
        out = []
        for key in list(saved) + [k for k in current if k not in saved]:
            out += _leaves(saved.get(key, _ABSENT), current.get(key, _ABSENT), (*path, key))
        return out
    return [] if saved == current else [(path, saved, current)]


def _show(value: Any) -> str:
    return "(absent)" if value is _ABSENT else repr(value)


def differences(
    saved: Mapping[str, Any],
    current: Mapping[str, Any],
    paths: Iterable[tuple[str, ...]] | None = None,
    given: str = "this run",
) -> list[str]:
    """Lines naming each setting where ``current`` contradicts the checkpoint's ``saved``.

    Args:
        saved: the checkpoint's description.
        current: the description of the run about to resume.
        paths: where to compare (default: task, task overrides, algorithm and its
            config, seed, and the :data:`FIXED_ON_RESUME` experiment fields).
        given: how to name ``current`` in the lines.

    Examples:
        >>> saved = {"task": "vmas/navigation", "seed": 7, "algorithm": "mappo",
        ...          "algorithm_config": {"lr": 5e-05, "buffer_device": "cpu"}}
        >>> differences(saved, dict(saved, seed=0, algorithm_config={"lr": 1e-3}))
        ["algorithm.lr: the checkpoint's run has 5e-05, this run 0.001", "seed: the checkpoint's run has 7, this run 0"]
    """
    saved, current = normalize_description(saved), normalize_description(current)
    if paths is None:
        paths = [(s,) for s in _SECTIONS] + [("experiment", f) for f in FIXED_ON_RESUME]
    # where the algorithm itself differs, its hyperparameters are not listed one by one
    old_algo, new_algo = saved.get("algorithm"), current.get("algorithm")
    if isinstance(old_algo, Mapping) and isinstance(new_algo, Mapping):
        renamed = {("algorithm_config", g) for g in old_algo if old_algo[g] != new_algo.get(g)}
    else:
        renamed = {("algorithm_config",)} if old_algo != new_algo else set()
    lines = []
    for path in paths:
        for leaf, old, new in _leaves(_get(saved, path), _get(current, path), tuple(path)):
            if any(leaf[: len(r)] == r for r in renamed):
                continue
            if leaf[0] == "algorithm_config" and leaf[-1] == "buffer_device":
                continue  # follows experiment.buffer_device, which may change on a resume
            if leaf[0] == "experiment" and leaf[-1] in _NOT_COMPARED:
                continue
            key = describe_path(saved, leaf)
            lines.append(f"{key}: the checkpoint's run has {_show(old)}, {given} {_show(new)}")
    return lines


def resume_arguments(
    checkpoint: Path,
    state: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    task: Any = None,
    folder: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """The :class:`~marl.experiment.Experiment` arguments that continue a checkpoint's run.

    Args:
        checkpoint: the checkpoint file.
        state: its content.
        config: ``experiment`` settings to change; :data:`FIXED_ON_RESUME` ones must
            keep their value.
        task: the env factory of a custom task (a factory is not saved).
        folder: where the run continues (default: the checkpoint's run folder).

    Raises:
        ValueError: naming what contradicts the checkpoint, or what is missing.
    """
    import dataclasses

    from marl.envs import list_tasks
    from marl.experiment.config import ExperimentConfig

    saved = state.get("config")
    if not isinstance(saved, Mapping) or "task" not in saved:
        raise ValueError(
            f"{checkpoint} holds no run config: expected a checkpoint written by "
            "marl.experiment.Experiment"
        )
    saved = normalize_description(saved)
    target = Path(folder) if folder is not None else run_folder_of(checkpoint)
    if target is None:
        raise ValueError(
            f"{checkpoint} is not in a run folder's checkpoints/: say where the run "
            "continues (Experiment.resume(path, folder=...), or hydra.run.dir=... for marl-run)"
        )
    names = {f.name for f in dataclasses.fields(ExperimentConfig)}
    before = {k: v for k, v in saved.get("experiment", {}).items() if k in names}
    changes = dict(config or {})
    for key in _NOT_COMPARED:
        if key in changes:
            raise ValueError(
                f"Experiment.resume: experiment.{key} comes from the checkpoint "
                f"(given {changes[key]!r}); use folder= to continue elsewhere"
            )
    fixed = [
        f"experiment.{k}: the checkpoint's run has {before.get(k)!r}, given {v!r}"
        for k, v in changes.items()
        if k in FIXED_ON_RESUME and plain(v) != before.get(k)
    ]
    if fixed:
        raise ValueError(
            f"Experiment.resume: a resumed run keeps these settings of its checkpoint "
            f"{checkpoint}:\n  " + "\n  ".join(fixed)
        )
    experiment = {**before, **changes}
    experiment.update(restore_file=str(checkpoint), save_folder=str(target))
    if task is None:
        if saved["task"] not in list_tasks():
            raise ValueError(
                f"the checkpoint's task {saved['task']!r} is not in the task catalogue: "
                "pass its env factory, Experiment.resume(path, task=factory)"
            )
        task = saved["task"]
    algorithm, algorithm_config = algorithm_from_description(saved)
    return {
        "task": task,
        "algorithm": algorithm,
        "model": saved.get("model"),
        "seed": saved["seed"],
        "config": experiment,
        "algorithm_config": algorithm_config,
        "task_overrides": saved.get("task_overrides"),
        "task_name": saved["task"],
    }
