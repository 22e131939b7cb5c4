"""``marl-run``: the hydra command line of the experiment runner.

Examples (shell)::

    marl-run                                   # mappo on vmas/navigation, seed 0
    marl-run algorithm=qmix task=pettingzoo/simple_spread seed=3 experiment.total_frames=200000
    marl-run -m algorithm=mappo,ippo seed=0,1,2            # a sweep, one run after another
    marl-run -m hydra/launcher=joblib seed=0,1,2           # in parallel (marl[launchers])
    marl-run experiment.restore_file=outputs/.../checkpoints/latest.pt

The configs ship with the package in ``marl/conf/``: ``config.yaml`` (task,
seed, output folders), ``experiment/`` (:class:`~marl.experiment.ExperimentConfig`
presets: ``base``, ``debug``, ``gpu``), ``algorithm/<name>.yaml`` (one per
registered algorithm, every hyperparameter) and ``model/`` (network sizes).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["main", "run_config"]

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def _slug(task: str) -> str:
    """``"vmas/navigation"`` -> ``"vmas-navigation"`` (a folder-name friendly task)."""
    return str(task).replace("/", "-")


def _tasks() -> str:
    """The catalogue's task names, for ``marl-run --help``."""
    from marl.envs import list_tasks

    return ", ".join(list_tasks())


def _register_resolvers() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("marl_slug"):
        OmegaConf.register_new_resolver("marl_slug", _slug)
    if not OmegaConf.has_resolver("marl_tasks"):
        OmegaConf.register_new_resolver("marl_tasks", _tasks)


def run_config(cfg: Any, folder: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Run one experiment from a composed config (``task``, ``seed``, ``experiment``,
    ``algorithm``, ``model``, ``task_overrides``).

    Args:
        cfg: an OmegaConf config or a plain dict.
        folder: the output folder (default: ``experiment.save_folder``, else the
            current directory, which hydra sets to the run dir).

    Returns:
        The summary of :meth:`Experiment.run`.
    """
    from omegaconf import DictConfig, OmegaConf

    from marl.experiment.experiment import Experiment

    data = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    algorithm = dict(data["algorithm"])
    name = algorithm.pop("name")
    experiment = dict(data.get("experiment") or {})
    if folder is not None:
        experiment["save_folder"] = str(folder)
    restore = experiment.get("restore_file")
    if restore:
        from hydra.utils import to_absolute_path

        try:
            experiment["restore_file"] = to_absolute_path(restore)
        except ValueError:  # outside a hydra run
            experiment["restore_file"] = os.path.abspath(restore)
    exp = Experiment(
        data["task"],
        name,
        model=data.get("model"),
        seed=int(data.get("seed", 0)),
        config=experiment,
        algorithm_config=algorithm,
        task_overrides=data.get("task_overrides") or {},
    )
    return exp.run()


def main() -> None:
    """Entry point of ``marl-run``."""
    import hydra
    from omegaconf import DictConfig

    _register_resolvers()

    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
    def _main(cfg: DictConfig) -> float:
        summary = run_config(cfg)
        # the return value is what hydra's sweepers optimize
        return float(summary.get("eval/episode_reward", summary.get("train/episode_reward", 0.0)))

    _main()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
