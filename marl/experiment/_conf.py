"""Generate the hydra YAML files of ``marl/conf/`` from the config dataclasses.

The dataclasses are the single source of truth: every field's default and
docstring. ``python -m marl.experiment._conf`` rewrites ``marl/conf/experiment/base.yaml``
and ``marl/conf/algorithm/<name>.yaml``; a test fails when a file is stale.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
from pathlib import Path
from typing import Any

import yaml

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
HEADER = "# Generated from {source} by `python -m marl.experiment._conf`; edit the dataclass.\n"


def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` from the string literals under each annotated field (MRO too)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body
        for node, after in itertools.pairwise(body):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def config_yaml(cls: type, extra: dict[str, Any] | None = None) -> str:
    """YAML of ``cls``'s defaults, each field preceded by its docstring as a comment."""
    instance = cls()
    docs = field_docs(cls)
    lines = [HEADER.format(source=f"{cls.__module__}.{cls.__name__}")]
    for key, value in (extra or {}).items():
        lines.append(yaml.safe_dump({key: value}, sort_keys=False))
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        doc = docs.get(f.name)
        if doc:
            lines.extend(f"# {line}\n" for line in textwrap.wrap(doc, 96))
        lines.append(yaml.safe_dump({f.name: _plain(getattr(instance, f.name))}, sort_keys=False))
    return "".join(lines)


def expected_files() -> dict[Path, str]:
    """Every generated file and its content."""
    from marl.algorithms import get_algorithm, list_algorithms
    from marl.experiment.config import ExperimentConfig, ModelConfig

    files = {
        CONF_DIR / "experiment" / "base.yaml": config_yaml(ExperimentConfig),
        CONF_DIR / "model" / "default.yaml": config_yaml(ModelConfig),
    }
    for name in list_algorithms():
        spec = get_algorithm(name)
        files[CONF_DIR / "algorithm" / f"{name}.yaml"] = config_yaml(
            spec.config_cls, extra={"name": name}
        )
    return files


def main() -> None:
    """Rewrite the generated files."""
    for path, text in expected_files().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
