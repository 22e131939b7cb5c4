"""The task catalogue: named, ready-to-train envs described by YAML files.

Each task (``"vmas/navigation"``, ``"pettingzoo/simple_tag"``,
``"gymnasium/cartpole"``, ...) is one YAML file with:

- ``description``: one line;
- ``family``: ``vmas``, ``pettingzoo``, ``gymnasium``, ``lbforaging``,
  ``rware``, ``mamujoco``, ``magent2``, ``meltingpot``, ``overcooked`` (the wrapper
  to use); ``smax``, ``lbforaging_torch``, ``rware_torch`` for marl's batched torch
  envs (:mod:`marl.envs.native`); or ``marl`` for marl's own test tasks
  (``env: {builtin: recall, ...}``). :mod:`marl.envs.families` knows each;
- ``env``: the wrapper's arguments, with BenchMARL-like defaults;
- ``group_map`` (optional): a constructor name or a dict of groups;
- ``transforms`` (optional): ``step_counter: <max_steps>`` for envs that do not
  truncate themselves, ``resize_images: {size: [H, W], grayscale: true}`` for pixel
  tasks (:class:`~marl.envs.image_transforms.ResizeImages`), ``double_to_float: true``
  for float64 observations the
  wrapper keeps (the wrappers already convert float64 to float32 by default);
- ``evaluation`` (optional): how a run's evaluation plays the task, one of
  :data:`TASK_EVALUATIONS` (``versus_random`` for zero-sum games played in self-play,
  whose plain headline, the mean over the players, is always 0); absent: the policy
  plays every agent.

A file is checked against this schema when it is loaded: an unknown key, an
unknown transform or a bad value raises a ``ValueError`` that names the file,
the key, the valid names and the closest match. The ``env`` section is checked
against the wrapper's arguments when the task is built.

The files ship inside the package (``marl/tasks``); in a source checkout they
are read from the repository's top-level ``tasks/`` folder. Listing and checking tasks
imports no torch (``marl-run --help`` lists them); :func:`make_task` does.
"""

from __future__ import annotations

import copy
import difflib
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marl._resources import data_folder
from marl.envs.families import (
    accepted_args,
    build_env,
    env_available,
    family_names,
    unknown_args,
)
from marl.extras import module_installed

if TYPE_CHECKING:
    from marl.envs.common import EnvBase
    from marl.envs.transforms import Transform

__all__ = [
    "TASK_EVALUATIONS",
    "check_task_name",
    "install_hints",
    "list_tasks",
    "load_task_config",
    "make_task",
    "task_available",
]

_GROUP_MAP_CONSTRUCTORS = ("all_in_one", "by_prefix", "one_per_agent")
_TASK_KEYS = (
    "description",
    "env",
    "evaluation",
    "family",
    "group_map",
    "requires",
    "transforms",
)

TASK_EVALUATIONS: dict[str, str] = {
    "versus_random": (
        "the trained policy against a uniformly random legal-move player, from each seat "
        "equally often; the headline return is the trained side's (zero-sum games of two "
        "seats: tictactoe's two players in one group, simple_tag's two groups)"
    ),
}
"""The values of a task file's ``evaluation`` key, with what each means. The experiment
runner (:func:`marl.experiment.parts.task_evaluator`) builds the evaluator of each."""


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


# transform name -> (value check, what a valid value is)
_TRANSFORMS: dict[str, tuple[Any, str]] = {
    "double_to_float": (lambda v: isinstance(v, bool), "true or false"),
    "step_counter": (_positive_int, "a positive int (the episode length)"),
    "resize_images": (
        lambda v: (
            isinstance(v, dict)
            and set(v) <= {"size", "grayscale"}
            and isinstance(v.get("size"), list)
            and len(v["size"]) == 2
            and all(_positive_int(x) for x in v["size"])
            and isinstance(v.get("grayscale", False), bool)
        ),
        "a mapping {size: [height, width], grayscale: true|false}",
    ),
}


def _unknown(kind: str, key: Any, valid: Any) -> str:
    close = difflib.get_close_matches(str(key), list(valid), n=1, cutoff=0.5)
    hint = f"; closest: {close[0]!r}" if close else ""
    return f"unknown {kind} {key!r}; valid: {sorted(valid)}{hint}"


def _validate_task_config(config: Any, source: Any) -> None:
    """Check a parsed task file against the schema; raise listing every problem.

    Raises:
        ValueError: naming ``source`` (the file), each bad key, the valid names
            and the closest match.
    """
    if not isinstance(config, dict):
        raise ValueError(f"task file {source} must be a mapping, got {config!r:.200}")
    problems = [_unknown("key", k, _TASK_KEYS) for k in config if k not in _TASK_KEYS]
    family = config.get("family")
    if family not in family_names():
        problems.append(f"'family' must be one of {family_names()}, got {family!r}")
    evaluation = config.get("evaluation")
    if evaluation is not None and (
        not isinstance(evaluation, str) or evaluation not in TASK_EVALUATIONS
    ):
        problems.append("evaluation: " + _unknown("evaluation", evaluation, TASK_EVALUATIONS))
    if "description" in config and not isinstance(config["description"], str):
        problems.append(f"'description' must be a string, got {config['description']!r}")
    requires = config.get("requires")
    if requires is not None and (
        not isinstance(requires, list) or not all(isinstance(m, str) and m for m in requires)
    ):
        problems.append(
            f"'requires' must be a list of module names (e.g. [Box2D]), got {requires!r}"
        )
    if config.get("env") is not None and not isinstance(config["env"], dict):
        problems.append(f"'env' must be a mapping of wrapper arguments, got {config['env']!r}")
    group_map = config.get("group_map")
    if isinstance(group_map, str):
        if group_map not in _GROUP_MAP_CONSTRUCTORS:
            problems.append(
                "group_map: " + _unknown("constructor", group_map, _GROUP_MAP_CONSTRUCTORS)
            )
    elif isinstance(group_map, dict):
        for group, members in group_map.items():
            if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
                problems.append(
                    f"group_map: group {group!r} must map to a list of agent names, got {members!r}"
                )
    elif group_map is not None:
        problems.append(
            f"'group_map' must be one of {list(_GROUP_MAP_CONSTRUCTORS)} or a mapping "
            f"group -> list of agents, got {group_map!r}"
        )
    transforms = config.get("transforms")
    if isinstance(transforms, dict):
        for name, value in transforms.items():
            if name not in _TRANSFORMS:
                problems.append(_unknown("transform", name, _TRANSFORMS))
                continue
            check, expected = _TRANSFORMS[name]
            if not check(value):
                problems.append(f"transforms.{name} must be {expected}, got {value!r}")
    elif transforms is not None:
        problems.append(
            f"'transforms' must be a mapping name -> value (valid names: {sorted(_TRANSFORMS)}), "
            f"got {transforms!r}"
        )
    if problems:
        raise ValueError(f"task file {source} is invalid:\n  - " + "\n  - ".join(problems))


def _catalogue_root() -> Path:
    """The folder holding ``<family>/<task>.yaml``: packaged, else the source checkout."""
    return data_folder("marl", "tasks", "tasks", "the task catalogue")


@lru_cache(maxsize=1)
def _index() -> dict[str, Path]:
    root = _catalogue_root()
    # sorted by task name, not by path: "a-2s.yaml" sorts before "a.yaml"
    found = {f"{p.parent.name}/{p.stem}": p for p in root.glob("*/*.yaml") if p.is_file()}
    return dict(sorted(found.items()))


def list_tasks(family: str | None = None, available: bool = False) -> list[str]:
    """Names of the catalogued tasks, sorted.

    Args:
        family: only this family (``"vmas"``, ``"pettingzoo"``, ``"gymnasium"``,
            ``"lbforaging"``, ``"rware"``, ``"mamujoco"``, ``"magent2"``, ``"meltingpot"``,
            ``"overcooked"``).
        available: only tasks whose packages are installed (see :func:`task_available`).

    Returns:
        Names such as ``"vmas/navigation"``.

    Examples:
        >>> "vmas/navigation" in list_tasks()
        True
        >>> list_tasks("gymnasium")
        ['gymnasium/cartpole', 'gymnasium/halfcheetah', 'gymnasium/lunarlander', 'gymnasium/pendulum']
    """
    names = [n for n in _index() if family is None or n.split("/")[0] == family]
    if available:
        names = [n for n in names if task_available(n)]
    return names


def check_task_name(name: str) -> str:
    """``name`` when it is a catalogued task, else a ``ValueError`` naming the closest ones.

    Raises:
        ValueError: ``unknown task 'vmas/navigaton'; closest names: ['vmas/navigation',
            ...]`` (or every known name when none is close).

    Examples:
        >>> check_task_name("vmas/navigation")
        'vmas/navigation'
        >>> check_task_name("vmas/navigaton")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: unknown task 'vmas/navigaton'; closest names: ['vmas/navigation', ...]
    """
    index = _index()
    if name in index:
        return name
    close = difflib.get_close_matches(name, list(index), n=5, cutoff=0.4)
    if "/" not in name:  # "navigation" -> "vmas/navigation"
        close = [n for n in index if n.split("/", 1)[1] == name] + close
    hint = f"closest names: {list(dict.fromkeys(close))}" if close else f"known: {list(index)}"
    raise ValueError(f"unknown task {name!r}; {hint}")


def load_task_config(name: str) -> dict[str, Any]:
    """The parsed YAML of a task (a fresh copy).

    Raises:
        ValueError: on an unknown task name (listing the closest names) or a
            file that breaks the schema (unknown keys or transforms, bad
            values: each named with the valid names and the closest match).
    """
    path = _index()[check_task_name(name)]
    stat = path.stat()
    return copy.deepcopy(_parsed_task_file(path, stat.st_mtime_ns, stat.st_size))


@lru_cache(maxsize=1024)
def _parsed_task_file(path: Path, mtime_ns: int, size: int) -> dict[str, Any]:
    """A task file, parsed and checked once per version of the file (its modification time
    and size are part of the key): listing the installed tasks reads every file twice."""
    import yaml

    # libyaml's loader when PyYAML has it: the same data, ten times faster than the pure
    # Python one (every catalogue file is read to list the installed tasks)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as f:
        config = yaml.load(f, Loader=loader)
    _validate_task_config(config, path)
    if config.get("env") is None:
        config["env"] = {}
    return config


def task_available(name: str) -> bool:
    """Whether the packages a task needs are installed (and hold the task): its family's
    (:func:`marl.envs.families.env_available`) and the modules its task file ``requires``
    (a Gymnasium task's simulator, e.g. ``[Box2D]``). Found on the path without importing
    anything, so a package present but broken counts as installed (making the task then
    raises its import error).

    Examples:
        >>> task_available("vmas/navigation")
        True
    """
    config = load_task_config(name)
    if not all(module_installed(m) for m in config.get("requires") or ()):
        return False
    return env_available(config["family"], config["env"])


def install_hints() -> dict[str, tuple[list[str], str]]:
    """The catalogued tasks that are not available, by family, with the command that adds them.

    Returns:
        ``{family: (task names, 'pip install "marl[<family>]"')}``, only for
        families with unavailable tasks.

    Examples:
        >>> hints = install_hints()
        >>> all(cmd == f'pip install "marl[{fam}]"' for fam, (_, cmd) in hints.items())
        True
    """
    hints: dict[str, tuple[list[str], str]] = {}
    for name in list_tasks():
        if not task_available(name):
            family = name.split("/")[0]
            # every family's extra is named after it (pyproject.toml)
            hints.setdefault(family, ([], f'pip install "marl[{family}]"'))[0].append(name)
    return hints


def make_task(
    name: str,
    num_envs: int | None = None,
    seed: int | None = None,
    device: Any = None,
    check_actions: bool = False,
    **overrides: Any,
) -> EnvBase:
    """Build a catalogued task, with ``RewardSum`` (and ``StepCounter`` where configured).

    Args:
        name: a catalogue name such as ``"vmas/navigation"`` (see :func:`list_tasks`).
        num_envs: env batch size. VMAS, marl's native envs and Gymnasium vectorize
            natively (VMAS defaults to 1, the others to a single unbatched env); PettingZoo,
            LBF, RWARE, MaMuJoCo, MAgent2 and Overcooked tasks are unbatched by default and stacked in a
            ``SerialEnv`` when ``num_envs`` is given.
        seed: optional seed.
        device: device of the tensors (``None``: the wrapper's default).
        check_actions: check every action's values at each step (NaN/inf,
            non-integer, out-of-range or illegal discrete actions) and raise a
            message naming the key, the expected domain and the offending
            values. Off by default: it costs time on the hot path (see
            ``docs/basic/envs_and_groups.md``); turn it on to debug.
        **overrides: replace entries of the task's ``env`` section (e.g.
            ``max_steps=50``, ``n_agents=5``) or its ``group_map``.

    Returns:
        A ``TransformedEnv`` over the family's wrapper.

    Raises:
        ValueError: on an unknown task (listing the closest names) or an
            unknown override (listing the accepted ones).
        ImportError: when the family's package is missing.

    Examples:
        >>> env = make_task("vmas/navigation", num_envs=2, seed=0, max_steps=5)
        >>> env.rollout(3)["agent", "episode_reward"].shape
        torch.Size([2, 3, 3, 1])
    """
    # the transforms import torch: here, so that listing and checking tasks does not
    from marl.envs.builtin_transforms import DoubleToFloat, RewardSum, StepCounter
    from marl.envs.image_transforms import ResizeImages
    from marl.envs.transforms import TransformedEnv

    name = check_task_name(name)
    config = load_task_config(name)
    family = config["family"]
    kwargs = dict(config["env"])
    group_map = config.get("group_map")
    if "group_map" in overrides:
        group_map = overrides.pop("group_map")
    unknown = unknown_args(family, kwargs, overrides)  # VMAS checks its scenario's itself
    if unknown:
        known = sorted(set(kwargs) | (accepted_args(family, kwargs) or set()))
        raise ValueError(f"unknown override(s) {unknown} for task {name!r}; accepted: {known}")
    kwargs.update(overrides)
    if device is not None:
        kwargs["device"] = device
    transforms = config.get("transforms") or {}
    try:
        env = build_env(family, kwargs, group_map, num_envs, seed)
    except TypeError as err:
        if "unexpected keyword argument" in str(err):
            known = sorted(set(config["env"]) | (accepted_args(family, config["env"]) or set()))
            raise ValueError(
                f"unknown override for task {name!r}: {err}; accepted: {known}"
            ) from err
        raise
    extra: list[Transform] = []
    if transforms.get("resize_images"):
        resize = transforms["resize_images"]
        extra.append(ResizeImages(resize["size"], grayscale=resize.get("grayscale", False)))
    if transforms.get("double_to_float"):
        extra.append(DoubleToFloat())
    if transforms.get("step_counter"):
        extra.append(StepCounter(int(transforms["step_counter"])))
    extra.append(RewardSum())
    out = TransformedEnv(env, extra)
    out.check_actions = check_actions
    return out
