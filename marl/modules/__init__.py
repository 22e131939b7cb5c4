"""Networks, multi-agent networks, mixers, distributions and exploration modules.

Everything here is a plain ``torch.nn.Module`` or a ``tensordict.nn`` module and can
be wrapped in ``TensorDictModule``/``ProbabilisticTensorDictModule`` to read and write
any (group) key. This package imports only torch, tensordict and numpy.
"""

from marl.modules.conv import MultiAgentCNN, MultiAgentConvNet
from marl.modules.distributions import MaskedCategorical, OneHotCategorical, TanhNormal
from marl.modules.exploration import AdditiveGaussian, EGreedy, OrnsteinUhlenbeck
from marl.modules.graph import GATv2Layer, MultiAgentGNN, adjacency
from marl.modules.mixers import QMixer, VDNMixer
from marl.modules.mlp import MLP, MultiAgentMLP
from marl.modules.recurrent import GRUModule, LSTMModule
from marl.modules.sets import MultiAgentDeepSets, masked_mean
from marl.modules.transformer import MATPolicy, MATValue, MultiAgentTransformer

__all__ = [
    "MLP",
    "AdditiveGaussian",
    "EGreedy",
    "GATv2Layer",
    "GRUModule",
    "LSTMModule",
    "MATPolicy",
    "MATValue",
    "MaskedCategorical",
    "MultiAgentCNN",
    "MultiAgentConvNet",
    "MultiAgentDeepSets",
    "MultiAgentGNN",
    "MultiAgentMLP",
    "MultiAgentTransformer",
    "OneHotCategorical",
    "OrnsteinUhlenbeck",
    "QMixer",
    "TanhNormal",
    "VDNMixer",
    "adjacency",
    "masked_mean",
]
