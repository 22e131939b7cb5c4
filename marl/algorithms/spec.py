"""``AlgorithmSpec``: what an algorithm module registers (its config, builder and kind)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from marl.algorithms._groups import GroupInfo
from marl.algorithms.contracts import Learner
from marl.algorithms.value_checks import check_config_values

__all__ = ["RENAMED", "AlgorithmSpec", "ConfigT"]


ConfigT = TypeVar("ConfigT")
"""An algorithm's config dataclass: what its spec makes and its builder reads."""


RENAMED: dict[str, str] = {
    "share_params": "share_policy_params (the actor or Q-network) and share_critic_params "
    "(the critic)",
}
"""Config fields that were renamed, and their new names: an old key is refused with the
new one named, not silently ignored."""


@dataclass(frozen=True)
class AlgorithmSpec(Generic[ConfigT]):
    """A registered algorithm (generic in its config type).

    Attributes:
        name: registry name (``"ppo"``).
        config_cls: its config dataclass.
        builder: ``(GroupInfo, config) -> Learner`` (a
            :class:`~marl.algorithms.contracts.Learner`: builders return
            :class:`GroupLearner`).
        on_policy: whether it learns from the latest batch only.
        action_spaces: the action spaces it serves (``{"continuous", "discrete"}``).
        description: one line.
        compile: whether ``Algorithm.build`` compiles its updates by default
            (``compile=None``); the one place that default is set, per algorithm.
            Off for every algorithm today: on this project's 2-core CPU the compiled
            step did not win 1.2x with under 30 s of warm-up (docs/advanced/compile.md).
    """

    name: str
    config_cls: type[ConfigT]
    builder: Callable[[GroupInfo, ConfigT], Learner]
    on_policy: bool
    action_spaces: frozenset[str]
    description: str = ""
    compile: bool = False

    def make_config(self, config: ConfigT | Mapping[str, Any] | None = None) -> ConfigT:
        """A config instance from ``None`` (defaults), an instance, or a dict of overrides.

        Raises:
            ValueError: for an unknown field (a renamed one with its new name, see
                :data:`RENAMED`), or a value out of its range
                (:func:`~marl.algorithms.value_checks.check_config_values`).

        Examples:
            >>> from marl.algorithms import get_algorithm
            >>> get_algorithm("ppo").make_config({"share_params": False})
            Traceback (most recent call last):
            ...
            ValueError: ppo config: share_params is now share_policy_params (the actor or Q-network) and share_critic_params (the critic)
        """
        if config is None:
            return self.config_cls()
        if isinstance(config, self.config_cls):
            check_config_values(config, self.name)
            return config
        if isinstance(config, Mapping):
            names = {f.name for f in dataclasses.fields(self.config_cls) if f.init}
            unknown = sorted(set(config) - names)
            renamed = [f"{old} is now {RENAMED[old]}" for old in unknown if old in RENAMED]
            if renamed:
                raise ValueError(f"{self.name} config: " + "; ".join(renamed))
            if unknown:
                raise ValueError(
                    f"unknown {self.name} config field(s) {unknown}; valid: {sorted(names)}"
                )
            made = self.config_cls(**config)
            check_config_values(made, self.name)
            return made
        raise TypeError(
            f"{self.name} config must be a {self.config_cls.__name__}, a dict or None, "
            f"got {type(config).__name__}"
        )
