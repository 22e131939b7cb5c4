"""Where the data folders shipped with marl live: in the package, or in the source checkout.

A wheel maps top-level folders of the repository into the package (``tasks/`` ->
``marl/tasks``, ``benchmarks/suites/`` -> ``marl/bench/suites``, see
``pyproject.toml``). An editable install may not, so each lookup falls back to
the repository folder.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["data_folder"]

_REPO = Path(__file__).resolve().parents[1]


def data_folder(package: str, name: str, source: str, what: str) -> Path:
    """``<package>/<name>`` when installed there, else ``<repository>/<source>``.

    Args:
        package: the package holding the folder in a wheel (``"marl.bench"``).
        name: the folder's name inside it (``"suites"``).
        source: the folder in the source checkout (``"benchmarks/suites"``).
        what: what the folder holds, for the error message.

    Raises:
        FileNotFoundError: naming both places that were tried.

    Examples:
        >>> data_folder("marl", "tasks", "tasks", "the task catalogue").is_dir()
        True
    """
    try:
        packaged = resources.files(package) / name
        if packaged.is_dir():
            return Path(str(packaged))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - unusual loaders
        pass
    folder = _REPO / source
    if folder.is_dir():
        return folder
    raise FileNotFoundError(  # pragma: no cover - broken install
        f"{what} was not found: expected {package.replace('.', '/')}/{name} in the installed "
        f"package or {source}/ in the source checkout ({folder})"
    )
