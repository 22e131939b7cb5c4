"""Which PettingZoo module holds a task (``"simple_spread_v3"``, ``"sisl/multiwalker_v9"``).

Apart from :mod:`marl.envs.libs.pettingzoo` (the wrapper, which imports torch) because
the task catalogue asks it whether a task is installed (``marl-run --help`` lists the
installed tasks) without building anything.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from marl.extras import module_installed

__all__ = ["find_task", "task_installed"]

# Where task names are looked up, in order: MPE moved to ``mpe2``.
_FAMILIES = {
    "mpe": "mpe2",
    "sisl": "pettingzoo.sisl",
    "classic": "pettingzoo.classic",
    "butterfly": "pettingzoo.butterfly",
}


def task_installed(task: str) -> bool:
    """Whether a PettingZoo task's module is installed, found without importing anything
    (:func:`module_installed`): ``marl-run --help`` lists the installed tasks in well under
    a second, where importing each family took one. A task whose module is present but one
    of whose own dependencies is missing counts as installed; making it then raises the
    error of :func:`find_task`, which names the missing package and the extra to install.

    Examples:
        >>> task_installed("classic/no_such_task_v0")
        False
    """
    family, _, name = task.rpartition("/")
    if family and family not in _FAMILIES:
        return False
    families = [_FAMILIES[family]] if family else list(_FAMILIES.values())
    return any(module_installed(f"{package}.{name}") for package in families)


def find_task(task: str) -> Any:
    """The module of a task such as ``"simple_spread_v3"`` or ``"sisl/multiwalker_v9"``."""
    family, _, name = task.rpartition("/")
    if family and family not in _FAMILIES:
        raise ValueError(
            f"unknown PettingZoo family {family!r} in {task!r}; expected one of {sorted(_FAMILIES)}"
        )
    families = [_FAMILIES[family]] if family else list(_FAMILIES.values())
    known: list[str] = []
    for package in families:
        try:
            pkg = importlib.import_module(package)
        except ImportError:
            continue
        try:
            module = importlib.import_module(f"{package}.{name}")
            if hasattr(module, "env") or hasattr(module, "parallel_env"):
                return module
        except ImportError as err:
            if err.name not in (f"{package}.{name}", package):
                raise ImportError(
                    f"PettingZoo task {task!r} needs a missing package ({err.name}); "
                    'pip install "marl[pettingzoo]"'
                ) from err
        known.extend(
            m.name
            for m in pkgutil.iter_modules(getattr(pkg, "__path__", []))
            if "_v" in m.name and m.name.rsplit("_v", 1)[1].isdigit()
        )
    import difflib

    close = difflib.get_close_matches(name, known, n=5)
    hint = f"closest names: {close}" if close else f"available: {sorted(known)}"
    raise ValueError(f"unknown PettingZoo task {task!r} (searched {families}); {hint}")
