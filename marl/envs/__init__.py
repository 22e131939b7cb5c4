"""Environments: the `EnvBase` API, transforms, batched envs and wrappers."""

from marl.envs.batched import ParallelEnv, SerialEnv, WorkerError
from marl.envs.builtin_transforms import (
    DoubleToFloat,
    ExcludeTransform,
    InitTracker,
    ObservationNorm,
    RenameTransform,
    RewardSum,
    StepCounter,
)
from marl.envs.checks import EnvSpecError, check_env_specs
from marl.envs.common import EnvBase, make_done_spec, step_mdp
from marl.envs.transforms import Compose, EnvSpecs, Transform, TransformedEnv

__all__ = [
    "Compose",
    "DoubleToFloat",
    "EnvBase",
    "EnvSpecError",
    "EnvSpecs",
    "ExcludeTransform",
    "InitTracker",
    "ObservationNorm",
    "ParallelEnv",
    "RenameTransform",
    "RewardSum",
    "SerialEnv",
    "StepCounter",
    "Transform",
    "TransformedEnv",
    "WorkerError",
    "check_env_specs",
    "make_done_spec",
    "step_mdp",
]
