"""The Multi-Agent Transformer (Wen et al., 2022): an encoder over a group's agents and an
autoregressive decoder over their actions.

- :class:`MultiAgentTransformer`: the network. The encoder embeds each agent's
  observation and runs self-attention blocks over the agents (no mask), giving each
  agent a representation ``o_i`` and a value ``V(o_i)``. The decoder reads the actions
  of agents ``0..i-1`` (shifted by one behind a learned start token, causal
  self-attention) plus ``o_i`` and cross-attends to every ``o_j``; its output at
  position ``i`` parametrizes agent ``i``'s action distribution.
- :class:`MATPolicy`: the ``tensordict.nn`` policy. It decodes the agents one after
  another (sample agent 0, feed its action, ...) and writes the group's ``action`` and
  ``action_log_prob``; :meth:`MATPolicy.get_dist` is the teacher-forced pass that a PPO
  loss calls: every agent's distribution in one pass given the collected actions, which
  are the ones that produced them (the log-probabilities are exact).
- :class:`MATValue`: the encoder's value head as a ``tensordict.nn`` module (the critic).

The agent dim of the group's entries is the sequence dim; the env batch dims before it
are flattened for the attention and restored after.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, TensorDictModuleBase, interaction_type
from tensordict.utils import NestedKey
from torch import distributions as D
from torch import nn

from marl.modules.distributions import MaskedCategorical, OneHotCategorical, TanhNormal

__all__ = ["ACTION_KINDS", "MATPolicy", "MATValue", "MultiAgentTransformer"]

ACTION_KINDS = ("index", "one_hot", "tanh_normal", "normal")
"""The action distributions :class:`MATPolicy` can write: discrete indices, one-hot
discrete actions, bounded continuous actions (``TanhNormal``), unbounded ones (Normal)."""


class _Attention(nn.Module):
    """Multi-head scaled dot-product attention of ``x`` (queries) over ``context``."""

    def __init__(self, dim: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.query = nn.Linear(dim, dim)
        self.key_value = nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, context: torch.Tensor, causal: bool) -> torch.Tensor:
        n, length, dim = x.shape
        heads, head_dim = self.n_heads, dim // self.n_heads
        q = self.query(x).view(n, length, heads, head_dim).transpose(1, 2)
        k, v = self.key_value(context).view(n, context.shape[1], 2, heads, head_dim).unbind(2)
        y = F.scaled_dot_product_attention(
            q, k.transpose(1, 2), v.transpose(1, 2), is_causal=causal
        )
        return self.out(y.transpose(1, 2).reshape(n, length, dim))


def _feed_forward(dim: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))


class _EncoderBlock(nn.Module):
    """Self-attention over every agent, then a feed-forward layer (post-norm residuals)."""

    def __init__(self, dim: int, n_heads: int) -> None:
        super().__init__()
        self.attention = _Attention(dim, n_heads)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mlp = _feed_forward(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attention(x, x, causal=False))
        return self.norm2(x + self.mlp(x))


class _DecoderBlock(nn.Module):
    """Causal self-attention over the action tokens, cross-attention to the encoder's
    representations, then a feed-forward layer (post-norm residuals)."""

    def __init__(self, dim: int, n_heads: int) -> None:
        super().__init__()
        self.self_attention = _Attention(dim, n_heads)
        self.cross_attention = _Attention(dim, n_heads)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mlp = _feed_forward(dim)

    def forward(self, x: torch.Tensor, rep: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.self_attention(x, x, causal=True))
        # every agent's representation depends on observations only: attending to all of
        # them keeps agent i's output independent of the actions of agents after it
        x = self.norm2(x + self.cross_attention(x, rep, causal=False))
        return self.norm3(x + self.mlp(x))


class MultiAgentTransformer(nn.Module):
    """MAT's encoder-decoder over the ``n_agents`` agents of one group.

    Args:
        obs_dim: features of one agent's (flattened) observation.
        action_dim: discrete: the number of actions; continuous: the action size.
        n_agents: agents in the group (the sequence length).
        discrete: whether actions are indices (embedded by a table) or vectors (embedded
            by a linear layer; :class:`MATPolicy` feeds them rescaled to ``[-1, 1]``).
        embed_dim: width of the tokens.
        n_heads: attention heads (must divide ``embed_dim``).
        n_blocks: encoder blocks, and as many decoder blocks.
        log_std_init: initial log standard deviation of continuous actions (a learned
            parameter per action dim, independent of the observations, as in the paper).

    Examples:
        >>> net = MultiAgentTransformer(6, 5, n_agents=3, discrete=True, embed_dim=16)
        >>> rep, value = net.encode(torch.randn(4, 3, 6))
        >>> rep.shape, value.shape
        (torch.Size([4, 3, 16]), torch.Size([4, 3, 1]))
        >>> net.decode(rep, net.shift(torch.randint(0, 5, (4, 3)))).shape
        torch.Size([4, 3, 5])
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        n_agents: int,
        *,
        discrete: bool,
        embed_dim: int = 64,
        n_heads: int = 1,
        n_blocks: int = 1,
        log_std_init: float = 0.0,
    ) -> None:
        super().__init__()
        for name, value in (
            ("obs_dim", obs_dim),
            ("action_dim", action_dim),
            ("n_agents", n_agents),
            ("embed_dim", embed_dim),
            ("n_heads", n_heads),
            ("n_blocks", n_blocks),
        ):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if embed_dim % n_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be a multiple of n_heads ({n_heads})")
        self.n_agents, self.discrete, self.action_dim = n_agents, discrete, action_dim
        self.obs_embed = nn.Sequential(
            nn.LayerNorm(obs_dim), nn.Linear(obs_dim, embed_dim), nn.GELU()
        )
        self.encoder = nn.ModuleList(_EncoderBlock(embed_dim, n_heads) for _ in range(n_blocks))
        self.value_head = nn.Sequential(
            nn.Linear(embed_dim, embed_dim), nn.GELU(), nn.Linear(embed_dim, 1)
        )
        if discrete:
            self.action_embed: nn.Module = nn.Embedding(action_dim, embed_dim)
        else:
            self.action_embed = nn.Linear(action_dim, embed_dim)
        self.start = nn.Parameter(torch.randn(embed_dim) * 0.02)
        # the decoding order is fixed: position i is agent i
        self.position = nn.Parameter(torch.randn(n_agents, embed_dim) * 0.02)
        self.decoder = nn.ModuleList(_DecoderBlock(embed_dim, n_heads) for _ in range(n_blocks))
        self.action_head = nn.Sequential(
            nn.Linear(embed_dim, embed_dim), nn.GELU(), nn.Linear(embed_dim, action_dim)
        )
        self.log_std = None if discrete else nn.Parameter(torch.full((action_dim,), log_std_init))

    def encode(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``[N, n_agents, obs_dim]`` -> representations ``[N, n, E]`` and values ``[N, n, 1]``."""
        x = self.obs_embed(obs)
        for block in self.encoder:
            x = block(x)
        return x, self.value_head(x)

    def embed_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """Tokens of actions: indices ``[N, k]`` or vectors ``[N, k, action_dim]`` -> ``[N, k, E]``."""
        return self.action_embed(actions.long() if self.discrete else actions)

    def shift(self, actions: torch.Tensor) -> torch.Tensor:
        """The decoder's input for teacher forcing: the start token, then the tokens of
        agents ``0..n-2``'s actions (agent ``i`` sees the actions before it only)."""
        tokens = self.embed_actions(actions)
        start = self.start.expand(tokens.shape[0], 1, -1)
        return torch.cat([start, tokens[:, :-1]], 1)

    def decode(self, rep: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """The action-distribution parameters of the first ``k = tokens.shape[1]`` agents.

        Args:
            rep: the encoder's representations of every agent, ``[N, n, E]``.
            tokens: the shifted action tokens of agents ``0..k-1``, ``[N, k, E]``.

        Returns:
            ``[N, k, action_dim]``: logits (discrete) or means (continuous).
        """
        k = tokens.shape[1]
        x = tokens + rep[:, :k] + self.position[:k]
        for block in self.decoder:
            x = block(x, rep)
        return self.action_head(x)


def _flat_features(xs: Sequence[torch.Tensor], ndims: Sequence[int]) -> torch.Tensor:
    parts = []
    for x, nd in zip(xs, ndims):
        x = x.reshape(*x.shape[: x.ndim - nd], -1) if nd != 1 else x
        parts.append(x if x.is_floating_point() else x.to(torch.get_default_dtype()))
    return parts[0] if len(parts) == 1 else torch.cat(parts, -1)


class _GroupInputs(TensorDictModuleBase):
    """Reads a group's observation leaves as one ``[N, n_agents, F]`` tensor."""

    def __init__(
        self, net: MultiAgentTransformer, obs_keys: Sequence[NestedKey], obs_ndims: Sequence[int]
    ) -> None:
        super().__init__()
        if len(obs_keys) != len(obs_ndims) or not obs_keys:
            raise ValueError(
                f"give one feature ndim per observation key, got {len(obs_keys)} keys and "
                f"{len(obs_ndims)} ndims"
            )
        self.net = net
        self.obs_keys, self.obs_ndims = list(obs_keys), list(obs_ndims)

    def _observation(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Size]:
        obs = _flat_features([td.get(k) for k in self.obs_keys], self.obs_ndims)
        if obs.ndim < 2 or obs.shape[-2] != self.net.n_agents:
            raise ValueError(
                f"expected observations [*batch, {self.net.n_agents} agents, features] at "
                f"{self.obs_keys}, got {tuple(obs.shape)}"
            )
        lead = obs.shape[:-2]
        return obs.reshape(-1, *obs.shape[-2:]), lead


class MATValue(_GroupInputs):
    """The encoder's value ``V(o_i)`` of every agent, written to ``value_key``.

    Args:
        net: the transformer (shared with the :class:`MATPolicy`).
        obs_keys: the group's observation leaves.
        obs_ndims: trailing feature dims of each leaf (flattened and concatenated).
        value_key: where ``[*B, n_agents, 1]`` values are written.
    """

    def __init__(
        self,
        net: MultiAgentTransformer,
        obs_keys: Sequence[NestedKey],
        obs_ndims: Sequence[int],
        value_key: NestedKey,
    ) -> None:
        super().__init__(net, obs_keys, obs_ndims)
        self.in_keys = list(obs_keys)
        self.out_keys = [value_key]

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        obs, lead = self._observation(tensordict)
        _, value = self.net.encode(obs)
        tensordict.set(self.out_keys[0], value.reshape(*lead, *value.shape[1:]))
        return tensordict


class MATPolicy(_GroupInputs):
    """MAT's policy: actions decoded agent after agent, log-probabilities of each.

    ``forward`` samples (``InteractionType.RANDOM`` or none set) or takes each agent's
    mode (any other interaction type, e.g. ``DETERMINISTIC``), agent ``i`` conditioned on
    the actions chosen for agents ``0..i-1``. :meth:`get_dist` gives every agent's
    distribution given the actions in the TensorDict (teacher forcing, one pass), which
    is what a PPO loss needs.

    Args:
        net: the transformer.
        obs_keys: the group's observation leaves.
        obs_ndims: trailing feature dims of each leaf.
        action_key: where the action is written (and read by :meth:`get_dist`).
        log_prob_key: where each agent's log-probability ``[*B, n_agents]`` is written.
        kind: one of :data:`ACTION_KINDS`.
        mask_key: the group's ``action_mask`` (discrete kinds only), or ``None``.
        low: lower bounds of ``"tanh_normal"`` actions ``[action_dim]``.
        high: upper bounds.

    Examples:
        >>> from tensordict import TensorDict
        >>> net = MultiAgentTransformer(4, 3, n_agents=2, discrete=True, embed_dim=8)
        >>> policy = MATPolicy(net, [("g", "obs")], [1], ("g", "action"),
        ...                    ("g", "action_log_prob"), kind="index")
        >>> td = policy(TensorDict({("g", "obs"): torch.randn(5, 2, 4)}, batch_size=[5]))
        >>> td["g", "action"].shape, td["g", "action_log_prob"].shape
        (torch.Size([5, 2]), torch.Size([5, 2]))
        >>> lp = policy.get_dist(td).log_prob(td["g", "action"])
        >>> torch.allclose(lp, td["g", "action_log_prob"], atol=1e-5)
        True
    """

    def __init__(
        self,
        net: MultiAgentTransformer,
        obs_keys: Sequence[NestedKey],
        obs_ndims: Sequence[int],
        action_key: NestedKey,
        log_prob_key: NestedKey,
        *,
        kind: str,
        mask_key: NestedKey | None = None,
        low: torch.Tensor | None = None,
        high: torch.Tensor | None = None,
    ) -> None:
        super().__init__(net, obs_keys, obs_ndims)
        if kind not in ACTION_KINDS:
            raise ValueError(f"kind must be one of {ACTION_KINDS}, got {kind!r}")
        if net.discrete != (kind in ("index", "one_hot")):
            raise ValueError(
                f"a {'discrete' if net.discrete else 'continuous'} transformer cannot "
                f"write {kind!r} actions"
            )
        if mask_key is not None and net.discrete is False:
            raise ValueError("an action mask needs discrete actions")
        if kind == "tanh_normal":
            if low is None or high is None:
                raise ValueError("'tanh_normal' actions need their bounds (low and high)")
            # copies: an exported program would store the whole tensor behind a view
            low = torch.as_tensor(low, dtype=torch.float32).reshape(-1).clone()
            high = torch.as_tensor(high, dtype=torch.float32).reshape(-1).clone()
            if not bool((high > low).all()):
                raise ValueError(f"action bounds need high > low, got {low} and {high}")
            self.register_buffer("low", low)
            self.register_buffer("high", high)
        self.kind = kind
        self.action_key, self.log_prob_key, self.mask_key = action_key, log_prob_key, mask_key
        self.in_keys = [*obs_keys, *([mask_key] if mask_key is not None else [])]
        self.out_keys = [action_key, log_prob_key]

    def _dist(self, params: torch.Tensor, mask: torch.Tensor | None) -> D.Distribution:
        """The per-agent distribution from the decoder's output ``[..., action_dim]``."""
        if self.kind == "index":
            return MaskedCategorical(logits=params, mask=mask)
        if self.kind == "one_hot":
            return OneHotCategorical(logits=params, mask=mask)
        scale = self.net.log_std.clamp(-20.0, 2.0).exp().expand_as(params)
        if self.kind == "tanh_normal":
            return TanhNormal(params, scale, low=self.low, high=self.high)
        return D.Independent(D.Normal(params, scale, validate_args=False), 1)

    def _token_input(self, action: torch.Tensor) -> torch.Tensor:
        """What the decoder embeds of an action: an index, or a vector in ``[-1, 1]``."""
        if self.kind == "one_hot":
            return action.argmax(-1)
        if self.kind == "tanh_normal":
            return (action - (self.high + self.low) / 2) / ((self.high - self.low) / 2)
        return action

    def _mask(self, td: TensorDictBase) -> torch.Tensor | None:
        if self.mask_key is None:
            return None
        mask = td.get(self.mask_key)
        return mask.reshape(-1, *mask.shape[-2:])

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        obs, lead = self._observation(tensordict)
        mask = self._mask(tensordict)
        rep, _ = self.net.encode(obs)
        sample = interaction_type() in (None, InteractionType.RANDOM)
        tokens = [self.net.start.expand(rep.shape[0], 1, -1)]
        actions, log_probs = [], []
        for i in range(self.net.n_agents):
            # decoding the prefix 0..i: causal attention makes its last output agent i's
            params = self.net.decode(rep, torch.cat(tokens, 1))[:, i]
            dist = self._dist(params, None if mask is None else mask[:, i])
            if sample:
                action = dist.sample()
            else:
                action = getattr(dist, "deterministic_sample", None)
                action = dist.mean if action is None else action
            actions.append(action)
            log_probs.append(dist.log_prob(action))
            if i + 1 < self.net.n_agents:
                tokens.append(self.net.embed_actions(self._token_input(action)).unsqueeze(1))
        action = torch.stack(actions, 1)
        log_prob = torch.stack(log_probs, 1)
        tensordict.set(self.action_key, action.reshape(*lead, *action.shape[1:]))
        tensordict.set(self.log_prob_key, log_prob.reshape(*lead, *log_prob.shape[1:]))
        return tensordict

    def get_dist(self, tensordict: TensorDictBase) -> D.Distribution:
        """Every agent's distribution given the TensorDict's actions (teacher forcing).

        Agent ``i``'s distribution reads the actions of agents ``0..i-1`` only. Its batch
        shape is the group's ``[*B, n_agents]``.
        """
        return self.get_dist_and_value(tensordict)[0]

    def get_dist_and_value(self, tensordict: TensorDictBase) -> tuple[D.Distribution, torch.Tensor]:
        """:meth:`get_dist` and the encoder's values ``[*B, n_agents, 1]`` (what
        :class:`MATValue` writes), from one encoder pass (the
        :class:`~marl.objectives.ActorCritic` protocol, for
        ``PPOLoss(..., value_from_actor=True)``)."""
        obs, lead = self._observation(tensordict)
        action = tensordict.get(self.action_key)
        action = action.reshape(-1, *action.shape[len(lead) :])
        rep, value = self.net.encode(obs)
        params = self.net.decode(rep, self.net.shift(self._token_input(action)))
        params = params.reshape(*lead, *params.shape[1:])
        mask = None if self.mask_key is None else tensordict.get(self.mask_key)
        return self._dist(params, mask), value.reshape(*lead, *value.shape[1:])

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, n_agents={self.net.n_agents}"
