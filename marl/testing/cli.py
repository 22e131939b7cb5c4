"""Run marl's command lines in a subprocess, as a user's shell would.

Tests of ``marl-run``, ``marl-tune``, ``marl-report`` and ``marl-bench`` run the real
entry point in a fresh interpreter: signals, exit codes, hydra's folders and the
messages a user reads are then those of the installed command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["run_cli"]


def run_cli(
    module: str,
    *args: str,
    cwd: str | os.PathLike[str] | None = None,
    fault: str | None = None,
    timeout: float = 300,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m <module> *args`` on one torch thread and capture its output.

    Args:
        module: the command's module: ``marl.experiment`` (``marl-run``),
            ``marl.tune.cli``, ``marl.report``, ...
        *args: its arguments, as typed after the command.
        cwd: the working directory (``None``: this process's).
        fault: a fault to inject (``MARL_TEST_FAULT``, see
            :mod:`marl.experiment.checkpoint`: ``"<point>@<frames>[:<SIGNAL>]"``);
            ``None`` clears one set in this process's environment.
        timeout: seconds before the command is killed (``subprocess.TimeoutExpired``).
        check: raise when the command fails.

    Returns:
        The finished process, with ``stdout`` and ``stderr`` as text.

    Raises:
        AssertionError: with ``check``, when the command exits non-zero (its output
            in the message).

    Examples:
        >>> out = run_cli("marl.experiment", "--help")
        >>> out.returncode, "marl-run" in out.stdout
        (0, True)
    """
    env = dict(os.environ, OMP_NUM_THREADS="1", HYDRA_FULL_ERROR="0")
    env.pop("MARL_TEST_FAULT", None)
    if fault:
        env["MARL_TEST_FAULT"] = fault
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=None if cwd is None else Path(cwd),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{module} {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc
