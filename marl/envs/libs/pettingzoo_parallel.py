"""PettingZoo's parallel step of an AEC env, without the observations it throws away.

Most PettingZoo parallel envs (``pistonball``, ``cooperative_pong``, MPE, KAZ) are AEC envs
under ``pettingzoo.utils.conversions.aec_to_parallel_wrapper``. Its ``step`` calls
``aec_env.last()`` before each agent's move, which computes that agent's observation and
discards it, then observes every agent again once all have moved. On pixel tasks an
observation is a crop copied out of the rendered screen: pistonball spent half of its
observation time (a sixth of its step) on the discarded ones (py-spy, 4 envs).
:func:`parallel_step` is that ``step`` with the same moves, rewards, flags and final
observations, minus the discarded ones.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

__all__ = ["parallel_step", "steps_without_discarded_observations"]


def steps_without_discarded_observations(env: Any) -> bool:
    """Whether :func:`parallel_step` can step ``env``: exactly PettingZoo's
    ``aec_to_parallel_wrapper`` (a subclass may change ``step``, so it keeps its own).

    Examples:
        >>> from mpe2 import simple_v3
        >>> steps_without_discarded_observations(simple_v3.parallel_env())
        True
    """
    try:
        from pettingzoo.utils.conversions import aec_to_parallel_wrapper
    except ImportError:  # an older PettingZoo: its own step
        return False
    return type(env) is aec_to_parallel_wrapper


def parallel_step(env: Any, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
    """``env.step(actions)`` for an ``aec_to_parallel_wrapper``, observing each agent once.

    The moves, the summed rewards, the flags, the infos and the returned observations are
    those of PettingZoo's ``aec_to_parallel_wrapper.step`` (PettingZoo 1.24 to 1.27);
    only the observation it computes before each agent's move, and never returns, is
    skipped (PettingZoo observations are pure reads of the env's state).

    Args:
        env: a PettingZoo ``aec_to_parallel_wrapper`` (see
            :func:`steps_without_discarded_observations`).
        actions: ``{agent: action}`` for every live agent.

    Returns:
        ``(observations, rewards, terminations, truncations, infos)``, as ``env.step``.

    Raises:
        AssertionError: as PettingZoo's, when the AEC env's agents do not take turns in
            order (an agent done mid-cycle, or turns skipped).

    Examples:
        >>> from mpe2 import simple_spread_v3
        >>> env = simple_spread_v3.parallel_env(N=2, max_cycles=5)
        >>> _ = env.reset(seed=0)
        >>> obs, rewards, *_ = parallel_step(env, {a: 0 for a in env.agents})
        >>> sorted(obs), sorted(rewards)
        (['agent_0', 'agent_1'], ['agent_0', 'agent_1'])
    """
    aec = env.aec_env
    rewards: dict[str, float] = defaultdict(int)
    for agent in aec.agents:
        if agent != aec.agent_selection:
            raise AssertionError(
                f"expected agent {agent} got agent {aec.agent_selection}: a parallel "
                "PettingZoo env's agents must take turns in a cycle, and be done only at "
                "the end of one"
            )
        aec.step(actions[agent])
        for live in aec.agents:
            rewards[live] += aec.rewards[live]
    terminations = dict(**aec.terminations)
    truncations = dict(**aec.truncations)
    infos = dict(**aec.infos)
    observations = {agent: aec.observe(agent) for agent in aec.agents}
    while aec.agents and (
        aec.terminations[aec.agent_selection] or aec.truncations[aec.agent_selection]
    ):
        aec.step(None)
    env.agents = aec.agents
    return observations, rewards, terminations, truncations, infos
