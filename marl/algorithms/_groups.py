"""What a builder knows about a group: :class:`GroupInfo`, read from an env by :func:`group_infos`.

A single-agent env is one group, :data:`ROOT`, whose keys have no group prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from tensordict.utils import NestedKey

from marl.envs.common import EnvBase
from marl.specs import Binary, Categorical, Composite, MultiCategorical, OneHot

if TYPE_CHECKING:  # updates imports this module: a runtime import would be circular
    from marl.algorithms.updates.sync import GradientSync

__all__ = ["ROOT", "GroupInfo", "group_infos"]

ROOT = "root"
"""The label of the single group of a single-agent env (its keys have no prefix)."""


@dataclass(frozen=True)
class GroupInfo:
    """What a builder needs to know about one group of an env.

    Attributes:
        name: the group name, or ``None`` for the root of a single-agent env.
        n_agents: agents in the group (``None`` for the root).
        batch_dims: number of env batch dims (``len(env.batch_size)``).
        observation_spec: the group's ``observation`` spec (a leaf or a ``Composite``).
        action_spec: the group's ``action`` spec.
        action_space: ``"continuous"`` or ``"discrete"``.
        has_action_mask: whether the env writes ``action_mask`` for the group.
        done_prefix: where the group's done flags live: the group (per-agent flags) or
            ``()`` (env-level flags).
        device: the env's device.
        env_observation_spec: every observation of the env (for critics spanning groups).
        groups: every group's name, in order (``()`` for a single-agent env).
        has_agent_mask: whether the env writes the per-agent ``(group, "mask")``
            (PettingZoo: False for agents that left the episode or are not acting);
            masked-out agents are excluded from the losses.
        turn_based: whether the env plays one agent's move per step (PettingZoo AEC);
            off-policy learners then rebuild each agent's transitions turn to turn.
        compile: whether the learner compiles its loss and backward
            (``Algorithm.build(env, compile=True)``; see ``marl.algorithms._compile``).
        gradient_sync: averages the gradients over data-parallel ranks before every
            optimizer step (``Algorithm.build(env, gradient_sync=...)``; see
            :class:`marl.algorithms.updates.GradientSync`); ``None``: one process.
    """

    name: str | None
    n_agents: int | None
    batch_dims: int
    observation_spec: Any
    action_spec: Any
    action_space: str
    has_action_mask: bool
    done_prefix: tuple[str, ...]
    device: torch.device
    env_observation_spec: Any = None
    groups: tuple[str, ...] = ()
    has_agent_mask: bool = False
    turn_based: bool = False
    compile: bool = False
    gradient_sync: GradientSync | None = None

    @property
    def has_state(self) -> bool:
        """Whether the env has a global ``"state"`` observation."""
        spec = self.env_observation_spec
        return spec is not None and "state" in spec.keys()

    @property
    def label(self) -> str:
        """The group's name, or ``"root"`` for a single-agent env."""
        return ROOT if self.name is None else self.name

    @property
    def prefix(self) -> tuple[str, ...]:
        """The key prefix of the group's entries: ``(name,)``, or ``()`` for the root."""
        return () if self.name is None else (self.name,)

    def key(self, *name: str) -> NestedKey:
        """The group's entry ``name``: ``(group, *name)``, or ``name`` at the root."""
        full = (*self.prefix, *name)
        return full[0] if len(full) == 1 else full

    def next_key(self, *name: str) -> tuple[str, ...]:
        """The group's entry under ``"next"``."""
        return ("next", *self.prefix, *name)

    def done_key(self, flag: str = "done") -> tuple[str, ...]:
        """``("next", *done_prefix, flag)``: per-agent flags where the env has them."""
        return ("next", *self.done_prefix, flag)

    @property
    def feature_dims(self) -> int:
        """Leading dims of a group entry before its features: env batch (+ agent)."""
        return self.batch_dims + (0 if self.name is None else 1)

    @property
    def action_shape(self) -> torch.Size:
        """The per-agent action shape (without env batch and agent dims)."""
        return self.action_spec.shape[self.feature_dims :]

    @property
    def n_actions(self) -> int:
        """The number of discrete choices."""
        if self.action_space != "discrete":
            raise ValueError(f"group {self.label!r} has continuous actions, not a choice count")
        return int(getattr(self.action_spec, "n", None) or self.action_spec.shape[-1])

    def loss_keys(self) -> dict[str, NestedKey]:
        """The keys a loss reads for this group, for ``LossModule.set_keys``.

        With a per-agent ``"mask"``, also ``agent_mask``: a loss with per-agent terms
        weights masked-out agents out of them (and of its advantage standardization).
        """
        keys: dict[str, NestedKey] = {
            "action": self.key("action"),
            "reward": self.next_key("reward"),
            "done": self.done_key("done"),
            "terminated": self.done_key("terminated"),
        }
        if self.has_agent_mask:
            keys["agent_mask"] = self.key("mask")
        return keys


def _action_space(spec: Any) -> str:
    if isinstance(spec, (Categorical, OneHot, MultiCategorical, Binary)):
        return "discrete"
    if spec.dtype.is_floating_point:
        return "continuous"
    raise TypeError(f"cannot tell the action space of {type(spec).__name__} ({spec.dtype})")


def _nested(key: tuple[str, ...]) -> NestedKey:
    return key[0] if len(key) == 1 else key


def group_infos(env: EnvBase, device: torch.device | str | None = None) -> dict[str, GroupInfo]:
    """Describe every group of ``env`` (or its root, for a single-agent env).

    Args:
        env: the env to train on.
        device: where the group's networks will live (default: the env's device).

    Returns:
        ``{label: GroupInfo}``, in the env's group order.

    Raises:
        ValueError: when an action key is neither ``"action"`` nor ``(group, "action")``.

    Examples:
        >>> from marl.testing import MultiAgentFakeEnv
        >>> infos = group_infos(MultiAgentFakeEnv(num_envs=2))
        >>> {k: (v.n_agents, v.action_space) for k, v in infos.items()}
        {'walker': (2, 'continuous'), 'picker': (3, 'discrete')}
    """
    keys = list(env.action_keys)
    names: list[str | None] = []
    for key in keys:
        if key == "action":
            names.append(None)
        elif isinstance(key, tuple) and len(key) == 2 and key[1] == "action":
            names.append(key[0])
        else:
            raise ValueError(
                f"unsupported action key {key!r}: expected 'action' (single-agent) or "
                "(group, 'action')"
            )
    if None in names and len(names) > 1:
        raise ValueError(f"an env cannot mix a root action with group actions, got {keys}")
    done_keys = set(env.done_keys)
    obs_spec: Composite = env.observation_spec
    groups = tuple(n for n in names if n is not None)
    infos: dict[str, GroupInfo] = {}
    for name, key in zip(names, keys):
        prefix = () if name is None else (name,)
        obs_key = _nested((*prefix, "observation"))
        if obs_key not in obs_spec.keys(include_nested=True):
            raise KeyError(f"the env has no observation at {obs_key} for action {key!r}")
        mask_key = _nested((*prefix, "action_mask"))
        action_spec = env.action_spec[key]
        info = GroupInfo(
            name=name,
            n_agents=None if name is None else int(obs_spec[obs_key].shape[len(env.batch_size)]),
            batch_dims=len(env.batch_size),
            observation_spec=obs_spec[obs_key],
            action_spec=action_spec,
            action_space=_action_space(action_spec),
            has_action_mask=mask_key in obs_spec.keys(include_nested=True),
            done_prefix=prefix if _nested((*prefix, "done")) in done_keys else (),
            device=torch.device(device) if device is not None else env.device,
            env_observation_spec=obs_spec,
            groups=groups,
            has_agent_mask=name is not None
            and _nested((*prefix, "mask")) in obs_spec.keys(include_nested=True),
            # declared by the env (PettingZoo's AEC games), through transforms and batches
            turn_based=name is not None and bool(env.turn_based),
        )
        infos[info.label] = info
    return infos
