"""Recurrent (GRU/LSTM) actors and Q-networks for a group, and the modes they run in.

A recurrent network is ``observation -> Linear+activation encoder -> GRU/LSTM ->
Linear head``. Its hidden state is per-step data, not a parameter: it lives in the
TensorDict under the group (``(group, "actor_rnn")``; ``_h``/``_c`` suffixes for an
LSTM), the step that reads it writes the next one under ``"next"`` (which the env's
``step`` keeps and ``step_mdp`` carries to the next step), and it is reset where the
root ``"is_init"`` flag is set. That flag comes from an
:class:`~marl.envs.InitTracker` on the env: the experiment adds one when the
algorithm's network is recurrent, and the :class:`~marl.algorithms.trainer.Trainer`
refuses a recurrent policy on an env without it (resets cannot be inferred from the
root ``done`` flags, which a partial reset clears before the policy reads them).

Every builder returns two modules over the same parameters: a **step** module (the
collection policy: one step from the stored state) and a **sequence** module (the
loss's: unrolls ``[*B, T]`` chunks from the state stored at each chunk's first step,
resetting at ``is_init`` inside). On the same data they compute the same outputs,
which is what makes training on collected sequences on-policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from tensordict import TensorDictBase
from tensordict.nn import (
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictModuleBase,
    TensorDictSequential,
)
from torch import nn

from marl.algorithms._groups import GroupInfo
from marl.envs.common import EnvBase
from marl.modules import (
    GRUModule,
    LSTMModule,
)
from marl.modules.recurrent import RecurrentModule

__all__ = [
    "RECURRENT_NETWORKS",
    "RecurrentModules",
    "SequenceQValues",
    "check_init_tracker",
    "is_recurrent",
    "recurrent_q_network",
    "recurrent_stochastic_actor",
]

RECURRENT_NETWORKS: dict[str, type[RecurrentModule]] = {"gru": GRUModule, "lstm": LSTMModule}
"""The recurrent network names and their cells."""

IS_INIT_KEY = "is_init"
"""The root flag (``[*B, 1]``, set by ``InitTracker``) where hidden states reset."""


class RecurrentModules(NamedTuple):
    """The two modes of one recurrent network (shared parameters)."""

    step: TensorDictModuleBase
    """One step from the stored state (collection, evaluation)."""
    sequence: TensorDictModuleBase
    """Unrolls ``[*B, T]`` sequences from each one's first stored state (training)."""


def is_recurrent(module: nn.Module) -> bool:
    """Whether ``module`` holds a GRU/LSTM module that keeps its state in the TensorDict.

    Examples:
        >>> is_recurrent(GRUModule(3, 4)), is_recurrent(nn.Linear(3, 4))
        (True, False)
    """
    return any(isinstance(m, RecurrentModule) for m in module.modules())


def check_init_tracker(env: EnvBase, what: str = "env") -> None:
    """Refuse an env without the ``"is_init"`` flag a recurrent policy resets on.

    Raises:
        ValueError: naming the env and the fix (an ``InitTracker``).
    """
    if IS_INIT_KEY not in env.observation_spec.keys():
        raise ValueError(
            f"a recurrent policy (gru/lstm) resets its hidden state where the root "
            f"{IS_INIT_KEY!r} flag is set, but the {what} has no {IS_INIT_KEY!r} observation: "
            "wrap it as TransformedEnv(env, InitTracker()) (marl.envs; the Experiment adds "
            "one itself for a recurrent model)"
        )


def check_recurrent(info: GroupInfo, network: str, share_params: bool) -> type[RecurrentModule]:
    """The cell class of ``network``, or a clear error for what the builders cannot make."""
    if network not in RECURRENT_NETWORKS:
        raise ValueError(
            f"unknown recurrent network {network!r}; expected one of {sorted(RECURRENT_NETWORKS)}"
        )
    if info.name is not None and not share_params:
        raise ValueError(
            f"group {info.label!r}: a {network} network shares its parameters over the group's "
            "agents (one cell, each agent its own hidden state); per-agent parameters are not "
            "implemented: set share_policy_params=True (share_params=True)"
        )
    return RECURRENT_NETWORKS[network]


def _body(
    info: GroupInfo,
    network: str,
    out_features: int,
    cells: Sequence[int],
    activation: str,
    *,
    share_params: bool,
    hidden_name: str,
    out_keys: list,
    post: nn.Module | None = None,
) -> RecurrentModules:
    """``obs -> encoder -> rnn -> head`` in both modes (the two share every module)."""
    from marl.algorithms._policies import CatNet, activation_class, observation_inputs

    cell_cls = check_recurrent(info, network, share_params)
    if not cells:
        raise ValueError(f"a {network} network needs at least one hidden width, got cells={cells}")
    in_keys, ndims, in_size = observation_inputs(info)
    width = int(cells[-1])
    encoder_net = nn.Sequential(
        nn.Linear(in_size, width, device=info.device), activation_class(activation)()
    )
    embed, rnn_out = info.key(f"{hidden_name}_in"), info.key(f"{hidden_name}_out")
    encoder = TensorDictModule(CatNet(encoder_net, ndims), in_keys, [embed])
    rnn_kwargs = dict(in_key=embed, out_key=rnn_out, hidden_key=info.key(hidden_name))
    rnn_step = cell_cls(width, width, is_init_key=IS_INIT_KEY, **rnn_kwargs).to(info.device)
    rnn_seq = cell_cls(  # one set of parameters, two modes
        width, width, is_init_key=IS_INIT_KEY, recurrent_mode=True, rnn=rnn_step.rnn, **rnn_kwargs
    )
    head_net = nn.Linear(width, out_features, device=info.device)
    head = TensorDictModule(
        head_net if post is None else nn.Sequential(head_net, post), [rnn_out], out_keys
    )
    return RecurrentModules(
        TensorDictSequential(encoder, rnn_step, head), TensorDictSequential(encoder, rnn_seq, head)
    )


def recurrent_stochastic_actor(
    info: GroupInfo,
    network: str,
    cells: Sequence[int],
    activation: str,
    *,
    share_params: bool = True,
    log_prob_key: str = "action_log_prob",
) -> RecurrentModules:
    """A recurrent sampling policy (``stochastic_actor``'s distributions) in both modes.

    Args:
        info: the group.
        network: ``"gru"`` or ``"lstm"``.
        cells: the last width is the encoder's and the cell's hidden size.
        activation: the encoder's activation.
        share_params: must be True for a group (one cell for every agent).
        log_prob_key: the leaf name of the log-probability.

    Returns:
        ``(step, sequence)`` actors, each with ``get_dist(td)``.

    Examples:
        >>> from marl.testing import MultiAgentFakeEnv, example_group
        >>> info = example_group("walker")
        >>> step, seq = recurrent_stochastic_actor(info, "gru", [16], "tanh")
        >>> td = step(MultiAgentFakeEnv(num_envs=2).reset())
        >>> td["next", "walker", "actor_rnn"].shape  # [envs, agents, layers, hidden]
        torch.Size([2, 2, 1, 16])
    """
    from marl.algorithms._policies import actor_distribution

    out_features, post, out_keys, head = actor_distribution(info, log_prob_key)
    body = _body(
        info,
        network,
        out_features,
        cells,
        activation,
        share_params=share_params,
        hidden_name="actor_rnn",
        out_keys=out_keys,
        post=post,
    )
    return RecurrentModules(
        ProbabilisticTensorDictSequential(*body.step.module, head),
        ProbabilisticTensorDictSequential(*body.sequence.module, head),
    )


class SequenceQValues(TensorDictModuleBase):
    """A recurrent Q-network's sequence mode, with the next step's values from the same unroll.

    On a ``[M, L]`` slice of one episode (the slice sampler never crosses an episode
    boundary), the next observation of step ``t < L - 1`` is the observation of step
    ``t + 1``: one unroll over ``L + 1`` observations (the slice's, then the last next
    one), from the hidden state stored at the slice's first step, gives the values now
    (its first ``L`` steps) and next (its last ``L``), which the Q-learning losses read
    through :meth:`now_and_next` instead of a second, separately started unroll.

    Args:
        body: the sequence-mode network writing ``value_key``.
        info: the group.
        mask: zero the values of masked-out agents (the group's ``"mask"``), as
            ``MaskedAgentValues`` does for the mixers.
    """

    def __init__(self, body: TensorDictModuleBase, info: GroupInfo, *, mask: bool = False) -> None:
        super().__init__()
        self.body = body
        self.value_key = info.key("action_value")
        self.mask_key = info.key("mask") if mask else None
        self.in_keys = list(body.in_keys) + ([self.mask_key] if mask else [])
        self.out_keys = [self.value_key]
        from marl.algorithms._policies import observation_inputs

        self._obs_keys = observation_inputs(info)[0]

    def _masked(self, values: torch.Tensor, td: TensorDictBase) -> torch.Tensor:
        if self.mask_key is None:
            return values
        return values.masked_fill(~td.get(self.mask_key).bool().unsqueeze(-1), 0.0)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        tensordict = self.body(tensordict)
        tensordict.set(self.value_key, self._masked(tensordict.get(self.value_key), tensordict))
        return tensordict

    def now_and_next(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Q(o_t, .), Q(o'_t, .))`` of a ``[M, L]`` slice, from one unroll of ``L + 1`` steps."""
        if tensordict.batch_dims != 2:
            raise ValueError(
                "now_and_next reads [slices, steps] sequences, got batch "
                f"{tuple(tensordict.batch_size)}"
            )
        now = tensordict.select(*self.body.in_keys, strict=False)
        last = tensordict.get("next")[:, -1:].select(*self._obs_keys).clone()
        last.set(IS_INIT_KEY, torch.zeros_like(now.get(IS_INIT_KEY)[:, -1:]))
        for key in now.keys(True, True):
            if key not in last.keys(True, True):
                last.set(key, now.get(key)[:, -1:])  # hidden states: only step 0's is read
        values = self.body(torch.cat([now, last], dim=1)).get(self.value_key)
        steps = tensordict.batch_size[1]
        q_now = self._masked(values[:, :steps], tensordict)
        q_next = self._masked(values[:, 1:], tensordict.get("next"))
        return q_now, q_next


def recurrent_q_network(
    info: GroupInfo,
    network: str,
    cells: Sequence[int],
    activation: str,
    *,
    share_params: bool = True,
) -> RecurrentModules:
    """A recurrent ``Q(h, .)`` over every discrete action, written to ``action_value``.

    Examples:
        >>> from marl.testing import MultiAgentFakeEnv, example_group
        >>> info = example_group("picker")
        >>> step, seq = recurrent_q_network(info, "lstm", [16], "relu")
        >>> step(MultiAgentFakeEnv(num_envs=2).reset())["picker", "action_value"].shape
        torch.Size([2, 3, 5])
    """
    return _body(
        info,
        network,
        info.n_actions,
        cells,
        activation,
        share_params=share_params,
        hidden_name="q_rnn",
        out_keys=[info.key("action_value")],
    )
