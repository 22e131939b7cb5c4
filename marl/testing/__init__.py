"""Tools to test envs and algorithms: fake envs and the random and no-op baselines.

- :class:`MultiAgentFakeEnv` and :class:`SingleAgentFakeEnv`: fast, vectorized,
  learnable pure-torch envs that follow the data layout exactly;
  :func:`example_group`: one of their groups, as the algorithm builders take it.
- :func:`random_policy`, :class:`NoopPolicy`, :func:`baseline_returns` and
  :func:`compare_with_baselines`: the two policies every trained policy must beat,
  run through the same evaluation as the trained one.
- :func:`run_cli`: a marl command line (``marl-run``, ``marl-tune``, ...) in a subprocess,
  as a user's shell runs it.
"""

from marl.testing.baselines import (
    BaselineComparison,
    NoopPolicy,
    baseline_returns,
    compare_with_baselines,
    random_policy,
)
from marl.testing.cli import run_cli
from marl.testing.fake_envs import MultiAgentFakeEnv, SingleAgentFakeEnv
from marl.testing.groups import example_group

__all__ = [
    "BaselineComparison",
    "MultiAgentFakeEnv",
    "NoopPolicy",
    "SingleAgentFakeEnv",
    "baseline_returns",
    "compare_with_baselines",
    "example_group",
    "random_policy",
    "run_cli",
]
