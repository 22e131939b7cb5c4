"""What a resumed run keeps from its checkpoint, and what it may change.

A checkpoint holds the run's resolved config (:meth:`Experiment.describe
<marl.experiment.Experiment.describe>`). A resumed run takes its task, algorithm and
hyperparameters, model and seed from there, and continues in the run's own folder
(the one that holds ``checkpoints/``). Settings that change what is learned or how
it is measured cannot change on a resume (:data:`FIXED_ON_RESUME`); the others
(``total_frames``, evaluation, logging and checkpoint intervals, devices, ...) can,
and are recorded in the run's ``config.yaml`` and its next checkpoints.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "FIXED_ON_RESUME",
    "algorithm_from_description",
    "checkpoint_path",
    "describe_path",
    "differences",
    "normalize_description",
    "plain",
    "resume_arguments",
    "run_folder_of",
]

FIXED_ON_RESUME = ("num_envs", "frames_per_batch", "init_random_frames", "evaluation_deterministic")
"""``experiment`` fields a resumed run keeps from its checkpoint (they shape the training
data or the meaning of the evaluations); every other ``experiment`` field may change."""

_NOT_COMPARED = ("save_folder", "restore_file")
_NUMBERED = re.compile(r"^checkpoint_(\d+)\.pt$")

_SECTIONS = ("task", "task_overrides", "algorithm", "algorithm_config", "seed")


def checkpoint_path(path: str | os.PathLike[str]) -> Path:
    """The checkpoint file of ``path``: a checkpoint file, or a run folder's newest checkpoint.

    For a run folder that is its ``checkpoints/checkpoint_<frames>.pt`` with the most
    frames (each is complete once it has its name), else ``checkpoints/latest.pt``. They
    differ only when a run was killed between writing a checkpoint and pointing
    ``latest.pt`` at it.

    Raises:
        FileNotFoundError: naming what was looked for.

    Examples:
        >>> import tempfile
        >>> checkpoint_path(tempfile.mkdtemp())
        Traceback (most recent call last):
        ...
        FileNotFoundError: ... holds no checkpoint: expected .../checkpoints/latest.pt (a run stopped before its first checkpoint cannot be resumed; start it again in a new folder)
    """
    p = Path(path).expanduser()
    if p.is_dir():
        folder = p / "checkpoints"
        numbered = sorted(
            (int(m.group(1)), f)
            for f in (folder.iterdir() if folder.is_dir() else [])
            if (m := _NUMBERED.match(f.name))
        )
        if numbered:
            return numbered[-1][1].resolve()
        latest = folder / "latest.pt"
        if not latest.is_file():
            raise FileNotFoundError(
                f"{p} holds no checkpoint: expected {latest} (a run stopped before its first "
                "checkpoint cannot be resumed; start it again in a new folder)"
            )
        return latest.resolve()
    if not p.is_file():
        raise FileNotFoundError(
            f"no checkpoint at {p}: expected a run folder or a checkpoints/<name>.pt file"
        )
    return p.resolve()


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
