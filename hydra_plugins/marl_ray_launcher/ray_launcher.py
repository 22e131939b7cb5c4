"""``hydra/launcher=marl_ray``: each job of a sweep is one Ray task.

On one machine it starts a local Ray instance; with ``address=auto`` (or a
``ray://`` address) it joins a running cluster, where the tasks spread over
the nodes. Each task gets ``num_cpus_per_job`` CPUs and ``num_gpus_per_job``
GPUs from Ray's scheduler, so a GPU cluster runs one VMAS job per GPU with
``hydra.launcher.num_gpus_per_job=1``.

Examples (shell)::

    marl-run -m hydra/launcher=marl_ray seed=0,1,2,3
    marl-run -m hydra/launcher=marl_ray hydra.launcher.address=auto \\
        hydra.launcher.num_gpus_per_job=1 experiment=gpu seed=0,1,2,3

Ray is imported only when a sweep launches (``pip install "marl[ray]"``).
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict

log = logging.getLogger(__name__)


@dataclass
class MarlRayLauncherConf:
    """Options of ``hydra/launcher=marl_ray`` (set them as ``hydra.launcher.<name>=...``)."""

    _target_: str = "hydra_plugins.marl_ray_launcher.ray_launcher.MarlRayLauncher"
    address: Optional[str] = None  # noqa: UP045 - OmegaConf needs typing.Optional
    """``None``: start a local Ray instance; ``auto`` or ``ray://host:port``: join a cluster."""
    num_cpus: Optional[int] = None  # noqa: UP045
    """CPUs of a local instance (``None``: all); ignored when joining a cluster."""
    num_cpus_per_job: float = 1.0
    """CPUs Ray reserves for each job (a job uses one torch thread by default)."""
    num_gpus_per_job: float = 0.0
    """GPUs Ray reserves for each job."""


ConfigStore.instance().store(
    group="hydra/launcher", name="marl_ray", node=MarlRayLauncherConf, provider="marl"
)


def _run_one(
    index: int,
    overrides: Sequence[str],
    hydra_context: HydraContext,
    config: DictConfig,
    task_function: TaskFunction,
    singleton_state: dict[Any, Any],
) -> JobReturn:
    """Body of one Ray task: rebuild hydra's global state, compose the job's config, run it."""
    setup_globals()
    Singleton.set_state(singleton_state)
    job_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(job_config):
        job_config.hydra.job.id = f"{job_config.hydra.job.name}_{index}"
        job_config.hydra.job.num = index
    HydraConfig.instance().set_config(job_config)
    return run_job(
        hydra_context=hydra_context,
        task_function=task_function,
        config=job_config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


class MarlRayLauncher(Launcher):
    """Launch a sweep's jobs as Ray tasks and wait for all of them.

    Args:
        address: see :class:`MarlRayLauncherConf`.
        num_cpus: see :class:`MarlRayLauncherConf`.
        num_cpus_per_job: see :class:`MarlRayLauncherConf`.
        num_gpus_per_job: see :class:`MarlRayLauncherConf`.
    """

    def __init__(
        self,
        address: str | None = None,
        num_cpus: int | None = None,
        num_cpus_per_job: float = 1.0,
        num_gpus_per_job: float = 0.0,
    ) -> None:
        if num_cpus_per_job < 0 or num_gpus_per_job < 0:
            raise ValueError(
                "hydra.launcher.num_cpus_per_job and num_gpus_per_job must be >= 0, got "
                f"{num_cpus_per_job} and {num_gpus_per_job}"
            )
        self.address = address
        self.num_cpus = num_cpus
        self.num_cpus_per_job = num_cpus_per_job
        self.num_gpus_per_job = num_gpus_per_job
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        """Keep what every job needs."""
        self.config = config
        self.task_function = task_function
        self.hydra_context = hydra_context

    def _ray(self) -> Any:
        try:
            import ray
        except ImportError as err:
            raise ImportError('hydra/launcher=marl_ray needs Ray: pip install "marl[ray]"') from err
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
            if self.address is not None:
                kwargs["address"] = self.address
            elif self.num_cpus is not None:
                kwargs["num_cpus"] = self.num_cpus
            ray.init(**kwargs)
        return ray

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        """Submit one Ray task per job; return their ``JobReturn`` in job order."""
        if self.config is None or self.hydra_context is None or self.task_function is None:
            raise RuntimeError("MarlRayLauncher.launch called before setup")
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        ray = self._ray()
        log.info("Ray is launching %d jobs; sweep output dir: %s", len(job_overrides), sweep_dir)
        remote = ray.remote(
            num_cpus=self.num_cpus_per_job, num_gpus=self.num_gpus_per_job, max_retries=0
        )(_run_one)
        state = Singleton.get_state()
        refs = []
        for offset, overrides in enumerate(job_overrides):
            index = initial_job_idx + offset
            log.info("\t#%d : %s", index, " ".join(filter_overrides(overrides)))
            refs.append(
                remote.remote(
                    index,
                    list(overrides),
                    self.hydra_context,
                    self.config,
                    self.task_function,
                    state,
                )
            )
        return ray.get(refs)
