"""The import layering of DESIGN.md, and a light ``import marl``."""

import ast
import pathlib
import subprocess
import sys

import marl

ORDER = [
    "specs",
    "groups",
    "envs",
    "data",
    "modules",
    "objectives",
    "collectors",
    "algorithms",
    "export",
    "league",
    "report",
    "experiment",
    "bench",
    "tune",
]
PEERS = {"envs", "data", "modules", "objectives"}
RANK = {name: i for i, name in enumerate(ORDER)}
ROOT = pathlib.Path(marl.__file__).parent


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("marl."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("marl."):
                    found.add(alias.name.split(".")[1])
    return found


def test_lower_layers_never_import_higher_ones():
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        layer = path.relative_to(ROOT).parts[0].removesuffix(".py")
        if layer not in RANK:
            continue
        for target in _imports(path):
            if target not in RANK or target == layer:
                continue
            if RANK[target] > RANK[layer] or (layer in PEERS and target in PEERS):
                bad.append(f"{path.relative_to(ROOT)} imports marl.{target}")
    assert not bad, "layering violations:\n" + "\n".join(bad)


def test_import_marl_is_light():
    code = (
        "import sys, marl, marl.envs, marl.specs, marl.groups\n"
        "heavy = [m for m in ('vmas', 'pettingzoo', 'gymnasium', 'wandb', 'ray', 'matplotlib', 'mpe2')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import marl pulled in optional packages: {out.stdout}"
