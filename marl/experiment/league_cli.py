"""``marl-league``: the hydra command line of a self-play league run.

Examples (shell)::

    marl-league task=pettingzoo/tictactoe algorithm=iql league.total_frames=20000 \\
        league.snapshot_interval=5000 league.strategy=uniform
    marl-league --resume outputs/2025-01-01/12-00-00_league_iql_pettingzoo-tictactoe_seed0
    marl-league --resume RUN_FOLDER league.total_frames=40000     # train it further

The config is ``marl/conf/league.yaml``: ``task``, ``seed``, the ``algorithm`` and
``model`` groups of ``marl-run`` (so ``algorithm=iql algorithm.lr=1e-3`` and
``model=small`` work the same way) and ``league`` (:class:`~marl.experiment.league_run.
LeagueConfig`). Hydra checks every type and key before anything is built. The run
folder (:mod:`marl.experiment.league_run`) holds ``config.yaml``, ``scalars.csv``,
``status.json``, ``checkpoints/`` and, at the end, ``elo.json``/``elo.csv``/``elo.png``,
which ``marl-report`` ranks.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from marl.experiment._conf import TaskSchema
from marl.experiment.config import LeagueConfig, ModelConfig

__all__ = ["LeagueSchema", "compose_league_config", "main"]

PROGRAM = "marl-league"
RESTORE_KEY = "league.restore_file"


@dataclass
class LeagueSchema(TaskSchema):
    """The root of ``marl-league``'s config; ``league.yaml`` gives the values."""

    algorithm: Any = MISSING
    model: ModelConfig = MISSING
    league: LeagueConfig = field(default_factory=LeagueConfig)


def _prepare() -> None:
    from hydra.core.config_store import ConfigStore

    from marl.experiment.cli import prepare_hydra

    prepare_hydra()
    ConfigStore.instance().store(name="marl_league_schema", node=LeagueSchema)


def compose_league_config(overrides: list[str] | tuple[str, ...] = ()) -> Any:
    """The config ``marl-league <overrides>`` composes, without running anything.

    Examples:
        >>> cfg = compose_league_config(["league.total_frames=4000", "algorithm.lr=1e-3"])
        >>> cfg.task, cfg.algorithm.name, cfg.algorithm.lr, cfg.league.total_frames
        ('pettingzoo/tictactoe', 'iql', 0.001, 4000)
    """
    from hydra import compose, initialize_config_dir

    from marl.experiment.cli import CONF_DIR

    _prepare()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("league", overrides=list(overrides))


def _given(overrides: list[str]) -> list[tuple[str, ...]]:
    """The key paths the command line set (``algorithm=iql`` -> ``("algorithm",)``)."""
    from marl.experiment.cli import parse_overrides

    return [path for path, _ in parse_overrides(overrides)]


def main() -> None:
    """Entry point of ``marl-league``."""
    from marl.experiment.argv import lock_run_dir, prepare_resume, run_holding

    try:
        args = prepare_resume(sys.argv[1:], restore_key=RESTORE_KEY, program=PROGRAM)
    except (ValueError, FileNotFoundError, FileExistsError) as err:
        sys.stderr.write(f"{PROGRAM}: {err}\n")
        sys.exit(2)
    if any(a in ("-m", "--multirun") for a in args):
        sys.stderr.write(f"{PROGRAM}: runs one league at a time (no -m/--multirun)\n")
        sys.exit(2)
    sys.argv[1:] = args

    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig, OmegaConf

    from marl.experiment.cli import CONF_DIR, help_text

    _prepare()
    text = help_text("league", args)
    if text is not None:
        print(text)
        return
    try:
        lock = lock_run_dir(args)  # a live league's folder: refused before hydra writes
    except FileExistsError as err:
        sys.stderr.write(f"{PROGRAM}: {err}\n")
        sys.exit(2)

    @hydra.main(config_path=str(CONF_DIR), config_name="league", version_base="1.3")
    def _main(cfg: DictConfig) -> None:
        from marl.experiment.league_run import run_league  # torch: not for --help

        data = OmegaConf.to_container(cfg, resolve=True)
        restore = data["league"].get("restore_file")
        if restore:
            from hydra.utils import to_absolute_path

            data["league"]["restore_file"] = to_absolute_path(restore)
        given = _given(list(HydraConfig.get().overrides.task))
        summary = run_league(data, HydraConfig.get().runtime.output_dir, given)
        ranked = sorted(summary["elo"].items(), key=lambda kv: -kv[1])
        print(f"{PROGRAM}: {summary['frames']} frames in {summary['folder']}")
        print("Elo: " + ", ".join(f"{name} {rating:.0f}" for name, rating in ranked))

    run_holding(lock, _main)


if __name__ == "__main__":  # pragma: no cover
    main()
