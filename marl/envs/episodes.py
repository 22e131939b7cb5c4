"""The episode loop: a policy plays exactly ``episodes`` complete episodes on a batched env.

Evaluation (:func:`marl.algorithms.evaluate_episodes`), league games
(:func:`marl.league.play_games`) and videos (:func:`marl.experiment.video.record_episode`)
all run this loop, so all count episodes the same fair way: each sub-env's share of the episodes is fixed before the first step, and a
sub-env counts its first episodes up to that share. Keeping instead the first
``episodes`` to end, whichever sub-env they come from, favours short episodes (in a
game, the quick wins or losses).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, set_interaction_type

from marl.envs.common import EnvBase

__all__ = ["Episodes", "episode_shares", "play_episodes"]


@dataclass
class Episodes:
    """The episodes :func:`play_episodes` counted, in the order they ended.

    Attributes:
        values: each episode's sums of the per-step values, ``[k]`` tensors.
        lengths: each episode's number of steps.
        wanted: the number of episodes asked for (``len(values)`` is less only when
            ``max_steps`` ran out first).
    """

    values: list[torch.Tensor] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    wanted: int = 0

    @property
    def complete(self) -> bool:
        """Whether every episode asked for ended."""
        return len(self.values) >= self.wanted


def episode_shares(episodes: int, num_envs: int) -> torch.Tensor:
    """Each sub-env's share of ``episodes``: ``episodes // num_envs``, one more for the first
    ``episodes % num_envs`` sub-envs.

    Examples:
        >>> episode_shares(10, 8).tolist()
        [2, 2, 1, 1, 1, 1, 1, 1]
        >>> episode_shares(2, 4).tolist()
        [1, 1, 0, 0]
    """
    share = torch.full((num_envs,), episodes // num_envs, dtype=torch.long)
    share[: episodes % num_envs] += 1
    return share


@torch.no_grad()
def play_episodes(
    env: EnvBase,
    policy: Callable[[TensorDictBase], TensorDictBase],
    episodes: int,
    step_values: Callable[[TensorDictBase], torch.Tensor],
    *,
    max_steps: int = 100_000,
    deterministic: bool = True,
    observe: Callable[[TensorDictBase], object] | None = None,
) -> Episodes:
    """Run ``policy`` on ``env`` until every sub-env has played its share of ``episodes``.

    The env is reset first and stepped with partial resets
    (:meth:`~marl.envs.common.EnvBase.step_and_maybe_reset`). Sub-envs with no share
    left (or none at all) keep stepping with the batch, but their episodes are not
    counted (:func:`episode_shares`).

    Args:
        env: the env (reset here).
        policy: ``td -> td`` writing every action.
        episodes: the number of episodes, ``>= 1``.
        step_values: ``td -> [k, num_envs]`` values of one step (``td`` holds the
            transition, ``"next"`` included), summed over each episode: the rewards
            of each group, of each side...
        max_steps: the cap on env steps; fewer episodes are returned when it runs out
            (see :attr:`Episodes.complete`).
        deterministic: run under ``InteractionType.DETERMINISTIC`` (mode, no
            exploration), else ``RANDOM``.
        observe: called with the reset TensorDict, then with every transition before
            the sub-envs that ended are reset, so the env still holds the state the
            step ended in (a video renders it).

    Returns:
        The counted episodes' value sums and lengths.

    Raises:
        ValueError: when ``episodes`` is not an integer ``>= 1``.

    Examples:
        >>> from marl.testing import SingleAgentFakeEnv
        >>> env = SingleAgentFakeEnv(num_envs=4, seed=0)
        >>> played = play_episodes(
        ...     env, env.rand_action, 6, lambda td: td["next", "reward"].reshape(1, -1))
        >>> len(played.values), played.complete, played.values[0].shape
        (6, True, torch.Size([1]))
    """
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"episodes must be an integer >= 1, got {episodes!r}")
    n = max(1, env.batch_size.numel())
    share = episode_shares(episodes, n)
    out = Episodes(wanted=episodes)
    running: torch.Tensor | None = None
    length = torch.zeros(n, dtype=torch.long)
    count = torch.zeros(n, dtype=torch.long)
    mode = InteractionType.DETERMINISTIC if deterministic else InteractionType.RANDOM
    td = env.reset()
    if observe is not None:
        observe(td)
    with set_interaction_type(mode):
        for _ in range(max_steps):
            td = policy(td)
            td = env.step(td)
            if observe is not None:
                observe(td)
            root = env.maybe_reset(td)
            values = step_values(td).float().reshape(-1, n).cpu()
            running = values if running is None else running + values
            length += 1
            done = td.get(("next", "done")).reshape(n).cpu()
            keep = done & (count < share)
            for j in keep.nonzero().flatten().tolist():
                out.values.append(running[:, j].clone())
                out.lengths.append(int(length[j]))
            count += done.long()
            running[:, done] = 0.0
            length[done] = 0
            if bool((count >= share).all()):
                break
            td = root
    return out
