"""``Algorithm``: one learner per agent group, built from registered algorithms.

An :class:`Algorithm` holds one :class:`GroupLearner` per agent group (a
single-agent env counts as one group, ``"root"``, whose keys have no group
prefix). Each algorithm module contributes an :class:`AlgorithmSpec`: a config
dataclass, the action spaces it serves, whether it is on-policy, and a builder
``(GroupInfo, config) -> GroupLearner``. Different groups may use different
algorithms, because learners never look at each other's keys. ``GroupInfo`` (what
a builder knows about its group) lives in ``marl.algorithms._groups``,
:class:`GroupLearner` in :mod:`marl.algorithms.learner` and :class:`AlgorithmSpec` in
:mod:`marl.algorithms.spec` (both importable from here too).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import torch
from tensordict import TensorDictBase
from tensordict.nn import (
    InteractionType,
    TensorDictSequential,
    set_interaction_type,
)
from torch import nn

from marl.algorithms._groups import ROOT, GroupInfo, group_infos
from marl.algorithms.contracts import (
    JointUpdater,
    Learner,
)
from marl.algorithms.learner import GroupLearner
from marl.algorithms.spec import AlgorithmConfig, AlgorithmSpec, check_network
from marl.algorithms.updates.sync import GradientSync
from marl.envs.common import EnvBase

__all__ = [
    "ROOT",
    "Algorithm",
    "AlgorithmSpec",
    "GroupInfo",
    "GroupLearner",
    "group_infos",
]


class _Deterministic(nn.Module):
    """Runs a policy under ``InteractionType.DETERMINISTIC`` (mode, no exploration)."""

    def __init__(self, policy: nn.Module) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        with set_interaction_type(InteractionType.DETERMINISTIC):
            return self.policy(td)


class Algorithm(nn.Module):
    """One learner per group, built from registered algorithms.

    Args:
        algorithm: a registered name (every group uses it), an :class:`AlgorithmSpec`,
            or ``{group: name}`` to train groups with different algorithms.
        config: the algorithm's config dataclass or a dict of overrides (applied to every
            group); with a per-group ``algorithm``, a ``{group: config}`` mapping.

    Examples:
        >>> from marl.algorithms import Algorithm
        >>> from marl.testing import MultiAgentFakeEnv
        >>> algo = Algorithm("ppo").build(MultiAgentFakeEnv(num_envs=2))
        >>> sorted(algo.learners)
        ['picker', 'walker']
    """

    def __init__(
        self,
        algorithm: str | AlgorithmSpec | Mapping[str, str | AlgorithmSpec],
        config: AlgorithmConfig | Mapping[str, AlgorithmConfig] = None,
    ) -> None:
        super().__init__()
        self._algorithm = algorithm
        self._config = config
        self.learners = nn.ModuleDict()
        self._policy: TensorDictSequential | None = None
        self.device = torch.device("cpu")

    @property
    def choice(self) -> str | AlgorithmSpec | Mapping[str, str | AlgorithmSpec]:
        """The ``algorithm`` argument as given: a name, a spec, or ``{group: name}``."""
        return self._algorithm

    @property
    def config(self) -> AlgorithmConfig | Mapping[str, AlgorithmConfig]:
        """The ``config`` argument as given (``None``, a config, overrides, or per group)."""
        return self._config

    @property
    def compiled(self) -> bool:
        """Whether :meth:`build` compiled the collection policy (any learner compiled)."""
        return self.built and any(lr.info.compile for _, lr in self.group_learners())

    @property
    def built(self) -> bool:
        """Whether :meth:`build` has run."""
        return self._policy is not None

    def _spec_and_config(self, label: str) -> tuple[AlgorithmSpec, AlgorithmConfig]:
        from marl.algorithms import get_algorithm

        algo, config = self._algorithm, self._config
        if isinstance(algo, Mapping):
            if label not in algo:
                raise KeyError(
                    f"no algorithm given for group {label!r}; groups given: {sorted(algo)}"
                )
            if config is not None and not isinstance(config, Mapping):
                raise TypeError(
                    "with one algorithm per group, config must be {group: config}, got "
                    f"{type(config).__name__}"
                )
            algo = algo[label]
            config = None if config is None else config.get(label)
        spec = algo if isinstance(algo, AlgorithmSpec) else get_algorithm(algo)
        return spec, spec.make_config(config)

    def build(
        self,
        env: EnvBase,
        seed: int | None = None,
        device: torch.device | str | None = None,
        *,
        compile: bool | None = None,
        gradient_sync: GradientSync | None = None,
    ) -> Algorithm:
        """Build every group's learner for ``env``.

        Args:
            env: the training env (only its specs are read).
            seed: seeds torch's global generator before the networks are drawn.
            device: where the networks train (default: the env's device); collected
                batches are moved there by :meth:`process_batch`.
            compile: compile each learner's loss and backward and the collection
                policy with ``torch.compile`` (``None``: each algorithm's default,
                :attr:`AlgorithmSpec.compile`). See ``marl.algorithms._compile``.
            gradient_sync: data-parallel training over ``torch.distributed`` ranks
                (:class:`~marl.algorithms.updates.GradientSync`): every learner's
                optimizer steps average their gradients over the ranks first, and the
                built learners' parameters and buffers (policies, critics, target
                networks, exploration schedules) are copied from rank 0 to every rank,
                so the ranks start, and stay, equal. Each rank collects and trains on
                its own share of the data. ``None``: one process.

        Returns:
            ``self``.

        Raises:
            ValueError: when an algorithm cannot serve a group's action space (the
                message names both), when its config's ``network`` cannot work for a
                group (the message names the algorithm, the network, the group and why:
                see ``marl.algorithms._networks.check_network``), or when a per-group
                mapping names unknown groups.
        """
        if seed is not None:
            torch.manual_seed(seed)
        self.device = torch.device(device) if device is not None else env.device
        infos = group_infos(env, device=self.device)
        if isinstance(self._algorithm, Mapping):
            unknown = sorted(set(self._algorithm) - set(infos))
            if unknown:
                raise ValueError(
                    f"algorithm given for unknown group(s) {unknown}; env groups: {sorted(infos)}"
                )
        if compile is not None and not isinstance(compile, bool):
            raise TypeError(f"compile must be True, False or None, got {compile!r}")
        if gradient_sync is not None and not isinstance(gradient_sync, GradientSync):
            raise TypeError(
                f"gradient_sync must be a GradientSync or None, got {type(gradient_sync).__name__}"
            )
        learners = {}
        for label, info in infos.items():
            spec, config = self._spec_and_config(label)
            info = dataclasses.replace(
                info,
                compile=spec.compile if compile is None else compile,
                gradient_sync=gradient_sync,
            )
            if info.action_space not in spec.action_spaces:
                raise ValueError(
                    f"algorithm {spec.name!r} supports {sorted(spec.action_spaces)} actions, "
                    f"but group {label!r} has {info.action_space} actions "
                    f"({type(info.action_spec).__name__})"
                )
            check_network(spec, info, config)
            learners[label] = spec.builder(info, config)
        self.learners = nn.ModuleDict(learners)
        if gradient_sync is not None:
            # ranks may have drawn different networks (seeds, or none): rank 0's win
            for learner in learners.values():
                gradient_sync.broadcast_(learner)
        self._policy = TensorDictSequential(*[lr.policy for lr in learners.values()])
        if any(lr.info.compile for lr in learners.values()):
            # in place: the policy keeps its state_dict, and the learners' own modules
            # (which the policy shares) stay as they are
            self._policy.compile(dynamic=False)
        return self

    def _check_built(self) -> None:
        if not self.built:
            raise RuntimeError("call Algorithm.build(env) first")

    def group_learners(self) -> Iterator[tuple[str, Learner]]:
        """``(group label, learner)`` pairs, in the env's group order.

        Typed by the :class:`~marl.algorithms.contracts.Learner` contract, the only
        thing ``Algorithm`` relies on (``check_learner`` checks it of every built-in).
        """
        for label, learner in self.learners.items():
            yield label, cast(Learner, learner)

    @property
    def on_policy(self) -> bool:
        """True when every learner is on-policy."""
        self._check_built()
        return all(lr.updater.on_policy for _, lr in self.group_learners())

    @property
    def recurrent(self) -> bool:
        """True when a group's policy keeps a hidden state in the data (``gru``/``lstm``).

        Such a policy reads the root ``"is_init"`` flag to reset it: its env needs an
        :class:`~marl.envs.InitTracker` (the :class:`~marl.algorithms.trainer.Trainer`
        checks it).
        """
        from marl.algorithms._recurrent import is_recurrent

        self._check_built()
        return any(is_recurrent(lr.policy) for _, lr in self.group_learners())

    @property
    def policy(self) -> TensorDictSequential:
        """The collection policy: every group's policy, exploration included."""
        self._check_built()
        return self._policy

    def eval_policy(self) -> nn.Module:
        """The evaluation policy: the same modules, deterministic (mode, no exploration)."""
        return _Deterministic(self.policy)

    def _selected(self, groups: Sequence[str] | None) -> dict[str, Learner]:
        learners = dict(self.group_learners())
        if groups is None:
            return learners
        unknown = [g for g in groups if g not in learners]
        if unknown:
            raise ValueError(f"unknown group(s) {unknown}; this algorithm has {list(learners)}")
        return {label: lr for label, lr in learners.items() if label in groups}

    def process_batch(
        self, batch: TensorDictBase, groups: Sequence[str] | None = None
    ) -> TensorDictBase:
        """Let every learner (or those of ``groups``) prepare a collected ``[*B, T]`` batch
        (in place)."""
        self._check_built()
        if batch.device != self.device:
            batch = batch.to(self.device)
        for learner in self._selected(groups).values():
            batch = learner.process_batch(batch)
        return batch

    def update(
        self, batch: TensorDictBase, groups: Sequence[str] | None = None
    ) -> dict[str, float]:
        """Run every learner's updates (or those of ``groups``) on a processed batch.

        Learners whose updaters are :class:`~marl.algorithms.contracts.JointUpdater`
        of the same ``joint`` kind (HAPPO's) update together, in one call of the first
        one's ``update_jointly``; the others update one by one, in group order.

        Args:
            batch: a batch :meth:`process_batch` prepared.
            groups: the groups to train (a league trains one side's); ``None``: all.

        Returns:
            Mean loss terms and diagnostics, keyed ``"<group>/<name>"`` for groups and
            ``"<name>"`` for a single-agent env.

        Raises:
            ValueError: naming a group of ``groups`` that this algorithm lacks.
        """
        self._check_built()
        learners = self._selected(groups)
        results: dict[str, dict[str, float]] = {}
        for label, learner in learners.items():
            if label in results:  # updated jointly with an earlier group
                continue
            updater = learner.updater
            if not isinstance(updater, JointUpdater):
                results[label] = learner.update(batch)
                continue
            # every group whose updater is of the same joint kind updates in one call
            # (HAPPO: one permutation over the agents of all its groups)
            members = [
                k
                for k, lr in learners.items()
                if isinstance(lr.updater, JointUpdater) and lr.updater.joint == updater.joint
            ]
            joint_logs = updater.update_jointly(batch, [learners[k].updater for k in members])
            for k, member_logs in zip(members, joint_logs, strict=True):
                learners[k].advance_exploration(batch.numel())
                results[k] = member_logs
        logs: dict[str, float] = {}
        for label, learner in learners.items():
            prefix = "" if learner.info.name is None else f"{label}/"
            for key, value in results[label].items():
                logs[prefix + key] = value
        return logs

    def layout(self) -> dict[str, dict[str, Any]]:
        """What each group's learner is: ``{group: {"algorithm": name, "n_agents": n}}``.

        Saved with :meth:`state_dict_full` so that a checkpoint is only loaded
        into an algorithm built the same way.
        """
        self._check_built()
        return {
            label: {"algorithm": lr.algorithm, "n_agents": lr.info.n_agents}
            for label, lr in self.group_learners()
        }

    def state_dict_full(self) -> dict[str, Any]:
        """Networks, optimizers and counters (no replay buffers), for checkpoints.

        It also records :meth:`layout`, which :meth:`load_state_dict_full` checks.
        The tensors are copies, not views of the live parameters and optimizer
        moments (as ``nn.Module.state_dict`` returns): a state kept in memory, a
        snapshot of a policy pool for instance, stays what it was when taken.

        Examples:
            >>> from marl.algorithms import Algorithm
            >>> from marl.testing import MultiAgentFakeEnv
            >>> algo = Algorithm("ippo").build(MultiAgentFakeEnv(num_envs=2), seed=0)
            >>> state = algo.state_dict_full()
            >>> name, value = next(iter(state["modules"].items()))
            >>> value.data_ptr() != algo.state_dict()[name].data_ptr()
            True
        """
        self._check_built()
        return copy.deepcopy(
            {
                "layout": self.layout(),
                "modules": self.state_dict(),
                "extra": {k: lr.extra_state() for k, lr in self.group_learners()},
            }
        )

    def load_state_dict_full(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict_full`, after checking that it fits this algorithm.

        Raises:
            ValueError: before anything is loaded, when the state was built by
                another algorithm, for other groups or agent counts, or with
                other network shapes; the message says what the state holds and
                what this algorithm expects.
        """
        self._check_built()
        _check_loadable(state, self.layout(), self.state_dict())
        # torch optimizers keep the given state tensors when device and dtype match:
        # copied, two algorithms loaded from one in-memory state never share moments
        state = copy.deepcopy(state)
        self.load_state_dict(state["modules"])
        learners = dict(self.group_learners())
        for label, extra in state["extra"].items():
            learners[label].load_extra_state(extra)

    def buffers_state_dict(self) -> dict[str, Any]:
        """The off-policy learners' replay buffers (can be large).

        On-policy learners keep no buffer (each batch is used once): nothing to save.
        """
        return {
            k: lr.updater.buffer.state_dict()
            for k, lr in self.group_learners()
            if lr.updater.buffer is not None
        }

    def load_buffers_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`buffers_state_dict`."""
        learners = dict(self.group_learners())
        for label, buf in state.items():
            buffer = learners[label].updater.buffer
            if buffer is None:
                raise ValueError(f"group {label!r}'s learner keeps no replay buffer to load")
            buffer.load_state_dict(buf)


def _describe(layout: Mapping[str, Mapping[str, Any]]) -> str:
    parts = []
    for label, entry in layout.items():
        n = entry.get("n_agents")
        agents = "" if n is None else f", {n} agent{'s' if n != 1 else ''}"
        parts.append(f"{label!r}: {entry.get('algorithm') or '?'}{agents}")
    return "{" + ", ".join(parts) + "}"


def _check_loadable(
    state: Any, layout: dict[str, dict[str, Any]], modules: Mapping[str, torch.Tensor]
) -> None:
    """Refuse a state built by another algorithm, group layout or network shape."""
    if not isinstance(state, Mapping) or not {"modules", "extra"} <= set(state):
        got = sorted(state) if isinstance(state, Mapping) else type(state).__name__
        raise ValueError(
            "expected an Algorithm.state_dict_full() state (keys 'layout', 'modules', 'extra'), "
            f"got {got}"
        )
    saved = state.get("layout")
    if saved is not None and saved != layout:
        raise ValueError(
            f"this checkpoint was built for groups {_describe(saved)}, but this algorithm "
            f"has {_describe(layout)}: a checkpoint only loads into the algorithm, groups "
            "and agent counts that saved it"
        )
    theirs = state["modules"]
    missing = [k for k in modules if k not in theirs]
    extra = [k for k in theirs if k not in modules]
    shapes = [
        f"{k}: checkpoint {tuple(theirs[k].shape)}, expected {tuple(v.shape)}"
        for k, v in modules.items()
        if k in theirs and hasattr(theirs[k], "shape") and theirs[k].shape != v.shape
    ]
    if missing or extra or shapes:
        lines = []
        if shapes:
            lines.append(f"{len(shapes)} tensor(s) of another shape: " + "; ".join(shapes[:5]))
        if missing:
            lines.append(f"{len(missing)} missing from the checkpoint: {missing[:5]}")
        if extra:
            lines.append(f"{len(extra)} not in this algorithm: {extra[:5]}")
        where = "" if saved is None else f" (groups {_describe(saved)})"
        raise ValueError(
            f"this checkpoint{where} does not fit this algorithm's networks "
            f"({_describe(layout)}; check the model config and the env): " + "; ".join(lines)
        )
