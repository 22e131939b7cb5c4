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


def _module_graph() -> dict[str, set[str]]:
    """``module -> marl modules it imports`` (at any depth, lazy imports included).

    Package ``__init__`` files are left out on both sides: they re-export their
    modules' names, so an edge through one says nothing about which module needs which.
    """
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            continue
        modules[".".join(parts)] = path
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("marl"):
                deps |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def test_no_import_circle_between_modules():
    graph = _module_graph()
    circles, done = [], set()

    def visit(node, path):
        if node in path:
            circles.append([*path[path.index(node) :], node])
            return
        if node in done:
            return
        for dep in sorted(graph[node]):
            visit(dep, [*path, node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


def test_only_marl_atomic_renames_files_over_others():
    """Files replaced in place go through :mod:`marl.atomic` (one temp-file naming that a
    folder's owner recognises and cleans, one fsync policy); it imports nothing of marl."""
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == ROOT / "atomic.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("replace", "rename")
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
            ):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} os.{node.attr}")
    assert not bad, "use marl.atomic instead of:\n" + "\n".join(bad)
    assert not _imports(ROOT / "atomic.py"), "marl.atomic must import nothing of marl"


def _private_module_outside(module: str, path: pathlib.Path) -> bool:
    """Whether ``module`` has a private part whose parent package does not hold ``path``."""
    if module == "marl._C":  # the compiled extension: torch's naming convention for it
        return False
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ROOT.parent.joinpath(*parts[:i]) not in path.parents
    return False


def _is_module(dotted: str) -> bool:
    base = ROOT.parent.joinpath(*dotted.split("."))
    return base.with_suffix(".py").exists() or base.is_dir() or dotted == "marl._C"


def test_no_private_name_imported_from_another_module():
    """``from marl.x import _name`` is refused, and so is a private module (a part that
    starts with ``_``) imported from outside the package that holds it."""
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if not node.module.startswith("marl"):
                    continue
                modules = [node.module]
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if _is_module(full):  # ``from marl.pkg import _mod`` names a module
                        modules.append(full)
                    elif alias.name.startswith("_") and not alias.name.startswith("__"):
                        bad.append(f"{rel}:{node.lineno} imports {alias.name} from {node.module}")
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names if a.name.startswith("marl")]
            else:
                continue
            for module in modules:
                if _private_module_outside(module, path):
                    bad.append(f"{rel}:{node.lineno} imports private module {module}")
    assert not bad, "private names imported across files:\n" + "\n".join(bad)


def test_optional_packages_are_required_through_marl_extras():
    """A missing optional package gets one kind of message, from :func:`marl.extras.require`
    (who needs what, and the extra that installs it); it imports nothing of marl."""
    allowed = {  # not an import of an optional package, or its own install command
        "experiment/config.py",  # find_spec check of the ONNX packages before training
        "bench/launchers.py",  # launchers name their own pip commands
        "envs/libs/pettingzoo_tasks.py",  # a task's own missing dependency, not pettingzoo
        "extras.py",
    }
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        if str(path.relative_to(ROOT)) in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Raise)
                and isinstance(node.exc, ast.Call)
                and isinstance(node.exc.func, ast.Name)
                and node.exc.func.id == "ImportError"
            ):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, "use marl.extras.require instead of raising ImportError in:\n" + "\n".join(bad)
    assert not _imports(ROOT / "extras.py"), "marl.extras must import nothing of marl"
