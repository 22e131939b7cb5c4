"""``--help`` of the command lines never imports torch (2-4 s): the help is composed from
the config dataclasses, which live in torch-free modules, and the package ``__init__``
files re-export their torch modules lazily (``marl._lazy``)."""

import subprocess
import sys

import pytest

# (program, module of its main, what its help must show)
PROGRAMS = [
    (
        "marl-run",
        "marl.experiment.cli",
        [
            "Tasks (task=...): ",
            "== Configuration groups ==",
            "algorithm: a2c, ddpg, dqn",
            "experiment: base, debug, gpu",
            "model: cnn, deepsets, default",
            "== Config ==",
            "  total_frames: 600000",  # ExperimentConfig
            "  name: mappo",  # the default algorithm's config
            "  clip_epsilon: 0.2",
            "  actor_cells: null",  # ModelConfig
        ],
    ),
    (
        "marl-league",
        "marl.experiment.league_cli",
        ["algorithm: a2c, ddpg, dqn", "league:", "  snapshot_interval: 5000", "  name: iql"],
    ),
    ("marl-tune", "marl.tune.cli", ["usage: marl-tune", "--scheduler"]),
]

HEAVY = ("torch", "tensordict")
# the env families' packages and what they import: marl-run's help lists the installed
# tasks by looking the packages up on the path (importing them took ~1 s of its 2)
ENV_PACKAGES = (
    "vmas", "pettingzoo", "mpe2", "gymnasium", "lbforaging", "rware", "gymnasium_robotics",
    "mujoco", "Box2D", "magent2", "meltingpot", "overcooked_ai_py", "scipy", "pygame",
)  # fmt: skip

CODE = """
import sys
sys.argv = [{program!r}, "--help", *{extra!r}]
from {module} import main
try:
    main()
except SystemExit as exit:
    assert exit.code in (0, None), exit.code
print("HEAVY:" + ",".join(m for m in {heavy!r} if m in sys.modules))
"""


def help_of(program: str, module: str, *extra: str) -> str:
    code = CODE.format(program=program, module=module, extra=list(extra), heavy=HEAVY)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize(("program", "module", "shown"), PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_help_imports_no_torch(program, module, shown):
    out = help_of(program, module)
    text, _, heavy = out.rpartition("HEAVY:")
    assert heavy.strip() == "", f"{program} --help imported {heavy.strip()}"
    missing = [line for line in shown if line not in text]
    assert not missing, f"{program} --help lacks {missing}:\n{text}"
    if program == "marl-run":  # every installed task, listed
        from marl.envs.tasks import list_tasks

        listed = next(line for line in text.splitlines() if line.startswith("Tasks (task=...)"))
        assert listed.split(": ", 1)[1].split(", ") == list_tasks(available=True)


@pytest.mark.parametrize(("program", "module", "shown"), PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_help_imports_no_env_package(program, module, shown):
    code = CODE.format(program=program, module=module, extra=[], heavy=ENV_PACKAGES)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    imported = proc.stdout.rpartition("HEAVY:")[2].strip()
    assert imported == "", f"{program} --help imported {imported}"


def test_help_of_another_algorithm_imports_no_torch():
    # algorithm=qmix composes qmix's config (its mixer's settings) from the torch-free module
    out = help_of("marl-run", "marl.experiment.cli", "algorithm=qmix")
    text, _, heavy = out.rpartition("HEAVY:")
    assert heavy.strip() == ""
    assert "  name: qmix" in text and "  mixing_embed_dim: 32" in text
