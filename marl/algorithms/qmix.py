"""QMIX: monotonic value factorisation (Rashid et al., 2018).

VDN's learner (:func:`marl.algorithms.vdn.value_decomposition_learner`) with a
``QMixer``: a hypernetwork conditioned on the env's global ``"state"``, or on the
group's concatenated observations when the env has no state.
"""

from __future__ import annotations

from marl.algorithms._groups import GroupInfo
from marl.algorithms.configs import QMIXConfig
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import q_learning_spec
from marl.algorithms.vdn import check_mixed_group, value_decomposition_learner
from marl.modules import QMixer
from marl.specs import Composite

__all__ = ["SPEC", "QMIXConfig", "build_qmix"]


def build_qmix(info: GroupInfo, config: QMIXConfig) -> GroupLearner:
    """Build a QMIX learner for one group.

    Raises:
        ValueError: for a single-agent env, or for a group with named (dict)
            observations and no global state to condition the mixer on.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("picker")
        >>> build_qmix(info, QMIXConfig()).loss.tensor_keys.state
        'state'
    """
    check_mixed_group(info, "qmix")
    c = config
    b = info.batch_dims
    if c.use_state and info.has_state:
        state_key, state_shape = "state", info.env_observation_spec["state"].shape[b:]
    else:
        if isinstance(info.observation_spec, Composite):
            raise ValueError(
                f"qmix: group {info.label!r} has named observations and the env has no "
                "'state' to condition the mixer on"
            )
        # the group's observations [n_agents, *obs], flattened by the mixer
        state_key, state_shape = info.key("observation"), info.observation_spec.shape[b:]
    mixer = QMixer(
        state_shape=tuple(state_shape),
        mixing_embed_dim=c.mixing_embed_dim,
        n_agents=info.n_agents,
        hypernet_embed=c.hypernet_embed,
        init_scale=c.hypernet_init_scale,
    ).to(info.device)
    return value_decomposition_learner(info, c, mixer, state_key=state_key, algorithm="qmix")


SPEC = q_learning_spec(
    "qmix", QMIXConfig, build_qmix, "QMIX: a state-conditioned monotonic mixer over per-agent Qs."
)
