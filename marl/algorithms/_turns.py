"""Turn-based (AEC) transitions: each agent's step leads to its own next turn.

In a turn-based env one ``step`` plays the acting agent's move, so the ``next``
entries of a collected ``[*B, T]`` batch are the state after that single move,
where the agent is not acting, and the rewards an agent earns on the other
agents' moves (e.g. the loser's -1 in a board game) arrive on steps where it is
masked out. :func:`turn_transitions` rewrites a group's entries so that an
agent's transition runs from one of its turns to its next one (or to the end of
the episode), summing the rewards in between. It is the single-agent MDP each
agent actually faces, and what one-step off-policy targets need.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from marl.algorithms._groups import GroupInfo

__all__ = ["turn_transitions"]


def turn_transitions(batch: TensorDictBase, info: GroupInfo) -> TensorDictBase:
    """Rewrite a group's transitions of a turn-based ``[*B, T]`` batch, in place.

    For every step ``t`` where agent ``j`` acts (the group's ``"mask"``), with
    ``t'`` its next turn in the same episode:

    - ``("next", g, "reward")`` becomes the sum of its rewards over ``t .. t'-1``
      (or to the episode's end);
    - the group's ``next`` observation, ``action_mask`` and ``mask`` are those of
      step ``t'``;
    - ``("next", g, "done"/"terminated")`` are True when the episode ends first
      (``terminated`` only when the env terminated rather than truncated).

    Turns whose next turn lies beyond the batch are masked out (``mask`` False):
    their target is unknown.

    Args:
        batch: collected data with time last, and the group's ``"mask"``.
        info: the group (``has_agent_mask`` required).

    Returns:
        ``batch``.

    Raises:
        ValueError: when the group has no per-agent ``"mask"``.
    """
    if not info.has_agent_mask:
        raise ValueError(f"group {info.label!r} has no 'mask': cannot tell whose turn it is")
    g = info.name
    # [E, T]: every env batch dim flattened (a copy unless the batch already is 2-d)
    flat = batch if batch.ndim == 2 else batch.reshape(-1, batch.shape[-1])
    acting = flat.get((g, "mask")).bool()  # [E, T, n]
    reward = flat.get(("next", g, "reward"))  # [E, T, n, 1]
    env_done = flat.get(("next", "done")).reshape(*acting.shape[:2], 1)
    env_term = flat.get(("next", "terminated"), env_done).reshape(*acting.shape[:2], 1)
    n_envs, steps, n = acting.shape
    acc = torch.zeros_like(reward[:, 0])
    nxt = torch.full((n_envs, n), -1, dtype=torch.long, device=acting.device)
    ended = torch.zeros((n_envs, n), dtype=torch.bool, device=acting.device)
    term = torch.zeros_like(ended)
    out_reward = torch.zeros_like(reward)
    out_next = torch.full_like(nxt.unsqueeze(1).expand(n_envs, steps, n), -1).clone()
    out_ended = torch.zeros_like(acting)
    out_term = torch.zeros_like(acting)
    for t in range(steps - 1, -1, -1):
        done_t = env_done[:, t].expand(n_envs, n)
        # the episode ends after step t: nothing later belongs to these turns
        acc = torch.where(done_t[..., None], torch.zeros_like(acc), acc)
        nxt = torch.where(done_t, torch.full_like(nxt, -1), nxt)
        ended = ended | done_t
        term = torch.where(done_t, env_term[:, t].expand(n_envs, n), term)
        acc = acc + reward[:, t]
        act = acting[:, t]
        out_reward[:, t] = torch.where(act[..., None], acc, out_reward[:, t])
        out_next[:, t] = torch.where(act, nxt, out_next[:, t])
        out_ended[:, t] = act & ended
        out_term[:, t] = act & ended & term
        # this turn is the next turn of the agent's earlier steps
        acc = torch.where(act[..., None], torch.zeros_like(acc), acc)
        nxt = torch.where(act, torch.full_like(nxt, t), nxt)
        ended = ended & ~act
        term = term & ~act
    valid = acting & (out_ended | (out_next >= 0))
    index = out_next.clamp_min(0)
    for key in ("observation", "action_mask", "mask"):
        if (g, key) not in flat.keys(include_nested=True):
            continue
        x = flat.get((g, key))
        idx = index.reshape(*index.shape, *([1] * (x.ndim - 3))).expand_as(x)
        flat.set(("next", g, key), x.gather(1, idx))
    flat.set(("next", g, "reward"), out_reward)
    flat.set(("next", g, "done"), out_ended.unsqueeze(-1))
    flat.set(("next", g, "terminated"), out_term.unsqueeze(-1))
    flat.set((g, "mask"), valid)
    if flat is not batch:
        batch.update(flat.reshape(batch.shape))
    return batch
