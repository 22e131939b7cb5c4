"""Run a search space: PBT, ASHA or random search over whole marl runs, on Ray Tune
(``backend="ray"``, each member in a worker) or in one process (``backend="vectorized"``,
:mod:`marl.tune.vectorized`: every member a run of one
:class:`~marl.experiment.runs.ExperimentRuns`; PBT and random search).

The tuning run's folder::

    tune.json          the space, the settings and the overrides (what --resume reads)
    members/member_NN/ each member's marl run folder (config.yaml, scalars.csv,
                       results.json, curves.png, checkpoints/, values.json, lineage.jsonl)
    lineage.json       every member's initial values and each exploit (PBT)
    tune.png           each member's score and searched values against frames
    best.json          the best member: score, values, and the marl-run command
    ray/               Ray Tune's experiment state (Tuner.restore reads it; ray backend)
    population.json    the last completed boundary, the values there (vectorized backend)

``marl-report <folder>/members`` reads the members' ``results.json`` like any runs'.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marl.tune.member import (
    MemberPlan,
    finish_stopped_member,
    read_lineage,
    read_reports,
    train_member,
)
from marl.tune.space import SearchSpace, override_strings

__all__ = ["TuneResult", "resume_tuning", "tune"]

SPEC_FILE = "tune.json"


@dataclass
class TuneResult:
    """What a tuning run found.

    Attributes:
        folder: the tuning run's folder.
        best_member: the best member's name (``member_03``).
        best_score: its last reported ``metric``.
        best_values: its searched values at the end.
        command: the ``marl-run`` command of the best configuration.
        scores: ``{member: last reported metric}``.
        lineage: the exploits, in order (PBT).
        metric: the optimized scalar.
        mode: ``"max"`` or ``"min"``.
    """

    folder: Path
    best_member: str
    best_score: float
    best_values: dict[str, Any]
    command: str
    scores: dict[str, float]
    lineage: list[dict[str, Any]]
    metric: str = "eval/episode_reward"
    mode: str = "max"


def _spec(space: SearchSpace, overrides: Sequence[str]) -> dict[str, Any]:
    return {
        "description": space.description,
        "source": space.source,
        "overrides": [*space.overrides, *overrides],
        "space": {k: {d.kind: list(d.values)} for k, d in space.keys.items()},
        "tune": dataclasses.asdict(space.settings),
    }


def tune(
    space: SearchSpace,
    folder: str | Path,
    overrides: Sequence[str] = (),
    *,
    verbose: int = 0,
    backend: str = "ray",
) -> TuneResult:
    """Tune the space's runs with its settings' scheduler; write the tuning run's folder.

    Args:
        space: the search space (:func:`~marl.tune.load_space`).
        folder: the tuning run's folder (must not hold a tuning run: resume that one).
        overrides: more ``marl-run`` overrides for every member (after the space's).
        verbose: Ray Tune's verbosity (0: silent, 1: a table of trials).
        backend: ``"ray"`` (each member in a Ray Tune worker) or ``"vectorized"`` (the
            whole population in this process, :mod:`marl.tune.vectorized`: pbt and
            random, searching the settings of
            :data:`~marl.algorithms.updates.PER_RUN_SETTINGS`).

    Returns:
        The :class:`TuneResult`.

    Raises:
        ValueError: on an unknown key in the space, a bad setting, a backend that cannot
            train the space, or a member that failed (with its error), before or after
            the run.
        FileExistsError: when ``folder`` holds a tuning run.
    """
    from marl.tune.vectorized import BACKENDS, check_population

    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {list(BACKENDS)}, got {backend!r}")
    folder = Path(folder).resolve()
    if (folder / SPEC_FILE).exists():
        raise FileExistsError(
            f"{folder} already holds a tuning run: continue it with marl-tune --resume {folder} "
            "(resume_tuning), or choose another folder"
        )
    base = space.check(overrides)
    spec = _spec(space, overrides)
    spec["total_frames"] = int(base.experiment.total_frames)
    spec["interval"] = int(space.settings.interval or base.experiment.evaluation_interval)
    spec["seed"] = int(base.seed)
    spec["backend"] = backend
    if backend == "vectorized":
        check_population(space, spec, folder)  # before anything is written
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SPEC_FILE).write_text(json.dumps(spec, indent=1))
    return _fit(spec, folder, restore=False, verbose=verbose)


def resume_tuning(folder: str | Path, *, verbose: int = 0) -> TuneResult:
    """Continue a tuning run that was stopped (killed, interrupted) where it stopped.

    Ray Tune restores its trials and scheduler from ``<folder>/ray``; each member
    continues from its last reported checkpoint. A vectorized run (``tune.json``'s
    ``backend``) continues from its last completed boundary (``population.json``). A
    finished run returns its result.

    Raises:
        FileNotFoundError: when ``folder`` holds no tuning run.
    """
    folder = Path(folder).resolve()
    if not (folder / SPEC_FILE).exists():
        raise FileNotFoundError(f"{folder} holds no tuning run: expected {folder / SPEC_FILE}")
    spec = json.loads((folder / SPEC_FILE).read_text())
    return _fit(spec, folder, restore=True, verbose=verbose)


def _space_of(spec: Mapping[str, Any]) -> SearchSpace:
    return SearchSpace.from_dict(
        {k: spec[k] for k in ("description", "overrides", "space", "tune")},
        source=spec.get("source", SPEC_FILE),
    )


def _scheduler(space: SearchSpace, spec: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """``(Ray scheduler, TuneConfig metric/mode)``: PBT and ASHA take them themselves."""
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    s = space.settings
    if s.scheduler == "pbt":
        return (
            _pbt(spec["total_frames"])(
                time_attr="frames",
                metric=s.metric,
                mode=s.mode,
                perturbation_interval=spec["interval"],
                # a list: a copied choice moves to a neighbouring value (or is resampled)
                hyperparam_mutations={
                    k: list(d.values) if d.kind == "choice" else d.ray()
                    for k, d in space.keys.items()
                },
                quantile_fraction=s.quantile_fraction,
                resample_probability=s.resample_probability,
                perturbation_factors=tuple(s.perturbation_factors),
                synch=s.synch,
            ),
            {},
        )
    if s.scheduler == "asha":
        return (
            ASHAScheduler(
                time_attr="frames",
                metric=s.metric,
                mode=s.mode,
                # past the last report: ASHA stops a member at max_t, and Ray ends a stopped
                # member in its report, before the run writes its end (status "complete")
                max_t=spec["total_frames"] + 1,
                grace_period=spec["interval"],
                reduction_factor=s.reduction_factor,
            ),
            {},
        )
    return FIFOScheduler(), {"metric": s.metric, "mode": s.mode}


def _pbt(total_frames: int) -> type:
    """Ray's PBT, with two changes.

    - It never exploits at a member's last report: a member cut there would restart at
      ``total_frames`` with nothing left to train on its new values.
    - In rounds (``synch``) it never waits on itself. Ray starts a paused member only while
      it is behind the next round (``last_train_time < _next_perturbation_sync``), and sets
      the next round to the furthest member's frames when members stand beyond it. When
      every member stands at that point, none is behind it and none runs: the run hangs.
      A resumed run gets there (its members come back from their own checkpoints, ahead of
      the scheduler's last snapshot). The next round is then one interval further on.
    """
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import PopulationBasedTraining, TrialScheduler

    class PBT(PopulationBasedTraining):
        def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
            if result.get("frames", 0) >= total_frames:
                return TrialScheduler.CONTINUE
            return super().on_trial_result(tune_controller, trial, result)

        def choose_trial_to_run(self, tune_controller: Any) -> Any:
            chosen = super().choose_trial_to_run(tune_controller)
            if chosen is not None or not self._synch:
                return chosen
            trials = tune_controller.get_trials()
            waiting = [t for t in trials if t.status in (Trial.PENDING, Trial.PAUSED)]
            if waiting and not any(t.status == Trial.RUNNING for t in trials):
                behind = min(self._trial_state[t].last_train_time for t in waiting)
                self._next_perturbation_sync = behind + self._perturbation_interval
                return super().choose_trial_to_run(tune_controller)
            return None

    return PBT


def _fit(spec: Mapping[str, Any], folder: Path, restore: bool, verbose: int) -> TuneResult:
    from marl.tune.vectorized import BACKENDS

    backend = spec.get("backend", "ray")  # a tuning run from before backends: Ray's
    if backend not in BACKENDS:
        raise ValueError(f"{SPEC_FILE}: backend: expected one of {list(BACKENDS)}, got {backend!r}")
    if backend == "vectorized":
        from marl.tune.vectorized import train_population

        space = _space_of(spec)
        train_population(spec, space, folder, restore)
        return _summarize(spec, space, folder)
    return _fit_ray(spec, folder, restore, verbose)


def _fit_ray(spec: Mapping[str, Any], folder: Path, restore: bool, verbose: int) -> TuneResult:
    import ray
    from ray import tune as ray_tune
    from ray.tune.search import BasicVariantGenerator

    space = _space_of(spec)
    s = space.settings
    plan = MemberPlan(
        folder=str(folder),
        overrides=tuple(spec["overrides"]),
        metric=s.metric,
        interval=int(spec["interval"]),
        seed_key="seed" in space.keys,
    )
    trainable = ray_tune.with_resources(
        ray_tune.with_parameters(train_member, plan=plan),
        {"cpu": s.cpus_per_member, "gpu": s.gpus_per_member},
    )
    started = ray.is_initialized()
    if not started:
        ray.init(
            # "local": a new instance, never another user's cluster found on this machine
            address=s.address or "local",
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=verbose > 0,
        )
    random.seed(s.seed)  # PBT's perturbations draw from Python's random module
    # Ray snapshots the experiment (which checkpoint each member is at) every 10 s or more
    # by default; a killed run resumes from the last snapshot. It is small: every 2 s.
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "2")
    try:
        if restore:
            tuner = ray_tune.Tuner.restore(
                str(folder / "ray"), trainable, resume_unfinished=True, resume_errored=True
            )
        else:
            scheduler, objective = _scheduler(space, spec)
            tuner = ray_tune.Tuner(
                trainable,
                param_space={k: d.ray() for k, d in space.keys.items()},
                tune_config=ray_tune.TuneConfig(
                    num_samples=s.members,
                    scheduler=scheduler,
                    search_alg=BasicVariantGenerator(random_state=s.seed),
                    max_concurrent_trials=s.max_concurrent,
                    reuse_actors=True,
                    **objective,
                ),
                run_config=ray_tune.RunConfig(
                    storage_path=str(folder),
                    name="ray",
                    verbose=verbose,
                    checkpoint_config=ray_tune.CheckpointConfig(num_to_keep=4),
                ),
            )
        grid = tuner.fit()
    finally:
        if not started:
            ray.shutdown()
    errors = [r for r in grid if r.error is not None]
    if errors:
        raise ValueError(
            f"{len(errors)} of {len(grid)} members failed; the first: {errors[0].error}"
        ) from (errors[0].error if isinstance(errors[0].error, BaseException) else None)
    for member in sorted((folder / "members").glob("member_*")):
        finish_stopped_member(member, spec["total_frames"])
    return _summarize(spec, space, folder)


def _last_per_key(overrides: Sequence[str], skip: set[str]) -> list[str]:
    """Each key's last override (hydra's winner), leaving out the keys in ``skip``.

    Examples:
        >>> _last_per_key(["a=1", "b=2", "a=3", "+c=4", "seed=0"], skip={"b", "seed"})
        ['a=3', '+c=4']
    """
    last: dict[str, str] = {}
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        last.pop(key, None)
        last[key] = override
    return [o for key, o in last.items() if key not in skip]


def _summarize(spec: Mapping[str, Any], space: SearchSpace, folder: Path) -> TuneResult:
    s = space.settings
    scores: dict[str, float] = {}
    values: dict[str, dict[str, Any]] = {}
    histories: dict[str, list[dict[str, Any]]] = {}
    members = sorted(p for p in (folder / "members").glob("member_*") if p.is_dir())
    for path in members:
        reports = read_reports(path)
        if reports:
            scores[path.name] = float(reports[-1][s.metric])
            values[path.name] = dict(reports[-1]["values"])
            histories[path.name] = reports
    if not scores:
        raise ValueError(f"no member reported tune.metric {s.metric!r}")
    sign = 1 if s.mode == "max" else -1
    best = max(sorted(scores), key=lambda m: sign * scores[m])
    lineage = read_lineage(members)
    initial = _initial_values(lineage, values)
    (folder / "lineage.json").write_text(
        json.dumps({"initial": initial, "final": values, "exploits": lineage}, indent=1)
    )
    seed = _member_seed(folder / "members" / best)
    overrides = _last_per_key(spec["overrides"], skip={*values[best], "seed"})
    # no seed: the member's seed is part of its luck, not of the configuration found
    # (best.json keeps it as member_seed, to rerun the member itself)
    command = shlex.join(["marl-run", *overrides, *override_strings(values[best])])
    (folder / "best.json").write_text(
        json.dumps(
            {
                "member": best,
                "metric": s.metric,
                "score": scores[best],
                "values": values[best],
                "command": command,
                "member_seed": seed,
                "scores": scores,
            },
            indent=1,
        )
    )
    try:
        from marl.tune.plot import plot_members

        plot_members(histories, list(space.keys), s.metric, folder / "tune.png", lineage)
    except ImportError:  # matplotlib is the report extra
        pass
    return TuneResult(
        folder, best, scores[best], values[best], command, scores, lineage, s.metric, s.mode
    )


def _initial_values(
    lineage: list[dict[str, Any]], final: Mapping[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Each member's values before its first exploit (its final values if never cut)."""
    initial = {m: dict(v) for m, v in final.items()}
    for event in reversed(lineage):
        initial[event["member"]] = dict(event["old_values"])
    return initial


def _member_seed(folder: Path) -> int:
    import yaml

    config = folder / "config.yaml"
    return int(yaml.safe_load(config.read_text())["seed"]) if config.exists() else 0
