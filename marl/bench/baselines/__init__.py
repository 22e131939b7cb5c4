"""The random and no-op baselines of a suite's tasks, evaluated like the suite's runs.

A learning curve means little without what acting at random and doing nothing
score on the same episodes. ``marl-bench`` computes both for every task of a
suite before it launches the runs (a few seconds per task) and writes them to
``OUTPUT/baselines.json`` (format: :mod:`marl.report.baselines`), which
``marl-report`` shows next to each algorithm's score and in the curves.

"Like the runs" means: the run's hydra config is composed (without running it)
to get its task, task options, ``experiment.evaluation_episodes``,
``experiment.evaluation_max_steps`` and sampling device, and the evaluation env is
built as the experiment runner builds it (``evaluation_episodes`` envs for VMAS,
``min(evaluation_episodes, 8)`` otherwise, seeded ``seed + 1``, its episodes cut after
``evaluation_max_steps``), then evaluated with the evaluator the task's file declares
(``evaluation: versus_random``: against a random player from each seat). Runs whose
settings differ (``qmix`` with ``+task_overrides.continuous_actions=false``) get their
own entry. Results are cached in the file, keyed by all of these settings, the evaluator
included: a second ``marl-bench`` call computes only what is new, and an entry computed
under another evaluator (or written before the file recorded the evaluator: tictactoe's
zero baselines from before ``versus_random``) is computed again.

``python -m marl.bench.baselines --out docs/results/baselines.md`` writes the
docs page of the baselines of every catalogue task (see :mod:`marl.bench.baselines.page`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from marl.bench.suite import Run, Suite, override_key
from marl.report.baselines import (
    BASELINES_FILENAME,
    POLICIES,
    BaselineEntry,
    load_baselines,
    write_baselines,
)
from marl.report.results import ResultsFormatError

__all__ = ["PLAIN_EVALUATION", "EvalSettings", "eval_num_envs", "evaluate_baselines",
           "evaluation_settings", "suite_baselines", "task_evaluation"]  # fmt: skip

log = logging.getLogger(__name__)

PLAIN_EVALUATION = "plain"
"""A task without an ``evaluation`` in its file: the policy on every agent
(:func:`marl.algorithms.evaluate_episodes`)."""

Scores = dict[str, dict[str, list[float]]]
"""policy -> metric -> episode values (one seed)."""


def eval_num_envs(task: str, episodes: int) -> int:
    """Envs of a catalogue run's evaluation env: :func:`marl.experiment.evaluation_num_envs`.

    Examples:
        >>> eval_num_envs("vmas/navigation", 20), eval_num_envs("gymnasium/cartpole", 20)
        (20, 8)
    """
    from marl.experiment.parts import evaluation_num_envs

    return evaluation_num_envs(task, episodes)


@dataclasses.dataclass(frozen=True)
class EvalSettings:
    """How one run evaluates its policy: what the baselines must copy.

    Attributes:
        task: ``"env/task"``.
        task_overrides: the task's env options, as sorted JSON (hashable).
        episodes: ``experiment.evaluation_episodes``.
        num_envs: envs of the evaluation env.
        seed: the run's seed.
        eval_seed: the evaluation env's seed (``seed + 1``).
        device: ``experiment.sampling_device``.
        evaluation: the task file's ``evaluation`` (``"versus_random"``), or
            ``"plain"`` (:func:`marl.algorithms.evaluate_episodes`).
        max_steps: ``experiment.evaluation_max_steps`` (``None``: episodes run to their end).
    """

    task: str
    task_overrides: str
    episodes: int
    num_envs: int
    seed: int
    eval_seed: int
    device: str = "cpu"
    evaluation: str = PLAIN_EVALUATION
    max_steps: int | None = None

    @classmethod
    def make(
        cls,
        task: str,
        seed: int,
        episodes: int,
        task_overrides: Mapping[str, Any] | None = None,
        device: str = "cpu",
        max_steps: int | None = None,
        evaluation: str | None = None,
    ) -> EvalSettings:
        """The settings of a run of ``task`` with ``seed`` and ``episodes`` evaluation episodes.

        ``evaluation`` ``None``: the one the task's file declares now (a cached entry
        passes the one it was computed with).

        Examples:
            >>> EvalSettings.make("vmas/navigation", seed=0, episodes=20).eval_seed
            1
            >>> EvalSettings.make("pettingzoo/tictactoe", seed=0, episodes=2).evaluation
            'versus_random'
        """
        overrides = json.dumps(dict(task_overrides or {}), sort_keys=True)
        if evaluation is None:
            evaluation = task_evaluation(task)
        return cls(task, overrides, episodes, eval_num_envs(task, episodes), seed, seed + 1,
                   device, evaluation, max_steps)  # fmt: skip

    @property
    def overrides(self) -> dict[str, Any]:
        """The task options as a dict."""
        return json.loads(self.task_overrides)

    @property
    def group(self) -> tuple:
        """Everything but the seed: runs that share it share a baselines entry."""
        return (self.task, self.task_overrides, self.episodes, self.num_envs, self.device,
                self.evaluation, self.max_steps)  # fmt: skip

    @property
    def cache_key(self) -> tuple:
        """What the baselines' values depend on: the group and the evaluation seed."""
        return (*self.group, self.eval_seed)


def task_evaluation(task: str) -> str:
    """How a catalogue task's runs are evaluated: its file's ``evaluation``, or ``"plain"``.

    Examples:
        >>> task_evaluation("vmas/navigation"), task_evaluation("pettingzoo/tictactoe")
        ('plain', 'versus_random')
    """
    from marl.envs.tasks import load_task_config

    return load_task_config(task).get("evaluation") or PLAIN_EVALUATION


def _value(overrides: Sequence[str], key: str) -> str | None:
    """The value the last override of ``key`` sets (``None``: not set)."""
    for override in reversed(overrides):
        if override_key(override) == key and "=" in override:
            return override.split("=", 1)[1]
    return None


def evaluation_settings(runs: Iterable[Run]) -> dict[Run, EvalSettings | str | None]:
    """Each run's evaluation settings, from its composed hydra config.

    Returns:
        run -> its settings; ``None`` for a run with ``experiment.evaluation=false``;
        the error message for a run whose config does not compose.
    """
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from marl.experiment.cli import CONF_DIR, prepare_hydra

    prepare_hydra()  # marl's structured configs, as marl-run registers them
    out: dict[Run, EvalSettings | str | None] = {}
    composed: dict[tuple[str, ...], Any] = {}
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for run in runs:
            # the seed does not change the rest of the config: compose once per rest
            rest = tuple(o for o in run.overrides if override_key(o) != "seed")
            if rest not in composed:
                try:
                    composed[rest] = compose("config", overrides=list(rest))
                except Exception as err:  # a bad override: the run itself will fail on it
                    composed[rest] = f"{type(err).__name__}: {err}"
            cfg = composed[rest]
            if isinstance(cfg, str):
                out[run] = cfg
                continue
            if not cfg.experiment.evaluation:
                out[run] = None
                continue
            seed = int(_value(run.overrides, "seed") or run.seed)
            overrides = OmegaConf.to_container(cfg.task_overrides, resolve=True) or {}
            max_steps = cfg.experiment.evaluation_max_steps
            out[run] = EvalSettings.make(
                str(cfg.task),
                seed,
                int(cfg.experiment.evaluation_episodes),
                overrides,  # type: ignore[arg-type]
                str(cfg.experiment.sampling_device),
                None if max_steps is None else int(max_steps),
            )
    return out


def evaluate_baselines(settings: EvalSettings) -> Scores:
    """Run the random and the no-op policy once each on a fresh evaluation env.

    Both are evaluated as a run's evaluation is: on the evaluation env the experiment
    runner builds (:func:`marl.experiment.parts.make_evaluation_env`: its episodes cut
    after ``settings.max_steps``), with the evaluator the task's file declares
    (:func:`marl.experiment.parts.task_evaluator`; tictactoe: against a random player
    from both seats), else :func:`marl.algorithms.evaluate_episodes`. The random
    policy draws from torch's global generator, seeded with the evaluation seed inside
    :func:`torch.random.fork_rng`, so results repeat and the caller's generator is left
    as it was.

    Returns:
        policy -> metric (``"return"``, ``"<group>/return"``) -> episode values.

    Raises:
        ValueError: when the task's file now declares another evaluation than
            ``settings.evaluation``.
        Exception: whatever building or stepping the env raises (a missing package).
    """
    import torch

    from marl.algorithms import evaluate_episodes
    from marl.envs import make_task
    from marl.experiment import ExperimentConfig
    from marl.experiment.parts import make_evaluation_env, task_evaluator
    from marl.testing import NoopPolicy, random_policy

    declared = task_evaluation(settings.task)
    if declared != settings.evaluation:
        raise ValueError(
            f"baselines of {settings.task}: settings for evaluation {settings.evaluation!r}, "
            f"but its task file declares {declared!r}"
        )
    config = ExperimentConfig(evaluation_episodes=settings.episodes,
                              evaluation_max_steps=settings.max_steps)  # fmt: skip

    def make_env(num_envs: int, seed: int) -> Any:
        return make_task(settings.task, num_envs=num_envs, seed=seed, device=settings.device,
                         **settings.overrides)  # fmt: skip

    factories: dict[str, Callable[[Any], Any]] = {"random": random_policy, "noop": NoopPolicy}
    scores: Scores = {}
    for policy, factory in factories.items():
        env = make_evaluation_env(make_env, settings.task, config, True, settings.eval_seed)
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(settings.eval_seed)
                evaluator = task_evaluator(settings.task, settings.task, env)
                evaluate = evaluate_episodes if evaluator is None else evaluator
                result = evaluate(env, factory(env), settings.episodes)
        finally:
            env.close()
        metrics = {"return": list(result.returns)}
        metrics.update({f"{g}/return": list(v) for g, v in result.group_returns.items()})
        scores[policy] = metrics
    return scores


def _cached(path: Path) -> tuple[dict[tuple, Scores], list[BaselineEntry]]:
    """(settings key -> scores, the entries) of an existing ``baselines.json``."""
    if not path.is_file():
        return {}, []
    try:
        entries = load_baselines(path)
    except (ResultsFormatError, OSError) as err:
        log.warning("marl-bench: ignoring %s (%s); computing the baselines again", path, err)
        return {}, []
    cache = {}
    for e in entries:
        # an entry that does not say its evaluator was written before the file recorded
        # it, maybe under another one (tictactoe's zero returns before versus_random)
        if e.error or e.evaluation is None:
            continue
        for i, (seed, eval_seed) in enumerate(zip(e.seeds, e.eval_seeds)):
            # its own evaluator, not the task file's of today: a changed file misses
            s = EvalSettings.make(e.task, seed, e.episodes, e.task_overrides, e.device,
                                  e.max_steps, e.evaluation)  # fmt: skip
            if s.num_envs == e.num_envs and s.eval_seed == eval_seed:
                cache[s.cache_key] = {
                    p: {m: v[i] for m, v in metrics.items()} for p, metrics in e.scores.items()
                }
    return cache, entries


def suite_baselines(
    suite: Suite,
    output: str | Path,
    overrides: Sequence[str] = (),
    report: Callable[[str], None] | None = None,
) -> Path:
    """Compute (or reuse) the baselines of every run of ``suite`` and write ``baselines.json``.

    Entries of an existing file are reused when their settings match, and kept
    for the (task, algorithm) pairs this call does not cover (a subset run).

    Args:
        suite: the suite.
        output: the benchmark folder.
        overrides: the extra hydra overrides of the runs.
        report: called with a line per computed entry (e.g. ``print``).

    Returns:
        The path of ``baselines.json``.
    """
    from marl import __version__

    path = Path(output) / BASELINES_FILENAME
    cache, old = _cached(path)
    runs = suite.runs(overrides)
    settings = evaluation_settings(runs)
    groups: dict[tuple, dict[str, Any]] = {}
    for run, s in settings.items():
        if s is None:
            continue
        key = (run.task, s) if isinstance(s, str) else s.group
        g = groups.setdefault(key, {"settings": {}, "algorithms": [], "error": ""})
        if run.algorithm not in g["algorithms"]:
            g["algorithms"].append(run.algorithm)
        if isinstance(s, str):
            g["error"], g["task"] = s, run.task
        else:
            g["settings"][s.seed] = s
    entries = []
    for g in groups.values():
        entries.append(_entry(g, cache, report))
    covered = {(run.task, run.algorithm) for run in runs}
    for e in old:  # what a previous (e.g. subset) call wrote for other runs
        keep = tuple(a for a in e.algorithms if (e.task, a) not in covered)
        if keep:
            entries.append(dataclasses.replace(e, algorithms=keep))
    entries.sort(key=lambda e: e.task)  # stable: the suite's algorithm order within a task
    return write_baselines(path, entries, f"marl-bench {suite.name} (marl {__version__})")


def _entry(
    group: dict[str, Any], cache: dict[tuple, Scores], report: Callable[[str], None] | None
) -> BaselineEntry:
    algorithms = tuple(group["algorithms"])
    if group["error"]:
        return BaselineEntry(group["task"], algorithms, {}, 0, 0, (), (), error=group["error"])
    settings = [group["settings"][k] for k in sorted(group["settings"])]
    first = settings[0]
    start = time.perf_counter()
    per_seed: list[Scores] = []
    error = ""
    for s in settings:
        key = s.cache_key
        if key not in cache:
            try:
                cache[key] = evaluate_baselines(s)
            except Exception as err:  # a missing package, a broken env: say so, go on
                error = f"{type(err).__name__}: {err}"
                break
        per_seed.append(cache[key])
    wall = time.perf_counter() - start
    seeds = tuple(s.seed for s in settings)
    eval_seeds = tuple(s.eval_seed for s in settings)
    common = dict(task=first.task, algorithms=algorithms, task_overrides=first.overrides,
                  episodes=first.episodes, num_envs=first.num_envs, seeds=seeds,
                  eval_seeds=eval_seeds, device=first.device, wall_s=wall,
                  evaluation=first.evaluation, max_steps=first.max_steps)  # fmt: skip
    if error:
        if report:
            report(f"baselines of {first.task} ({', '.join(algorithms)}) failed: {error}")
        return BaselineEntry(**common, error=error)
    metrics = set.intersection(*(set(s["random"]) & set(s["noop"]) for s in per_seed))
    scores = {p: {m: [s[p][m] for s in per_seed] for m in sorted(metrics)} for p in POLICIES}
    entry = BaselineEntry(**common, scores=scores)
    if report:
        values = ", ".join(f"{POLICIES[p]} {entry.mean(p):.4g}" for p in POLICIES)
        report(f"baselines of {first.task} ({', '.join(algorithms)}): {values} "
               f"({len(seeds)} seeds x {first.episodes} episodes, {wall:.1f}s)")  # fmt: skip
    return entry
