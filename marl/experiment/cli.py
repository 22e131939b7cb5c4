"""``marl-run``: the hydra command line of the experiment runner.

Examples (shell)::

    marl-run                                   # mappo on vmas/navigation, seed 0
    marl-run algorithm=qmix task=pettingzoo/simple_spread seed=3 experiment.total_frames=200000
    marl-run -m algorithm=mappo,ippo seed=0,1,2            # a sweep, one run after another
    marl-run -m hydra/launcher=joblib seed=0,1,2           # in parallel (marl[launchers])
    marl-run --resume outputs/2025-01-01/12-00-00_mappo_vmas-navigation_seed0
    marl-run --nproc 2 task=vmas/navigation     # one run over 2 processes (data-parallel)
    marl-run experiment.restore_file=outputs/.../checkpoints/latest.pt   # the same
    marl-run task=pettingzoo/simple_tag +algorithm@algorithm.groups.adversary=mappo \\
        +algorithm@algorithm.groups.agent=iql algorithm.groups.adversary.lr=1e-4

The configs are the dataclasses (:class:`~marl.experiment.ExperimentConfig`,
:class:`~marl.experiment.ModelConfig`, each algorithm's config), registered as hydra
structured configs (:mod:`marl.experiment._conf`), so a wrong type or an unknown key
stops ``marl-run`` before anything is built. ``marl/conf/`` holds ``config.yaml``
(the defaults list, ``task``, ``seed``, output folders) and presets
(``experiment/debug``, ``experiment/gpu``, ``model/small``, ``model/large``).

Resuming: ``experiment.restore_file=<checkpoint>`` (or ``--resume <run folder>``, which
means its newest intact checkpoint) continues that run in its own folder, with the
config, seed and hyperparameters of the checkpoint. The checkpoint is read as data (it
cannot run code; ``MARL_TRUST_CHECKPOINTS=1`` unpickles a trusted one in full) and must
be the folder's own run's (``run.json``). Other overrides given with it must
agree with the checkpoint, except the ``experiment`` settings that do not change what
is learned (``total_frames``, intervals, devices, loggers, ...), which are applied.

Before hydra starts, :mod:`marl.experiment.argv` reads the command line: ``--nproc N``
(``marl-run`` then re-runs itself under torchrun over ``N`` processes: see
:mod:`marl.experiment.data_parallel`), ``--resume``, the lock on a run folder known in
advance, unknown task names and renamed keys.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "compose_config",
    "experiment_from_config",
    "help_text",
    "main",
    "prepare_hydra",
    "run_config",
]

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
_ROOT_GROUPS = ("experiment", "algorithm", "model")


def _slug(task: str) -> str:
    """``"vmas/navigation"`` -> ``"vmas-navigation"`` (a folder-name friendly task)."""
    return str(task).replace("/", "-")


def _tasks() -> str:
    """The installed catalogue tasks, then per missing family the extra that installs it."""
    from marl.envs.tasks import install_hints, list_tasks

    text = ", ".join(list_tasks(available=True)) or "(none installed)"
    for family, (names, command) in install_hints().items():
        listed = ", ".join(names) if len(names) <= 3 else f"{len(names)} {family} tasks"
        text += f"\n  not installed: {listed} ({command})"
    return text


def _group_options(group: str) -> str:
    """The options of config group ``group`` (for help texts that list only their own groups)."""
    from hydra.core.global_hydra import GlobalHydra

    hydra = GlobalHydra.instance()
    if not hydra.is_initialized():
        return "(run marl-run --help)"
    return ", ".join(sorted(hydra.config_loader().get_group_options(group)))


def _algorithm_folder_name(node: Any) -> str:
    """``mappo``, or ``adversary-mappo_agent-iql`` when ``algorithm.groups`` is set."""
    from marl.experiment.config import algorithm_label

    groups = node.get("groups") or {}
    if groups:
        return algorithm_label({g: sub.get("name") for g, sub in groups.items()})
    return algorithm_label(node.get("name"))


def _register_resolvers() -> None:
    from omegaconf import OmegaConf

    for name, fn in (
        ("marl_slug", _slug),
        ("marl_tasks", _tasks),
        ("marl_algorithm", _algorithm_folder_name),
        ("marl_group_options", _group_options),
    ):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)


def prepare_hydra() -> None:
    """Register marl's structured configs and resolvers with hydra (idempotent).

    ``marl-run`` does this before hydra starts; call it before composing marl's
    configs with hydra's compose API yourself.
    """
    from marl.experiment._conf import register_configs

    register_configs()
    _register_resolvers()


def compose_config(overrides: Sequence[str] = ()) -> Any:
    """The config ``marl-run <overrides>`` composes, without running anything.

    Args:
        overrides: hydra overrides, as on the command line.

    Returns:
        The composed ``DictConfig`` (types and keys checked by hydra).

    Examples:
        >>> compose_config(["algorithm=qmix", "seed=3"]).algorithm.name
        'qmix'
    """
    from hydra import compose, initialize_config_dir

    prepare_hydra()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def help_text(config_name: str, args: Sequence[str]) -> str | None:
    """The ``--help`` text hydra prints for ``args``, or ``None`` to let hydra print it.

    Hydra fills ``$APP_CONFIG_GROUPS`` and ``$HYDRA_CONFIG_GROUPS`` for every help text,
    copying its config repository (every registered algorithm's config) once per group
    and option list it reads: about 65 copies, 10-25 s on a shared 2-core machine. This
    renders the same template with the app's groups listed from one repository. A
    template that shows hydra's flags or groups, another flag next to ``--help``, or an
    override that does not compose is left to hydra (which reports the error).

    Hydra itself stays: the help shows the config as the command line's overrides
    compose it (``marl-run algorithm=qmix experiment=debug --help``), which only hydra's
    composition gives faithfully; importing and composing cost about 0.5 s here. The
    tasks' availability is looked up without importing their packages
    (:func:`marl.envs.tasks.list_tasks`).

    Args:
        config_name: ``"config"`` (marl-run) or ``"league"`` (marl-league).
        args: the command line after the program name.
    """
    import string

    helps, rest = {"--help", "-h"}, [a for a in args if a not in ("--help", "-h", "--resolve")]
    if not helps & set(args) or any(a.startswith("-") for a in rest):
        return None
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.object_type import ObjectType
    from omegaconf import OmegaConf

    prepare_hydra()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name, overrides=rest, return_hydra_config=True)
            template = str(cfg.hydra.help.template)
            if "$FLAGS_HELP" in template or "$HYDRA_CONFIG_GROUPS" in template:
                return None
            # the loader's repository itself: its list_groups/get_group_options build and
            # copy a caching repository on every call (0.5 s of the help's 1 s, measured)
            repository = GlobalHydra.instance().config_loader().repository

            def options(group: str, kind: ObjectType = ObjectType.CONFIG) -> list[str]:
                return repository.get_group_options(group, results_filter=kind)

            def groups(parent: str) -> list[str]:
                out = []
                for name in options(parent, ObjectType.GROUP):
                    group = f"{parent}/{name}" if parent else name
                    if group == "hydra":
                        continue
                    if options(group):
                        out.append(group)
                    out += groups(group)
                return out

            listed = ""
            if "$APP_CONFIG_GROUPS" in template:
                for group in sorted(groups("")):
                    listed += f"{group}: {', '.join(sorted(options(group)))}\n"
    except Exception:  # a bad override: hydra prints its own error
        return None
    with_hydra = OmegaConf.to_container(cfg)
    with_hydra.pop("hydra", None)
    config = OmegaConf.to_yaml(OmegaConf.create(with_hydra), resolve="--resolve" in args)
    return string.Template(template).substitute(APP_CONFIG_GROUPS=listed, CONFIG=config)


# ------------------------------------------------------------------ overrides
def parse_overrides(overrides: Sequence[str]) -> list[tuple[tuple[str, ...], bool]]:
    """``(key path, is a config-group choice)`` of each hydra override."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    out = []
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        key = override.key_or_group
        if override.package:  # +algorithm@algorithm.groups.agent=iql
            out.append((tuple(override.package.split(".")), True))
        elif "/" not in key:
            out.append((tuple(key.split(".")), key in _ROOT_GROUPS))
    return out


def _description_paths(path: tuple[str, ...], choice: bool) -> list[tuple[str, ...]]:
    """Where an override lands in :meth:`Experiment.describe`'s output."""
    head, rest = path[0], path[1:]
    if head == "hydra":
        return []
    if head == "algorithm":
        if not rest:
            return [("algorithm",)] if choice else [("algorithm",), ("algorithm_config",)]
        if rest[0] == "name":
            return [("algorithm",)]
        if rest[0] == "groups":
            group = rest[1:2]
            if len(rest) > 2:
                return [("algorithm_config", *group, rest[2])]
            named = [("algorithm", *group)]
            return named if choice else [*named, ("algorithm_config", *group)]
        return [("algorithm_config", rest[0])]
    return [path[:2]]


def _flat_algorithm_settings(
    node: Mapping[str, Any], given: list[tuple[tuple[str, ...], bool]] | None
) -> list[str]:
    """Settings of the root ``algorithm`` that no group would receive."""
    from marl.algorithms import get_algorithm
    from marl.experiment.resume import plain

    flat: dict[str, Any] = {}
    defaults = plain(dataclasses.asdict(get_algorithm(node["name"]).config_cls()))
    for key, value in node.items():
        if key not in ("name", "groups") and plain(value) != defaults.get(key, object()):
            flat[f"algorithm.{key}"] = value
    for path, choice in given or []:
        if path[0] != "algorithm" or path[1:2] == ("groups",):
            continue
        if choice and len(path) == 1:
            flat["algorithm"] = node["name"]
        elif len(path) > 1:
            flat[".".join(path[:2])] = node.get(path[1])
    return [f"{k}={v}" for k, v in flat.items()]


def algorithm_choice(
    node: Mapping[str, Any], given: list[tuple[tuple[str, ...], bool]] | None = None
) -> tuple[Any, Any]:
    """``(algorithm, algorithm_config)`` for :class:`Experiment` from the ``algorithm`` node."""
    node = dict(node)
    groups = node.get("groups") or {}
    if not groups:
        return node.pop("name"), {k: v for k, v in node.items() if k != "groups"}
    choice = {g: sub["name"] for g, sub in groups.items()}
    flat = _flat_algorithm_settings(node, given)
    if flat:
        keys = [item.split("=", 1)[0] for item in flat]
        example = " ".join(
            f"algorithm.groups.{g}.{k.split('.', 1)[1]}={node.get(k.split('.', 1)[1])}"
            for k in keys
            if "." in k
            for g in choice
        )
        raise ValueError(
            f"with one algorithm per group ({', '.join(f'{g}={n}' for g, n in choice.items())}) "
            f"these settings would reach no group: {' '.join(flat)}. Give them per group"
            + (f", e.g. {example}" if example else "")
            + (
                " (`algorithm=` would choose no group's algorithm: drop it)"
                if "algorithm" in keys
                else ""
            )
            + "."
        )
    configs = {}
    for group, sub in groups.items():
        sub = dict(sub)
        sub.pop("name")
        if sub.pop("groups", None):
            raise ValueError(f"algorithm.groups.{group}.groups: per-group algorithms do not nest")
        configs[group] = sub
    return choice, configs


# ------------------------------------------------------------------------ run
def run_config(
    cfg: Any,
    folder: str | os.PathLike[str] | None = None,
    overrides: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Run one experiment from a composed config (``task``, ``seed``, ``experiment``,
    ``algorithm``, ``model``, ``task_overrides``): :func:`experiment_from_config`, then
    :meth:`Experiment.run <marl.experiment.Experiment.run>`.

    Args:
        cfg: an OmegaConf config or a plain dict.
        folder: the output folder (see :func:`experiment_from_config`).
        overrides: the hydra overrides that produced ``cfg`` (see
            :func:`experiment_from_config`).

    Returns:
        The summary of :meth:`Experiment.run`.
    """
    return experiment_from_config(cfg, folder, overrides).run()


def experiment_from_config(
    cfg: Any,
    folder: str | os.PathLike[str] | None = None,
    overrides: Sequence[str] | None = None,
) -> Any:
    """The :class:`~marl.experiment.Experiment` of a composed config, checked, not run.

    Args:
        cfg: an OmegaConf config or a plain dict.
        folder: the output folder (default: ``experiment.save_folder``, else the
            current directory, which hydra sets to the run dir).
        overrides: the hydra overrides that produced ``cfg`` (``marl-run`` passes its
            command line). With ``experiment.restore_file``, they say which settings the
            user gave: those must agree with the checkpoint (or be ``experiment``
            settings that may change), and everything else comes from the checkpoint.
            ``None``: ``cfg`` describes the whole run and must match the checkpoint.

    Returns:
        The experiment (or the checkpoint's, resumed with the allowed changes); with
        ``experiment.runs > 1``, the :class:`~marl.experiment.runs.ExperimentRuns` of its
        seeds (``run()`` then returns one summary per run).

    Raises:
        ValueError, TypeError: a setting refused (each names its key), before anything
            is built or written.
    """
    from omegaconf import DictConfig, OmegaConf

    from marl.experiment.experiment import Experiment

    data = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    given = parse_overrides(overrides) if overrides is not None else None
    algorithm, algorithm_config = algorithm_choice(data["algorithm"], given)
    experiment = dict(data.get("experiment") or {})
    if folder is not None:
        experiment["save_folder"] = str(folder)
    restore = experiment.get("restore_file")
    if restore:
        from hydra.utils import to_absolute_path

        try:
            restore = experiment["restore_file"] = to_absolute_path(restore)
        except ValueError:  # outside a hydra run
            restore = experiment["restore_file"] = os.path.abspath(restore)
    arguments = dict(
        model=data.get("model"),
        seed=int(data.get("seed", 0)),
        config=experiment,
        algorithm_config=algorithm_config,
        task_overrides=data.get("task_overrides") or {},
    )
    if experiment.get("runs", 1) != 1:  # several seeds in this process: marl.experiment.runs
        from marl.experiment.runs import ExperimentRuns

        return ExperimentRuns.create(data["task"], algorithm, **arguments)
    exp = Experiment(data["task"], algorithm, **arguments)
    if restore and given is not None:
        exp = _resumed(exp, Path(restore), given)
    return exp


def _resumed(candidate: Any, restore: Path, given: list[tuple[tuple[str, ...], bool]]) -> Any:
    """The run of checkpoint ``restore``, with the command line's allowed changes applied.

    ``candidate`` is what the command line composes; only the settings it names are
    compared with the checkpoint.
    """
    from marl.experiment.experiment import Experiment
    from marl.experiment.resume import FIXED_ON_RESUME, differences, load_resumable

    # a run folder: its newest intact checkpoint (a damaged newer one is kept aside)
    checkpoint, state = load_resumable(restore)
    current = candidate.describe()
    paths: list[tuple[str, ...]] = []
    changes: dict[str, Any] = {}
    for path, choice in given:
        if path[0] == "experiment":
            fields = path[1:2] or tuple(current["experiment"])
            for field in fields:
                if field in FIXED_ON_RESUME:
                    paths.append(("experiment", field))
                elif field not in ("restore_file", "save_folder"):
                    changes[field] = current["experiment"][field]
        else:
            paths += _description_paths(path, choice)
    saved = state.get("config") or {}
    lines = differences(saved, current, paths, given="the command line")
    if lines:
        raise ValueError(
            f"these overrides contradict the checkpoint {checkpoint}:\n  "
            + "\n  ".join(lines)
            + "\nA resumed run keeps its checkpoint's task, algorithm and hyperparameters, "
            f"model, seed and experiment.{{{','.join(FIXED_ON_RESUME)}}}. Drop these "
            "overrides to continue the run, or start a new run without "
            "experiment.restore_file."
        )
    return Experiment._from_checkpoint(
        checkpoint, state, changes, None, candidate.config.save_folder or os.getcwd()
    )


def resume_runs(folder: Path, args: Sequence[str]) -> int:
    """``marl-run --resume <folder of runs> [experiment.<key>=<value> ...]``: continue every
    run of ``folder`` (:meth:`ExperimentRuns.resume <marl.experiment.runs.ExperimentRuns.resume>`).

    Returns:
        The exit code: 0, 2 for a refused argument, ``128 + signal`` when interrupted.
    """
    import yaml

    from marl.experiment.lifecycle import RunInterrupted
    from marl.experiment.runs import ExperimentRuns

    changes: dict[str, Any] = {}
    for arg in args[args.index("--resume") + 2 :] + args[: args.index("--resume")]:
        key, sep, value = arg.partition("=")
        if not sep or not key.startswith("experiment.") or key.count(".") != 1:
            sys.stderr.write(
                f"marl-run: --resume {folder} continues runs trained together: it takes "
                f"experiment.<key>=<value> settings only, got {arg!r}\n"
            )
            return 2
        changes[key.split(".", 1)[1]] = yaml.safe_load(value)
    try:
        runs = ExperimentRuns.resume(folder, changes)
    except (ValueError, TypeError, FileNotFoundError, FileExistsError) as err:
        sys.stderr.write(f"marl-run: {err}\n")
        return 2
    try:
        runs.run()
    except RunInterrupted as err:
        return err.exit_code
    return 0


def main() -> None:
    """Entry point of ``marl-run``."""
    # torch is imported below, after the help text: `marl-run --help` needs only hydra
    # and the config dataclasses
    from marl.experiment.argv import (
        check_task_overrides,
        folder_of_runs,
        follower_args,
        launch_rank,
        lock_run_dir,
        prepare_launch,
        prepare_resume,
        run_holding,
        runs_nothing,
        torchrun_command,
    )

    rank, args = launch_rank(), sys.argv[1:]
    runs_folder = folder_of_runs(args)
    if runs_folder is not None:  # --resume of runs trained together: no hydra, no new folder
        sys.exit(resume_runs(runs_folder, args))
    try:
        nproc, args = prepare_launch(args)
        if nproc is not None and rank is not None:
            raise ValueError(
                f"--nproc {nproc} under torchrun (WORLD_SIZE={os.environ['WORLD_SIZE']}): "
                "torchrun already started the processes; drop --nproc"
            )
    except ValueError as err:
        sys.stderr.write(f"marl-run: {err}\n")
        sys.exit(2)
    # one run over nproc processes: torchrun runs them (not to print a help or a config)
    if nproc is not None and nproc > 1 and not runs_nothing(args):
        command = torchrun_command(nproc, args)
        sys.stderr.write(f"marl-run: {shlex.join(['python', *command[1:]])}\n")
        sys.stderr.flush()
        os.execv(command[0], command)
    if rank:  # torchrun's rank > 0 writes nothing into the run folder: hydra's go elsewhere
        args, scratch = follower_args(args, rank)
        atexit.register(shutil.rmtree, scratch, True)
    try:
        args = prepare_resume(args)
    except (ValueError, FileNotFoundError, FileExistsError) as err:
        sys.stderr.write(f"marl-run: {err}\n")
        sys.exit(2)
    sys.argv[1:] = args
    text = help_text("config", args)
    if text is not None:
        print(text)
        return
    try:
        check_task_overrides(args)  # before hydra makes a run folder for a typo
        lock = None if rank else lock_run_dir(args)
    except (ValueError, FileExistsError) as err:
        sys.stderr.write(f"marl-run: {err}\n")
        sys.exit(2)

    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig

    from marl.experiment.data_parallel import process_group
    from marl.experiment.peers import PeerLost

    prepare_hydra()

    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
    def _main(cfg: DictConfig) -> float:
        try:
            exp = experiment_from_config(cfg, overrides=list(HydraConfig.get().overrides.task))
        except (ValueError, TypeError) as err:  # a refused setting: its line, no traceback
            sys.stderr.write(f"marl-run: {err}\n")
            sys.exit(2)
        # under torchrun (WORLD_SIZE > 1): one rank of a data-parallel run
        runs = getattr(exp, "experiments", None)  # experiment.runs > 1: ExperimentRuns
        c = exp.config if runs is None else runs[0].config
        if runs is None and c.runs > 1:  # --resume of one folder of runs trained together
            sys.stderr.write(
                f"marl-run: {exp.folder} is one of experiment.runs={c.runs} runs trained "
                f"together: resume them all with marl-run --resume {exp.folder.parent}, or "
                "this one alone with experiment.runs=1\n"
            )
            sys.exit(2)
        with process_group(c.train_device, c.peer_timeout_s) as data_parallel:
            if data_parallel is not None:
                try:
                    if runs is not None:
                        raise ValueError(
                            f"experiment.runs={c.runs} trains its runs in one process: it "
                            "cannot be a data-parallel run (--nproc, torchrun) as well"
                        )
                    exp.use_data_parallel(data_parallel)
                except ValueError as err:
                    sys.stderr.write(f"marl-run: {err}\n")
                    sys.exit(2)
            try:
                summary = exp.run()
            except PeerLost as err:  # a data-parallel peer died or hung: its line, and 1
                sys.stderr.write(f"marl-run: {err}\n")
                sys.exit(1)
        # the return value is what hydra's sweepers optimize (the runs' mean for several)
        summaries = summary if isinstance(summary, list) else [summary]
        values = [
            float(s.get("eval/episode_reward", s.get("train/episode_reward", 0.0)))
            for s in summaries
        ]
        return sum(values) / len(values)

    run_holding(lock, _main)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
