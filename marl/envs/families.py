"""The env families of the task catalogue: what each needs installed, which arguments
its wrapper takes, and how its env is built.

A task file names its ``family`` (see :mod:`marl.envs.tasks`); this module is the one
place that knows the families: the package each imports, the wrapper class, the
arguments it accepts (for the catalogue's clear errors on a misspelt override), and
whether it steps a batch of envs itself (VMAS, marl's native envs) or is stacked in a
``SerialEnv``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the catalogue reads this module without torch
    from marl.envs.common import EnvBase

__all__ = [
    "accepted_args",
    "batched_family",
    "build_env",
    "env_available",
    "family_names",
    "unknown_args",
]

_FAMILY_PACKAGES = {
    "vmas": "vmas",
    "pettingzoo": "pettingzoo",
    "gymnasium": "gymnasium",
    "lbforaging": "lbforaging",
    "rware": "rware",
    "mamujoco": "gymnasium_robotics",
    "magent2": "magent2",
    "meltingpot": "meltingpot",
    "overcooked": "overcooked_ai_py",
    "marl": "marl",
    # marl's own batched torch envs need nothing beyond torch
    "smax": "torch",
    "lbforaging_torch": "torch",
    "rware_torch": "torch",
}
# Modules a family needs besides its package (looked up, never imported, by env_available)
_FAMILY_EXTRA_MODULES = {"mamujoco": ("mujoco",), "meltingpot": ("dmlab2d",)}
# marl's own (batched) tasks: the ``builtin`` entry of their ``env`` section -> (module, class).
_BUILTIN_TASKS = {"recall": ("marl.envs.memory", "RecallEnv")}
# marl's batched torch families (``marl.envs.native``): family -> (module, class). Each
# takes ``num_envs`` itself, as VMAS does, and its arguments are its constructor's.
_NATIVE_FAMILIES = {
    "smax": ("marl.envs.native.smax", "SmaxEnv"),
    "lbforaging_torch": ("marl.envs.native.lbf", "LBFEnv"),
    "rware_torch": ("marl.envs.native.rware", "RwareEnv"),
}
# The Gymnasium-registered families with tuple spaces over agents: (module, class).
_TUPLE_FAMILIES = {
    "lbforaging": ("marl.envs.libs.lbforaging", "LBForagingEnv"),
    "rware": ("marl.envs.libs.rware", "RwareEnv"),
}
# Families built by a factory over an unbatched wrapper: (module, callable).
_FACTORY_FAMILIES = {
    "mamujoco": ("marl.envs.libs.mamujoco", "MaMuJoCoEnv"),
    "magent2": ("marl.envs.libs.magent2", "magent2_env"),
    "meltingpot": ("marl.envs.libs.meltingpot", "meltingpot_env"),
    "overcooked": ("marl.envs.libs.overcooked", "OvercookedEnv"),
}
_TUPLE_ARGS = {
    "env_id",
    "group_map",
    "seed",
    "categorical_actions",
    "device",
    "keep_float64",
}
_WRAPPER_ARGS = {
    "vmas": {
        "num_envs",
        "device",
        "continuous_actions",
        "max_steps",
        "seed",
        "group_map",
        "categorical_actions",
        "loop_reset_threshold",
        "scenario",
        "keep_float64",
    },
    "pettingzoo": {
        "task",
        "parallel",
        "group_map",
        "use_mask",
        "return_state",
        "seed",
        "done_on_any",
        "categorical_actions",
        "device",
        "render_mode",
        "keep_float64",
    },
    "gymnasium": {
        "env_id",
        "num_envs",
        "seed",
        "categorical_action_encoding",
        "vectorization_mode",
        "device",
        "render_mode",
        "keep_float64",
    },
    "lbforaging": _TUPLE_ARGS
    | {
        "max_episode_steps",
        "sight",
        "force_coop",
        "penalty",
        "normalize_reward",
        "observe_agent_levels",
        "grid_observation",
        "players",
        "field_size",
        "max_num_food",
        "min_player_level",
        "max_player_level",
        "min_food_level",
        "max_food_level",
        "render_mode",
    },
    "rware": _TUPLE_ARGS
    | {
        "reward_type",
        "max_steps",
        "max_inactivity_steps",
        "sensor_range",
        "request_queue_size",
        "n_agents",
        "msg_bits",
        "column_height",
        "shelf_rows",
        "shelf_columns",
        "normalised_coordinates",
        "render_mode",
    },
    "mamujoco": {
        "scenario",
        "agent_conf",
        "agent_obsk",
        "group_map",
        "return_state",
        "seed",
        "device",
        "keep_float64",
        "max_episode_steps",
        "render_mode",
        "ctrl_cost_weight",
        "forward_reward_weight",
        "reset_noise_scale",
        "healthy_reward",
        "terminate_when_unhealthy",
    },
    "magent2": {
        "task",
        "group_map",
        "use_mask",
        "return_state",
        "seed",
        "categorical_actions",
        "device",
        "render_mode",
        "map_size",
        "max_cycles",
        "minimap_mode",
        "extra_features",
        # the reward terms of the tasks (each task accepts its own)
        "step_reward",
        "dead_penalty",
        "attack_penalty",
        "attack_opponent_reward",
        "attack_food_reward",
        "tag_penalty",
        "tiger_step_recover",
        "deer_attacked",
    },
    "meltingpot": {
        "substrate",
        "roles",
        "max_steps",
        "group_map",
        "return_state",
        "seed",
        "categorical_actions",
        "device",
        "render_mode",
    },
    "overcooked": {
        "layout",
        "horizon",
        "reward_shaping",
        "group_map",
        "seed",
        "categorical_actions",
        "device",
    },
}


def family_names() -> list[str]:
    """Every family a task file may name.

    Examples:
        >>> {"vmas", "smax", "lbforaging", "lbforaging_torch"} <= set(family_names())
        True
    """
    return sorted(_FAMILY_PACKAGES)


def batched_family(family: str) -> bool:
    """Whether the family's env steps ``num_envs`` sub-envs in one batch itself (VMAS and
    marl's native envs): it renders from that batch and takes as many envs as a run
    wants, where the others step copies one by one.

    Examples:
        >>> batched_family("vmas"), batched_family("smax"), batched_family("lbforaging")
        (True, True, False)
    """
    return family == "vmas" or family in _NATIVE_FAMILIES


def _own_class(family: str, builtin: Any) -> type[EnvBase]:
    """The class of a ``marl`` task (by its ``builtin`` name) or of a native family."""
    if family == "marl":
        if builtin not in _BUILTIN_TASKS:
            raise ValueError(
                f"a marl task's env needs builtin: one of {sorted(_BUILTIN_TASKS)}, got {builtin!r}"
            )
        module, cls = _BUILTIN_TASKS[builtin]
    else:
        module, cls = _NATIVE_FAMILIES[family]
    return getattr(importlib.import_module(module), cls)


def accepted_args(family: str, env: Mapping[str, Any]) -> set[str] | None:
    """The ``env`` arguments a family's wrapper accepts, ``None`` when it checks its own
    (VMAS: each scenario takes its own).

    marl's own envs accept their constructor's arguments; ``env`` (the task's ``env``
    section) says which ``builtin`` a ``marl`` task is.

    Examples:
        >>> sorted(accepted_args("marl", {"builtin": "recall"}))[:4]
        ['builtin', 'delay', 'device', 'group_map']
    """
    if family == "vmas":
        return None
    if family == "marl" or family in _NATIVE_FAMILIES:
        cls = _own_class(family, env.get("builtin"))
        params = inspect.signature(cls.__init__).parameters
        names = {n for n, p in params.items() if n != "self" and p.kind is not p.VAR_KEYWORD}
        return names | ({"builtin"} if family == "marl" else set())
    return set(_WRAPPER_ARGS[family])


def unknown_args(family: str, env: Mapping[str, Any], names: Any) -> list[str]:
    """Which of ``names`` the family's wrapper does not accept (sorted)."""
    known = accepted_args(family, env)
    if known is None:
        return []
    unknown = sorted(set(names) - known - set(env))
    if unknown and family == "gymnasium":
        unknown = [k for k in unknown if not _gym_accepts(env["env_id"], k)]
    return unknown


def env_available(family: str, env: Mapping[str, Any]) -> bool:
    """Whether the packages a family's env needs are installed and hold the module of the
    env that ``env`` (a task's ``env`` section) names.

    Nothing is imported: the modules are looked up on the path
    (:func:`importlib.util.find_spec`; submodules in their parents' folders), so that
    ``marl-run --help`` lists the installed tasks in milliseconds, where importing every
    family (gymnasium's simulators, scipy under PettingZoo's SISL, ...) took a second. The
    price: a package that is present but broken (one of its own dependencies missing) counts
    as installed, and making its task then raises the import error, which for PettingZoo
    names the missing package and the extra to install. Gymnasium-registered ids
    (lbforaging, rware, gymnasium) are those of the versions the extras pin; a task's own
    simulator (Box2D, MuJoCo) is its task file's ``requires``
    (:func:`marl.envs.tasks.task_available`).

    Examples:
        >>> env_available("smax", {"scenario": "3m"})
        True
    """
    from marl.envs.libs.pettingzoo_tasks import task_installed
    from marl.extras import module_installed

    needed = [_FAMILY_PACKAGES[family], *_FAMILY_EXTRA_MODULES.get(family, ())]
    if not all(module_installed(m) for m in needed):
        return False
    if family == "pettingzoo":
        return task_installed(env["task"])
    if family == "magent2":
        return module_installed(f"magent2.environments.{env['task']}")
    return True


def _gym_accepts(env_id: str, key: str) -> bool:
    import inspect

    import gymnasium
    from gymnasium.envs.registration import load_env_creator

    spec = gymnasium.spec(env_id)
    if key in spec.kwargs or key in ("render_mode", "max_episode_steps", "disable_env_checker"):
        return True
    creator = spec.entry_point
    if isinstance(creator, str):
        creator = load_env_creator(creator)
    params = inspect.signature(creator).parameters
    return key in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def build_env(
    family: str, kwargs: dict[str, Any], group_map: Any, num_envs: int | None, seed: int | None
) -> EnvBase:
    """The env of a family from a task's ``env`` arguments (``kwargs`` is consumed).

    Batched families (:func:`batched_family`) get ``num_envs`` (VMAS: 1 when ``None``);
    the others are one env, or a ``SerialEnv`` of ``num_envs`` copies.
    """
    if family == "vmas":
        from marl.envs.libs.vmas import VmasEnv

        scenario = kwargs.pop("scenario")
        return VmasEnv(scenario, num_envs=num_envs or 1, seed=seed, group_map=group_map, **kwargs)
    if family == "marl" or family in _NATIVE_FAMILIES:
        env_cls = _own_class(family, kwargs.pop("builtin", None))
        return env_cls(num_envs=num_envs, seed=seed, group_map=group_map, **kwargs)
    if family == "pettingzoo" or family in _TUPLE_FAMILIES or family in _FACTORY_FAMILIES:
        if family == "pettingzoo":
            from marl.envs.libs.pettingzoo import PettingZooEnv as wrapper
        else:
            module, cls = (_TUPLE_FAMILIES | _FACTORY_FAMILIES)[family]
            wrapper = getattr(importlib.import_module(module), cls)
        if num_envs is None:
            return wrapper(seed=seed, group_map=group_map, **kwargs)
        from marl.envs.batched import SerialEnv

        env = SerialEnv(num_envs, wrapper, dict(group_map=group_map, **kwargs))
        if seed is not None:
            env.set_seed(seed)
        return env
    from marl.envs.libs.gymnasium import GymnasiumEnv

    return GymnasiumEnv(num_envs=num_envs, seed=seed, **kwargs)
