"""Recurrent modules (``GRUModule``, ``LSTMModule``) that keep their hidden state in the TensorDict.

Two modes:

- **step mode** (collection, the default): the input is ``[*B, in]`` (``*B`` may
  include an agent dim). The previous hidden state is read from ``hidden_key``
  (zeros if absent, then written there too), zeroed where ``is_init`` is True (an ``InitTracker`` flag set
  on the first step of an episode), advanced one step, and the new state is written
  to ``("next", hidden_key)`` so that it becomes the root state on the next step.
- **recurrent mode** (training on ``[*B, T]`` sequences, ``set_recurrent_mode()``):
  the whole sequence is processed with the hidden state taken from the first step,
  and it is reset wherever ``is_init`` is True inside the sequence.

``is_init`` may be env-level (``[*B, 1]``) next to per-agent inputs: it is broadcast.
"""

from __future__ import annotations

import itertools

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey
from torch import nn

__all__ = ["GRUModule", "LSTMModule"]


def _next(key: NestedKey) -> tuple[str, ...]:
    return ("next", *(key if isinstance(key, tuple) else (key,)))


class RecurrentModule(TensorDictModuleBase):
    _rnn_cls: type[nn.RNNBase]
    _state_names: tuple[str, ...]

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        *,
        num_layers: int = 1,
        in_key: NestedKey = "observation",
        out_key: NestedKey = "embed",
        hidden_key: NestedKey = "recurrent_state",
        is_init_key: NestedKey = "is_init",
        recurrent_mode: bool = False,
        rnn: nn.RNNBase | None = None,
    ) -> None:
        super().__init__()
        if rnn is None:
            rnn = self._rnn_cls(input_size, hidden_size, num_layers=num_layers, batch_first=True)
        elif not isinstance(rnn, self._rnn_cls) or (
            rnn.input_size,
            rnn.hidden_size,
            rnn.num_layers,
            rnn.batch_first,
        ) != (input_size, hidden_size, num_layers, True):
            raise ValueError(
                f"{type(self).__name__}: rnn must be a batch_first {self._rnn_cls.__name__}"
                f"({input_size}, {hidden_size}, num_layers={num_layers}), got {rnn!r}"
            )
        self.rnn = rnn
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        hk = hidden_key if isinstance(hidden_key, tuple) else (hidden_key,)
        suffixes = [""] if len(self._state_names) == 1 else [f"_{n}" for n in self._state_names]
        self.hidden_keys = [(*hk[:-1], hk[-1] + s) for s in suffixes]
        self.hidden_keys = [k[0] if len(k) == 1 else k for k in self.hidden_keys]
        self.in_key, self.out_key, self.is_init_key = in_key, out_key, is_init_key
        self.recurrent_mode = recurrent_mode
        self.in_keys = [in_key, is_init_key, *self.hidden_keys]
        self.out_keys = [out_key, *(_next(k) for k in self.hidden_keys)]

    def set_recurrent_mode(self, mode: bool = True) -> RecurrentModule:
        """Switch between step mode (``False``) and sequence mode (``True``); returns self."""
        self.recurrent_mode = mode
        return self

    def _is_init(self, td: TensorDictBase, batch_shape: torch.Size) -> torch.Tensor | None:
        """The reset flags broadcast to ``batch_shape`` (the input shape minus features)."""
        flag = td.get(self.is_init_key, None)
        if flag is None:
            return None
        if flag.shape[-1:] == (1,) and flag.ndim > td.batch_dims:
            flag = flag.squeeze(-1)
        while flag.ndim < len(batch_shape):
            flag = flag.unsqueeze(-1)
        return flag.expand(batch_shape)

    def _initial_states(self, td: TensorDictBase, n: int, like: torch.Tensor) -> list[torch.Tensor]:
        """Stored states as ``[num_layers, n, hidden]`` (zeros when absent)."""
        states = []
        for key in self.hidden_keys:
            h = td.get(key, None)
            if h is None:
                h = like.new_zeros(self.num_layers, n, self.hidden_size)
            else:
                h = h.reshape(n, self.num_layers, self.hidden_size).transpose(0, 1)
            states.append(h)
        return states

    def _run(
        self, x: torch.Tensor, states: list[torch.Tensor]
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        hx = states[0].contiguous() if len(states) == 1 else tuple(s.contiguous() for s in states)
        out, hn = self.rnn(x, hx)
        return out, [hn] if isinstance(hn, torch.Tensor) else list(hn)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        x = tensordict.get(self.in_key)
        if x.shape[-1] != self.input_size:
            raise ValueError(
                f"{type(self).__name__} expected {self.in_key!r} with last dim {self.input_size}, "
                f"got {tuple(x.shape)}"
            )
        if self.recurrent_mode:
            return self._forward_sequence(tensordict, x)
        lead = x.shape[:-1]
        n = lead.numel()
        states = self._initial_states(tensordict, n, x)
        for key, s in zip(self.hidden_keys, states):
            if key not in tensordict.keys(True):
                # the zero state of a first step is written too: every collected step then
                # holds the state it started from, which sequence training starts a chunk at
                tensordict.set(key, s.transpose(0, 1).reshape(*lead, self.num_layers, -1))
        is_init = self._is_init(tensordict, lead)
        if is_init is not None:
            keep = (~is_init).reshape(1, n, 1).to(x.dtype)
            states = [s * keep for s in states]
        out, states = self._run(x.reshape(n, 1, self.input_size), states)
        tensordict.set(self.out_key, out.reshape(*lead, self.hidden_size))
        for key, s in zip(self.hidden_keys, states):
            tensordict.set(_next(key), s.transpose(0, 1).reshape(*lead, self.num_layers, -1))
        return tensordict

    def _forward_sequence(self, td: TensorDictBase, x: torch.Tensor) -> TensorDictBase:
        if td.batch_dims < 1:
            raise ValueError("recurrent mode needs a time dim: a TensorDict with batch [*B, T]")
        tpos = td.batch_dims - 1
        T = x.shape[tpos]
        # [*B, T, *A, in] -> [N, T, in] with N = prod(B) * prod(A)
        xs = x.movedim(tpos, -2)
        lead = xs.shape[:-2]
        n = lead.numel()
        xs = xs.reshape(n, T, self.input_size)
        first = td[(slice(None),) * tpos + (0,)]
        states = self._initial_states(first, n, x)
        flags = self._is_init(td, x.shape[:-1])
        if flags is None:
            flags = torch.zeros(x.shape[:-1], dtype=torch.bool, device=x.device)
        flags = flags.movedim(tpos, -1).reshape(n, T)
        # Run the RNN over segments between reset times (one call when nothing resets).
        cuts = [0, *torch.nonzero(flags[:, 1:].any(0)).flatten().add(1).tolist(), T]
        outs = []
        for a, b in itertools.pairwise(cuts):
            keep = (~flags[:, a]).reshape(1, n, 1).to(xs.dtype)
            out, states = self._run(xs[:, a:b], [s * keep for s in states])
            outs.append(out)
        out = torch.cat(outs, 1) if len(outs) > 1 else outs[0]
        out = out.reshape(*lead, T, self.hidden_size).movedim(-2, tpos)
        td.set(self.out_key, out)
        return td


class GRUModule(RecurrentModule):
    """A GRU whose hidden state lives in the TensorDict (``hidden_key``, ``[*B, L, H]``).

    Args:
        input_size: input features.
        hidden_size: hidden (and output) features.
        num_layers: stacked GRU layers.
        in_key: input key.
        out_key: output key.
        hidden_key: where the hidden state is read (and written under ``"next"``).
        is_init_key: reset flag key.
        recurrent_mode: start in sequence mode.
        rnn: the ``nn.GRU`` to run (``batch_first``), e.g. a step-mode module's, so that
            a step-mode and a sequence-mode module share one set of parameters (``None``:
            a new one).

    Examples:
        >>> from tensordict import TensorDict
        >>> gru = GRUModule(3, 8)
        >>> td = gru(TensorDict(observation=torch.randn(4, 3), batch_size=[4]))
        >>> td["embed"].shape, td["next", "recurrent_state"].shape
        (torch.Size([4, 8]), torch.Size([4, 1, 8]))
        >>> GRUModule(3, 8, recurrent_mode=True, rnn=gru.rnn).rnn is gru.rnn
        True
    """

    _rnn_cls = nn.GRU
    _state_names = ("h",)


class LSTMModule(RecurrentModule):
    """An LSTM whose states live in the TensorDict (``<hidden_key>_h`` and ``<hidden_key>_c``).

    Args:
        input_size: input features.
        hidden_size: hidden (and output) features.
        num_layers: stacked LSTM layers.
        in_key: input key.
        out_key: output key.
        hidden_key: prefix of the two state keys.
        is_init_key: reset flag key.
        recurrent_mode: start in sequence mode.
        rnn: the ``nn.LSTM`` to run (``batch_first``), e.g. a step-mode module's, so that
            a step-mode and a sequence-mode module share one set of parameters (``None``:
            a new one).

    Examples:
        >>> from tensordict import TensorDict
        >>> lstm = LSTMModule(3, 8)
        >>> td = lstm(TensorDict(observation=torch.randn(4, 3), batch_size=[4]))
        >>> td["next", "recurrent_state_c"].shape
        torch.Size([4, 1, 8])
    """

    _rnn_cls = nn.LSTM
    _state_names = ("h", "c")
