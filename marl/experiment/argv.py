"""The command line before hydra starts: ``--nproc``, ``--resume``, the run folder's lock,
and the overrides refused before hydra makes a run folder for them.

``marl-run`` and ``marl-league`` pass their arguments through here first
(``marl-run`` takes ``--nproc N`` out first, :func:`prepare_launch`, and re-runs itself
under torchrun with :func:`torchrun_command`):
:func:`prepare_resume` turns ``--resume <folder>`` (or ``<restore key>=<checkpoint>``)
into overrides that continue the run in its own folder; :func:`lock_run_dir` holds a
folder known in advance (:mod:`marl.experiment.runlock`), so that a resume or a new run
into the folder of a live run is refused with that run's PID before hydra writes its
``.hydra/``; :func:`check_task_overrides` refuses an unknown task name (with the closest
names) and a renamed ``algorithm.<key>`` (with its new name). Under ``torchrun``,
:func:`launch_rank` and :func:`follower_args` keep the ranks above 0 out of the run folder.
Nothing here imports torch at import time: ``marl-run --help`` starts here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "check_task_overrides",
    "follower_args",
    "launch_rank",
    "lock_run_dir",
    "prepare_launch",
    "prepare_resume",
    "run_holding",
    "runs_nothing",
    "torchrun_command",
]


def launch_rank() -> int | None:
    """This process's rank when ``torchrun`` launched several (``WORLD_SIZE > 1``), else ``None``."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    return int(os.environ["RANK"])


def follower_args(args: list[str], rank: int) -> tuple[list[str], str]:
    """``marl-run``'s overrides for a rank > 0, and the scratch folder they name.

    Hydra writes ``.hydra/`` and its log into its run dir before marl's code runs: a
    rank > 0 gets a fresh scratch folder (deleted when it ends) as ``hydra.run.dir``
    and ``hydra.output_subdir=null``, so that it writes nothing into the run folder.
    """
    import tempfile

    scratch = tempfile.mkdtemp(prefix=f"marl-rank{rank}-")
    keys = ("hydra.run.dir=", "hydra.output_subdir=")
    kept = [a for a in args if not a.lstrip("+~").startswith(keys)]
    return [*kept, f"hydra.run.dir={scratch}", "hydra.output_subdir=null"], scratch


def _override(key: str, value: str | os.PathLike[str]) -> str:
    """``key=value`` with ``value`` quoted when hydra's grammar needs it."""
    import re

    text = Path(value).as_posix() if isinstance(value, os.PathLike) else str(value)
    if not re.match(r"^[\w./:+@-]+$", text):
        text = "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return f"{key}={text}"


def _key(arg: str) -> str:
    return arg.lstrip("+~").split("=", 1)[0]


def _value(arg: str) -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_override(arg).value()


def _refuse_a_folder_with_a_run(args: list[str], program: str = "marl-run") -> None:
    """A new run into ``hydra.run.dir=<a folder that holds a run>`` is refused here,
    before hydra rewrites that run's ``.hydra/`` (a live run's: naming its PID)."""
    from marl.experiment.lifecycle import held_run
    from marl.experiment.runlock import check_run_folder

    given = [a for a in args if _key(a) == "hydra.run.dir"]
    if not given or any(a in ("-m", "--multirun") for a in args):
        return
    folder = Path(str(_value(given[-1]))).expanduser()
    check_run_folder(folder)
    held = held_run(folder)
    if held is not None:
        raise ValueError(
            f"{folder} already holds {held}. Continue it with {program} --resume {folder}, "
            "or choose another hydra.run.dir."
        )


def prepare_launch(args: list[str]) -> tuple[int | None, list[str]]:
    """Take ``--nproc N`` (or ``--nproc=N``) out of ``marl-run``'s arguments.

    ``marl-run --nproc N ...`` trains one data-parallel run over ``N`` processes on this
    machine: ``marl-run`` re-runs itself under torchrun with the other arguments
    (:func:`torchrun_command`), as ``torchrun --nproc_per_node=N --standalone -m
    marl.experiment ...`` would.

    Args:
        args: the command line after the program name.

    Returns:
        ``(N, the other arguments)``; ``N`` is ``None`` without ``--nproc``.

    Raises:
        ValueError: for a value that is not an integer >= 1, a missing value, ``--nproc``
            given twice, or with ``-m``/``--multirun``.

    Examples:
        >>> prepare_launch(["--nproc", "2", "seed=1"])
        (2, ['seed=1'])
        >>> prepare_launch(["seed=1"])
        (None, ['seed=1'])
        >>> prepare_launch(["--nproc=0"])
        Traceback (most recent call last):
        ...
        ValueError: --nproc expects the number of processes, an integer >= 1; got '0'
    """
    out: list[str] = []
    given: list[str | None] = []
    items = iter(args)
    for arg in items:
        if arg == "--nproc":
            given.append(next(items, None))
        elif arg.startswith("--nproc="):
            given.append(arg.split("=", 1)[1])
        else:
            out.append(arg)
    if not given:
        return None, out
    if len(given) > 1:
        raise ValueError(f"--nproc is given {len(given)} times; give it once")
    text = given[0]
    if text is None or text.startswith("-"):
        raise ValueError("--nproc needs a value: the number of processes, an integer >= 1")
    try:
        nproc = int(text)
    except ValueError:
        nproc = 0
    if nproc < 1 or str(nproc) != text.strip():
        raise ValueError(f"--nproc expects the number of processes, an integer >= 1; got {text!r}")
    if any(a in ("-m", "--multirun") for a in out):
        raise ValueError(
            "--nproc runs one data-parallel run; it does not combine with -m/--multirun "
            "(sweep with one process per run, or launch each run with --nproc)"
        )
    return nproc, out


def torchrun_command(nproc: int, args: Sequence[str]) -> list[str]:
    """The command that runs ``marl-run <args>`` over ``nproc`` processes on this machine.

    Examples:
        >>> torchrun_command(2, ["seed=1"])[1:]
        ['-m', 'torch.distributed.run', '--nproc_per_node=2', '--standalone', '-m', 'marl.experiment', 'seed=1']
    """
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--standalone",
        "-m",
        "marl.experiment",
        *args,
    ]


def folder_of_runs(args: Sequence[str]) -> Path | None:
    """The folder that ``--resume <folder>`` names when it holds runs trained together
    (``experiment.runs``, its ``runs.json``), else ``None``.

    Examples:
        >>> import tempfile
        >>> folder_of_runs(["--resume", tempfile.mkdtemp()]) is None
        True
    """
    items = list(args)
    if "--resume" not in items or items.index("--resume") + 1 >= len(items):
        return None
    from marl.experiment.lifecycle import RUNS_FILE

    folder = Path(items[items.index("--resume") + 1]).expanduser()
    return folder.resolve() if (folder / RUNS_FILE).is_file() else None


def prepare_resume(
    args: list[str], restore_key: str = "experiment.restore_file", program: str = "marl-run"
) -> list[str]:
    """Turn ``--resume <folder>`` and ``experiment.restore_file=<checkpoint>`` into overrides
    that run in the checkpoint's own run folder (and refuse a new run into a folder that
    holds one). ``marl-league`` passes its own ``restore_key`` (``league.restore_file``).

    Raises:
        ValueError, FileNotFoundError: with what is wrong, before hydra starts.
        FileExistsError: a new run into the folder of a live run
            (:class:`~marl.experiment.runlock.RunFolderInUse`, naming its PID).
    """
    from marl.experiment.resume import checkpoint_path, run_folder_of

    out: list[str] = []
    resume = None
    items = iter(args)
    for arg in items:
        if arg == "--resume":
            resume = next(items, None)
            if resume is None or resume.startswith("-"):
                raise ValueError("--resume needs a run folder (or a checkpoint file)")
        elif arg.startswith("--resume="):
            resume = arg.split("=", 1)[1]
        else:
            out.append(arg)
    restore = [a for a in out if _key(a) == restore_key]
    if resume is not None and restore:
        raise ValueError(f"give --resume or {restore_key}, not both")
    if resume is not None:
        source = resume
    elif restore and _value(restore[-1]) not in (None, ""):
        source = str(_value(restore[-1]))
        out = [a for a in out if a not in restore]
    else:
        _refuse_a_folder_with_a_run(out, program)
        return out
    checkpoint = checkpoint_path(source)  # refuses a folder without one, or a link out of it
    if any(a in ("-m", "--multirun") for a in out):
        raise ValueError("resume one run at a time (without -m/--multirun)")
    folder_given = Path(source).expanduser().is_dir() and restore_key == "experiment.restore_file"
    # a run folder stays a folder: the run resumes from its newest intact checkpoint
    # (marl.experiment.resume.load_resumable), chosen when it loads
    out.append(
        _override(restore_key, Path(source).expanduser().resolve() if folder_given else checkpoint)
    )
    keys = {_key(a) for a in out}
    if "hydra.run.dir" not in keys:
        folder = run_folder_of(checkpoint)
        if folder is None:
            raise ValueError(
                f"{checkpoint} is not in a run folder's checkpoints/: add "
                "hydra.run.dir=<folder> to say where the run continues"
            )
        out.append(_override("hydra.run.dir", folder))
    if "hydra.output_subdir" not in keys:
        # keep the run's own .hydra/ (how it was started); config.yaml records the resume
        out.append("hydra.output_subdir=null")
    return out


# hydra flags that run nothing (they print a config, help or completions)
_NO_RUN = ("-c", "--cfg", "-h", "--help", "--hydra-help", "-i", "--info", "-sc")
_NO_RUN_PREFIXES = ("--cfg=", "--info=", "--shell-completion")


def runs_nothing(args: Sequence[str]) -> bool:
    """Whether hydra only prints something for ``args`` (a help, a config, completions).

    Examples:
        >>> runs_nothing(["--nproc", "2", "--help"]), runs_nothing(["seed=1"])
        (True, False)
    """
    return any(a in _NO_RUN or a.startswith(_NO_RUN_PREFIXES) for a in args)


def lock_run_dir(args: list[str]) -> Any:
    """Hold the run folder that ``hydra.run.dir`` names (``prepare_resume`` sets it for a
    resume) before hydra starts, which writes ``.hydra/`` and the log there first; the
    :class:`~marl.experiment.Experiment` that hydra then runs in this process joins the
    hold (:mod:`marl.experiment.runlock`). ``None`` when the folder is not known yet
    (hydra's own timestamped folders, ``-m``) or nothing runs.

    Raises:
        RunFolderInUse: a live run holds the folder (a ``FileExistsError``).
    """
    from marl.experiment.runlock import lock_run_folder

    if runs_nothing(args) or any(a in ("-m", "--multirun") for a in args):
        return None
    given = [a for a in args if _key(a) == "hydra.run.dir"]
    if not given:
        return None
    folder = str(_value(given[-1]))
    if "${" in folder:  # an interpolation that only hydra resolves
        return None
    return lock_run_folder(Path(folder).expanduser())


def run_holding(lock: Any, run: Callable[[], object]) -> None:
    """Call ``run`` (the hydra entry point of ``marl-run`` or ``marl-league``), then
    release ``lock`` (from :func:`lock_run_dir`; ``None`` holds nothing) however it ends.

    Args:
        lock: the run folder's hold, or ``None``.
        run: the entry point, called with no arguments.

    Raises:
        SystemExit: with the interruption's exit code when SIGINT/SIGTERM stopped the
            run (it saved a checkpoint and said so).
    """
    from marl.experiment.lifecycle import RunInterrupted

    try:
        run()
    except RunInterrupted as err:  # SIGINT/SIGTERM: the run saved a checkpoint and said so
        sys.exit(err.exit_code)
    finally:
        if lock is not None:
            lock.release()


def check_task_overrides(args: Sequence[str]) -> None:
    """Refuse a ``task=`` override (each value of a ``-m`` sweep) that names no catalogued
    task, suggesting the closest names, and a renamed ``algorithm.<key>`` with its new
    name, before hydra creates a run folder for them.

    Raises:
        ValueError: from :func:`marl.envs.tasks.check_task_name`.

    Examples:
        >>> check_task_overrides(["task=vmas/navigation", "seed=1"])
        >>> check_task_overrides(["task=vmas/navigaton"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: unknown task 'vmas/navigaton'; closest names: ['vmas/navigation', ...]
        >>> check_task_overrides(["algorithm.share_params=false"])
        Traceback (most recent call last):
        ...
        ValueError: algorithm.share_params is now share_policy_params (the actor or Q-network) and share_critic_params (the critic)
    """
    from marl.algorithms.spec import RENAMED
    from marl.envs.tasks import check_task_name

    for arg in args:
        key, sep, value = arg.partition("=")
        path = key.lstrip("+~").split(".")
        if sep and path[0] == "algorithm" and path[-1] in RENAMED:
            # hydra would say only "Key ... not in ...": name the new key
            raise ValueError(f"{key} is now {RENAMED[path[-1]]}")
        if not sep or key.lstrip("+~") != "task" or "${" in value or "(" in value:
            continue  # not a plain task override (interpolations and sweep functions pass)
        for name in value.split(","):
            check_task_name(name.strip())
