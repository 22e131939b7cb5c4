"""Episode outcomes besides the return (a win rate): what the env declares in
``episode_metrics`` is logged in training and evaluation and kept per episode in
``results.json``, counted at the step each episode ends."""

import torch
from tensordict import TensorDict

from marl.algorithms import evaluate_episodes
from marl.envs import EnvBase, check_env_specs, make_done_spec
from marl.envs.builtin_transforms import RewardSum
from marl.envs.transforms import TransformedEnv
from marl.experiment import Experiment, read_scalars
from marl.groups import GroupMap
from marl.report import load_results
from marl.specs import Categorical, Composite, Unbounded


class GuessEnv(EnvBase):
    """Two agents guess a coin over 3-step episodes; the team wins when both name 1 at
    the last step. ``("info", "won")`` is True at the FIRST step of every episode too,
    so a reader that does not look at the last step only counts wrong."""

    episode_metrics = {"win_rate": ("info", "won")}

    def __init__(self, num_envs=4, seed=0, device=None):
        names = ["agent_0", "agent_1"]
        super().__init__(batch_size=[num_envs], group_map=GroupMap.by_prefix(names))
        b = self.batch_size
        group = lambda **kw: Composite(kw, shape=(*b, 2))  # noqa: E731
        self.observation_spec = Composite(
            {
                "agent": group(observation=Unbounded((*b, 2, 1))),
                "info": Composite({"won": Unbounded((*b, 1), dtype=torch.bool)}, shape=b),
            },
            shape=b,
        )
        self.action_spec = Composite({"agent": group(action=Categorical(2, (*b, 2)))}, shape=b)
        self.reward_spec = Composite({"agent": group(reward=Unbounded((*b, 2, 1)))}, shape=b)
        self.done_spec = make_done_spec(b)
        self._t = torch.zeros(b, dtype=torch.long)

    def _out(self, won, done):
        b = self.batch_size
        t = self._t.float()[:, None, None].expand(*b, 2, 1)
        return TensorDict(
            {
                "agent": TensorDict({"observation": t.clone()}, batch_size=(*b, 2)),
                "info": TensorDict({"won": won[:, None]}, batch_size=b),
                "done": done[:, None],
                "terminated": done[:, None].clone(),
                "truncated": torch.zeros_like(done[:, None]),
            },
            batch_size=b,
        )

    def _reset(self, td):
        mask = None if td is None else td.get("_reset", None)
        where = torch.ones(self.batch_size, dtype=torch.bool) if mask is None else mask[:, 0]
        self._t = torch.where(where, 0, self._t)
        false = torch.zeros(self.batch_size, dtype=torch.bool)
        return self._out(false, false)

    def _step(self, td):
        action = td.get(("agent", "action"))
        self._t = self._t + 1
        done = self._t >= 3
        won = torch.where(done, (action == 1).all(-1), self._t == 1)
        out = self._out(won, done)
        out.set(("agent", "reward"), torch.zeros(*self.batch_size, 2, 1))
        return out

    def _set_seed(self, seed):
        pass


def _constant(value):
    def policy(td):
        td.set(("agent", "action"), torch.full((*td.batch_size, 2), value))
        return td

    return policy


def test_the_guess_env_passes_the_checker():
    check_env_specs(GuessEnv())


def test_maybe_reset_leaves_the_transitions_nested_entries_alone():
    # the reset of a sub-env that ended must not rewrite the transition it ended in:
    # "info" is a nested entry that no reward key makes step_mdp copy
    env = GuessEnv(num_envs=2)
    td = env.reset()
    for _ in range(3):
        step = env.step(_constant(1)(td))
        won = step["next", "info", "won"].clone()
        td = env.maybe_reset(step)
        assert torch.equal(step["next", "info", "won"], won)
    assert step["next", "done"].all() and won.all()  # the last step ended (and was won)
    assert not td["info", "won"].any()  # the reset's values are in the next root


def test_evaluation_counts_each_outcome_at_its_episodes_end():
    env = TransformedEnv(GuessEnv(num_envs=3), RewardSum())
    assert dict(env.episode_metrics) == {"win_rate": ("info", "won")}  # through transforms
    wins = evaluate_episodes(env, _constant(1), episodes=5)
    losses = evaluate_episodes(env, _constant(0), episodes=5)
    assert wins.metrics == {"win_rate": [1.0] * 5}
    assert losses.metrics == {"win_rate": [0.0] * 5}  # the True of the first steps is not counted
    assert wins.logs()["eval/win_rate"] == 1.0 and losses.logs()["eval/win_rate"] == 0.0
    assert wins.returns == [0.0] * 5  # the outcome is not mixed into the return


def test_a_run_logs_and_keeps_the_win_rate(tmp_path, caplog):
    config = dict(
        num_envs=4,
        frames_per_batch=48,
        total_frames=96,
        evaluation_interval=48,
        evaluation_episodes=4,
        checkpoint_interval=0,
        render=False,
        progress=True,  # the status line (logged: no terminal here) shows the win rate
        save_folder=str(tmp_path),
    )
    caplog.set_level("INFO", logger="marl.experiment")
    Experiment(
        lambda num_envs, seed, device: GuessEnv(num_envs, seed),
        "mappo",
        seed=0,
        task_name="fake/guess",
        config=config,
    ).run()
    status = [r.getMessage() for r in caplog.records if "frames/s" in r.getMessage()]
    assert status and "(win_rate " in status[-1], status
    scalars = read_scalars(tmp_path / "scalars.csv")
    for key in ("train/win_rate", "eval/win_rate"):
        values = [v for _, v in scalars[key]]
        assert values and all(0.0 <= v <= 1.0 for v in values), key
    table = load_results([tmp_path / "results.json"])
    evaluations = [ev for ev in table.evaluations]
    assert evaluations and all(len(ev.metrics["win_rate"]) == 4 for ev in evaluations)
    assert all(set(ev.metrics["win_rate"].tolist()) <= {0.0, 1.0} for ev in evaluations)
    assert "win_rate" in next(iter(table.absolute.values()))
