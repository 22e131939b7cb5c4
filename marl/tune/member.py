"""One member of a tuning run: a real marl run (:class:`~marl.experiment.Experiment`) in
``<run>/members/<member>/``, reporting to Ray Tune every ``interval`` frames.

Ray Tune calls :func:`train_member` in a worker process with the member's sampled
values. Every report carries the member's checkpoint (marl's own ``.pt``), so:

- a member restarted by Ray (a pause, a killed tuning run that is restored) continues
  from its own checkpoint with :meth:`Experiment.resume`;
- a member cut by PBT receives a better member's checkpoint and new values: the
  checkpoint becomes this member's (its config rewritten to the new values, its frame
  count kept), so the resumed run has the donor's networks, optimizer moments (and
  buffers with ``experiment.checkpoint_buffers``) and trains with the new values.
  The exploit is appended to ``lineage.jsonl`` in the member's folder.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marl.algorithms import Trainer, TrainerCallback
from marl.atomic import atomic_write_text

__all__ = [
    "MEMBER_FILE",
    "MemberPlan",
    "append_report",
    "compose_member",
    "finish_stopped_member",
    "install_checkpoint",
    "member_experiment",
    "member_name",
    "read_lineage",
    "read_reports",
    "record_exploit",
    "report_metrics",
    "train_member",
    "truncate_reports",
]

MEMBER_FILE = "member.json"
"""Next to ``checkpoint.pt`` in a Ray checkpoint: whose it is, at what frames, with what values."""
LINEAGE_FILE = "lineage.jsonl"
REPORTS_FILE = "reports.jsonl"
"""Every report of a member (its scalars and values), in the member's folder."""


@dataclass(frozen=True)
class MemberPlan:
    """What every member shares (passed to the Ray workers with ``tune.with_parameters``)."""

    folder: str
    """The tuning run's folder; members run in ``<folder>/members/<member>``."""
    overrides: tuple[str, ...]
    """``marl-run`` overrides every member gets (the space's and the command line's)."""
    metric: str
    interval: int
    seed_key: bool
    """The space searches ``seed`` (else member ``i`` runs with ``seed + i``)."""


def member_name(trial_id: str) -> str:
    """``"a1b2c_00003"`` (Ray's trial id) -> ``"member_03"``.

    Examples:
        >>> member_name("a1b2c_00003")
        'member_03'
    """
    index = trial_id.rsplit("_", 1)[-1]
    return f"member_{int(index):02d}" if index.isdigit() else f"member_{trial_id}"


def compose_member(plan: MemberPlan, values: Mapping[str, Any], index: int) -> dict[str, Any]:
    """Member ``index``'s ``marl-run`` config: the plan's overrides, then its values; its
    seed is the config's plus ``index`` unless the space searches ``seed``."""
    from omegaconf import OmegaConf

    from marl.experiment.cli import compose_config
    from marl.tune.space import override_strings

    overrides = [*plan.overrides, *override_strings(values)]
    cfg = OmegaConf.to_container(compose_config(overrides), resolve=True)
    if not plan.seed_key:
        cfg["seed"] = int(cfg.get("seed", 0)) + index
    return cfg


def member_experiment(
    cfg: Mapping[str, Any],
    folder: Path,
    plan: MemberPlan,
    callbacks: Sequence[Any],
    runs: int = 1,
) -> Any:
    """The member's :class:`Experiment` from a composed marl-run config (not run).

    Args:
        cfg: the member's config (:func:`compose_member`).
        folder: the member's run folder.
        plan: what every member shares (its interval: evaluations and checkpoints).
        callbacks: the member's trainer callbacks.
        runs: ``experiment.runs``: the population's size when every member trains in
            one process (:mod:`marl.tune.vectorized`), else 1.

    Raises:
        ValueError: when the overrides set ``experiment.runs`` themselves.
    """
    from marl.experiment.cli import algorithm_choice
    from marl.experiment.experiment import Experiment

    algorithm, algorithm_config = algorithm_choice(cfg["algorithm"])
    experiment = dict(cfg.get("experiment") or {})
    if experiment.get("runs", 1) != 1:
        raise ValueError(
            f"experiment.runs={experiment['runs']}: marl-tune trains one run per member; "
            "drop experiment.runs (several runs in one process are marl-run's)"
        )
    experiment.update(
        save_folder=str(folder),
        evaluation_interval=plan.interval,
        checkpoint_interval=plan.interval,
        progress=False,
        restore_file=None,
        runs=runs,
    )
    return Experiment(
        cfg["task"],
        algorithm,
        model=cfg.get("model"),
        seed=int(cfg["seed"]),
        config=experiment,
        algorithm_config=algorithm_config,
        task_overrides=cfg.get("task_overrides") or {},
        callbacks=callbacks,
    )


class _Reporter(TrainerCallback):
    """Reports the scalars and the member's checkpoint to Ray every ``interval`` frames."""

    def __init__(self, plan: MemberPlan, member: str, values: Mapping[str, Any]):
        self.experiment: Any = None  # the run it reports, set once built
        self.plan = plan
        self.member = member
        self.values = dict(values)
        self.evaluation: dict[str, float] = {}
        self.last_report = -1

    def on_train_start(self, trainer: Trainer) -> None:
        self.last_report = trainer.frames

    def on_evaluation(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self.evaluation = {k: float(v) for k, v in logs.items() if k.startswith("eval/")}

    def on_iteration_end(self, trainer: Trainer, logs: dict[str, float]) -> None:
        due = trainer.frames - self.last_report >= self.plan.interval
        if not due and trainer.frames < trainer.total_frames:
            return
        self.report(trainer, logs)

    def report(self, trainer: Trainer, logs: Mapping[str, float]) -> None:
        metrics = report_metrics(logs, self.evaluation, trainer.frames, self.plan.metric)
        from ray import tune

        frames = trainer.frames
        exp = self.experiment
        checkpoint = exp.folder / "checkpoints" / f"checkpoint_{frames}.pt"
        if not checkpoint.exists():
            checkpoint = exp.save_checkpoint()
        staging = Path(tempfile.mkdtemp(prefix="marl-tune-"))
        try:
            try:
                os.link(checkpoint, staging / "checkpoint.pt")
            except OSError:
                shutil.copy2(checkpoint, staging / "checkpoint.pt")
            (staging / MEMBER_FILE).write_text(
                json.dumps({"member": self.member, "frames": frames, "values": self.values})
            )
            self.last_report = frames
            metrics = append_report(exp.folder, metrics, self.values)
            # Ray ends a stopped member's thread here with sys.exit(0) (ASHA's cuts and
            # max_t, PBT's pauses and exploits): its status.json then says "stopped"; its
            # results.json holds its evaluations up to that report.
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(str(staging)))
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _scalar(value: Any) -> bool:
    return isinstance(value, (int, float, str, bool))


def report_metrics(
    logs: Mapping[str, Any], evaluation: Mapping[str, float], frames: int, metric: str
) -> dict[str, Any]:
    """A report's scalars: the iteration's numeric logs, the last evaluation's, ``frames``.

    Raises:
        ValueError: when ``metric`` is not among them, listing those logged.

    Examples:
        >>> report_metrics({"train/loss": 0.5, "note": "x"}, {"eval/r": 2.0}, 500, "eval/r")
        {'train/loss': 0.5, 'eval/r': 2.0, 'frames': 500}
    """
    metrics: dict[str, Any] = {
        k: float(v)
        for k, v in logs.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    metrics.update(evaluation)
    metrics["frames"] = int(frames)
    if metric not in metrics:
        raise ValueError(
            f"tune.metric: {metric!r} is not logged by this run; logged: {sorted(metrics)}"
        )
    return metrics


def append_report(
    folder: Path, metrics: Mapping[str, Any], values: Mapping[str, Any]
) -> dict[str, Any]:
    """Append a report to the member's ``reports.jsonl``; return its scalars with the
    member's values as ``hp/<key>`` (what Ray Tune is given)."""
    out = {**metrics, **{f"hp/{k}": v for k, v in values.items() if _scalar(v)}}
    with open(Path(folder) / REPORTS_FILE, "a") as f:
        f.write(json.dumps({**out, "values": dict(values), "time": time.time()}) + "\n")
    return out


def install_checkpoint(
    source: Path, folder: Path, description: Mapping[str, Any], keep: int
) -> int:
    """Make checkpoint ``source`` this member's latest, with this member's config
    (``description``: its :meth:`Experiment.describe`), its run id, and its checkpoints
    after that frame count discarded.

    Returns:
        Its frame count.
    """
    from marl.experiment.checkpoint import CheckpointManager, load_checkpoint
    from marl.experiment.resume import new_run_id, read_run_id, write_run_id

    state = load_checkpoint(source)
    frames = int(state["trainer"]["frames"])
    state["config"] = dict(description)
    manager = CheckpointManager(folder / "checkpoints", keep)
    # the copy becomes this member's own checkpoint: its run id is this member's
    run_id = read_run_id(folder)
    if run_id is None:
        run_id = new_run_id()
        write_run_id(folder, run_id)
    state["run_id"] = run_id
    manager.discard_after(frames)  # a later checkpoint of this member is abandoned
    manager.save(state, frames)
    return frames


def train_member(values: dict[str, Any], plan: MemberPlan) -> None:
    """The Ray Tune trainable: run the member until ``experiment.total_frames``.

    Args:
        values: this member's sampled (or perturbed) values, ``{marl-run key: value}``.
        plan: what every member shares.
    """
    import torch
    from ray import tune

    from marl.experiment.runlock import lock_run_folder

    torch.set_num_threads(1)
    member = member_name(tune.get_context().get_trial_id())
    given = tune.get_checkpoint()
    # the member's folder is written (cleared, given a checkpoint) before its Experiment
    # runs: hold it from here; the Experiment joins the hold (marl.experiment.runlock)
    with lock_run_folder(Path(plan.folder) / "members" / member):
        if given is None:
            prepare_member(values, plan, member, None).run()
            return
        with given.as_directory() as d:
            exp = prepare_member(values, plan, member, Path(d))
        exp.run()


def prepare_member(
    values: Mapping[str, Any], plan: MemberPlan, member: str, checkpoint: Path | None
) -> Any:
    """The member's :class:`~marl.experiment.Experiment`, ready to run (with its reporter).

    Args:
        values: the member's values.
        plan: what every member shares.
        member: its name (``member_03``).
        checkpoint: a Ray checkpoint folder (``checkpoint.pt`` and ``member.json``) to
            continue from: the member's own (a restart) or a better member's (an exploit);
            ``None``: a new run.
    """
    from marl.experiment.experiment import Experiment
    from marl.experiment.resume import FIXED_ON_RESUME
    from marl.experiment.runlock import LOCK_FILE, check_run_folder

    index = int(member.split("_")[-1]) if member.split("_")[-1].isdigit() else 0
    folder = Path(plan.folder) / "members" / member
    check_run_folder(folder)  # a live run of the member: never clear or rewrite its files
    reporter = _Reporter(plan, member, values)
    candidate = member_experiment(compose_member(plan, values, index), folder, plan, [reporter])
    if checkpoint is None:
        if folder.exists():  # a start that never reported: Ray starts it again from zero
            for path in folder.iterdir():
                if path.name == LOCK_FILE:  # train_member's hold: deleting it would free it
                    continue
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        exp = candidate
    else:
        meta = json.loads((checkpoint / MEMBER_FILE).read_text())
        description = candidate.describe()
        own = read_reports(folder)
        # the member's last report, read before install_checkpoint drops the reports after frames
        cut = {"frames": int(own[-1]["frames"]), "score": own[-1].get(plan.metric)} if own else {}
        frames = install_checkpoint(
            checkpoint / "checkpoint.pt", folder, description, candidate.config.keep_checkpoints
        )
        if meta["member"] != member:
            donor = {**meta, "checkpoint": str(checkpoint)}
            record_exploit(folder, member, donor, values, frames, cut)
        truncate_reports(folder, frames)
        changes = {
            k: v
            for k, v in description["experiment"].items()
            if k not in ("save_folder", "restore_file", *FIXED_ON_RESUME)
        }
        exp = Experiment.resume(
            folder / "checkpoints" / f"checkpoint_{frames}.pt", changes, callbacks=[reporter]
        )
    reporter.experiment = exp
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "values.json").write_text(json.dumps(dict(values), indent=1))
    return exp


def finish_stopped_member(folder: Path, total_frames: int) -> bool:
    """Finish a member that Ray ended in its last report, after it trained every frame.

    Ray ends a member's thread with ``sys.exit(0)`` inside ``tune.report`` when it stops
    or pauses the member there. At the last report (``total_frames``) the run has then
    trained all its frames but not written its end: ``status.json`` says ``stopped`` and
    ``results.json`` lacks the absolute metric. Resuming it from its last checkpoint
    trains nothing and writes that end (the absolute metric, ``complete``).

    Args:
        folder: the member's run folder.
        total_frames: the frames every member trains.

    Returns:
        Whether the member was finished here (``False``: it was not stopped at
        ``total_frames``; a member ASHA cut earlier stays ``stopped``).
    """
    from marl.experiment.experiment import Experiment

    path = Path(folder) / "status.json"
    try:
        status = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    if status.get("status") != "stopped" or int(status.get("frames", 0)) < total_frames:
        return False
    Experiment.resume(folder).run()
    return True


def truncate_reports(folder: Path, frames: int) -> None:
    """Drop the member's reports after ``frames`` (of a run killed after its last
    checkpoint, or cut for an earlier checkpoint)."""
    path = folder / REPORTS_FILE
    if path.exists():
        kept = [r for r in read_reports(folder) if r["frames"] <= frames]
        atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in kept), fsync=False)


def read_reports(folder: Path) -> list[dict[str, Any]]:
    """A member's reports, oldest first (``frames``, the scalars, ``hp/<key>``, ``values``)."""
    path = Path(folder) / REPORTS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def record_exploit(
    folder: Path,
    member: str,
    donor: Mapping[str, Any],
    values: Mapping[str, Any],
    frames: int,
    cut: Mapping[str, Any],
) -> None:
    """Append an exploit to the member's ``lineage.jsonl`` (its old values: ``values.json``).

    ``frames`` is where the member continues (the donor's checkpoint), ``member_frames``
    and ``member_score`` its last report before the cut. They differ in asynchronous PBT, where the donor's
    checkpoint is the one from its own last check: a member cut at 500 frames for a donor
    checked at 1,000 continues from 1,000 (its reports jump from 500 to 1,500), one cut at
    1,000 for a donor checked at 500 drops its own report at 1,000 and trains it again.
    """
    old = {}
    values_file = folder / "values.json"
    if values_file.exists():
        old = json.loads(values_file.read_text())
    event = {
        "member": member,
        "frames": frames,
        "member_frames": cut.get("frames", 0),
        "member_score": cut.get("score"),
        "donor": donor["member"],
        "donor_frames": donor["frames"],
        "donor_checkpoint": donor["checkpoint"],
        "old_values": old,
        "donor_values": donor.get("values", {}),
        "new_values": dict(values),
        "time": time.time(),
    }
    with open(folder / LINEAGE_FILE, "a") as f:
        f.write(json.dumps(event) + "\n")


def read_lineage(members: Sequence[Path]) -> list[dict[str, Any]]:
    """Every exploit of these member folders, in order of frames then time."""
    events = []
    for folder in members:
        path = Path(folder) / LINEAGE_FILE
        if path.exists():
            events += [json.loads(line) for line in path.read_text().splitlines() if line]
    return sorted(events, key=lambda e: (e["frames"], e["time"], e["member"]))
