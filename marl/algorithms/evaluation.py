"""Evaluation: complete episodes of a policy on an env, each counted once.

:func:`evaluate_episodes` is the evaluation loop that :class:`~marl.algorithms.Trainer`,
the experiment runner's absolute metric and the baselines' comparisons use by default;
:func:`evaluate` gives its logs. An :class:`Evaluator` is anything called like
:func:`evaluate_episodes`: a task can be evaluated another way (a zero-sum game against
a fixed opponent: :class:`marl.league.VersusReference`) by handing the trainer one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import torch
from tensordict import TensorDictBase

from marl.envs.common import EnvBase
from marl.envs.episodes import play_episodes
from marl.specs import NestedKey

__all__ = [
    "EvalEpisodes",
    "Evaluator",
    "Logs",
    "episode_outcomes",
    "evaluate",
    "evaluate_episodes",
    "put_log",
    "reward_prefixes",
]

Logs = dict[str, float]


def reward_prefixes(env: EnvBase) -> list[tuple[str, ...]]:
    """``()`` for a root reward, ``(group,)`` for group rewards.

    Examples:
        >>> from marl.testing import MultiAgentFakeEnv
        >>> reward_prefixes(MultiAgentFakeEnv(num_envs=1))
        [('walker',), ('picker',)]
    """
    out = []
    for key in env.reward_keys:
        key = key if isinstance(key, tuple) else (key,)
        out.append(key[:-1])
    return out


def _label(prefix: tuple[str, ...]) -> str:
    return "/".join(prefix)


def put_log(logs: Logs, scope: str, prefix: tuple[str, ...], name: str, value: float) -> None:
    """``logs["<scope>/<group>/<name>"] = value`` (``"<scope>/<name>"`` for a root prefix)."""
    logs[f"{scope}/{_label(prefix)}/{name}" if prefix else f"{scope}/{name}"] = value


@dataclass
class EvalEpisodes:
    """Per-episode results of :func:`evaluate_episodes`.

    Attributes:
        returns: each episode's return (mean over groups of the agent-mean return).
        group_returns: ``{group: [return per episode]}`` for grouped rewards.
        lengths: each episode's length in env steps.
        metrics: ``{name: [outcome per episode]}`` for the env's
            :attr:`~marl.envs.EnvBase.episode_metrics` (a win rate's 0/1 wins).
    """

    returns: list[float]
    group_returns: dict[str, list[float]]
    lengths: list[int]
    metrics: dict[str, list[float]] = field(default_factory=dict)

    def logs(self) -> Logs:
        """``eval/episode_reward``, ``eval/<group>/episode_reward``, ``eval/episode_length``
        and ``eval/<metric>`` for each episode metric."""
        logs: Logs = {"eval/episode_reward": sum(self.returns) / len(self.returns)}
        for group, values in self.group_returns.items():
            logs[f"eval/{group}/episode_reward"] = sum(values) / len(values)
        logs["eval/episode_length"] = sum(self.lengths) / len(self.lengths)
        for name, values in self.metrics.items():
            logs[f"eval/{name}"] = sum(values) / len(values)
        return logs


class Evaluator(Protocol):
    """How a policy's evaluation episodes are played: :func:`evaluate_episodes`'s signature.

    ``evaluator(env, policy, episodes, deterministic=...)`` plays complete episodes of
    ``policy`` on ``env`` and returns an :class:`EvalEpisodes` whose ``returns`` are the
    headline (``eval/episode_reward``, ``results.json``'s ``"return"``).
    """

    def __call__(
        self,
        env: EnvBase,
        policy: Callable[[TensorDictBase], TensorDictBase],
        episodes: int,
        *,
        deterministic: bool = True,
    ) -> EvalEpisodes: ...


def episode_outcomes(env: EnvBase, td: TensorDictBase) -> dict[str, torch.Tensor]:
    """Each of ``env.episode_metrics`` read from a transition's ``"next"``, ``[*B]`` floats.

    Its value counts at the steps where an episode ended.

    Examples:
        >>> from marl.testing import MultiAgentFakeEnv
        >>> env = MultiAgentFakeEnv(num_envs=2)
        >>> episode_outcomes(env, env.rollout(2))
        {}
    """
    return {
        name: td.get(("next", *_key(key))).float().reshape(td.batch_size)
        for name, key in env.episode_metrics.items()
    }


def _key(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


@torch.no_grad()
def evaluate_episodes(
    env: EnvBase,
    policy: Callable[[TensorDictBase], TensorDictBase],
    episodes: int = 10,
    max_steps: int = 100_000,
    deterministic: bool = True,
) -> EvalEpisodes:
    """Run ``policy`` on ``env`` for exactly ``episodes`` episodes, shared over its sub-envs.

    The loop is :func:`marl.envs.episodes.play_episodes`. Each sub-env's share is fixed before the first step: ``episodes // num_envs``, one
    more for the first ``episodes % num_envs`` sub-envs (10 episodes over 8 envs: 2, 2,
    1, 1, 1, 1, 1, 1), and it counts its first episodes up to that share. Which episodes
    count thus never depends on their length, so short episodes are not favoured as
    they would be by keeping the first ``episodes`` to end. Sub-envs with no share left
    (or none at all) keep stepping with the batch, but their episodes are not counted.
    Rewards are averaged over a group's agents, then summed over the episode.

    Args:
        env: the evaluation env (reset here; a separate env from the training one).
        policy: ``td -> td`` writing every action.
        episodes: the number of episodes.
        max_steps: safety cap on env steps.
        deterministic: run under ``InteractionType.DETERMINISTIC`` (mode, no exploration).

    Returns:
        The returns and lengths of every finished episode.

    Raises:
        RuntimeError: when no episode ends within ``max_steps``.

    Examples:
        >>> from marl.testing import MultiAgentFakeEnv
        >>> env = MultiAgentFakeEnv(num_envs=4, seed=0)
        >>> result = evaluate_episodes(env, env.rand_action, episodes=6)
        >>> len(result.returns), sorted(result.group_returns)
        (6, ['picker', 'walker'])
    """
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"evaluate: episodes must be an integer >= 1, got {episodes!r}")
    prefixes = reward_prefixes(env)
    n = max(1, env.batch_size.numel())

    metric_names = list(env.episode_metrics)

    def group_rewards(td: TensorDictBase) -> torch.Tensor:  # [groups + metrics, n]
        rows = [td.get(("next", *p, "reward")).float().reshape(n, -1).mean(-1) for p in prefixes]
        if metric_names:
            # an outcome counts at the episode's last step only: zero elsewhere, so the
            # episode's sum is its value at the end
            done = td.get(("next", "done")).reshape(n).float()
            rows += [v.reshape(n) * done for v in episode_outcomes(env, td).values()]
        return torch.stack(rows)

    played = play_episodes(
        env, policy, episodes, group_rewards, max_steps=max_steps, deterministic=deterministic
    )
    if not played.values:
        raise RuntimeError(f"evaluate: no episode ended within max_steps={max_steps}")
    group_returns = {
        _label(prefix): [float(r[i]) for r in played.values]
        for i, prefix in enumerate(prefixes)
        if prefix
    }
    k = len(prefixes)
    return EvalEpisodes(
        returns=[float(r[:k].mean()) for r in played.values],
        group_returns=group_returns,
        lengths=list(played.lengths),
        metrics={
            name: [float(r[k + i]) for r in played.values] for i, name in enumerate(metric_names)
        },
    )


def evaluate(
    env: EnvBase,
    policy: Callable[[TensorDictBase], TensorDictBase],
    episodes: int = 10,
    max_steps: int = 100_000,
    deterministic: bool = True,
) -> Logs:
    """Mean return of ``policy`` over complete episodes on ``env``.

    Args:
        env: the evaluation env (reset here; a separate env from the training one).
        policy: ``td -> td`` writing every action.
        episodes: the number of episodes.
        max_steps: safety cap on env steps.
        deterministic: run under ``InteractionType.DETERMINISTIC`` (mode, no exploration).

    Returns:
        ``eval/episode_reward`` (the mean over groups), ``eval/<group>/episode_reward``
        for each group, and ``eval/episode_length``; see :func:`evaluate_episodes`.

    Examples:
        >>> from marl.testing import SingleAgentFakeEnv
        >>> env = SingleAgentFakeEnv(num_envs=4, seed=0)
        >>> logs = evaluate(env, env.rand_action, episodes=4)
        >>> sorted(logs)
        ['eval/episode_length', 'eval/episode_reward']
    """
    return evaluate_episodes(env, policy, episodes, max_steps, deterministic).logs()
