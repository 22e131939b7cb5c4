"""marl.modules and marl.objectives import only what the layering allows."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2] / "marl"
# marl._lazy (the packages' lazy re-exports) imports nothing of marl, as checked below
ALLOWED = {"torch", "tensordict", "numpy", "marl._C", "marl._lazy", "marl.specs", "marl.groups"}


@pytest.mark.parametrize("package", ["modules", "objectives"])
def test_imports_respect_layers(package):
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                top = name.split(".")[0]
                if top != "marl":
                    continue
                ok = (
                    name.startswith(f"marl.{package}")
                    or any(name == a or name.startswith(a + ".") for a in ALLOWED)
                    or name == "marl"
                )
                assert ok, f"{path.relative_to(ROOT.parent)} imports {name}"


def test_the_lazy_exports_import_nothing_of_marl():
    tree = ast.parse((ROOT / "_lazy.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            assert not node.module.startswith("marl"), node.module
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("marl") for a in node.names)
