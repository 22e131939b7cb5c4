"""The update loops shared by the algorithms, and the pieces every builder needs.

- :mod:`~marl.algorithms.updates.gradient`: one optimizer step (:class:`GradientStep`,
  :func:`loss_and_backward`, :func:`make_optimizer`).
- :mod:`~marl.algorithms.updates.on_policy`: :class:`OnPolicyUpdater`, advantages on the
  ``[*B, T]`` batch, then ``epochs`` passes over it in shuffled minibatches.
- :mod:`~marl.algorithms.updates.off_policy`: :class:`OffPolicyUpdater`, the batch goes
  into a replay buffer; each batch is followed by ``utd_ratio * frames`` sampled
  updates, target-network updates and, with a prioritized sampler, priority updates;
  :func:`off_policy_learner` assembles such a learner.
- :mod:`~marl.algorithms.updates.sync`: :class:`GradientSync`, data-parallel training:
  gradients averaged over ``torch.distributed`` ranks before every optimizer step.
- :mod:`~marl.algorithms.updates.stacked`: :class:`StackedOnPolicy`, the on-policy
  updates of many runs (seeds) of one group as one ``vmap`` over their stacked networks,
  each run's result the same as its own update's.
- :mod:`~marl.algorithms.updates.stacked_off_policy`: :class:`StackedOffPolicy`, the same
  for the replay-buffer updates (each run's buffer, targets and clipping), with a
  :class:`StackedAdam` (:mod:`~marl.algorithms.updates.stacked_adam`): Adam over stacked
  parameters with a learning rate per run.

Both updaters follow :mod:`marl.algorithms.contracts`: they get the learner's loss
and optimizer in their constructor and store only the entries the loss reads.
"""

from marl.algorithms.updates.gradient import (
    GradientStep,
    GradientStepUpdater,
    LossTerms,
    UpdateStats,
    check_update_parts,
    clip_grad_norm_per_group_,
    loss_and_backward,
    loss_terms,
    make_optimizer,
    sum_loss_terms,
)
from marl.algorithms.updates.off_policy import (
    OffPolicyUpdater,
    off_policy_buffer,
    off_policy_learner,
)
from marl.algorithms.updates.on_policy import OnPolicyUpdater, shuffled_minibatches
from marl.algorithms.updates.report import compile_report
from marl.algorithms.updates.stacked import PER_RUN_SETTINGS, StackedOnPolicy
from marl.algorithms.updates.stacked_adam import StackedAdam
from marl.algorithms.updates.stacked_off_policy import StackedOffPolicy
from marl.algorithms.updates.sync import GradientSync

__all__ = [
    "PER_RUN_SETTINGS",
    "GradientStep",
    "GradientStepUpdater",
    "GradientSync",
    "LossTerms",
    "OffPolicyUpdater",
    "OnPolicyUpdater",
    "StackedAdam",
    "StackedOffPolicy",
    "StackedOnPolicy",
    "UpdateStats",
    "check_update_parts",
    "clip_grad_norm_per_group_",
    "compile_report",
    "loss_and_backward",
    "loss_terms",
    "make_optimizer",
    "off_policy_buffer",
    "off_policy_learner",
    "shuffled_minibatches",
    "sum_loss_terms",
]
