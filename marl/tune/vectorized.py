"""``marl-tune --backend vectorized``: a whole population trained in ONE process.

The Ray backend (:mod:`marl.tune.run`) trains each member in a Ray worker of its own. This
one trains every member together as the runs of one
:class:`~marl.experiment.runs.ExperimentRuns`: one env batch of ``members x num_envs``
sub-envs on the batched families (VMAS, the native envs; other envs keep a collector per
member), and one stacked update of all members' learners, each member with its own
learning rates and loss hyperparameters
(:data:`~marl.algorithms.updates.PER_RUN_SETTINGS`). No Ray, no worker processes, no
pauses and restarts.

Each member is the same :class:`~marl.experiment.Experiment` as a Ray member
(:func:`~marl.tune.member.compose_member`, :func:`~marl.tune.member.member_experiment`:
the space's overrides plus its values, seed ``seed + index``, evaluations and checkpoints
every ``interval`` frames) in ``<folder>/members/member_NN/``, with ``experiment.runs``
set to the population's size. Training goes in segments:

1. every member trains to the next boundary, ``interval`` frames on (the first round
   that reaches it: :meth:`ExperimentRuns.run(until_frames=...)
   <marl.experiment.runs.ExperimentRuns.run>`); each stops there with a checkpoint,
   ``status.json`` saying ``stopped``, and a report in its ``reports.jsonl`` (the same
   rows as a Ray member's);
2. PBT: the worst ``quantile_fraction`` of the members each take a random member of the
   best fraction as donor (Ray's PBT rules, in rounds): the donor's checkpoint at that
   boundary becomes the member's (:func:`~marl.tune.member.install_checkpoint`), with the
   donor's values perturbed (:meth:`Distribution.perturb
   <marl.tune.space.Distribution.perturb>`), recorded in its ``lineage.jsonl``
   (:func:`~marl.tune.member.record_exploit`). ``random`` has no such step. No member is
   cut at the end (``total_frames``);
3. :meth:`ExperimentRuns.resume <marl.experiment.runs.ExperimentRuns.resume>` continues
   every member from that boundary.

The exploit decisions at each boundary draw from ``random.Random`` seeded with the
settings' ``seed`` and the boundary's frames, so a run is reproducible, and a resumed run
takes the decisions the killed one would have. The initial values draw from
``random.Random(seed)`` (``pbt`` and ``random`` sample the same ones; not the ones Ray's
sampler draws for the same seed).

``population.json`` in the tuning folder records the last completed boundary, every
member's values there, and the exploits decided there that are not yet applied all
through. ``resume_tuning`` continues from it: each member's checkpoints and reports
after that boundary are discarded (a segment cut short trains again), pending exploits
are applied again (idempotently: the donor's checkpoint is untouched, a lineage event
is written once), and the members resume together. A run killed before its first
boundary starts again from zero. SIGINT or SIGTERM stops every member at the end of the
round with a checkpoint (:class:`~marl.experiment.RunInterrupted`), and a resume goes on
from the last completed boundary as well.

Limits: the searched keys must be ones that runs trained together may hold apart
(``algorithm.<key>`` or ``algorithm.groups.<group>.<key>`` with the key in
``PER_RUN_SETTINGS``, read when the space is checked, so keys added there work here);
``asha`` is refused; at least 2 members; and what ``experiment.runs`` refuses (recurrent
networks, data-parallel runs, collectors other than ``inline``). Ray's placement
settings (``max_concurrent``, ``cpus_per_member``, ``gpus_per_member``, ``address``)
and ``synch`` (always in rounds here) do not apply.
"""

from __future__ import annotations

import math
import random
import shutil
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from marl.algorithms import Trainer, TrainerCallback
from marl.atomic import atomic_write_json
from marl.tune.member import (
    MemberPlan,
    append_report,
    compose_member,
    install_checkpoint,
    member_experiment,
    read_lineage,
    record_exploit,
    report_metrics,
    truncate_reports,
)
from marl.tune.space import SearchSpace, TuneSettings

__all__ = [
    "BACKENDS",
    "STATE_FILE",
    "check_population",
    "exploit_decisions",
    "initial_values",
    "ray_only_settings",
    "searchable_keys",
    "train_population",
]

BACKENDS = ("ray", "vectorized")
"""``marl-tune --backend``: Ray Tune workers, or one process (this module)."""
_RAY_ONLY = ("max_concurrent", "cpus_per_member", "gpus_per_member", "address")
STATE_FILE = "population.json"
"""The vectorized backend's state in the tuning folder: what ``--resume`` continues from."""


def searchable_keys() -> frozenset[str]:
    """The algorithm settings members of one process may hold apart, read now (not at
    import) from :data:`marl.algorithms.updates.PER_RUN_SETTINGS`.

    Examples:
        >>> {"lr", "actor_lr", "critic_lr"} <= searchable_keys()
        True
    """
    from marl.algorithms.updates import PER_RUN_SETTINGS

    return frozenset(PER_RUN_SETTINGS)


def _per_run_key(key: str, allowed: frozenset[str]) -> bool:
    parts = key.split(".")
    flat = len(parts) == 2 and parts[0] == "algorithm"
    grouped = len(parts) == 4 and parts[:2] == ["algorithm", "groups"]
    return (flat or grouped) and parts[-1] in allowed


def _plan(space: SearchSpace, spec: Mapping[str, Any], folder: Path) -> MemberPlan:
    """What every member shares, as the Ray backend's members share it."""
    return MemberPlan(
        folder=str(folder),
        overrides=tuple(spec["overrides"]),
        metric=space.settings.metric,
        interval=int(spec["interval"]),
        seed_key="seed" in space.keys,
    )


def _names(count: int) -> list[str]:
    return [f"member_{i:02d}" for i in range(count)]


def _build(plan: MemberPlan, values: Mapping[str, Mapping[str, Any]], members: Path) -> list[Any]:
    """The members' Experiments (not run), ``experiment.runs`` = the population's size."""
    count = len(values)
    return [
        member_experiment(compose_member(plan, v, i), members / name, plan, [], runs=count)
        for i, (name, v) in enumerate(values.items())
    ]


def check_population(space: SearchSpace, spec: Mapping[str, Any], folder: Path) -> None:
    """Refuse, before anything is written, a space this backend cannot train.

    Raises:
        ValueError: for ``asha``, fewer than 2 members, a searched key that runs trained
            together cannot hold apart (naming it and the keys they can), or a setup
            that ``experiment.runs`` refuses (its own message).

    Warns:
        UserWarning: naming the space's Ray placement settings (:func:`ray_only_settings`),
            which do not apply here.

    Examples:
        >>> space = SearchSpace.from_dict({"overrides": ["algorithm=mappo"],
        ...     "space": {"algorithm.epochs": [2, 4]}, "tune": {"members": 2}})
        >>> check_population(space, {}, Path("unused"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: --backend vectorized: the members train in one process and may differ only in the settings each run there holds its own value of (...); 'algorithm.epochs' is not one. Search it with --backend ray, or fix it in the overrides.
    """
    ignored = ray_only_settings(space)
    if ignored:
        warnings.warn(
            f"--backend vectorized trains every member in this process: the Ray settings "
            f"{ignored} do not apply (use --backend ray for them)",
            stacklevel=2,
        )
    s = space.settings
    if s.scheduler not in ("pbt", "random"):
        raise ValueError(
            f"--backend vectorized: tune.scheduler {s.scheduler!r} is not supported (its "
            "members train in lockstep and none stops early); use pbt or random, or "
            "--backend ray"
        )
    if s.members < 2:
        raise ValueError(
            f"--backend vectorized: expected tune.members >= 2 (a population in one "
            f"process), got {s.members}"
        )
    allowed = searchable_keys()
    for key in space.keys:
        if not _per_run_key(key, allowed):
            raise ValueError(
                "--backend vectorized: the members train in one process and may differ "
                "only in the settings each run there holds its own value of "
                f"(algorithm[.groups.<group>].{{{', '.join(sorted(allowed))}}}); {key!r} is "
                "not one. Search it with --backend ray, or fix it in the overrides."
            )
    from marl.experiment.runs import ExperimentRuns

    plan = _plan(space, spec, folder)
    values = initial_values(space)
    try:  # builds nothing and writes nothing: the configs and the runs' checks
        ExperimentRuns(_build(plan, values, folder / "members"), folder / "members")
    except ValueError as err:
        raise ValueError(f"--backend vectorized: {err}") from None


def ray_only_settings(space: SearchSpace) -> dict[str, Any]:
    """The space's Ray placement settings that differ from their defaults: they place Ray
    workers, which the vectorized backend has none of.

    Examples:
        >>> ray_only_settings(SearchSpace.from_dict({"space": {"algorithm.lr": [0.1, 0.2]},
        ...     "tune": {"cpus_per_member": 0.5}}))
        {'cpus_per_member': 0.5}
    """
    defaults = TuneSettings()
    return {
        key: getattr(space.settings, key)
        for key in _RAY_ONLY
        if getattr(space.settings, key) != getattr(defaults, key)
    }


def initial_values(space: SearchSpace) -> dict[str, dict[str, Any]]:
    """Each member's first values, drawn in order from ``random.Random(seed)``.

    Examples:
        >>> space = SearchSpace.from_dict({"space": {"algorithm.lr": [0.001, 0.01]},
        ...                                "tune": {"members": 3, "seed": 4}})
        >>> sorted(initial_values(space)), initial_values(space) == initial_values(space)
        (['member_00', 'member_01', 'member_02'], True)
    """
    rng = random.Random(space.settings.seed)
    return {name: space.sample(rng) for name in _names(space.settings.members)}


def exploit_decisions(
    scores: Mapping[str, float],
    values: Mapping[str, Mapping[str, Any]],
    space: SearchSpace,
    rng: random.Random,
) -> list[dict[str, Any]]:
    """PBT's exploits at one boundary, by Ray's rules: the worst ``quantile_fraction``
    (rounded up, at most half) each take a random member of as many best as donor, with
    the donor's values perturbed.

    Returns:
        ``[{"member", "donor", "old_values", "donor_values", "new_values",
        "member_score", "donor_score"}]``, the worst member first.

    Examples:
        >>> space = SearchSpace.from_dict({"space": {"algorithm.lr": [0.0, 0.01, 0.1]},
        ...     "tune": {"quantile_fraction": 0.25}})
        >>> values = {m: {"algorithm.lr": 0.01} for m in "abcd"}
        >>> scores = {"a": 3.0, "b": 1.0, "c": 9.0, "d": float("nan")}
        >>> [(e["member"], e["donor"]) for e in exploit_decisions(scores, values, space,
        ...                                                      random.Random(0))]
        [('b', 'c')]
    """
    s = space.settings
    sign = 1.0 if s.mode == "max" else -1.0
    scored = [m for m, v in scores.items() if v is not None and math.isfinite(v)]
    ranked = sorted(scored, key=lambda m: (sign * scores[m], m))  # the worst first
    if len(ranked) <= 1:
        return []
    count = math.ceil(len(ranked) * s.quantile_fraction)
    if count > len(ranked) / 2:
        count = len(ranked) // 2
    lower, upper = ranked[:count], ranked[len(ranked) - count :]
    decisions = []
    for member in lower:
        donor = rng.choice(upper)
        new = {
            key: d.perturb(values[donor][key], rng, s.perturbation_factors, s.resample_probability)
            for key, d in space.keys.items()
        }
        decisions.append(
            {
                "member": member,
                "donor": donor,
                "old_values": dict(values[member]),
                "donor_values": dict(values[donor]),
                "new_values": new,
                "member_score": scores[member],
                "donor_score": scores[donor],
            }
        )
    return decisions


class _Recorder(TrainerCallback):
    """A member's last iteration logs and last evaluation (its report at a boundary)."""

    def __init__(self) -> None:
        self.logs: dict[str, Any] = {}
        self.evaluation: dict[str, float] = {}

    def on_evaluation(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self.evaluation = {k: float(v) for k, v in logs.items() if k.startswith("eval/")}

    def on_iteration_end(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self.logs = dict(logs)


def _write_state(folder: Path, frames: int, values: Mapping[str, Any], pending: list) -> None:
    atomic_write_json(
        folder / STATE_FILE, {"frames": frames, "values": dict(values), "pending": pending}
    )


def _apply(
    event: Mapping[str, Any], frames: int, plan: MemberPlan, members: Path, count: int
) -> None:
    """Install one exploit at ``frames`` (again, if a killed run had begun it): the
    donor's checkpoint with the member's new config, the lineage event once, its values."""
    import json

    name, donor = event["member"], event["donor"]
    folder = members / name
    exp = member_experiment(
        compose_member(plan, event["new_values"], int(name.split("_")[-1])),
        folder,
        plan,
        [],
        runs=count,
    )
    source = members / donor / "checkpoints" / f"checkpoint_{frames}.pt"
    install_checkpoint(source, folder, exp.describe(), exp.config.keep_checkpoints)
    if not any(e["frames"] == frames for e in read_lineage([folder])):
        # record_exploit reads the old values from values.json: written after it
        atomic_write_json(folder / "values.json", event["old_values"], indent=1, fsync=False)
        record_exploit(
            folder,
            name,
            {
                "member": donor,
                "frames": frames,
                "values": event["donor_values"],
                "checkpoint": str(source),
            },
            event["new_values"],
            frames,
            {"frames": frames, "score": event["member_score"]},
        )
    truncate_reports(folder, frames)
    (folder / "values.json").write_text(json.dumps(event["new_values"], indent=1))


def _restart_point(
    folder: Path, members: Path, plan: MemberPlan, space: SearchSpace
) -> tuple[int, dict[str, dict[str, Any]]]:
    """Where a killed run continues: its last boundary and the values there, with the
    members' files after it discarded and its pending exploits applied."""
    import json

    from marl.experiment.checkpoint import CheckpointManager
    from marl.experiment.runlock import check_run_folder

    path = folder / STATE_FILE
    if not path.exists():
        raise FileNotFoundError(f"{folder} holds no {STATE_FILE}: not a vectorized tuning run")
    state = json.loads(path.read_text())
    frames, values = int(state["frames"]), dict(state["values"])
    for name in values:
        check_run_folder(members / name)  # a live run of it: touch nothing
    if frames == 0:  # killed before its first boundary: from zero again
        for name in values:
            shutil.rmtree(members / name, ignore_errors=True)
        return 0, values
    for name in values:
        ckpts = members / name / "checkpoints"
        if ckpts.is_dir():
            CheckpointManager(ckpts, 10**9).discard_after(frames)
        truncate_reports(members / name, frames)
    for event in state["pending"]:
        _apply(event, frames, plan, members, len(values))
    _write_state(folder, frames, values, [])
    return frames, values


def train_population(
    spec: Mapping[str, Any],
    space: SearchSpace,
    folder: Path,
    restore: bool,
    progress: Callable[[str], Any] | None = None,
) -> None:
    """Train the space's population in this process, segment by segment (module doc).

    Args:
        spec: the tuning run's ``tune.json``.
        space: its space.
        folder: the tuning run's folder.
        restore: continue from ``population.json`` (a killed run), else start.
        progress: where each boundary's line goes (members' scores, exploits; ``None``:
            ``sys.stderr`` as it is when the line is written).
    """
    from marl.experiment.runs import ExperimentRuns

    s = space.settings
    plan = _plan(space, spec, folder)
    members = folder / "members"
    total, interval = int(spec["total_frames"]), int(spec["interval"])
    if restore:
        frames, values = _restart_point(folder, members, plan, space)
    else:
        frames, values = 0, initial_values(space)
        _write_state(folder, 0, values, [])
    while frames < total:
        if frames == 0:
            runs = ExperimentRuns(_build(plan, values, members), members)
            for name, v in values.items():
                (members / name).mkdir(parents=True, exist_ok=True)
                atomic_write_json(members / name / "values.json", v, indent=1, fsync=False)
        else:
            runs = ExperimentRuns.resume(members)
        recorders = [_Recorder() for _ in runs.experiments]
        for exp, recorder in zip(runs.experiments, recorders):
            exp.extra_callbacks.append(recorder)
        summaries = runs.run(until_frames=frames + interval)
        frames = int(summaries[0]["frames"])
        scores = {}
        for exp, recorder in zip(runs.experiments, recorders):
            name = exp.folder.name
            metrics = report_metrics(recorder.logs, recorder.evaluation, frames, s.metric)
            append_report(exp.folder, metrics, values[name])
            scores[name] = metrics[s.metric]
        events: list[dict[str, Any]] = []
        if s.scheduler == "pbt" and frames < total:
            rng = random.Random(f"marl-tune:{s.seed}:{frames}")
            events = exploit_decisions(scores, values, space, rng)
        for event in events:
            values[event["member"]] = event["new_values"]
        # the decisions first, then the files: a run killed in between applies them again
        _write_state(folder, frames, values, events)
        for event in events:
            _apply(event, frames, plan, members, len(values))
        _write_state(folder, frames, values, [])
        (progress or sys.stderr.write)(_line(frames, total, scores, events, s.metric) + "\n")


def _line(
    frames: int,
    total: int,
    scores: Mapping[str, float],
    events: Sequence[Mapping[str, Any]],
    metric: str,
) -> str:
    """A boundary's progress line.

    Examples:
        >>> _line(500, 1500, {"member_00": 1.0, "member_01": 2.5},
        ...       [{"member": "member_00", "donor": "member_01",
        ...         "new_values": {"algorithm.lr": 0.012}}], "eval/episode_reward")
        'marl-tune: 500/1500 frames, eval/episode_reward: member_00 1.000, member_01 2.500; exploits: member_00 <- member_01 (algorithm.lr=0.012)'
    """
    text = f"marl-tune: {frames}/{total} frames, {metric}: " + ", ".join(
        f"{m} {v:.3f}" for m, v in scores.items()
    )
    if events:
        text += "; exploits: " + ", ".join(
            f"{e['member']} <- {e['donor']} ("
            + ", ".join(
                f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                for k, v in e["new_values"].items()
            )
            + ")"
            for e in events
        )
    return text
