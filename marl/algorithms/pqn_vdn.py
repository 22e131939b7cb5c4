"""PQN-VDN: parallel Q-learning on the team value ``Q_tot = sum_i Q_i`` (Gallici et al., 2025).

PQN (:mod:`marl.algorithms.pqn`) with VDN's decomposition: the agents act
greedily on their own ``Q_i(o_i, .)``, and the sum of their chosen values is
regressed on the team's Q(lambda) returns (the mean of the agents' rewards,
bootstrapped on ``sum_i max_a Q_i(o_i', a)`` until the episode ends). Masked-out
agents (dead, or not acting) are removed from the sum. JaxMARL's strongest
Q-learning baseline; here on any catalogue task with discrete actions.
"""

from __future__ import annotations

from tensordict.nn import TensorDictModuleBase

from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import q_value_network
from marl.algorithms.configs import PQNVDNConfig
from marl.algorithms.learner import GroupLearner
from marl.algorithms.pqn import pqn_learner
from marl.algorithms.spec import pqn_spec
from marl.algorithms.vdn import MaskedAgentValues

__all__ = ["SPEC", "PQNVDNConfig", "build_pqn_vdn"]


def build_pqn_vdn(info: GroupInfo, config: PQNVDNConfig) -> GroupLearner:
    """Build a PQN-VDN learner for one group: team Q(lambda) on ``sum_i Q_i``.

    Raises:
        ValueError: for a single-agent env (no group to sum over).

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("picker")
        >>> build_pqn_vdn(info, PQNVDNConfig()).loss.team
        True
    """
    if info.name is None:
        raise ValueError("pqn_vdn sums the values of a group's agents; got a single-agent env")
    c = config
    qnet: TensorDictModuleBase = q_value_network(info, layer_norm=c.layer_norm, **c.q_body())
    if info.has_agent_mask:
        qnet = MaskedAgentValues(qnet, info)
    return pqn_learner(info, c, qnet=qnet, team=True, algorithm="pqn_vdn")


SPEC = pqn_spec(
    "pqn_vdn",
    PQNVDNConfig,
    build_pqn_vdn,
    "PQN on the team value: the sum of the agents' Qs, team Q(lambda) returns.",
)
