"""Print the task tables of the family pages in ``docs/basic/tasks/`` (Markdown).

Run ``python docs/figures/make_task_tables.py vmas`` (or ``pettingzoo``, ``gymnasium``,
any family of the catalogue) with the family's extra installed, and paste the output
into the family's page. Every row comes from building the task with
:func:`marl.envs.make_task` (seed 0, one env) and reading its specs, so the groups
and shapes are the ones the wrapper produces, not a transcription.
"""

from __future__ import annotations

import sys
import warnings

from marl.envs import list_tasks, make_task
from marl.envs.tasks import load_task_config
from marl.specs import Categorical, OneHot

# masks and what the catalogue's transforms add (RewardSum, StepCounter) are not observations
_SKIP = ("action_mask", "mask", "episode_reward", "step_count", "info")


def _shape(shape) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def _action(spec) -> str:
    if isinstance(spec, (Categorical, OneHot)):
        return f"{spec.n} choices"
    low, high = spec.low.flatten(), spec.high.flatten()
    bounds = f"[{low.min().item():g}, {high.max().item():g}]"
    return f"{_shape(spec.shape[-1:])} in {bounds}"


def _steps(config: dict) -> str:
    env = config.get("env", {})
    for key in ("max_steps", "max_cycles", "max_episode_steps"):
        if env.get(key) is not None:
            return str(env[key])
    if "env_id" in env:  # gymnasium: the registered time limit
        import gymnasium

        return str(gymnasium.spec(env["env_id"]).max_episode_steps)
    return "none"


def row(task: str) -> str:
    """One Markdown row: the task, its groups (agents, observation, action), episode length."""
    config = load_task_config(task)
    env = make_task(task, seed=0)
    batch = len(env.batch_size)
    groups = []
    if env.group_map is None:  # single-agent: keys at the root
        obs = env.observation_spec
        shapes = [f"`{k}` {_shape(obs[k].shape[batch:])}" for k in obs.keys() if k not in _SKIP]
        groups.append(
            "1 agent: " + ", ".join(shapes) + f"; action {_action(env.action_spec['action'])}"
        )
    for group, agents in (env.group_map or {}).items():
        obs = env.observation_spec[group] if group in env.observation_spec.keys() else None
        shapes = []
        if obs is not None:
            for key in obs.keys():
                if key in _SKIP:
                    continue
                shapes.append(f"`{key}` {_shape(obs[key].shape[batch + 1 :])}")
        action = env.action_spec[group, "action"]
        groups.append(
            f"`{group}`: {len(agents)} agents, " + ", ".join(shapes) + f"; action {_action(action)}"
        )
    if "state" in env.observation_spec.keys():
        groups.append(f"`state` {_shape(env.observation_spec['state'].shape[batch:])}")
    env.close()
    return f"| `{task}` | " + "<br>".join(groups) + f" | {_steps(config)} |"


def main(family: str) -> None:
    print("| task | groups: agents, observation, action | steps |")
    print("|---|---|---|")
    for task in list_tasks(family):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            print(row(task), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
