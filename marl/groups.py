"""Agent groups: which agents are stacked together.

A :class:`GroupMap` is an ordered mapping ``group name -> list of agent names``.
Agents in one group are stacked along an agent dimension (their data is
vectorized); agents in different groups keep separate TensorDict entries, so
they may have different observation and action shapes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

_SUFFIX = re.compile(r"^(?P<prefix>.+)_(?P<index>\d+)$")

__all__ = ["RESERVED_GROUP_NAMES", "GroupMap", "GroupMapLike"]

#: Names a group may not take: a group's entries live under its name at the
#: root of every TensorDict, so these would collide with the root keys of the
#: layout (docs/design.md) and with the root keys the built-in transforms,
#: replay buffers and collectors write.
RESERVED_GROUP_NAMES: frozenset[str] = frozenset(
    {
        # the layout of docs/design.md
        "next",
        "observation",
        "action",
        "action_mask",
        "reward",
        "done",
        "terminated",
        "truncated",
        "state",
        "episode_reward",
        "_reset",
        # root keys written by the built-in transforms, buffers and collectors
        "step_count",
        "is_init",
        "index",
        "priority_weight",
        "collector",
    }
)


class GroupMap(Mapping[str, list[str]]):
    """An ordered, validated ``dict[str, list[str]]`` from group names to agents.

    Args:
        mapping: group name -> agent names. Every agent may appear in one group
            only and no group may be empty.
        agents: when given, the full list of agents the map must cover; an
            agent missing from the map, or a name not in ``agents``, raises.

    Raises:
        ValueError: on an empty group, an agent in two groups, an agent that
            is missing, an unknown agent, or a reserved group name (see
            :data:`RESERVED_GROUP_NAMES`). The message names the culprit.

    Examples:
        >>> gm = GroupMap({"red": ["a_0", "a_1"], "blue": ["b_0"]})
        >>> gm["red"]
        ['a_0', 'a_1']
        >>> gm.group_of("b_0")
        'blue'
        >>> GroupMap.by_prefix(["adversary_0", "adversary_1", "agent_0"])
        GroupMap({'adversary': ['adversary_0', 'adversary_1'], 'agent': ['agent_0']})
    """

    def __init__(
        self, mapping: Mapping[str, Sequence[str]], agents: Sequence[str] | None = None
    ) -> None:
        if isinstance(mapping, GroupMap):
            mapping = mapping._groups
        if not isinstance(mapping, Mapping):
            raise TypeError(
                f"GroupMap expects a mapping group -> list of agents, got {type(mapping).__name__}"
            )
        groups: dict[str, list[str]] = {}
        for name, members in mapping.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"group names must be non-empty strings, got {name!r}")
            if name in RESERVED_GROUP_NAMES:
                raise ValueError(
                    f"group name {name!r} is reserved: a group's keys live at the root of the "
                    f"TensorDict, where {name!r} is already a key. Reserved names: "
                    f"{sorted(RESERVED_GROUP_NAMES)}"
                )
            if isinstance(members, str) or not isinstance(members, Iterable):
                raise ValueError(
                    f"group {name!r} must map to a list of agent names, got {members!r}"
                )
            groups[name] = list(members)
        self._groups = groups
        self.validate(agents)

    # ----------------------------------------------------------- constructors
    @classmethod
    def all_in_one(cls, agents: Sequence[str], name: str = "agents") -> GroupMap:
        """Put every agent in a single group called ``name``."""
        return cls({name: list(agents)}, agents)

    @classmethod
    def one_per_agent(cls, agents: Sequence[str]) -> GroupMap:
        """Put each agent in its own group, named after the agent."""
        return cls({a: [a] for a in agents}, agents)

    @classmethod
    def by_prefix(cls, agents: Sequence[str]) -> GroupMap:
        """Group agents by the name before their ``_<int>`` suffix.

        ``"adversary_0"`` goes to ``"adversary"``; a name without a numeric
        suffix is its own group. Groups keep the order of first appearance.
        """
        groups: dict[str, list[str]] = {}
        for agent in agents:
            match = _SUFFIX.match(agent)
            prefix = match.group("prefix") if match else agent
            groups.setdefault(prefix, []).append(agent)
        return cls(groups, agents)

    @classmethod
    def build(cls, spec: GroupMapLike | None, agents: Sequence[str]) -> GroupMap:
        """Make a map from what a wrapper's ``group_map=`` argument accepts.

        Args:
            spec: ``None`` (``by_prefix``), a constructor name
                (``"all_in_one"``, ``"one_per_agent"``, ``"by_prefix"``), a
                ``GroupMap`` or a plain dict.
            agents: the env's agents; the map must cover exactly these.

        Raises:
            ValueError: as :class:`GroupMap`; for a reserved group name made from
                the agents' names, the message says to pass a dict with other names.
        """
        try:
            return cls._build(spec, agents)
        except ValueError as err:
            if "is reserved" not in str(err) or isinstance(spec, Mapping):
                raise
            raise ValueError(
                f"{err}. The agents {list(agents)} give this group name with group_map="
                f"{spec or 'by_prefix'!r}: pass group_map={{<new name>: [<agents>], ...}} instead"
            ) from None

    @classmethod
    def _build(cls, spec: GroupMapLike | None, agents: Sequence[str]) -> GroupMap:
        if spec is None:
            return cls.by_prefix(agents)
        if isinstance(spec, str):
            constructors = {
                "all_in_one": cls.all_in_one,
                "one_per_agent": cls.one_per_agent,
                "by_prefix": cls.by_prefix,
            }
            if spec not in constructors:
                raise ValueError(
                    f"unknown group map constructor {spec!r}; expected one of {sorted(constructors)}"
                )
            return constructors[spec](agents)
        return cls(spec, agents)

    # ------------------------------------------------------------- validation
    def validate(self, agents: Sequence[str] | None = None) -> GroupMap:
        """Check the map, optionally against the env's full agent list.

        Returns:
            ``self``, so that calls can be chained.
        """
        seen: dict[str, str] = {}
        for group, members in self._groups.items():
            if not members:
                raise ValueError(f"group {group!r} is empty; every group needs at least one agent")
            for agent in members:
                if not isinstance(agent, str):
                    raise ValueError(
                        f"agent names must be strings, got {agent!r} in group {group!r}"
                    )
                if agent in seen:
                    where = (
                        f"groups {seen[agent]!r} and {group!r}"
                        if seen[agent] != group
                        else f"group {group!r} twice"
                    )
                    raise ValueError(
                        f"agent {agent!r} is in {where}; an agent belongs to one group"
                    )
                seen[agent] = group
        if agents is not None:
            known = set(agents)
            unknown = [a for a in seen if a not in known]
            if unknown:
                raise ValueError(
                    f"unknown agent {unknown[0]!r} in group {seen[unknown[0]]!r}; "
                    f"the env's agents are {list(agents)}"
                )
            missing = [a for a in agents if a not in seen]
            if missing:
                raise ValueError(
                    f"agent {missing[0]!r} is in no group; every agent must be in exactly one "
                    f"(missing: {missing})"
                )
        return self

    # ---------------------------------------------------------------- queries
    def group_of(self, agent: str) -> str:
        """The group that holds ``agent``."""
        for group, members in self._groups.items():
            if agent in members:
                return group
        raise KeyError(f"agent {agent!r} is in no group of {self!r}")

    @property
    def agents(self) -> list[str]:
        """All agents, group by group, in order."""
        return [a for members in self._groups.values() for a in members]

    def to_dict(self) -> dict[str, list[str]]:
        """A plain copy, e.g. for configs and logs."""
        return {g: list(m) for g, m in self._groups.items()}

    def __getitem__(self, group: str) -> list[str]:
        return self._groups[group]

    def __iter__(self) -> Iterator[str]:
        return iter(self._groups)

    def __len__(self) -> int:
        return len(self._groups)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GroupMap):
            return self._groups == other._groups
        if isinstance(other, Mapping):
            return self._groups == {k: list(v) for k, v in other.items()}
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple((g, tuple(m)) for g, m in self._groups.items()))

    def __repr__(self) -> str:
        return f"GroupMap({self._groups!r})"


GroupMapLike = GroupMap | Mapping[str, Sequence[str]] | str
