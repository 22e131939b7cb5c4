"""``AlgorithmSpec``: what an algorithm module registers (its config, builder and kind)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar

from marl.algorithms._groups import GroupInfo
from marl.algorithms._networks import NETWORKS, group_refusal
from marl.algorithms.contracts import Learner
from marl.algorithms.settings import RECURRENT_BODIES, NetworkSettings
from marl.algorithms.value_checks import check_config_values

__all__ = [
    "NOT_RECURRENT",
    "OFF_POLICY_NOT_RECURRENT",
    "RENAMED",
    "AlgorithmConfig",
    "AlgorithmSpec",
    "Builder",
    "ConfigT",
    "check_network",
    "policy_gradient_spec",
    "pqn_spec",
    "q_learning_spec",
    "recurrent_refusals",
    "replay_actor_critic_spec",
]


ConfigT = TypeVar("ConfigT")
"""An algorithm's config dataclass: what its spec makes and its builder reads."""

AlgorithmConfig: TypeAlias = "object | Mapping[str, object] | None"
"""What an algorithm is configured with: ``None`` (its defaults), an instance of its
``config_cls``, or a mapping of overrides (the command line's ``algorithm`` node)."""


RENAMED: dict[str, str] = {
    "share_params": "share_policy_params (the actor or Q-network) and share_critic_params "
    "(the critic)",
}
"""Config fields that were renamed, and their new names: an old key is refused with the
new one named, not silently ignored."""


NOT_RECURRENT = (
    "a recurrent body (gru, lstm) trains on sequences unrolled from stored hidden states; "
    "this algorithm's builder trains on single steps"
)
"""Why an algorithm that says nothing about recurrent bodies refuses them."""

OFF_POLICY_NOT_RECURRENT = (
    "an off-policy actor-critic replays single transitions, and its critic's target reads "
    "the actor's action at the next step; a recurrent actor would need both networks "
    "unrolled over replayed sequences from stored states, which is built for the "
    "Q-learners (dqn, iql, vdn, qmix) only"
)
"""Why DDPG, TD3, SAC and their multi-agent forms refuse recurrent bodies."""


def recurrent_refusals(why: str) -> dict[str, str]:
    """``{"gru": why, "lstm": why}``: an algorithm's refusal of the recurrent bodies."""
    return dict.fromkeys(RECURRENT_BODIES, why)


@dataclass(frozen=True)
class AlgorithmSpec(Generic[ConfigT]):
    """A registered algorithm (generic in its config type).

    Attributes:
        name: registry name (``"ppo"``).
        config_cls: its config dataclass.
        builder: ``(info, config) -> Learner``: given one group (its
            :class:`~marl.algorithms.GroupInfo`) and the config (an instance of
            ``config_cls``), the group's learner (a
            :class:`~marl.algorithms.contracts.Learner`: builders return
            :class:`GroupLearner`). Every ``build_<name>`` function follows this
            contract; their docstrings say only what they build.
        on_policy: whether it learns from the latest batch only.
        action_spaces: the action spaces it serves (``{"continuous", "discrete"}``).
        description: one line.
        compile: whether ``Algorithm.build`` compiles its updates by default
            (``compile=None``); the one place that default is set, per algorithm.
            Off for every algorithm today: on this project's 2-core CPU the compiled
            step did not win 1.2x with under 30 s of warm-up (docs/advanced/compile.md).
        network_refusals: the network bodies (``model.network``) it cannot take whatever
            the env, each with why: the one place an algorithm says which models it takes
            (``docs/basic/models.md`` prints the table). Default: every body but the
            recurrent ones (:data:`NOT_RECURRENT`); an algorithm whose builder trains on
            sequences gives ``{}``.
    """

    name: str
    config_cls: type[ConfigT]
    builder: Callable[[GroupInfo, ConfigT], Learner]
    on_policy: bool
    action_spaces: frozenset[str]
    description: str = ""
    compile: bool = False
    network_refusals: Mapping[str, str] = field(
        default_factory=lambda: recurrent_refusals(NOT_RECURRENT)
    )

    def network_refusal(self, network: str) -> str | None:
        """Why this algorithm cannot take ``network`` whatever the env, or ``None``.

        Examples:
            >>> from marl.algorithms import get_algorithm
            >>> get_algorithm("mappo").network_refusal("gnn") is None
            True
            >>> get_algorithm("ddpg").network_refusal("gru").startswith("an off-policy")
            True
        """
        if network not in NETWORKS:
            return f"unknown network {network!r}; expected one of {list(NETWORKS)}"
        return self.network_refusals.get(network)

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


Builder: TypeAlias = "Callable[[GroupInfo, ConfigT], Learner]"
"""``(info, config) -> Learner``: what an algorithm module's ``build_<name>`` is."""

_BOTH_SPACES = frozenset({"continuous", "discrete"})


def _family_spec(
    name: str,
    config_cls: type[ConfigT],
    builder: Builder,
    description: str,
    on_policy: bool,
    action_spaces: frozenset[str],
    refusals: Mapping[str, str],
) -> AlgorithmSpec[ConfigT]:
    # the one call the family helpers below share: each fixes what its family has in common
    return AlgorithmSpec(
        name=name,
        config_cls=config_cls,
        builder=builder,
        on_policy=on_policy,
        action_spaces=action_spaces,
        description=description,
        network_refusals=dict(refusals),
    )


def policy_gradient_spec(
    name: str,
    config_cls: type[ConfigT],
    builder: Builder,
    description: str,
    *,
    network_refusals: Mapping[str, str] | None = None,
) -> AlgorithmSpec[ConfigT]:
    """The :class:`AlgorithmSpec` of an on-policy actor-critic on ``build_ppo``'s assembly
    (PPO, A2C, IPPO, MAPPO, HAPPO, MAT): both action spaces, and every body, the recurrent
    ones too (its builder trains them on sequences), but those ``network_refusals`` names."""
    refusals = network_refusals or {}
    return _family_spec(name, config_cls, builder, description, True, _BOTH_SPACES, refusals)


def q_learning_spec(
    name: str, config_cls: type[ConfigT], builder: Builder, description: str
) -> AlgorithmSpec[ConfigT]:
    """The :class:`AlgorithmSpec` of a replay Q-learner on ``build_dqn`` (DQN, IQL, VDN,
    QMIX): discrete actions, and every body, the recurrent ones too (its builder trains them
    on replayed slices)."""
    discrete = frozenset({"discrete"})
    return _family_spec(name, config_cls, builder, description, False, discrete, {})


def pqn_spec(
    name: str, config_cls: type[ConfigT], builder: Builder, description: str
) -> AlgorithmSpec[ConfigT]:
    """The :class:`AlgorithmSpec` of a parallel Q-learner on ``pqn_learner`` (PQN,
    PQN-VDN): on-policy, discrete actions, and no recurrent body (it trains on single steps
    of the collected batch)."""
    why = (
        f"{name} trains on single steps of the collected batch (lambda-returns, no replay); "
        "sequence training is not built for it"
    )
    discrete = frozenset({"discrete"})
    return _family_spec(
        name, config_cls, builder, description, True, discrete, recurrent_refusals(why)
    )


def replay_actor_critic_spec(
    name: str, config_cls: type[ConfigT], builder: Builder, description: str, *, continuous: bool
) -> AlgorithmSpec[ConfigT]:
    """The :class:`AlgorithmSpec` of an off-policy actor-critic on ``build_ddpg`` or
    ``build_sac`` (DDPG, TD3, SAC and their multi-agent forms): continuous actions only
    (``continuous``, the DDPGs') or both, and no recurrent body
    (:data:`OFF_POLICY_NOT_RECURRENT`)."""
    spaces = frozenset({"continuous"}) if continuous else _BOTH_SPACES
    refusals = recurrent_refusals(OFF_POLICY_NOT_RECURRENT)
    return _family_spec(name, config_cls, builder, description, False, spaces, refusals)


def check_network(algorithm: AlgorithmSpec, info: GroupInfo, config: object) -> None:
    """Refuse a network body that cannot work for ``algorithm`` on this group.

    Args:
        algorithm: the algorithm (its :meth:`~AlgorithmSpec.network_refusal`: the bodies
            it never takes).
        info: the group.
        config: the algorithm config; its ``network`` field names the body (a config
            without :class:`~marl.algorithms.settings.NetworkSettings` takes none, and is
            not checked).

    Raises:
        ValueError: naming the algorithm, the network, the group and why.

    Examples:
        >>> from marl.algorithms import get_algorithm
        >>> from marl.algorithms.base import group_infos
        >>> from marl.algorithms.ppo import PPOConfig
        >>> from marl.testing import SingleAgentFakeEnv
        >>> info = group_infos(SingleAgentFakeEnv(num_envs=2))["root"]
        >>> check_network(get_algorithm("ppo"), info, PPOConfig(network="gnn"))
        Traceback (most recent call last):
        ...
        ValueError: algorithm 'ppo' cannot use network 'gnn' for group 'root': a single-agent env (its root group) has no agents to pass messages between: use mlp
    """
    if not isinstance(config, NetworkSettings):
        return
    network = config.network
    why = algorithm.network_refusal(network) or group_refusal(info, network, config)
    if why is not None:
        raise ValueError(
            f"algorithm {algorithm.name!r} cannot use network {network!r} for group "
            f"{info.label!r}: {why}"
        )
