"""The random and the no-op baseline, run through the same evaluation as a trained policy.

A learning result means something only next to what doing nothing and acting at
random score on the same episodes. On VMAS ``navigation``, for instance, standing
still scores 0.0 while random actions score about -0.2: a test that only asks
"better than random" passes for a policy that learned to stand still.

- :func:`random_policy`: uniformly random actions (legal ones where the env has
  action masks), from the env's own :meth:`~marl.envs.EnvBase.rand_action`.
- :class:`NoopPolicy`: the most passive action: zero for continuous actions
  (clamped into the bounds), index 0 for discrete ones (the "no-op" of VMAS and
  MPE), or the lowest legal index where an action mask forbids 0.
- :func:`compare_with_baselines`: the trained policy, the random and the no-op
  policy, each on a fresh env built the same way (same seed, same episodes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from tensordict import TensorDictBase

from marl.envs.common import EnvBase
from marl.specs import Binary, Categorical, MultiCategorical, OneHot, TensorSpec

__all__ = [
    "BaselineComparison",
    "NoopPolicy",
    "baseline_returns",
    "compare_with_baselines",
    "random_policy",
]

Policy = Callable[[TensorDictBase], TensorDictBase]


def random_policy(env: EnvBase) -> Policy:
    """Uniformly random actions for every group of ``env`` (legal ones under a mask).

    Examples:
        >>> from marl.testing import MultiAgentFakeEnv
        >>> env = MultiAgentFakeEnv(num_envs=2, seed=0)
        >>> td = random_policy(env)(env.reset())
        >>> td["picker", "action"].shape
        torch.Size([2, 3])
    """
    return env.rand_action


def _noop(spec: TensorSpec, mask: torch.Tensor | None) -> torch.Tensor:
    if isinstance(spec, (Categorical, OneHot)):
        n = spec.n
        if mask is None:
            index = torch.zeros(spec.shape[:-1] if isinstance(spec, OneHot) else spec.shape,
                                dtype=torch.long, device=spec.device)  # fmt: skip
        else:
            # the first legal choice: argmax returns the first maximum
            index = mask.to(torch.int8).argmax(-1)
        if isinstance(spec, OneHot):
            return torch.nn.functional.one_hot(index, n).to(spec.dtype)
        return index.to(spec.dtype)
    if isinstance(spec, (MultiCategorical, Binary)):
        return spec.zero()
    return spec.project(spec.zero())  # continuous: zero, clamped into the bounds


class NoopPolicy:
    """The most passive action for every group: the baseline "do nothing".

    - continuous actions: zero, clamped into the action bounds;
    - discrete actions: index 0 (VMAS and MPE's no-op), or the lowest legal index
      where the env's ``action_mask`` forbids 0;
    - multi-discrete and binary actions: all zeros.

    Args:
        env: the env whose ``action_spec`` gives the shapes.

    Examples:
        >>> from marl.testing import MultiAgentFakeEnv
        >>> env = MultiAgentFakeEnv(num_envs=2, seed=0)
        >>> td = NoopPolicy(env)(env.reset())
        >>> td["walker", "action"].abs().sum().item()
        0.0
        >>> bool(td["picker", "action_mask"].gather(
        ...     -1, td["picker", "action"].unsqueeze(-1)).all())  # legal moves only
        True
    """

    def __init__(self, env: EnvBase) -> None:
        self.action_spec = env.action_spec
        self.action_keys = list(env.action_keys)

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        for key in self.action_keys:
            path = key if isinstance(key, tuple) else (key,)
            mask = td.get((*path[:-1], "action_mask"), None)
            td.set(key, _noop(self.action_spec[key], mask))
        return td


@dataclass
class BaselineComparison:
    """Mean evaluation returns of a trained policy and of the two baselines.

    Attributes:
        trained: the trained policy's mean return.
        random: the random policy's mean return.
        noop: the no-op policy's mean return.
        episodes: episodes per policy.
        group_returns: ``{policy: {group: mean return}}`` for envs with groups.
        metrics: ``{policy: {metric: mean}}`` for the env's episode metrics (a win rate:
            see :attr:`~marl.envs.EnvBase.episode_metrics`).
    """

    trained: float
    random: float
    noop: float
    episodes: int
    group_returns: dict[str, dict[str, float]] = field(default_factory=dict)
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def best_baseline(self) -> float:
        """The higher of the random and no-op returns."""
        return max(self.random, self.noop)

    @property
    def margin(self) -> float:
        """How far the trained policy is above the better baseline (negative: below)."""
        return self.trained - self.best_baseline

    def __str__(self) -> str:
        text = (
            f"trained {self.trained:.3f} vs random {self.random:.3f}, no-op {self.noop:.3f} "
            f"({self.episodes} episodes each; margin {self.margin:+.3f})"
        )
        for name in self.metrics.get("trained", {}):
            values = ", ".join(
                f"{policy} {self.metrics[policy][name]:.3f}"
                for policy in ("trained", "random", "noop")
            )
            text += f"; {name}: {values}"
        return text


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def baseline_returns(
    make_env: Callable[[], EnvBase], episodes: int = 20, max_steps: int = 100_000, seed: int = 0
) -> dict[str, float]:
    """Mean returns of the random and the no-op policy, each on a fresh ``make_env()``.

    Args:
        make_env: builds the evaluation env; called once per policy, so build it with
            a fixed seed to give both policies the same episodes.
        episodes: episodes per policy.
        max_steps: safety cap on env steps.
        seed: seeds torch's global generator for each evaluation (restored after), so
            the random policy's score repeats.

    Returns:
        ``{"random": ..., "noop": ...}``.

    Examples:
        >>> from marl.testing import SingleAgentFakeEnv
        >>> scores = baseline_returns(lambda: SingleAgentFakeEnv(num_envs=4, seed=0), episodes=4)
        >>> sorted(scores)
        ['noop', 'random']
    """
    return {
        name: _mean(result.returns)
        for name, result in _run_baselines(make_env, episodes, max_steps, seed).items()
    }


def _run_baselines(
    make_env: Callable[[], EnvBase], episodes: int, max_steps: int, seed: int
) -> dict:
    out = {}
    for name, factory in (("random", random_policy), ("noop", NoopPolicy)):
        out[name] = _evaluate(make_env, factory, episodes, max_steps, seed)
    return out


def _evaluate(make_env, policy_factory, episodes: int, max_steps: int, seed: int):
    # marl.algorithms holds the evaluation loop; imported here so that importing the
    # fake envs stays light
    from marl.algorithms.evaluation import evaluate_episodes

    # the random policy (and any sampling env) draws from torch's global generator: seed
    # it here, without disturbing the caller's stream, so that a score does not depend
    # on what ran before
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        env = make_env()
        try:
            return evaluate_episodes(env, policy_factory(env), episodes, max_steps)
        finally:
            env.close()


def compare_with_baselines(
    make_env: Callable[[], EnvBase],
    policy: Policy,
    episodes: int = 20,
    max_steps: int = 100_000,
    seed: int = 0,
) -> BaselineComparison:
    """Evaluate ``policy``, the random and the no-op policy on the same episodes.

    Each policy runs on its own ``make_env()`` (build it with a fixed seed), through
    :func:`~marl.algorithms.evaluate_episodes` in deterministic mode, which is how
    trained policies are evaluated everywhere in marl.

    Args:
        make_env: builds the evaluation env.
        policy: the trained policy (e.g. ``algorithm.eval_policy()``).
        episodes: episodes per policy.
        max_steps: safety cap on env steps.
        seed: seeds torch's global generator for each evaluation (restored after), so
            that sampling (the random policy's, a stochastic env's) repeats.

    Returns:
        The three mean returns (and per-group ones).

    Examples:
        >>> from marl.testing import SingleAgentFakeEnv
        >>> make = lambda: SingleAgentFakeEnv(num_envs=4, seed=0)
        >>> result = compare_with_baselines(make, NoopPolicy(make()), episodes=4)
        >>> result.trained == result.noop
        True
    """
    results = {"trained": _evaluate(make_env, lambda env: policy, episodes, max_steps, seed)}
    results.update(_run_baselines(make_env, episodes, max_steps, seed))
    groups = {
        name: {g: _mean(v) for g, v in result.group_returns.items()}
        for name, result in results.items()
        if result.group_returns
    }
    return BaselineComparison(
        trained=_mean(results["trained"].returns),
        random=_mean(results["random"].returns),
        noop=_mean(results["noop"].returns),
        episodes=len(results["trained"].returns),
        group_returns=groups,
        metrics={
            name: {m: _mean(v) for m, v in result.metrics.items()}
            for name, result in results.items()
            if result.metrics
        },
    )
