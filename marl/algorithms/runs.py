"""Many runs in one env batch: each run's policy acts on its own slice of the envs.

Several runs of one algorithm on one task (seeds, population members) can share one
batched env (VMAS, the native envs: one env of ``runs x envs_per_run`` sub-envs), so
that one env step serves every run. :class:`RunsPolicy` is the collection policy of
such an env: sub-envs ``[r * E, (r + 1) * E)`` belong to run ``r`` and are acted on by
run ``r``'s policy alone. :func:`split_runs` cuts a collected ``[runs * E, T]`` batch into
the ``[runs, E, T]`` batches that each run processes and trains on (for example with
:class:`~marl.algorithms.updates.StackedOnPolicy`).

Each policy runs in turn on its slice: a policy samples its actions with torch's
in-place samplers, which ``vmap`` cannot give each run separately.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from tensordict import TensorDictBase
from torch import nn

__all__ = ["RunsPolicy", "split_runs"]


def split_runs(batch: TensorDictBase, runs: int) -> TensorDictBase:
    """A ``[runs * E, ...]`` batch as ``[runs, E, ...]`` (a view: run ``r`` at index ``r``).

    Args:
        batch: a batch whose first dim holds the runs' sub-envs, run after run.
        runs: the number of runs.

    Raises:
        ValueError: when the first dim is not a multiple of ``runs``.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict(x=torch.arange(12).reshape(6, 2), batch_size=[6, 2])
        >>> split_runs(td, 3)["x"][1].tolist()
        [[4, 5], [6, 7]]
    """
    if runs < 1 or batch.batch_dims < 1 or batch.shape[0] % runs:
        raise ValueError(
            f"cannot split a batch of shape {tuple(batch.shape)} into {runs} runs: its "
            "first dim must be a multiple of the number of runs"
        )
    return batch.reshape(runs, batch.shape[0] // runs, *batch.shape[1:])


class RunsPolicy(nn.Module):
    """The collection policy of ``len(policies)`` runs sharing one env batch.

    Args:
        policies: run ``r``'s policy (``td -> td``) acts on sub-envs
            ``[r * E, (r + 1) * E)`` of the env's first batch dim.

    Raises:
        ValueError: for no policies, or (when called) an env batch that is not a
            multiple of the number of runs.

    Examples:
        >>> from marl.algorithms import Algorithm
        >>> from marl.testing import SingleAgentFakeEnv
        >>> runs = [Algorithm("ppo").build(SingleAgentFakeEnv(num_envs=2), seed=s)
        ...         for s in range(3)]
        >>> env = SingleAgentFakeEnv(num_envs=6, seed=0)  # 3 runs x 2 sub-envs
        >>> td = RunsPolicy([run.policy for run in runs])(env.reset())
        >>> td["action"].shape
        torch.Size([6, 2])
    """

    def __init__(self, policies: Sequence[Callable[[TensorDictBase], TensorDictBase]]):
        super().__init__()
        if not policies:
            raise ValueError("RunsPolicy needs at least one policy")
        self.policies = list(policies)
        # registered when they are modules, so .to() and state_dict() reach them
        self._modules_list = nn.ModuleList(p for p in self.policies if isinstance(p, nn.Module))

    @property
    def runs(self) -> int:
        """The number of runs."""
        return len(self.policies)

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        """Each run's policy on its slice; the slices' outputs, concatenated in run order."""
        parts = split_runs(td, self.runs).unbind(0)
        outs = []
        for policy, part in zip(self.policies, parts):
            out = policy(part)
            outs.append(part if out is None else out)
        return torch.cat(outs, 0)
