"""The PettingZoo-based wrappers give the raw package's data, agent by agent.

MPE, SISL, Butterfly (agents that die; the pixel tasks) and MAgent2.

Same seed and same actions on both sides: the raw PettingZoo parallel env, stepped
by hand, and marl's wrapper. Every live agent's observation and reward, and every
agent's done flags, must be the package's own, through deaths (MAgent2) and to the
end of the episode. For MAgent2 both wrapper paths are checked (the engine's team
arrays and PettingZoo's dicts), against MAgent2's own ``step``.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch


def _check_against_raw(env, raw, steps: int, draw) -> int:
    """Step ``env`` and ``raw`` with the same actions; returns the steps played."""
    td = env.reset()
    raw_obs, _ = raw.reset(seed=3)
    members = env.group_map
    for t in range(steps):
        live = list(raw.agents)
        actions = {}
        for g, names in members.items():
            a = draw(g, len(names))
            td[g, "action"] = a
            actions.update({n: int(x) for n, x in zip(names, a) if n in live})
        for g, names in members.items():  # observations at the start of the step
            obs = td[g, "observation"].numpy()
            for j, n in enumerate(names):
                if n in raw_obs:  # float64 observations arrive as float32
                    expected = np.asarray(raw_obs[n]).astype(obs.dtype)
                    np.testing.assert_array_equal(obs[j], expected, err_msg=f"{n} at {t}")
        td = env.step(td)
        raw_obs, rewards, terms, truncs, _ = raw.step(actions)
        nxt = td["next"]
        for g, names in members.items():
            reward = nxt[g, "reward"].squeeze(-1).numpy()
            term = nxt[g, "terminated"].squeeze(-1).numpy()
            trunc = nxt[g, "truncated"].squeeze(-1).numpy()
            for j, n in enumerate(names):
                if n in rewards:
                    assert reward[j] == np.float32(rewards[n]), f"{n}'s reward at {t}"
                    assert term[j] == terms[n], f"{n}'s terminated at {t}"
                    assert trunc[j] == truncs[n], f"{n}'s truncated at {t}"
                if "mask" in nxt[g].keys():
                    assert nxt[g, "mask"][j].item() == (n in raw.agents), f"{n}'s mask at {t}"
        assert nxt["done"].item() == (not raw.agents)
        if not raw.agents:
            return t + 1
        td = nxt
    return steps


def _uniform(n_actions: dict[str, int], seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return lambda g, n: torch.randint(n_actions[g], (n,), generator=gen)


@pytest.mark.parametrize("task", ["simple_spread_v3", "simple_tag_v3"])
def test_mpe_data_is_the_packages_own(task):
    pytest.importorskip("mpe2")
    from marl.envs import PettingZooEnv

    module = importlib.import_module(f"mpe2.{task}")
    env = PettingZooEnv(task, seed=3, max_cycles=30)
    raw = module.parallel_env(max_cycles=30)
    n_actions = {g: env.action_spec[g, "action"].n for g in env.group_map}
    assert _check_against_raw(env, raw, 40, _uniform(n_actions)) == 30


@pytest.mark.parametrize(
    ("family", "task", "kwargs", "all_die"),
    [
        ("sisl", "pursuit_v5", {"max_cycles": 40}, False),
        # archers and knights die (zombies reach them): agents leave one by one, and
        # the episode ends before max_cycles when the last one does
        ("butterfly", "knights_archers_zombies_v11", {"max_cycles": 300}, True),
        # pixel tasks: the wrapper renders them by default (their frames are drawn only
        # when the env renders), so the raw env is built with render_mode="rgb_array"
        ("butterfly", "pistonball_v6", {"max_cycles": 12, "continuous": False}, False),
        ("butterfly", "cooperative_pong_v6", {"max_cycles": 30}, False),
    ],
)
def test_sisl_and_butterfly_data_is_the_packages_own(family, task, kwargs, all_die):
    pytest.importorskip("pettingzoo")
    from marl.envs import PettingZooEnv

    module = importlib.import_module(f"pettingzoo.{family}.{task}")
    env = PettingZooEnv(task, seed=3, **kwargs)
    pixels = task.startswith(("pistonball", "cooperative_pong"))
    raw = module.parallel_env(**kwargs, **({"render_mode": "rgb_array"} if pixels else {}))
    n_actions = {g: env.action_spec[g, "action"].n for g in env.group_map}
    played = _check_against_raw(env, raw, kwargs["max_cycles"] + 5, _uniform(n_actions))
    assert (played < kwargs["max_cycles"]) if all_die else (played == kwargs["max_cycles"])


@pytest.mark.parametrize("engine_arrays", [True, False], ids=["engine", "pettingzoo"])
def test_magent2_data_is_the_packages_own_through_deaths(engine_arrays):
    """MAgent2's own step, with its teams counted after the map is built (MAgent2 0.3.4
    counts them before, and then hands the engine empty action arrays at the first step
    of an episode: see ``MAgent2Env.reset_arrays``)."""
    pytest.importorskip("magent2")
    from magent2.environments import battle_v4

    from marl.envs import magent2_env

    kwargs = {"map_size": 12, "max_cycles": 2500}
    env = magent2_env("battle_v4", seed=3, **kwargs)
    env.engine_arrays = engine_arrays
    raw = battle_v4.parallel_env(**kwargs)
    reset = raw.reset

    def reset_and_recount(**kw):
        out = reset(**kw)
        raw.team_sizes = [raw.env.get_num(h) for h in raw.handles]
        return out

    raw.reset = reset_and_recount
    gen = torch.Generator().manual_seed(0)

    def attacks(g, n):  # 60% attacks (actions 13-20): agents die, a team is wiped out
        any_action = torch.randint(0, 21, (n,), generator=gen)
        attack = torch.randint(13, 21, (n,), generator=gen)
        return torch.where(torch.rand(n, generator=gen) < 0.6, attack, any_action)

    steps = _check_against_raw(env, raw, 2500, attacks)
    assert steps < 2500  # the game ended before the cycle limit: a team was wiped out
    assert (env.pettingzoo_env.env.get_num(env.pettingzoo_env.handles[0]) == 0) or (
        env.pettingzoo_env.env.get_num(env.pettingzoo_env.handles[1]) == 0
    )
