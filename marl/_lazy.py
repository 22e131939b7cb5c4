"""Lazy re-exports for a package ``__init__``: names resolve on first access.

A package such as :mod:`marl.algorithms` re-exports the public names of its modules,
most of which import torch. Importing them eagerly makes every ``import
marl.<package>.<light module>`` pay for torch (2-4 s), because Python runs the package's
``__init__`` first: ``marl-run --help`` needs only config dataclasses and hydra.

The package lists its re-exports once, as ordinary imports under ``if TYPE_CHECKING:``
(so type checkers and the API docs still see them), and hands its module-level
``__getattr__``/``__dir__`` to :func:`lazy_exports`, which reads that block from the
package's own source on first access and imports a name's module only when the name is
asked for (PEP 562). A name that is not re-exported but is a submodule
(``marl.envs.libs``) is imported as one, as an eager ``__init__`` would have made it an
attribute.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["lazy_exports"]


def _exports(init_file: str) -> dict[str, tuple[str, str]]:
    """``{exported name: (module, name in that module)}`` from the ``TYPE_CHECKING`` block."""
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"))
    found: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                for alias in stmt.names:
                    found[alias.asname or alias.name] = (stmt.module, alias.name)
    if not found:
        raise RuntimeError(f"{init_file}: no `if TYPE_CHECKING:` block of re-exports found")
    return found


def _is_submodule(init_file: str, name: str) -> bool:
    folder = Path(init_file).parent
    return (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()


def lazy_exports(
    package: str, init_file: str, names: list[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose re-exports load on first use.

    Args:
        package: the package's ``__name__``.
        init_file: its ``__init__.py`` (``__file__``), whose ``if TYPE_CHECKING:`` block of
            ``from <module> import <name>`` lines lists the re-exports.
        names: the package's ``__all__`` (what ``dir()`` lists besides its globals).

    Returns:
        ``(__getattr__, __dir__)`` to bind at the package's module level.

    Examples:
        In ``marl/objectives/__init__.py``::

            if TYPE_CHECKING:
                from marl.objectives.ppo import PPOLoss
            __getattr__, __dir__ = lazy_exports(__name__, __file__, __all__)

        >>> import marl.objectives
        >>> marl.objectives.PPOSettings().clip_epsilon
        0.2
    """
    table: dict[str, tuple[str, str]] = {}
    module = importlib.import_module(package)

    def __getattr__(name: str) -> Any:
        if not table:
            table.update(_exports(init_file))
        if name in table:
            source, attr = table[name]
            if source == package:  # `from marl.objectives import settings`: a submodule
                value = importlib.import_module(f"{package}.{attr}")
            else:
                value = getattr(importlib.import_module(source), attr)
        elif not name.startswith("__") and _is_submodule(init_file, name):
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(module, name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(module)) | set(names))

    return __getattr__, __dir__
