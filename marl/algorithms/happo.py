"""HAPPO: heterogeneous-agent PPO (Kuba et al., 2022, "Trust region policy optimisation
in multi-agent reinforcement learning").

Each iteration, a centralized critic (MAPPO's) gives the advantages ``A``; then the
agents of every HAPPO group, in one random order over all of them, update one after
another. Agent ``i_m`` runs PPO's epochs and minibatches on its own clipped objective
with the advantage ``M * A``, where ``M`` (one per sample, 1 at the start) is the
product of the probability ratios ``pi_new / pi_old`` of the agents updated before it;
after its turn ``M`` is multiplied by its own ratio on the whole batch. Then the critic
regresses the value targets, as MAPPO's does.

Roles:

- :class:`HAPPOConfig`: MAPPO's settings (the multi-agent PPO preset), per-agent actors
  (required);
- :class:`~marl.objectives.HAPPOLoss`: one agent's objective, its ratio, the critic's terms;
- :class:`~marl.algorithms._agent_adam.AgentAdam`: the optimizer that steps one agent's
  slice of the stacked actor parameters and leaves the others' (and their Adam state)
  untouched;
- :class:`HAPPOUpdater`: the sequential update, a
  :class:`~marl.algorithms.contracts.JointUpdater`: ``Algorithm.update`` gives it every
  HAPPO group, so that one permutation covers the agents of all of them;
- :func:`happo_actor_loss_terms`, :func:`happo_critic_loss_terms`: the loss terms of one
  actor-turn step and of one critic step, what ``compile=True`` runs through
  ``torch.compile`` (see ``marl.algorithms._compile``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from marl.algorithms._agent_adam import AgentAdam
from marl.algorithms._compile import compiled_loss_terms
from marl.algorithms._critics import centralized_critic_of
from marl.algorithms._groups import GroupInfo
from marl.algorithms._policies import stochastic_actor
from marl.algorithms.configs import HAPPOConfig
from marl.algorithms.learner import GroupLearner
from marl.algorithms.ppo import point_at_group
from marl.algorithms.spec import policy_gradient_spec, recurrent_refusals
from marl.algorithms.updates import (
    GradientSync,
    UpdateStats,
    clip_grad_norm_per_group_,
    shuffled_minibatches,
    sum_loss_terms,
)
from marl.objectives import HAPPOLoss

__all__ = [
    "SPEC",
    "HAPPOConfig",
    "HAPPOUpdater",
    "build_happo",
    "happo_actor_loss_terms",
    "happo_critic_loss_terms",
    "happo_round",
]


def happo_actor_loss_terms(
    loss: HAPPOLoss,
    minibatch: TensorDictBase,
    agent: int | torch.Tensor,
    factor: torch.Tensor,
) -> tuple[TensorDictBase, torch.Tensor | None]:
    """One actor-turn step's terms: :meth:`HAPPOLoss.actor_terms` and the sum of its
    ``loss_*`` terms (``None`` when none requires grad).

    A plain function of the loss and its inputs, what ``compile=True`` wraps in
    ``torch.compile`` (:func:`~marl.algorithms._compile.compiled_loss_terms`); the
    compiled update passes ``agent`` as a 0-d tensor, so that one graph serves every
    agent of a group.

    Examples:
        >>> import torch
        >>> from marl.algorithms import Algorithm
        >>> from marl.testing import MultiAgentFakeEnv
        >>> algo = Algorithm("happo").build(MultiAgentFakeEnv(num_envs=2, seed=0), seed=0)
        >>> learner = algo.learners["walker"]
        >>> with torch.no_grad():
        ...     td = MultiAgentFakeEnv(num_envs=2, seed=0).rollout(3, algo.policy)
        >>> data = learner.updater.prepare(algo.process_batch(td))
        >>> out, total = happo_actor_loss_terms(learner.loss, data, 1, torch.ones(data.numel()))
        >>> total.requires_grad, sorted(k for k in out.keys() if k.startswith("loss_"))
        (True, ['loss_objective'])
        >>> out, total = happo_critic_loss_terms(learner.loss, data)
        >>> total is out["loss_critic"]
        True
    """
    out = loss.actor_terms(minibatch, agent, factor)
    return out, sum_loss_terms(out)


def happo_critic_loss_terms(
    loss: HAPPOLoss, minibatch: TensorDictBase
) -> tuple[TensorDictBase, torch.Tensor | None]:
    """One critic step's terms: :meth:`HAPPOLoss.critic_terms` and the sum of its
    ``loss_*`` terms; compiled with ``compile=True`` as :func:`happo_actor_loss_terms` is
    (whose example calls both).
    """
    out = loss.critic_terms(minibatch)
    return out, sum_loss_terms(out)


class HAPPOUpdater:
    """HAPPO's update of one group, run jointly with the other HAPPO groups'.

    1. :meth:`process`: the centralized critic writes advantages and value targets (GAE).
    2. :meth:`update_jointly` (``Algorithm.update`` calls it with every HAPPO group's
       updater): each group's entries are flattened and its advantages standardized
       once; ``M = 1`` per sample; one ``torch.randperm`` (torch's global generator,
       which ``Trainer(seed=...)`` seeds) orders the agents of all the groups; each
       agent in turn runs ``epochs`` passes of shuffled minibatches on its own
       objective (:meth:`HAPPOLoss.actor_terms` with ``M``), stepping only its slice
       (``AgentAdam.step(agents=[i])``), then ``M *= ratio`` of the updated agent on the
       whole batch; last, each critic trains for ``epochs`` passes.

    With ``compile``, each step's loss terms (an actor turn's,
    :func:`happo_actor_loss_terms`, and the critic's, :func:`happo_critic_loss_terms`)
    run through ``torch.compile``, their backward compiled with them, as every other
    learner's ``GradientStep`` does (``marl.algorithms._compile``); the agent's index is
    a tensor input, so a group compiles one actor graph for all its agents and one
    critic graph. ``backward()``, the clipping, ``AgentAdam``'s step, the minibatch
    gathering and ``M``'s update on the whole batch stay eager.

    Args:
        group: the group's label (named in :attr:`last_order`).
        loss: the group's :class:`~marl.objectives.HAPPOLoss`.
        optimizer: an :class:`AgentAdam` whose ``"actor"`` param group is stacked over
            the group's agents.
        n_agents: agents in the group.
        epochs: passes over the batch per agent turn and for the critic.
        minibatch_size: samples (env steps) per optimizer step.
        max_grad_norm: gradient clipping of the actor and of the critic (``None``: off).
        sync: average the gradients over data-parallel ranks before each step, before
            the clipping (:class:`~marl.algorithms.updates.GradientSync`; ``None``: off).
        compile: run the actor turns' and the critic's loss terms (and so their
            backward) through ``torch.compile``.

    Raises:
        ValueError: for a non-positive ``epochs``/``minibatch_size``, or an optimizer with
            no per-agent actor group.
    """

    on_policy = True
    joint = "happo"

    def __init__(
        self,
        *,
        group: str,
        loss: HAPPOLoss,
        optimizer: AgentAdam,
        n_agents: int,
        epochs: int,
        minibatch_size: int,
        max_grad_norm: float | None,
        sync: GradientSync | None = None,
        compile: bool = False,
    ) -> None:
        if epochs < 1 or minibatch_size < 1:
            raise ValueError(
                f"epochs and minibatch_size must be >= 1, got {epochs}, {minibatch_size}"
            )
        if not isinstance(loss, HAPPOLoss) or loss.value_estimator is None:
            raise TypeError(f"loss must be a HAPPOLoss with a critic, got {type(loss).__name__}")
        if not isinstance(optimizer, AgentAdam) or not any(
            g["n_agents"] == n_agents for g in optimizer.param_groups
        ):
            raise ValueError(
                "optimizer must be an AgentAdam with a param group stacked over the "
                f"{n_agents} agents (n_agents={n_agents}), got {type(optimizer).__name__}"
            )
        self.group = group
        self._loss = loss
        self._optimizer = optimizer
        self.n_agents = n_agents
        self.epochs = epochs
        self.minibatch_size = minibatch_size
        self.max_grad_norm = max_grad_norm
        self.sync = sync
        self._compiled = compile
        self._actor_terms = (
            compiled_loss_terms(happo_actor_loss_terms) if compile else happo_actor_loss_terms
        )
        self._critic_terms = (
            compiled_loss_terms(happo_critic_loss_terms) if compile else happo_critic_loss_terms
        )
        self._steps = 0
        self._keys = list(loss.in_keys)
        self.last_order: list[tuple[str, int]] = []
        """The agents, ``(group, agent index)``, in the order of the last update."""

    @property
    def loss(self) -> HAPPOLoss:
        return self._loss

    @property
    def optimizer(self) -> AgentAdam:
        return self._optimizer

    @property
    def compiled(self) -> bool:
        """Whether the actor turns' and the critic's loss terms run compiled."""
        return self._compiled

    @property
    def steps(self) -> int:
        """Optimizer steps run so far, actor turns' and critic's (all of them compiled
        when :attr:`compiled`)."""
        return self._steps

    @property
    def buffer(self) -> None:
        """No buffer: each batch is used once."""
        return None

    def process(self, batch: TensorDictBase) -> TensorDictBase:
        """Write the group's advantage and value target on the ``[*B, T]`` batch."""
        with torch.no_grad():
            self._loss.value_estimator(batch)
        return batch

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        """This group alone: :meth:`update_jointly` with ``[self]``."""
        return self.update_jointly(batch, [self])[0]

    def update_jointly(
        self, batch: TensorDictBase, updaters: Sequence[HAPPOUpdater]
    ) -> list[dict[str, float]]:
        """One HAPPO update of every group in ``updaters``, one permutation over all agents.

        The round is :func:`happo_round`'s; each updater is then told the order it ran in
        (:meth:`record_order`).

        Returns:
            One log dict per updater: the means of its agents' and critic's loss terms
            and diagnostics, and ``correction_mean``/``correction_std``, the final ``M``'s.
        """
        if self not in updaters:
            raise ValueError("update_jointly must be given its own updater among the updaters")
        logs, order = happo_round(batch, updaters)
        for updater in updaters:
            updater.record_order(order)
        return logs

    def record_order(self, order: Sequence[tuple[str, int]]) -> None:
        """Keep the agents' order of the last update, ``(group, agent index)``, as
        :attr:`last_order`."""
        self.last_order = list(order)

    # One round's steps, in the order happo_round calls them.
    def prepare(self, batch: TensorDictBase) -> TensorDictBase:
        """The loss's entries, flattened, with the advantage standardized once for all turns."""
        data = batch.select(*self._keys, strict=False).reshape(-1)
        key = self._loss.tensor_keys.advantage
        with torch.no_grad():
            data.set(key, self._loss.standardized_advantage(data))
        return data

    def agent_turn(
        self, data: TensorDictBase, agent: int, factor: torch.Tensor, stats: UpdateStats
    ) -> torch.Tensor:
        """Agent ``agent``'s PPO epochs on ``M * A``; only its slice of the actor steps.

        Args:
            data: this group's :meth:`prepare` d entries.
            agent: the agent's index in the group.
            factor: ``M``, one per sample: the product of the ratios of the agents that
                went before.
            stats: collects the loss terms.

        Returns:
            ``M`` for the next agent: ``factor`` times this agent's new ratio.
        """
        # compiled: the index as a tensor input, so that every agent runs the same graph
        # (an int would be a constant of the graph: one recompilation per agent)
        index = torch.tensor(agent, device=data.device) if self._compiled else agent
        for minibatch, mb_factor in shuffled_minibatches(
            data, self.minibatch_size, self.epochs, factor
        ):
            self._optimizer.zero_grad(set_to_none=True)
            terms, total = self._actor_terms(self._loss, minibatch, index, mb_factor)
            self._step(total, [agent])
            stats.add(terms.detach())
        return factor * self._loss.agent_ratio(data, agent)

    def critic_update(self, data: TensorDictBase, stats: UpdateStats) -> None:
        """The critic's epochs on the value targets (the actors get no gradient)."""
        for (minibatch,) in shuffled_minibatches(data, self.minibatch_size, self.epochs):
            self._optimizer.zero_grad(set_to_none=True)
            terms, total = self._critic_terms(self._loss, minibatch)
            self._step(total, None)
            stats.add(terms.detach())

    def _step(self, total: torch.Tensor | None, agents: list[int] | None) -> None:
        self._steps += 1
        if total is None:
            return
        total.backward()
        if self.sync is not None:
            # every parameter: a rank's gradient of a part no rank trained stays None
            self.sync([p for g in self._optimizer.param_groups for p in g["params"]])
        if self.max_grad_norm is not None:
            clip_grad_norm_per_group_(self._optimizer.param_groups, self.max_grad_norm)
        self._optimizer.step(agents=agents)

    def state_dict(self) -> dict[str, Any]:
        """No state between batches: ``{}`` (the permutation is drawn from torch's
        generator, which a run's checkpoint saves)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Nothing to restore (see :meth:`state_dict`)."""


def happo_round(
    batch: TensorDictBase, updaters: Sequence[HAPPOUpdater]
) -> tuple[list[dict[str, float]], list[tuple[str, int]]]:
    """One HAPPO update of the groups of ``updaters`` (Kuba et al., 2022, Algorithm 1).

    Every group's entries are :meth:`~HAPPOUpdater.prepare` d; ``M = 1`` per sample;
    one ``torch.randperm`` orders the agents of all the groups; each agent in turn runs
    its :meth:`~HAPPOUpdater.agent_turn` on ``M * A`` and multiplies ``M`` by its new
    ratio; last, every critic trains (:meth:`~HAPPOUpdater.critic_update`).

    Returns:
        ``(logs, order)``: one log dict per updater (its loss terms' means,
        ``correction_mean``/``correction_std`` of the final ``M``), and the agents as
        ``(group, agent index)`` in the order they were updated.
    """
    data = [u.prepare(batch) for u in updaters]
    n = data[0].numel()
    factor = torch.ones(n, device=data[0].device)
    agents = [(k, i) for k, u in enumerate(updaters) for i in range(u.n_agents)]
    order = [agents[j] for j in torch.randperm(len(agents)).tolist()]
    stats = [UpdateStats() for _ in updaters]
    for k, i in order:
        factor = updaters[k].agent_turn(data[k], i, factor, stats[k])
    for updater, d, s in zip(updaters, data, stats):
        updater.critic_update(d, s)
    correction = {
        "correction_mean": factor.mean().item(),
        "correction_std": factor.std().item() if n > 1 else 0.0,
    }
    logs = [{**s.means(), **correction} for s in stats]
    return logs, [(updaters[k].group, i) for k, i in order]


def build_happo(info: GroupInfo, config: HAPPOConfig) -> GroupLearner:
    """Build a HAPPO learner for one group: per-agent actors, MAPPO's centralized critic.

    Raises:
        ValueError: for a single-agent env.

    Examples:
        >>> from marl.testing import example_group
        >>> info = example_group("walker")
        >>> learner = build_happo(info, HAPPOConfig())
        >>> [g["name"] for g in learner.optimizer.param_groups], learner.updater.joint
        (['actor', 'critic'], 'happo')
    """
    if info.name is None:
        raise ValueError(
            "happo updates a group's agents one after another; a single-agent env (its "
            "root group) has no agents to order: use ppo"
        )
    c = config
    # every actor parameter stacked over the agents, whatever share_policy_params says
    actor = stochastic_actor(info, **{**c.actor_body(), "share_params": False})
    critic = centralized_critic_of(info, c, "state_value")
    loss = point_at_group(HAPPOLoss(actor, critic, c), info)
    critic_lr = c.lr if c.critic_lr is None else c.critic_lr
    optimizer = AgentAdam(
        [
            # every actor parameter is stacked over the agents (MultiAgentMLP, unshared)
            {"params": actor.parameters(), "lr": c.lr, "name": "actor", "n_agents": info.n_agents},
            {"params": critic.parameters(), "lr": critic_lr, "name": "critic"},
        ]
    )
    updater = HAPPOUpdater(
        group=info.label,
        loss=loss,
        optimizer=optimizer,
        n_agents=info.n_agents,
        epochs=c.epochs,
        minibatch_size=c.minibatch_size,
        max_grad_norm=c.max_grad_norm,
        sync=info.gradient_sync,
        compile=info.compile,
    )
    return GroupLearner(
        info,
        algorithm="happo",
        policy=actor,
        loss=loss,
        optimizer=optimizer,
        updater=updater,
        config=c,
    )


_SLICES = (
    "happo updates one agent's slice of the actor's parameters at a time, so every actor "
    "parameter must be stacked over the agents and an agent's action must depend on its own "
    "slice only"
)

SPEC = policy_gradient_spec(
    "happo",
    HAPPOConfig,
    build_happo,
    "Heterogeneous-agent PPO: agents updated in turn, a centralized critic.",
    network_refusals={
        **recurrent_refusals(
            "happo updates one agent's slice of a per-agent (stacked) actor at a time, "
            "while a recurrent actor is one cell shared by the group's agents"
        ),
        "deepsets": _SLICES + "; a deepsets actor's action depends on every agent's "
        "encoder through the pool",
        "gnn": _SLICES + "; a gnn actor's action depends on the other agents' "
        "parameters through the messages",
        "cnn": _SLICES + "; a cnn's grouped convolutions stack the agents along "
        "channels, not on a leading agent dim",
    },
)
