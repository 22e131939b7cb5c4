"""Optional dependencies: import one, or say which ``marl`` extra installs it.

Every optional package (an env family, a logger, Ray, matplotlib, ...) is imported
lazily, where it is first needed, through :func:`require`, so that a missing one fails
with one kind of message: who needed what, and the ``pip install "marl[<extra>]"`` that
brings it. This module imports nothing of marl, so every layer may use it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
from collections.abc import Sequence
from types import ModuleType

__all__ = ["module_installed", "require"]


def require(
    module: str,
    user: str,
    extra: str,
    *,
    what: str | None = None,
    own: Sequence[str] | None = None,
) -> ModuleType:
    """Import ``module``, or raise an ``ImportError`` naming the extra that installs it.

    Args:
        module: the dotted module to import, e.g. ``"vmas"`` or
            ``"gymnasium_robotics.mamujoco_v1"``.
        user: who needs it, the subject of the message (``"VmasEnv"``).
        extra: the ``marl`` extra that installs it (``"vmas"`` gives
            ``pip install "marl[vmas]"``).
        what: what is missing, in words (default: ``the "<top package>" package``).
        own: the top-level packages whose absence this message explains (default: any
            import error). A failed import of another package (a broken dependency of
            an installed package) is raised as it is, since the extra would not fix it.

    Returns:
        The imported module.

    Raises:
        ImportError: ``'<user> needs <what>: pip install "marl[<extra>]"'``, chained to
            the original error.

    Examples:
        >>> require("json", "the example", "none").__name__
        'json'
        >>> require("no_such_package_here", "MyEnv", "myenv")
        Traceback (most recent call last):
        ...
        ImportError: MyEnv needs the "no_such_package_here" package: pip install "marl[myenv]"
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        missing = (err.name or "").split(".")[0]
        if own is not None and missing and missing not in own:
            raise
        what = what or f'the "{module.split(".")[0]}" package'
        raise ImportError(f'{user} needs {what}: pip install "marl[{extra}]"') from err


def module_installed(name: str) -> bool:
    """Whether module ``name`` (dotted) is on the path, found without importing it or its
    parent packages: the top-level package through :func:`importlib.util.find_spec`, each
    submodule in its parent's folders (importing ``pettingzoo.sisl`` alone imports scipy).

    Examples:
        >>> module_installed("json.decoder"), module_installed("json.no_such_module")
        (True, False)
    """
    parts = name.split(".")
    spec = importlib.util.find_spec(parts[0])
    for depth in range(2, len(parts) + 1):
        folders = None if spec is None else spec.submodule_search_locations
        if not folders:  # not found, or a module (not a package) has no submodules
            return False
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:depth]), list(folders))
    return spec is not None
