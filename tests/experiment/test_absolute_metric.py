"""``absolute_metrics``: the best evaluation's policy re-evaluated over 10x the episodes.

And a resume with nothing to train adds no evaluation row. The runs are tiny runs on the
fake multi-agent env (64 frames a batch, 2 evaluation episodes); ``evaluate_episodes`` is
wrapped to record the weights each evaluation ran with, and to make one evaluation the
best where a test needs to choose it.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

import marl.algorithms.trainer as trainer_module
from marl.experiment import Experiment, RunInterrupted
from marl.report import load_results
from marl.report.report import ReportConfig, build_report
from marl.testing import MultiAgentFakeEnv

EPISODES = 2


def fake_task(num_envs, seed, device):
    return MultiAgentFakeEnv(num_envs=num_envs, seed=seed)


def config(tmp_path, **overrides):
    return {
        "num_envs": 4,
        "frames_per_batch": 64,
        "total_frames": 256,
        "evaluation_interval": 64,
        "evaluation_episodes": EPISODES,
        "render": False,
        "progress": False,
        "save_folder": str(tmp_path),
        **overrides,
    }


def run_node(folder):
    data = json.loads((folder / "results.json").read_text())
    return data["fake"]["multiagent"]["mappo"]["seed_0"]


def step_counts(folder):
    node = run_node(folder)
    return [
        node[f"step_{i}"]["step_count"] for i in range(len(node) - ("absolute_metrics" in node))
    ]


class Recorder:
    """Wraps ``evaluate_episodes``: records ``(episodes, weights)`` of every call, and adds
    ``bonus`` to the returns of the ``best_call``-th evaluation of ``EPISODES`` episodes."""

    def __init__(self, monkeypatch, best_call=None, bonus=100.0):
        self.real = trainer_module.evaluate_episodes
        self.calls = []
        self.evaluations = 0
        self.best_call, self.bonus = best_call, bonus
        # the trainer's default evaluator, which the absolute metric's re-evaluation runs too
        monkeypatch.setattr(trainer_module, "evaluate_episodes", self)

    def __call__(self, env, policy, episodes=10, *args, **kwargs):
        result = self.real(env, policy, episodes, *args, **kwargs)
        weights = {k: v.detach().clone() for k, v in policy.state_dict().items()}
        self.calls.append((episodes, weights))
        if episodes == EPISODES:
            if self.evaluations == self.best_call:
                result.returns = [r + self.bonus for r in result.returns]
            self.evaluations += 1
        return result


def same_weights(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_absolute_metric_is_the_best_evaluation_over_ten_times_the_episodes(tmp_path):
    Experiment(fake_task, "mappo", task_name="fake/multiagent", config=config(tmp_path)).run()
    node = run_node(tmp_path)
    absolute = node.pop("absolute_metrics")
    assert len(absolute["return"]) == 10 * EPISODES
    assert len(absolute["walker/return"]) == len(absolute["picker/return"]) == 10 * EPISODES
    last = node[f"step_{len(node) - 1}"]
    assert absolute["return"][:EPISODES] != last["return"]  # not a copy of the last one
    # it comes from the evaluation with the best mean return (the first of equal ones)
    means = [sum(s["return"]) / len(s["return"]) for s in node.values()]
    best = node[f"step_{means.index(max(means))}"]
    assert absolute["step_count"] == best["step_count"]
    # the report reads the file, and leaves the absolute metric's step_count out
    table = load_results([tmp_path / "results.json"])
    assert sorted(table.absolute[table.runs[0]]) == ["picker/return", "return", "walker/return"]


def test_the_best_middle_evaluation_is_re_evaluated_and_the_final_weights_restored(
    tmp_path, monkeypatch
):
    recorder = Recorder(monkeypatch, best_call=2)  # evaluations at 0, 64, 128, 192, 256
    exp = Experiment(fake_task, "mappo", task_name="fake/multiagent", config=config(tmp_path))
    exp.run()
    assert step_counts(tmp_path) == [0, 64, 128, 192, 256]
    assert run_node(tmp_path)["absolute_metrics"]["step_count"] == 128
    evaluations = [w for n, w in recorder.calls if n == EPISODES]
    (reevaluated,) = [w for n, w in recorder.calls if n == 10 * EPISODES]
    assert same_weights(reevaluated, evaluations[2])  # the policy evaluated at 128 frames
    assert not same_weights(reevaluated, evaluations[-1])  # training went on after it
    # the final policy is back in place (what experiment.export exports)
    final = {f"policy.{k}": v for k, v in exp.algorithm.policy.state_dict().items()}
    assert same_weights(final, evaluations[-1])


def test_marl_report_score_absolute_differs_from_the_final_score(tmp_path, monkeypatch):
    Recorder(monkeypatch, best_call=1)  # the evaluation at 64 frames: +100 to its returns
    Experiment(fake_task, "mappo", task_name="fake/multiagent", config=config(tmp_path)).run()
    absolute = run_node(tmp_path)["absolute_metrics"]
    table = load_results([tmp_path / "results.json"])
    final = build_report(table, ReportConfig(reps=20))
    best = build_report(table, ReportConfig(reps=20, score="absolute"))
    (seed,) = final.raw["fake/multiagent"]["mappo"]
    score = best.raw["fake/multiagent"]["mappo"][seed]
    assert score == pytest.approx(sum(absolute["return"]) / len(absolute["return"]))
    assert score != pytest.approx(final.raw["fake/multiagent"]["mappo"][seed])


KILLED_RUN = """
import sys, torch
import marl.algorithms.trainer as trainer_module
from marl.experiment import Experiment
from marl.testing import MultiAgentFakeEnv

real, calls = trainer_module.evaluate_episodes, []

def evaluate_episodes(env, policy, episodes=10, *args, **kwargs):
    result = real(env, policy, episodes, *args, **kwargs)
    torch.save(policy.state_dict(), f"{sys.argv[2]}/eval_{len(calls)}.pt")
    if len(calls) == 1:  # the evaluation at 128 frames: the best
        result.returns = [r + 100.0 for r in result.returns]
    calls.append(episodes)
    return result

trainer_module.evaluate_episodes = evaluate_episodes
Experiment(
    lambda num_envs, seed, device: MultiAgentFakeEnv(num_envs=num_envs, seed=seed),
    "mappo", task_name="fake/multiagent",
    config=dict(num_envs=4, frames_per_batch=64, total_frames=512, evaluation_interval=128,
                checkpoint_interval=128, evaluation_episodes=2, render=False,
                progress=False, save_folder=sys.argv[1]),
).run()
"""


def test_a_killed_and_resumed_run_keeps_the_best_policy_from_before_the_kill(tmp_path, monkeypatch):
    run, weights = tmp_path / "run", tmp_path / "weights"
    weights.mkdir()
    script = tmp_path / "killed_run.py"
    script.write_text(textwrap.dedent(KILLED_RUN))
    env = dict(os.environ, OMP_NUM_THREADS="1", MARL_TEST_FAULT="iteration@320")
    proc = subprocess.run(
        [sys.executable, str(script), str(run), str(weights)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert step_counts(run) == [0, 128, 256]  # the last checkpoint is at 256 frames

    recorder = Recorder(monkeypatch)  # no bonus: the evaluations after the resume
    Experiment.resume(run, task=fake_task).run()
    assert step_counts(run) == [0, 128, 256, 384, 512]
    assert run_node(run)["absolute_metrics"]["step_count"] == 128
    (reevaluated,) = [w for n, w in recorder.calls if n == 10 * EPISODES]
    before_kill = torch.load(weights / "eval_1.pt", weights_only=True)
    assert same_weights(reevaluated, dict(before_kill))
    # the checkpoint keeps the best policy as plain tensors
    state = torch.load(run / "checkpoints" / "latest.pt", weights_only=True)
    assert state["best_policy"]["frames"] == 128


@pytest.mark.parametrize("interrupted", [True, False])
def test_a_resume_with_nothing_to_train_adds_no_evaluation(tmp_path, monkeypatch, interrupted):
    cfg = config(tmp_path, evaluation_interval=128, checkpoint_interval=0)
    exp = Experiment(fake_task, "mappo", task_name="fake/multiagent", config=cfg)
    if interrupted:  # SIGTERM at 192 frames: a checkpoint there, the last evaluation at 128
        monkeypatch.setenv("MARL_TEST_FAULT", "iteration@192:TERM")
        with pytest.raises(RunInterrupted):
            exp.run()
        monkeypatch.delenv("MARL_TEST_FAULT")
        frames = 192
    else:
        exp.run()
        frames = 256
    first = None
    for _ in range(2):  # resumed at its frames: nothing to train
        Experiment.resume(tmp_path, {"total_frames": frames}, task=fake_task).run()
        steps = step_counts(tmp_path)
        assert steps[-1] == frames and len(steps) == len(set(steps)), steps
        assert first is None or steps == first
        first = steps
        assert run_node(tmp_path)["absolute_metrics"]["step_count"] in steps


def test_a_finished_run_resumed_with_nothing_to_train_keeps_its_absolute_metric(
    tmp_path, monkeypatch
):
    # re-evaluating the same policy would replace the published figure by another draw
    cfg = config(tmp_path, evaluation_interval=128, checkpoint_interval=0)
    Experiment(fake_task, "mappo", task_name="fake/multiagent", config=cfg).run()
    published = run_node(tmp_path)["absolute_metrics"]
    recorder = Recorder(monkeypatch)
    Experiment.resume(tmp_path, task=fake_task).run()
    assert run_node(tmp_path)["absolute_metrics"] == published
    assert recorder.calls == []  # nothing evaluated: no row, no absolute metric again
    # trained further, the run's end writes it again, from its new best policy
    Experiment.resume(tmp_path, {"total_frames": 320}, task=fake_task).run()
    assert recorder.calls[-1][0] == 10 * EPISODES
    assert run_node(tmp_path)["absolute_metrics"] != published


@pytest.mark.parametrize("cap", [None, 3])
def test_evaluation_max_steps_cuts_every_evaluation_episode(tmp_path, monkeypatch, cap):
    lengths = []
    real = trainer_module.evaluate_episodes

    def recording(*args, **kwargs):
        result = real(*args, **kwargs)
        lengths.append(list(result.lengths))
        return result

    monkeypatch.setattr(trainer_module, "evaluate_episodes", recording)
    overrides = {"total_frames": 128, "evaluation_max_steps": cap}
    Experiment(
        fake_task, "mappo", task_name="fake/multiagent", config=config(tmp_path, **overrides)
    ).run()
    # evaluations at 0, 64 and 128 frames, then the absolute metric's 10x the episodes
    assert [len(x) for x in lengths] == [EPISODES] * 3 + [10 * EPISODES]
    longest = max(max(x) for x in lengths)
    if cap is None:  # the fake env's episodes last up to 10 steps
        assert longest > 3
    else:
        assert longest == cap
