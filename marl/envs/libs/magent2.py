"""`magent2_env`: MAgent2 gridworlds (hundreds of agents in teams) through `PettingZooEnv`.

MAgent2's environments are PettingZoo parallel envs, so this module finds and
builds one and hands it to :class:`MAgent2Env`, a
:class:`~marl.envs.libs.pettingzoo.PettingZooEnv` whose specs, grouping, masks for
agents that die, float32 conversion and seeding are that wrapper's. Only its step
differs: with hundreds of agents, PettingZoo's per-agent dicts (one entry per agent
for actions, observations, rewards and flags, built by MAgent2 and taken apart
again by the wrapper) cost more than the engine's step, so :class:`MAgent2Env`
reads the engine's per-team arrays directly and follows MAgent2's own parallel
step line by line (see :meth:`MAgent2Env.step_arrays`). See :func:`magent2_env`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from marl.envs.batched import env_flag_arrays
from marl.envs.libs.pettingzoo import PettingZooEnv
from marl.extras import require
from marl.groups import GroupMapLike
from marl.specs import NestedKey

__all__ = ["TASKS", "MAgent2Env", "magent2_env"]

# The environments of magent2 0.3.4 (``magent2.environments.<name>``).
TASKS = (
    "adversarial_pursuit_v4",
    "battle_v4",
    "battlefield_v5",
    "combined_arms_v6",
    "gather_v5",
    "tiger_deer_v4",
)


def _import_task(task: str) -> Any:
    """The ``magent2.environments`` module of ``task``; clear errors otherwise."""
    if not isinstance(task, str) or task not in TASKS:
        close = difflib.get_close_matches(str(task), TASKS, n=3, cutoff=0.5)
        hint = f"; closest: {close}" if close else ""
        raise ValueError(f"unknown MAgent2 task {task!r}; expected one of {list(TASKS)}{hint}")
    return require(
        f"magent2.environments.{task}", f"MAgent2 task {task!r}", "magent2", own=("magent2",)
    )


class MAgent2Env(PettingZooEnv):
    """A :class:`~marl.envs.libs.pettingzoo.PettingZooEnv` over a MAgent2 env that
    steps through the engine's per-team arrays.

    Built by :func:`magent2_env`; everything but the step (specs, groups, masks,
    flags, seeding, reset, render) is :class:`PettingZooEnv`'s. MAgent2's parallel
    ``step`` turns the engine's per-team arrays into one dict entry per agent
    (observations, rewards, flags), which the wrapper then stacks back into
    per-group arrays: with 162 agents that round trip costs more than the engine's
    own step. :meth:`step_arrays` follows MAgent2's ``step`` line by line on the
    team arrays instead: actions set per team in agent order, the engine stepped,
    ``terminated`` from the engine's alive flags (every agent when the game ends),
    ``truncated`` at ``max_cycles``, observations (with the minimap and extra
    feature channels) and rewards read before the dead are cleared, and the
    env's ``agents``, ``team_sizes`` and ``frames`` kept as MAgent2 keeps them.
    Its outputs are those of the PettingZoo path, value for value
    (``tests/envs/test_magent2_engine.py`` compares them on every task).

    The engine path applies when every group holds agents of one team (true of
    the default grouping, one group per team) and the engine numbers each team's
    agents in agent order at reset (it does on every MAgent2 task); otherwise, or
    with ``engine_arrays = False``, the env steps through PettingZoo's dicts.

    Attributes:
        engine_arrays: step through the engine's team arrays when they apply
            (True by default). Read at every reset.

    Examples:
        >>> env = magent2_env("battle_v4", seed=0, map_size=16, max_cycles=5)
        >>> type(env).__name__, env.engine_arrays
        ('MAgent2Env', True)
        >>> env.rollout(3)["next", "blue", "reward"].shape
        torch.Size([3, 6, 1])
    """

    engine_arrays: bool = True
    _plan: _EnginePlan | None = None

    def reset_arrays(self) -> dict[str, Any]:
        """Reset through PettingZoo (MAgent2 rebuilds its map); then plan the engine path."""
        arrays = super().reset_arrays()
        raw = self._env
        if hasattr(raw, "team_sizes") and hasattr(raw, "handles"):
            # MAgent2 0.3.4's reset counts each team before generate_map adds its agents
            # ([0, 0]), so its next step hands the engine an empty action array per team,
            # from which the engine reads its n agents' actions: the first step of every
            # episode after a reset played garbage. Count the teams after the map.
            raw.team_sizes = [raw.env.get_num(h) for h in raw.handles]
        self._plan = self._engine_plan() if self.engine_arrays else None
        return arrays

    def _engine_plan(self) -> _EnginePlan | None:
        """Where each group's agents sit in the engine's team arrays (None: not applicable)."""
        from magent2.environments.magent_env import magent_parallel_env

        raw = self._env
        if not self.parallel or not isinstance(raw, magent_parallel_env):
            return None
        engine = raw.env
        index = {a: i for i, a in enumerate(self.agent_names)}
        teams, offset = [], 0
        for handle, size in zip(raw.handles, raw.team_sizes):
            ids = engine.get_agent_id(handle)
            if not np.array_equal(ids, np.arange(offset, offset + size)):
                return None  # the engine does not number this team in agent order
            teams.append(_Team(handle, offset, size))
            offset += size
        if offset != len(self.agent_names):
            return None
        groups = []
        for g, members in self.group_map.items():
            if self._obs_layout[g] != (False, ["observation"]) or self._has_action_mask[g]:
                return None
            idx = np.array([index[a] for a in members])
            j = next(k for k, t in enumerate(teams) if t.offset <= idx[0] < t.offset + t.size)
            team = teams[j]
            local = idx - team.offset
            if local.min() < 0 or local.max() >= team.size:
                return None  # a group across teams
            full = len(local) == team.size and np.array_equal(local, np.arange(team.size))
            groups.append((g, j, None if full else local))
        n = [t.size for t in teams]
        return _EnginePlan(
            teams=teams,
            groups=groups,
            live=[np.ones(k, bool) for k in n],
            term=[np.zeros(k, bool) for k in n],
            trunc=[np.zeros(k, bool) for k in n],
            ending_trunc=[False] * len(n),
        )

    def step_arrays(self, inputs: Mapping[NestedKey, Any]) -> dict[str, Any]:
        """Step with the ``(g, "action")`` entries of ``inputs``; the outcome as numpy arrays.

        MAgent2's parallel ``step``, on team arrays (see the class docstring); the
        PettingZoo path when the engine path does not apply.
        """
        plan = self._plan
        if plan is None:
            return super().step_arrays(inputs)
        raw = self._env
        engine = raw.env
        teams = plan.teams
        actions = [np.zeros(t.size, np.int32) for t in teams]
        for g, j, local in plan.groups:
            a = inputs[g, "action"]
            if self._act_kind[g][0]:  # one-hot
                a = a.argmax(-1)
            a = a.detach().cpu().numpy()
            if local is None:
                actions[j][:] = a
            else:
                actions[j][local] = a
        for t, act, live in zip(teams, actions, plan.live):
            # the live agents' actions in agent order, as MAgent2's step hands them over
            engine.set_action(t.handle, act[live])
        raw.frames += 1
        game_over = engine.step()
        truncating = raw.frames >= raw.max_cycles
        obs, rewards, term_now = [], [], []
        for j, t in enumerate(teams):
            ids = engine.get_agent_id(t.handle) - t.offset  # alive before this step
            if game_over:
                term = plan.live[j].copy()
            else:
                term = np.zeros(t.size, bool)
                term[ids] = ~engine.get_alive(t.handle)
                raw.team_sizes[j] = len(ids) - int(term[ids].sum())
            term_now.append(term)
            obs.append(self._team_obs(engine, t, ids))
            r = np.zeros(t.size, self._reward_dtype)
            r[ids] = engine.get_reward(t.handle)
            rewards.append(r)
        engine.clear_dead()
        ended = False
        for j in range(len(teams)):
            live = plan.live[j]
            term = term_now[j] & live
            trunc = live if truncating else np.zeros_like(live)
            ending = term | trunc  # both are of live agents only: ending is this step's
            if ending.any():
                ended = True
                plan.term[j] |= term
                plan.trunc[j] |= trunc
                plan.live[j] = live & ~ending
            plan.ending_trunc[j] = bool(trunc.any())
        if ended:
            alive = np.concatenate(plan.live)
            raw.agents = [a for a, keep in zip(self.agent_names, alive) if keep]
        if raw.render_mode == "human":
            raw.render()
        return self._pack_team_arrays(plan, obs, rewards)

    def _team_obs(self, engine: Any, team: _Team, ids: np.ndarray) -> np.ndarray:
        """Every agent's observation in one team ``[size, H, W, C]``; zeros for the dead.

        MAgent2's ``_compute_observations``: the view, with the feature vector
        broadcast over extra channels in minimap or extra-feature mode.
        """
        raw = self._env
        view, features = engine.get_observation(team.handle)
        shape = raw.observation_space(self.agent_names[team.offset]).shape
        out = np.zeros((team.size, *shape), np.float32)
        if raw.minimap_mode or raw.extra_features:
            if raw.minimap_mode and not raw.extra_features:
                features = features[:, -2:]
            c = view.shape[-1]
            out[ids, :, :, :c] = view
            out[ids, :, :, c:] = features[:, None, None, :]
        else:
            out[ids] = view
        return out

    def _pack_team_arrays(
        self, plan: _EnginePlan, obs: list[np.ndarray], rewards: list[np.ndarray]
    ) -> dict[str, Any]:
        """The groups' entries and the root flags, as :meth:`_pack_arrays` lays them out."""
        root: dict[str, Any] = {}
        for g, j, local in plan.groups:
            rows = slice(None) if local is None else local
            te, tr = plan.term[j][rows], plan.trunc[j][rows]
            flags = np.stack([te, tr, te | tr], axis=1)
            group: dict[str, Any] = {"observation": obs[j][rows]}
            group["terminated"] = flags[:, 0:1]
            group["truncated"] = flags[:, 1:2]
            group["done"] = flags[:, 2:3]
            if self.use_mask:
                group["mask"] = plan.live[j][rows].copy()
            group["reward"] = rewards[j][rows][:, None]
            root[g] = group
        # an agent is done once it has left the episode (live is never set again)
        if self.done_on_any:
            done = not all(bool(live.all()) for live in plan.live)
        else:
            done = not any(bool(live.any()) for live in plan.live)
        root.update(env_flag_arrays(done, any(plan.ending_trunc)))
        if self.return_state:
            root["state"] = np.array(self._env.state(), dtype=self._state_np_dtype)
        return root


class _Team(NamedTuple):
    """An engine team (a MAgent2 handle): its agents are ``agent_names[offset:offset+size]``."""

    handle: Any
    offset: int
    size: int


@dataclass
class _EnginePlan:
    """:class:`MAgent2Env`'s engine path: teams, groups and each team's per-agent state."""

    teams: list[_Team]
    groups: list[tuple[str, int, np.ndarray | None]]  # (group, team, rows or None: all)
    live: list[np.ndarray]  # per team: in the episode (MAgent2's ``agents``)
    term: list[np.ndarray]  # per team: terminated (sticky)
    trunc: list[np.ndarray]  # per team: truncated (sticky)
    ending_trunc: list[bool]  # per team: an agent's episode ended by truncation this step


def magent2_env(
    task: str,
    group_map: GroupMapLike | None = None,
    use_mask: bool = True,
    return_state: bool = False,
    seed: int | None = None,
    *,
    categorical_actions: bool = True,
    device: Any = None,
    check_actions: bool = False,
    **kwargs: Any,
) -> MAgent2Env:
    """A MAgent2 environment (``magent2`` 0.3.x), agents stacked by team, unbatched.

    MAgent2 names agents ``<team>_<i>`` (``red_0 ... red_80``,
    ``predator_0``, ``prey_0``, ...), so the default ``by_prefix`` grouping
    gives one group per team (per unit type in ``combined_arms``, whose melee
    and ranged units have different observations and actions). Keys, for a
    group ``g`` of ``n_g`` agents (see :class:`PettingZooEnv` for the rest):

    - ``(g, "observation")`` ``[n_g, H, W, C]`` float32: each agent's local
      view as MAgent2 gives it, channels last (e.g. ``13 x 13 x 5`` in
      ``battle``: walls, own team presence and HP, other team presence and
      HP). Kept as an image: algorithms flatten it for their MLPs, and
      ``obs.movedim(-1, -3)`` gives the ``[.., C, H, W]`` that
      :class:`~marl.modules.MultiAgentConvNet` reads. ``minimap_mode=True``
      adds the global density channels and the agent's position;
    - ``(g, "action")`` ``[n_g]`` (index) or ``[n_g, A]`` (one-hot). MAgent2
      has no action masks (every action is accepted; a blocked move does
      nothing);
    - ``(g, "mask")`` ``[n_g]`` bool: False once an agent has died (MAgent2
      removes dead agents; they stay in the layout with zero observations and
      zero rewards until the episode ends);
    - root ``done``: every agent dead or the episode over (``truncated`` at
      ``max_cycles``, ``terminated`` when the game ends, e.g. one team wiped
      out in ``battle``);
    - ``"state"`` ``[map, map, C]`` with ``return_state=True``: the whole map
      (walls, each team's presence and HP). It costs a second observation pass
      of the engine per step, so it is off by default.

    Args:
        task: one of :data:`TASKS`, e.g. ``"battle_v4"``.
        group_map: ``None`` (``by_prefix``: one group per team), a constructor
            name, a dict or a ``GroupMap``.
        use_mask: write the per-group ``"mask"`` key.
        return_state: add the global ``"state"``.
        seed: optional seed (MAgent2 seeds its engine, so the map and the
            agents' placement repeat).
        categorical_actions: actions as indices (True) or one-hot (False).
        device: device of the tensors.
        check_actions: check every action before MAgent2 sees it.
        **kwargs: the task's arguments: ``map_size`` (sets the number of
            agents), ``max_cycles``, ``minimap_mode``, ``extra_features``,
            ``render_mode`` and its reward terms (e.g. ``step_reward``).

    Returns:
        A :class:`MAgent2Env` (a :class:`PettingZooEnv` that steps through the
        engine's team arrays) over the built MAgent2 env (``env.pettingzoo_env``
        is the MAgent2 env).

    Raises:
        ImportError: naming ``pip install "marl[magent2]"`` when the package is missing.
        ValueError: on an unknown task (listing the known ones) or argument.

    Examples:
        >>> env = magent2_env("battle_v4", seed=0, map_size=16, max_cycles=5)
        >>> {g: len(m) for g, m in env.group_map.items()}
        {'red': 6, 'blue': 6}
        >>> td = env.rollout(3)
        >>> td["red", "observation"].shape, td["red", "mask"].shape
        (torch.Size([3, 6, 13, 13, 5]), torch.Size([3, 6]))
    """
    module = _import_task(task)
    try:
        raw = module.parallel_env(**kwargs)
    except TypeError as err:
        if "unexpected keyword" not in str(err):
            raise
        raise ValueError(f"unknown argument for MAgent2 task {task!r}: {err}") from err
    env = MAgent2Env(
        env=raw,
        group_map=group_map,
        use_mask=use_mask,
        return_state=return_state,
        seed=seed,
        categorical_actions=categorical_actions,
        device=device,
        check_actions=check_actions,
    )
    env.task = task
    return env
