"""A zero-sum game's evaluation: the trained policy against a fixed reference player.

In self-play the trained policy plays every seat of a game (tictactoe's two players share
the group ``"player"``; VMAS simple_tag's adversaries and good agent are two groups, both
trained). The plain evaluation (:func:`~marl.algorithms.evaluate_episodes`) reports the
mean return over the groups' agents, which in a zero-sum game is 0 whatever the policy:
it says nothing. :class:`VersusReference` is an :class:`~marl.algorithms.Evaluator` whose
headline does: the policy plays one seat and a reference player (uniformly random legal
actions by default) the other, from each seat equally often, and the return is the
policy's side's: about 0 for a policy no better than the reference (in a zero-sum game
the reference's two seats cancel out), up to +1 for one that always wins tictactoe.

The games are :func:`~marl.league.games.play_sides`'s, hence
:func:`marl.envs.episodes.play_episodes`'s loop, the one every evaluation runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tensordict import TensorDictBase

from marl.algorithms import EvalEpisodes, group_infos
from marl.envs.common import EnvBase
from marl.league.games import Outcome, Policy, RandomPlayer, compare_returns, play_sides, score_game
from marl.league.sides import Side, SideSpec, resolve_sides

__all__ = ["REFERENCE_PLAYERS", "VersusReference"]

REFERENCE_PLAYERS: dict[str, Callable[[EnvBase], Policy]] = {"random": RandomPlayer}
"""The reference players by name: each is built from the evaluation env."""

# per-game outcomes, each 1 or 0, logged as eval/<name> and kept in results.json
_OUTCOMES = {1.0: "win_rate", 0.5: "draw_rate", 0.0: "loss_rate"}


class VersusReference:
    """Evaluate a policy against a fixed reference player, from both seats of a game.

    Half of the episodes the policy plays the first seat, half the second (an odd count is
    rounded up so that both seats play equally often). The result's ``returns`` (the
    headline: ``eval/episode_reward``, ``results.json``'s ``"return"``) are the policy's
    side's returns (a side's return: the sum over the game of its agents' mean reward);
    ``group_returns`` keep their usual meaning, each group's mean over its agents whoever
    plays them (a group split in two seats: 0 in a zero-sum game); ``metrics`` hold
    ``win_rate``, ``draw_rate`` and ``loss_rate`` (1 or 0 per game, scored by
    ``outcome``). Episodes are listed seat by seat: first-seat games first.

    The seats are :func:`~marl.league.resolve_sides`'s: a group of two agents split in
    two (tictactoe), or two groups (simple_tag: ``adversary`` and ``agent``).

    Args:
        reference: the opponent: a name of :data:`REFERENCE_PLAYERS` (``"random"``:
            uniformly random legal actions) or ``env -> policy``.
        sides: the two seats (see :func:`~marl.league.resolve_sides`); ``None``: two
            groups, or a group of two agents split in two.
        outcome: scores a game from the two sides' returns (default: the higher wins).
        max_steps: safety cap on env steps per seat.

    Raises:
        ValueError: for an unknown reference name.

    Examples:
        >>> from marl.envs.tasks import make_task
        >>> env = make_task("pettingzoo/tictactoe", num_envs=2, seed=0)
        >>> evaluator = VersusReference("random")
        >>> [s.label for s in evaluator.seats(env)]
        ['player[0]', 'player[1]']
        >>> result = evaluator(env, RandomPlayer(env), episodes=4)
        >>> len(result.returns), sorted(result.metrics)
        (4, ['draw_rate', 'loss_rate', 'win_rate'])
        >>> result.group_returns["player"]  # zero-sum: the group's mean is always 0
        [0.0, 0.0, 0.0, 0.0]
    """

    def __init__(
        self,
        reference: str | Callable[[EnvBase], Policy] = "random",
        *,
        sides: Sequence[SideSpec] | None = None,
        outcome: Outcome = compare_returns,
        max_steps: int = 100_000,
    ) -> None:
        if isinstance(reference, str):
            if reference not in REFERENCE_PLAYERS:
                raise ValueError(
                    f"unknown reference player {reference!r}; known: {sorted(REFERENCE_PLAYERS)} "
                    "(or give a function env -> policy)"
                )
            self.name, self.make_reference = reference, REFERENCE_PLAYERS[reference]
        elif callable(reference):
            self.name = getattr(reference, "__name__", type(reference).__name__)
            self.make_reference = reference
        else:
            raise ValueError(
                f"reference must be a name in {sorted(REFERENCE_PLAYERS)} or a function "
                f"env -> policy, got {reference!r}"
            )
        self.sides = None if sides is None else list(sides)
        self.outcome = outcome
        self.max_steps = max_steps

    def seats(self, env: EnvBase) -> tuple[Side, Side]:
        """The game's two seats on ``env``, checked.

        Raises:
            ValueError: when ``env`` is not a two-seat game (a single agent, one group of
                more than two agents, three groups...): any problem
                :func:`~marl.league.resolve_sides` finds, with its hint.
        """
        try:
            return resolve_sides(self.sides, group_infos(env), env.group_map)
        except ValueError as err:
            raise ValueError(
                "an evaluation against a reference player needs a game of two seats (two "
                f"groups, or one group of two agents split in two): {err}"
            ) from err

    def play_seat(
        self,
        env: EnvBase,
        policy: Callable[[TensorDictBase], TensorDictBase],
        games: int,
        seat: int,
        *,
        deterministic: bool = True,
    ) -> EvalEpisodes:
        """``games`` games with ``policy`` on seat ``seat`` (0: first, 1: second).

        Returns:
            The policy's side's returns, the group's mean returns, lengths and the
            win/draw/loss outcomes of each game (see the class).

        Raises:
            ValueError: for a seat other than 0 or 1, or an env that is not a two-seat
                game (:meth:`seats`).
            RuntimeError: when the games do not end within ``max_steps``.
        """
        if seat not in (0, 1) or isinstance(seat, bool):
            raise ValueError(f"seat must be 0 (the first) or 1 (the second), got {seat!r}")
        seats = self.seats(env)
        mine, theirs = seats[seat], seats[1 - seat]
        played = play_sides(
            env,
            policy,
            self.make_reference(env),
            (mine, theirs),
            games,
            deterministic=deterministic,
            max_steps=self.max_steps,
        )
        metrics: dict[str, list[float]] = {name: [] for name in _OUTCOMES.values()}
        for values in played.values:
            score = score_game(self.outcome, values)
            for value, name in _OUTCOMES.items():
                metrics[name].append(1.0 if score == value else 0.0)
        if mine.group == theirs.group:  # one group split in two: weigh each side by its agents
            n_mine, n_theirs = len(mine.agents or ()), len(theirs.agents or ())
            group_returns = {
                mine.group: [
                    float(v[0] * n_mine + v[1] * n_theirs) / (n_mine + n_theirs)
                    for v in played.values
                ]
            }
        else:  # two groups: each side's return is its group's, in the env's group order
            by_group = {mine.group: 0, theirs.group: 1}
            group_returns = {
                g: [float(v[by_group[g]]) for v in played.values]
                for g in env.group_map
                if g in by_group
            }
        return EvalEpisodes(
            returns=[float(v[0]) for v in played.values],
            group_returns=group_returns,
            lengths=list(played.lengths),
            metrics=metrics,
        )

    def __call__(
        self,
        env: EnvBase,
        policy: Callable[[TensorDictBase], TensorDictBase],
        episodes: int,
        *,
        deterministic: bool = True,
    ) -> EvalEpisodes:
        """Play ``episodes`` games (rounded up to even), half from each seat.

        Raises:
            ValueError: when ``episodes`` is not an integer >= 1, or ``env`` is not a
                two-seat game (:meth:`seats`).
            RuntimeError: when the games do not end within ``max_steps``.
        """
        if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
            raise ValueError(f"episodes must be an integer >= 1, got {episodes!r}")
        per_seat = (episodes + 1) // 2
        first, second = (
            self.play_seat(env, policy, per_seat, seat, deterministic=deterministic)
            for seat in (0, 1)
        )
        return EvalEpisodes(
            returns=first.returns + second.returns,
            group_returns={g: v + second.group_returns[g] for g, v in first.group_returns.items()},
            lengths=first.lengths + second.lengths,
            metrics={name: v + second.metrics[name] for name, v in first.metrics.items()},
        )

    def __repr__(self) -> str:
        return f"VersusReference({self.name!r})"
