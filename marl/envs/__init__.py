"""Environments: the `EnvBase` API, transforms, batched envs and wrappers."""

from typing import TYPE_CHECKING

from marl._lazy import lazy_exports

# the re-exports, imported on first access (marl._lazy): importing a light module of
# this package must not import torch through this file
if TYPE_CHECKING:
    from marl.envs.action_checks import InvalidActionError
    from marl.envs.batched import (
        HostArrayEnv,
        ParallelEnv,
        SerialEnv,
        WorkerError,
        arrays_to_td,
        env_flag_arrays,
    )
    from marl.envs.builtin_transforms import (
        DoubleToFloat,
        ExcludeTransform,
        InitTracker,
        ObservationNorm,
        RenameTransform,
        RewardSum,
        StepCounter,
    )
    from marl.envs.checks import EnvSpecError, check_env_specs, check_serial_arrays
    from marl.envs.common import EnvBase, make_done_spec, step_mdp

    # Wrappers import their third-party library lazily (when an env is built).
    from marl.envs.libs import (
        GymnasiumEnv,
        LBForagingEnv,
        MaMuJoCoEnv,
        OvercookedEnv,
        PettingZooEnv,
        RwareEnv,
        VmasEnv,
        magent2_env,
        meltingpot_env,
    )
    from marl.envs.tasks import list_tasks, make_task
    from marl.envs.transforms import Compose, EnvSpecs, Transform, TransformedEnv

__all__ = [
    "Compose",
    "DoubleToFloat",
    "EnvBase",
    "EnvSpecError",
    "EnvSpecs",
    "ExcludeTransform",
    "GymnasiumEnv",
    "HostArrayEnv",
    "InitTracker",
    "InvalidActionError",
    "LBForagingEnv",
    "MaMuJoCoEnv",
    "ObservationNorm",
    "OvercookedEnv",
    "ParallelEnv",
    "PettingZooEnv",
    "RenameTransform",
    "RewardSum",
    "RwareEnv",
    "SerialEnv",
    "StepCounter",
    "Transform",
    "TransformedEnv",
    "VmasEnv",
    "WorkerError",
    "arrays_to_td",
    "check_env_specs",
    "check_serial_arrays",
    "env_flag_arrays",
    "list_tasks",
    "magent2_env",
    "make_done_spec",
    "make_task",
    "meltingpot_env",
    "step_mdp",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__, __all__)
