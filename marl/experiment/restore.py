"""Continuing a run from its checkpoint: the checks before anything is written, then the restore.

A run checks first and writes after (see :meth:`Experiment.run
<marl.experiment.Experiment.run>`): :func:`load_restore` checks the checkpoint against
the run's config, :func:`check_folder` refuses a folder that holds another run and
:func:`identify` finds the run's id, all before the folder is touched. Once the run has
built its trainer and outputs, :func:`restore_run` loads the checkpoint into them.
What a resume may change, and how runs are told apart, is :mod:`marl.experiment.resume`'s.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from marl.algorithms import Algorithm, EvalEpisodes, Trainer
from marl.experiment.checkpoint import CheckpointManager, set_rng_state
from marl.experiment.config import ExperimentConfig
from marl.experiment.lifecycle import held_run
from marl.experiment.outputs import RunOutputs
from marl.experiment.resume import (
    FIXED_ON_RESUME,
    check_run_identity,
    differences,
    load_resumable,
    new_run_id,
    read_run_id,
    run_folder_of,
)

__all__ = ["RestorePoint", "check_folder", "identify", "load_restore", "restore_run"]

log = logging.getLogger("marl.experiment")

RestorePoint = tuple[Path, dict[str, Any]]
"""``(checkpoint path, its loaded state)``: where a run continues from."""


def load_restore(
    pending: RestorePoint | None,
    restore_file: str | None,
    describe: Callable[[], dict[str, Any]],
) -> RestorePoint | None:
    """The checkpoint to resume from, checked against this run's config.

    Args:
        pending: the checkpoint :meth:`Experiment.resume
            <marl.experiment.Experiment.resume>` already loaded, if any.
        restore_file: ``experiment.restore_file``, loaded when nothing is pending.
        describe: the run's resolved config (called only when there is a checkpoint).

    Returns:
        ``None`` for a new run.

    Raises:
        ValueError: when the checkpoint holds no run config, or another run's.
    """
    if pending is not None:
        checkpoint, state = pending
    elif restore_file:
        checkpoint, state = load_resumable(restore_file)
    else:
        return None
    saved = state.get("config")
    if not isinstance(saved, Mapping) or "task" not in saved:
        raise ValueError(
            f"experiment.restore_file: {checkpoint} holds no run config: expected a "
            "checkpoint written by marl.experiment.Experiment"
        )
    lines = differences(saved, describe())
    if lines:
        raise ValueError(
            f"experiment.restore_file: {checkpoint} is a checkpoint of another run:\n  "
            + "\n  ".join(lines)
            + "\nA resumed run keeps its checkpoint's task, algorithm and hyperparameters, "
            f"seed and experiment.{{{','.join(FIXED_ON_RESUME)}}}: "
            "Experiment.resume(path) takes them from the checkpoint."
        )
    return checkpoint, state


def check_folder(folder: Path, checkpoint: Path | None) -> None:
    """Refuse to write into a folder that holds another run (its rows would mix).

    A folder may hold a run only when ``checkpoint`` is one of that run's own.

    Raises:
        FileExistsError: naming the run the folder holds, and what to do instead.
    """
    held = held_run(folder)
    if held is None:
        return
    if checkpoint is not None:
        own = run_folder_of(checkpoint)
        if own is not None and own.resolve() == folder:
            return
        raise FileExistsError(
            f"{folder} already holds {held}; the checkpoint {checkpoint} belongs "
            "elsewhere and cannot continue there: choose an empty folder"
        )
    raise FileExistsError(
        f"{folder} already holds {held}. Continue it with "
        f"Experiment.resume({str(folder)!r}) (marl-run --resume {folder}), or "
        "choose another folder."
    )


def identify(folder: Path, restore: RestorePoint | None) -> str:
    """The run's id: the folder's ``run.json``, else the checkpoint's, else a new one.

    Raises:
        ValueError: for a checkpoint of another run (:func:`check_run_identity
            <marl.experiment.resume.check_run_identity>`).
    """
    if restore is None:
        return read_run_id(folder) or new_run_id()
    return check_run_identity(folder, *restore) or new_run_id()


def restore_run(
    path: Path,
    state: dict[str, Any],
    *,
    trainer: Trainer,
    algorithm: Algorithm,
    outputs: RunOutputs,
    checkpoints: CheckpointManager | None,
    config: ExperimentConfig,
) -> float:
    """Load the checkpoint ``state`` (read from ``path``) into a freshly built run.

    Trainer, RNG states, loggers, ``results.json`` and the best policy continue from
    the checkpoint's frames; newer checkpoints, of a future that will be trained
    again, are discarded.

    Returns:
        The training wall time before the checkpoint (``results.json`` counts on from it).
    """
    trainer.load_state_dict(state["trainer"])
    set_rng_state(state["rng"])
    frames = trainer.frames
    if state.get("last_evaluation"):
        trainer.last_evaluation = EvalEpisodes(**state["last_evaluation"])
    # a finished run resumed with nothing to train keeps its absolute metric: evaluating
    # the same policy again would only replace the published figure by another draw
    outputs.restore(state, frames, finished=frames >= config.total_frames)
    last = outputs.results.last_evaluation
    if last is not None and last[0] == frames:
        # already evaluated at these frames (e.g. a resume with nothing to train, whose
        # final evaluation came after this checkpoint): no second row for them, and
        # that evaluation, of these very weights, competes for the best policy
        trainer.mark_evaluated()
        outputs.best_policy.observe(algorithm, frames, last[1])
    # checkpoints before version 3 kept no wall time: the last evaluation's is the best guess
    elapsed = state.get("elapsed_time", outputs.results.last_elapsed_time)
    elapsed_before = float(elapsed or 0.0)
    if checkpoints is not None:
        checkpoints.discard_after(frames)
    changed = [
        f"experiment.{k}={v!r}"
        for k, v in dataclasses.asdict(config).items()
        if k not in ("restore_file", "save_folder")
        and state["config"].get("experiment", {}).get(k, v) != v
    ]
    log.info(
        "resumed from %s at %d frames%s",
        path,
        frames,
        f"; changed: {', '.join(changed)}" if changed else "",
    )
    return elapsed_before
