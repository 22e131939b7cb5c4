"""The two sides of a competitive game, and how their actions and data are kept apart.

A :class:`Side` is a set of agents: a whole group (simultaneous games such as
simple_tag: ``"adversary"`` against ``"agent"``), or some agents of one group
(tictactoe's two players sit in one group, ``"player"``: ``("player", [0])`` against
``("player", [1])``). :func:`resolve_sides` checks sides against an env;
:func:`merge_actions` writes one side's actions from another policy's output;
:func:`mask_side` removes a side's rows from a collected batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase

from marl.algorithms import ROOT, GroupInfo

__all__ = ["Side", "SideSpec", "mask_side", "merge_actions", "resolve_sides", "side_values"]


@dataclass(frozen=True)
class Side:
    """A set of agents that play together.

    Attributes:
        group: the group the agents are in.
        agents: their indices in the group, or ``None`` for the whole group.
        label: how reports name the side (``"adversary"``, ``"player[0]"``).
    """

    group: str
    agents: tuple[int, ...] | None = None

    @property
    def label(self) -> str:
        if self.agents is None:
            return self.group
        return f"{self.group}[{','.join(map(str, self.agents))}]"


SideSpec = str | tuple[str, Sequence[int | str]] | Side
"""A group name, ``(group, agent indices or names)``, or a :class:`Side`."""


def resolve_sides(
    specs: Sequence[SideSpec] | None, infos: dict[str, GroupInfo], group_map: Any
) -> tuple[Side, Side]:
    """Check two side specs against an env's groups; ``None`` picks the obvious split.

    ``None``: two groups are the two sides; one group of two agents is split in two.

    Raises:
        ValueError: for a single-agent env, a game that is not split in two sides, a
            side that names an unknown group or agent, sides that overlap or leave
            agents out, or a split group without a per-agent ``"mask"``.
    """
    if ROOT in infos or sum(info.n_agents or 0 for info in infos.values()) < 2:
        raise ValueError(
            f"a league needs a game of at least two agents in two sides; this env has "
            f"{'a single agent' if ROOT in infos else f'groups {dict(group_map)}'}"
        )
    if specs is None:
        if len(infos) == 2:
            specs = list(infos)
        elif len(infos) == 1 and next(iter(infos.values())).n_agents == 2:
            group = next(iter(infos))
            specs = [(group, [0]), (group, [1])]
        else:
            raise ValueError(
                f"cannot guess the two sides of groups {dict(group_map)}: give sides=, e.g. "
                f"sides=[{next(iter(infos))!r}, ...] or [(group, [agent indices]), ...]"
            )
    specs = list(specs)
    if len(specs) != 2:
        raise ValueError(
            f"a league plays two sides against each other, got {len(specs)} sides: {specs}"
        )
    sides = tuple(_resolve(spec, infos, group_map) for spec in specs)
    for side in sides:
        if side.agents is not None and not infos[side.group].has_agent_mask:
            raise ValueError(
                f"side {side.label!r} splits group {side.group!r}, which needs the env's "
                f"per-agent (group, 'mask') to keep the opponent's rows out of the losses "
                f"(turn-based PettingZoo envs have it); give whole groups as sides instead"
            )
    covered: dict[str, set[int]] = {}
    for side in sides:
        n = infos[side.group].n_agents or 0
        agents = set(range(n) if side.agents is None else side.agents)
        if covered.get(side.group, set()) & agents:
            raise ValueError(
                f"sides {[s.label for s in sides]} share agents of group {side.group!r}"
            )
        covered.setdefault(side.group, set()).update(agents)
    left = {
        g: sorted(set(range(info.n_agents or 0)) - covered.get(g, set()))
        for g, info in infos.items()
    }
    left = {g: idx for g, idx in left.items() if idx}
    if left:
        raise ValueError(
            "every agent must play on one side; not on any: "
            + ", ".join(f"{g} {[group_map[g][i] for i in idx]}" for g, idx in left.items())
        )
    return sides  # type: ignore[return-value]


def _resolve(spec: SideSpec, infos: dict[str, GroupInfo], group_map: Any) -> Side:
    if isinstance(spec, Side):
        group, agents = spec.group, spec.agents
    elif isinstance(spec, str):
        group, agents = spec, None
    elif isinstance(spec, tuple | list) and len(spec) == 2 and isinstance(spec[0], str):
        group, agents = spec[0], spec[1]
    else:
        raise ValueError(
            f"a side is a group name or (group, [agent indices or names]), got {spec!r}"
        )
    if group not in infos:
        raise ValueError(f"side {spec!r}: no group {group!r}; the env's groups are {sorted(infos)}")
    if agents is None:
        return Side(group)
    names = list(group_map[group])
    resolved = []
    for agent in agents:
        if isinstance(agent, str) and agent in names:
            resolved.append(names.index(agent))
        elif isinstance(agent, int) and not isinstance(agent, bool) and 0 <= agent < len(names):
            resolved.append(agent)
        else:
            raise ValueError(
                f"side {spec!r}: no agent {agent!r} in group {group!r}, which has agents "
                f"{names} (indices 0..{len(names) - 1})"
            )
    if not resolved or len(set(resolved)) != len(resolved):
        raise ValueError(f"side {spec!r}: give one or more distinct agents")
    return Side(group, tuple(sorted(resolved)))


def merge_actions(td: TensorDictBase, other: TensorDictBase, side: Side) -> TensorDictBase:
    """Write ``side``'s actions from ``other`` (another policy's output) into ``td``, in place."""
    key = (side.group, "action")
    if side.agents is None:
        td.set(key, other.get(key))
        return td
    action = td.get(key).clone()
    dim = td.batch_dims  # the agent dim follows the env batch dims
    index = torch.tensor(side.agents, device=action.device)
    action.index_copy_(dim, index, other.get(key).index_select(dim, index))
    td.set(key, action)
    return td


def mask_side(batch: TensorDictBase, side: Side) -> TensorDictBase:
    """Mark ``side``'s agents as not acting in a collected batch, in place.

    Sets ``(group, "mask")`` (and ``("next", group, "mask")``) False for the side's
    agents: every algorithm's loss leaves masked-out agents out of its terms.
    """
    keys = batch.keys(include_nested=True)
    for key in ((side.group, "mask"), ("next", side.group, "mask")):
        if key not in keys:
            continue
        mask = batch.get(key).clone()
        index = torch.tensor(side.agents, device=mask.device)
        mask.index_fill_(batch.batch_dims, index, False)
        batch.set(key, mask)
    return batch


def side_values(values: torch.Tensor, side: Side, batch_dims: int) -> torch.Tensor:
    """The mean over ``side``'s agents of per-agent ``values`` ``[*B, n_g, 1]``: ``[*B]``."""
    if side.agents is not None:
        index = torch.tensor(side.agents, device=values.device)
        values = values.index_select(batch_dims, index)
    return values.float().reshape(*values.shape[:batch_dims], -1).mean(-1)
