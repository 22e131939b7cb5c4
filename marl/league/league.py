"""Self-play against a pool of past selves: :class:`League`.

The learner is an :class:`~marl.algorithms.Algorithm` built on a competitive env
with two sides (:mod:`marl.league.sides`). Each batch, the learner plays one side
(the sides alternate batch by batch, so it learns both seats of a turn-based game)
and a snapshot drawn from the pool (:mod:`marl.league.pool`) plays the other. Only
the learner's own data trains it:

- a side that is a whole group: only that group's learner processes and learns
  from the batch (the opponent group's learner is left alone);
- a side that is some agents of a group: the opponent's agents are marked as not
  acting in the group's ``"mask"`` before the learner sees the batch, which every
  algorithm's loss already honours (it is how turn-based envs mark idle agents).

Snapshots (the policy's ``state_dict``, cloned) join the pool at the start and
every ``snapshot_interval`` frames, and at the end. :meth:`League.rate` then plays
every pair of snapshots and reference players (a random player at least) on both
sides and fits Elo ratings to all games (:mod:`marl.league.elo`).

:meth:`League.state_dict` and :meth:`League.load_state_dict` checkpoint a league (the
learner, every snapshot and its record, the pool's draws, the counters and RNG), so a
killed league continues where it stopped; ``marl-league``
(:mod:`marl.experiment.league_run`) runs one into a run folder with checkpoints.
"""

from __future__ import annotations

import copy
import itertools
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, set_interaction_type
from torch import nn

from marl.algorithms import Algorithm, group_infos
from marl.collectors import Collector
from marl.envs.common import EnvBase
from marl.league.elo import GameResult
from marl.league.games import Outcome, Policy, RandomPlayer, compare_returns, play_games
from marl.league.pool import OpponentPool, Snapshot, snapshot_from_state, snapshot_state
from marl.league.ratings import LeagueRatings, rate_results
from marl.league.sides import Side, SideSpec, mask_side, merge_actions, resolve_sides, side_values

__all__ = ["League"]

_STATE_VERSION = 1  # the layout of League.state_dict()


class _LeaguePolicy(nn.Module):
    """The collection policy: the learner acts, then the opponent overwrites its side's actions."""

    def __init__(self, learner: nn.Module, opponent: nn.Module, explore: bool) -> None:
        super().__init__()
        self.learner = learner
        self.opponent = opponent
        self.explore = explore
        self.opponent_side: Side | None = None

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        theirs = td.clone()
        if self.explore:
            theirs = self.opponent(theirs)
        else:
            with set_interaction_type(InteractionType.DETERMINISTIC):
                theirs = self.opponent(theirs)
        return merge_actions(self.learner(td), theirs, self.opponent_side)


class _Frozen(nn.Module):
    """A copy of the learner's policy holding one snapshot, run deterministically."""

    def __init__(self, policy: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
        super().__init__()
        self.policy = policy
        self.policy.load_state_dict(state)

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        with set_interaction_type(InteractionType.DETERMINISTIC):
            return self.policy(td)


class League:
    """Train an algorithm against snapshots of itself, then rate every snapshot by Elo.

    Args:
        algorithm: the learner; built on ``env`` (with ``seed``) if it is not built yet.
        env: the training env of a two-sided game (``make_task`` adds ``RewardSum``,
            whose episode returns score the training games).
        sides: the two sides (:func:`~marl.league.sides.resolve_sides`): group names, or
            ``(group, [agent indices or names])``; ``None`` takes two groups, or splits
            one group of two agents.
        frames_per_batch: frames per collected batch (each batch: one side, one opponent).
        total_frames: stop once this many frames were collected.
        snapshot_interval: frames between snapshots joining the pool.
        strategy: how opponents are drawn: ``"latest"``, ``"uniform"``, ``"prioritized"``.
        pool_size: keep at most this many snapshots for training (``None``: all); every
            snapshot is still rated.
        opponent_exploration: opponents act as the learner did when it was snapshotted
            (sampling, epsilon-greedy); ``False``: deterministically.
        outcome: scores a game from the two sides' returns (default: the higher wins).
        reset_each_batch: every batch starts new games (the collector resets its envs),
            so each game is played against one opponent from one seat, and scored
            against that opponent; games still running at the end of a batch are cut
            (their last moves have no target, and value-based learners mask them out).
            ``frames_per_batch`` must then hold whole games. ``False``: games continue
            into the next batch, where the opponent and the seats change.
        seed: seeds torch and the pool's draws.

    Raises:
        ValueError: for sides that do not fit the env (see ``resolve_sides``), an unknown
            strategy, or non-positive frame counts.

    Examples:
        >>> from marl.algorithms import Algorithm
        >>> from marl.envs.tasks import make_task
        >>> from marl.league import League
        >>> env = make_task("pettingzoo/tictactoe", seed=0)
        >>> league = League(Algorithm("iql", config={"learning_starts": 50, "batch_size": 32}),
        ...                 env, frames_per_batch=50, total_frames=200, snapshot_interval=100,
        ...                 strategy="uniform", seed=0)
        >>> [s.label for s in league.sides]
        ['player[0]', 'player[1]']
        >>> logs = list(league.train())
        >>> [s.name for s in league.pool]
        ['snapshot_0', 'snapshot_100', 'snapshot_200']
        >>> ratings = league.rate(make_task("pettingzoo/tictactoe", seed=1), games=2)
        >>> [p.name for p in ratings.players]
        ['snapshot_0', 'snapshot_100', 'snapshot_200', 'random']
    """

    def __init__(
        self,
        algorithm: Algorithm,
        env: EnvBase,
        *,
        sides: Sequence[SideSpec] | None = None,
        frames_per_batch: int,
        total_frames: int,
        snapshot_interval: int,
        strategy: str = "uniform",
        pool_size: int | None = None,
        opponent_exploration: bool = True,
        outcome: Outcome = compare_returns,
        reset_each_batch: bool = True,
        seed: int | None = None,
    ) -> None:
        for name, value in (
            ("frames_per_batch", frames_per_batch),
            ("total_frames", total_frames),
            ("snapshot_interval", snapshot_interval),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        self.sides = resolve_sides(sides, group_infos(env), env.group_map)
        self.pool = OpponentPool(strategy, max_size=pool_size, seed=seed)
        if seed is not None:
            torch.manual_seed(seed)
        if not algorithm.built:
            algorithm.build(env)
        self.algorithm = algorithm
        self.env = env
        self.total_frames = total_frames
        self.snapshot_interval = snapshot_interval
        self.outcome = outcome
        self.frames = 0
        self.iteration = 0
        self.history: list[dict[str, Any]] = []
        self.snapshots: list[Snapshot] = []  # every snapshot taken, also those the pool dropped
        self._policy = _LeaguePolicy(
            algorithm.policy, copy.deepcopy(algorithm.policy), opponent_exploration
        )
        self.collector = Collector(
            env,
            self._policy,
            frames_per_batch=frames_per_batch,
            reset_at_each_iter=reset_each_batch,
        )
        self._batches: Iterator[TensorDictBase] | None = None
        self._reset_each_batch = reset_each_batch
        self._warned = False
        self._opponent: Snapshot = self._snapshot()

    # ------------------------------------------------------------------ training
    @property
    def learner_side(self) -> int:
        """The side (0 or 1) the learner plays in the next batch."""
        return self.iteration % 2

    def _snapshot(self) -> Snapshot:
        snap = self.pool.add(
            self.algorithm.policy.state_dict(), iteration=self.iteration, frames=self.frames
        )
        self.snapshots.append(snap)
        return snap

    def _draw_opponent(self) -> None:
        self._opponent = self.pool.sample()
        self._policy.opponent.load_state_dict(self._opponent.state)
        self._policy.opponent_side = self.sides[1 - self.learner_side]

    def _training_scores(self, batch: TensorDictBase, ours: Side, theirs: Side) -> list[float]:
        """The learner's score in each game that ended in ``batch`` (from ``RewardSum``)."""
        done = batch.get(("next", "done")).reshape(batch.shape)
        key = ("next", ours.group, "episode_reward")
        if not bool(done.any()) or key not in batch.keys(include_nested=True):
            return []
        dims = batch.batch_dims
        a = side_values(batch.get(key), ours, dims)[done]
        b = side_values(batch.get(("next", theirs.group, "episode_reward")), theirs, dims)[done]
        return [self.outcome(float(x), float(y)) for x, y in zip(a, b, strict=True)]

    def train(self) -> Iterator[dict[str, Any]]:
        """Train until ``total_frames``, lazily: one batch (one side, one opponent) per item.

        Yields:
            Each iteration's logs: ``frames``, ``iteration``, ``learner_side``,
            ``opponent``, ``pool_size``, ``train/score`` (the learner's mean score in the
            games that ended in the batch, when any did) and ``train/<group>/<loss term>``.
        """
        algo = self.algorithm
        if self._batches is None:
            self._batches = iter(self.collector)
        while self.frames < self.total_frames:
            side = self.learner_side
            self._draw_opponent()  # a new draw for every batch
            ours, theirs = self.sides[side], self.sides[1 - side]
            batch = next(self._batches)
            scores = self._training_scores(batch, ours, theirs)
            if not scores and self._reset_each_batch and not self._warned:
                self._warned = True
                warnings.warn(
                    f"no game ended within a batch of {batch.numel()} frames, and every batch "
                    "starts new games (reset_each_batch=True): the learner is never scored "
                    "against its opponents (prioritized sampling cannot tell them apart) and "
                    "never sees a game's end; raise frames_per_batch",
                    RuntimeWarning,
                    stacklevel=2,
                )
            for score in scores:
                self._opponent.record(score)
            if theirs.agents is not None:  # same group: the opponent's rows leave the losses
                mask_side(batch, theirs)
            batch = batch.to(algo.device)
            # the learner side's group only, through Algorithm.update: joint updates
            # (HAPPO) and exploration schedules as in any run
            batch = algo.process_batch(batch, groups=[ours.group])
            logs: dict[str, Any] = {
                f"train/{key}": value
                for key, value in algo.update(batch, groups=[ours.group]).items()
            }
            self.frames += batch.numel()
            self.iteration += 1
            opponent = self._opponent.name
            if self.frames - self.snapshots[-1].frames >= self.snapshot_interval or (
                self.frames >= self.total_frames and self.snapshots[-1].frames != self.frames
            ):
                self._snapshot()
            logs = {
                "frames": self.frames,
                "iteration": self.iteration,
                "learner_side": ours.label,
                "opponent": opponent,
                "pool_size": len(self.pool),
                **({"train/score": sum(scores) / len(scores)} if scores else {}),
                **logs,
            }
            self.history.append(logs)
            yield logs

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self, include_buffers: bool = False) -> dict[str, Any]:
        """Everything a killed league needs to continue: learner, pool, counters, RNG.

        As :meth:`Trainer.state_dict <marl.algorithms.Trainer.state_dict>` does for a
        run: the learner's networks, optimizers and counters
        (:meth:`~marl.algorithms.Algorithm.state_dict_full`), the frame and batch
        counters (which fix the learner's next side), every snapshot taken (weights,
        name, frames, training record; also those the pool dropped), the pool's
        generator, the collector's counters and torch's RNG state. Every tensor is a
        copy: training on leaves the state as it was.

        Games still running when the state is taken are not in it: with
        ``reset_each_batch=False`` a restored league starts new games.

        Args:
            include_buffers: also save the off-policy learners' replay buffers (can be
                large; without them a restored learner refills its buffer first).

        Returns:
            A dict for ``torch.save``; :meth:`load_state_dict` restores it.

        Examples:
            >>> from marl.algorithms import Algorithm
            >>> from marl.envs.tasks import make_task
            >>> def build():
            ...     env = make_task("pettingzoo/tictactoe", seed=0)
            ...     algo = Algorithm("iql", config={"learning_starts": 50, "batch_size": 32})
            ...     return League(algo, env, frames_per_batch=50, total_frames=100,
            ...                   snapshot_interval=50, seed=0)
            >>> league = build()
            >>> logs = list(league.train())
            >>> resumed = build()
            >>> resumed.load_state_dict(league.state_dict())
            >>> resumed.frames, [s.name for s in resumed.pool]
            (100, ['snapshot_0', 'snapshot_50', 'snapshot_100'])
        """
        in_pool = {s.name for s in self.pool}
        collector = self.collector.state_dict()
        collector.pop("policy", None)  # the learner is in "algorithm"; opponents are redrawn
        state: dict[str, Any] = {
            "league": _STATE_VERSION,
            "sides": [s.label for s in self.sides],
            "algorithm": self.algorithm.state_dict_full(),
            "frames": self.frames,
            "iteration": self.iteration,
            "warned": self._warned,
            "opponent": self._opponent.name,
            "pool": self.pool.state_dict(),
            "dropped": [snapshot_state(s) for s in self.snapshots if s.name not in in_pool],
            "history": copy.deepcopy(self.history),
            "collector": copy.deepcopy(collector),
            "torch_rng": torch.get_rng_state(),
        }
        if include_buffers:
            state["buffers"] = copy.deepcopy(self.algorithm.buffers_state_dict())
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` into a league built like the one that saved it.

        The league's own arguments stay (``total_frames`` may grow, ``strategy`` and
        ``pool_size`` change); what was learned and counted comes from ``state``.

        Raises:
            ValueError: before anything is loaded, for a state that is not a league's,
                or one of a league with other sides, another algorithm, other groups or
                other network shapes; the message says what the state holds and what
                this league is.
        """
        if not isinstance(state, Mapping) or "league" not in state:
            got = sorted(state) if isinstance(state, Mapping) else type(state).__name__
            raise ValueError(f"expected a League.state_dict() (with a 'league' key), got {got}")
        sides = [s.label for s in self.sides]
        if list(state["sides"]) != sides:
            raise ValueError(
                f"this checkpoint is of a league with sides {list(state['sides'])}, but this "
                f"league has sides {sides}: a league checkpoint only loads into a league of "
                "the same sides, in the same order"
            )
        try:  # checks the layout and the networks' shapes before loading anything
            self.algorithm.load_state_dict_full(state["algorithm"])
        except ValueError as err:
            raise ValueError(f"cannot load this league checkpoint: {err}") from err
        if "buffers" in state:
            self.algorithm.load_buffers_state_dict(copy.deepcopy(state["buffers"]))
        self.pool.load_state_dict(state["pool"])
        pooled = {s.name: s for s in self.pool}  # the pool's and the league's are one object
        dropped = [snapshot_from_state(s) for s in state["dropped"]]
        dropped += [
            snapshot_from_state(s) for s in state["pool"]["snapshots"] if s["name"] not in pooled
        ]  # dropped now, by a smaller pool_size
        self.snapshots = sorted([*dropped, *pooled.values()], key=lambda s: s.frames)
        self.frames = int(state["frames"])
        self.iteration = int(state["iteration"])
        self._warned = bool(state["warned"])
        self._opponent = self.pool_snapshot(state["opponent"])
        self.history = copy.deepcopy(list(state["history"]))
        self.collector.load_state_dict(copy.deepcopy(state["collector"]))
        torch.set_rng_state(state["torch_rng"])

    # ------------------------------------------------------------------ rating
    def snapshot_policy(self, snapshot: Snapshot | str) -> Policy:
        """A deterministic policy playing ``snapshot`` (a copy: the learner is untouched)."""
        if isinstance(snapshot, str):
            snapshot = self.pool_snapshot(snapshot)
        return _Frozen(copy.deepcopy(self.algorithm.policy), snapshot.state)

    def rate(
        self,
        eval_env: EnvBase,
        *,
        games: int = 10,
        references: Mapping[str, Policy] | None = None,
        snapshots: Sequence[str] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> LeagueRatings:
        """Play every pair of players on both sides and fit Elo ratings to the games.

        Players: the snapshots (all taken, or those named in ``snapshots``), each
        deterministic, and the reference players: ``"random"`` (uniform legal actions)
        and any in ``references``.

        Args:
            eval_env: a separate env for the games (the training env keeps its state).
            games: games per pairing and side assignment (each pair plays ``2 * games``).
            references: extra fixed players, ``{name: policy}``.
            snapshots: the names of the snapshots to rate (default: all).
            meta: extra fields for ``elo.json`` (e.g. ``task``, ``algorithm``).

        Returns:
            The ratings (write them with :meth:`LeagueRatings.write`).

        Raises:
            ValueError: for the training env as ``eval_env``, or a reference player named
                like a snapshot or ``"random"``.
        """
        if eval_env is self.env:
            raise ValueError(
                "rate() needs a separate eval_env: the training env keeps the state of the "
                "games being collected"
            )
        chosen = self.snapshots if snapshots is None else [self.pool_snapshot(n) for n in snapshots]
        players: dict[str, Policy] = {s.name: self.snapshot_policy(s) for s in chosen}
        refs: dict[str, Policy] = {"random": RandomPlayer(eval_env)}
        for name, player in (references or {}).items():
            if name in refs or name in players:
                raise ValueError(f"reference player {name!r} clashes with a player of that name")
            refs[name] = player
        players.update(refs)
        results = []
        for a, b in itertools.combinations(players, 2):
            for first, second in ((a, b), (b, a)):
                scores = play_games(
                    eval_env,
                    players[first],
                    players[second],
                    self.sides,
                    games,
                    outcome=self.outcome,
                )
                results += [GameResult(first, second, s) for s in scores]
        info = {"sides": [s.label for s in self.sides], "games_per_pairing": games, **(meta or {})}
        return rate_results(
            results, [(s.name, s.iteration, s.frames) for s in chosen], list(refs), info
        )

    def pool_snapshot(self, name: str) -> Snapshot:
        """A snapshot taken by this league, by name."""
        for snap in self.snapshots:
            if snap.name == name:
                return snap
        raise KeyError(f"no snapshot {name!r}; taken: {[s.name for s in self.snapshots]}")
