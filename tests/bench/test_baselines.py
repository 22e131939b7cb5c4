"""marl-bench's baselines.json and references.json, and marl-report showing them."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import yaml

from marl.bench import Run, load_suite, run_suite
from marl.bench import baselines as bench_baselines
from marl.bench import cli as bench_cli
from marl.bench import runner as bench_runner
from marl.bench.baselines import (
    EvalSettings,
    evaluate_baselines,
    evaluation_settings,
    suite_baselines,
)
from marl.bench.baselines.page import main as page_main
from marl.report import load_baselines

FAKE = [sys.executable, str(Path(__file__).with_name("fake_runner.py"))]
# ci_tiny-like, on the fake runner, with 2 evaluation episodes to keep the baselines cheap
SUITE = {
    "description": "tiny",
    "algorithms": ["mappo", "ippo"],
    "tasks": ["vmas/navigation"],
    "seeds": 2,
    "frames": 100,
    "overrides": ["experiment.frames_per_batch=50", "experiment.evaluation_episodes=2"],
}
# the fake runner's mappo scores 3.25 (seed 0) and 4.25 (seed 1) at 100 frames: mean 3.75
MAPPO_OK = {"task": "vmas/navigation", "algorithm": "mappo", "frames": 100, "value": 3.7,
            "tolerance": 0.1, "source": "the fake runner"}  # fmt: skip
IPPO_MISSED = {**MAPPO_OK, "algorithm": "ippo", "value": 10.0, "tolerance_rel": 0.1}
del IPPO_MISSED["tolerance"]


def write_suite(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump({**SUITE, **changes}))
    return path


@pytest.fixture
def vmas():
    pytest.importorskip("vmas")


def test_bench_writes_baselines_and_references_and_the_report_shows_them(
    tmp_path, monkeypatch, capsys, vmas
):
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(bench_runner, "DEFAULT_RUNNER", tuple(FAKE))
    out = tmp_path / "out"
    suite = write_suite(tmp_path, references=[MAPPO_OK, IPPO_MISSED])
    code = bench_cli.main([str(suite), "--output", str(out), "--quiet", "--report", "--check"])
    captured = capsys.readouterr()
    assert code == 3, captured  # ippo misses its reference
    assert "marl-bench: baselines of vmas/navigation (mappo, ippo): random " in captured.out
    assert "vmas/navigation ippo at 100 frames: below: marl 1.75" in captured.err

    [entry] = load_baselines(out / "baselines.json")
    assert (entry.task, entry.algorithms, entry.task_overrides) == ("vmas/navigation",
                                                                     ("mappo", "ippo"), {})  # fmt: skip
    # the runs' evaluation settings: 2 episodes on 2 envs, seeded seed + 1
    assert (entry.episodes, entry.num_envs, entry.seeds, entry.eval_seeds) == (2, 2, (0, 1), (1, 2))
    assert entry.mean("noop") == 0.0  # standing still on navigation scores exactly 0
    assert set(entry.scores["random"]) == {"return", "agent/return"}
    # computed as evaluate_baselines computes them, seed by seed
    again = [evaluate_baselines(EvalSettings.make("vmas/navigation", s, 2)) for s in (0, 1)]
    assert entry.values("random") == [a["random"]["return"] for a in again]
    refs = json.loads((out / "references.json").read_text())
    assert [r["algorithm"] for r in refs["references"]] == ["mappo", "ippo"]

    report = (out / "report" / "report.md").read_text()
    per_task = report[report.index("## Final return") : report.index("## References")]
    assert "| task | ippo | mappo | random | no-op |" in per_task
    assert f"| {entry.mean('random'):.4g} | 0 |" in per_task
    references = report[report.index("## References") : report.index("## Aggregate")]
    assert "| vmas/navigation | mappo | return | 100 | 3.75 [" in references
    assert "| reproduced | the fake runner |" in references
    assert "| 10 ± 1 (10%) |" in references and "**missed (below)**" in references
    assert (out / "report" / "curves_vmas_navigation.png").is_file()


def test_baselines_are_computed_once_and_kept_for_a_subset(tmp_path, monkeypatch, vmas):
    suite = load_suite(write_suite(tmp_path, seeds=1))
    out = tmp_path / "out"
    out.mkdir()
    path = suite_baselines(suite, out)
    assert path == out / "baselines.json"
    before = load_baselines(path)

    def fail(settings):
        raise AssertionError("computed again")

    monkeypatch.setattr(bench_baselines, "evaluate_baselines", fail)
    after = load_baselines(suite_baselines(suite, out))
    assert [e.scores for e in after] == [e.scores for e in before] and not after[0].error
    # a run of one algorithm with other settings keeps the other algorithm's entry
    monkeypatch.undo()
    ippo = dataclasses.replace(suite, algorithms=["ippo"])
    suite_baselines(ippo, out, ["experiment.evaluation_episodes=1"])
    entries = {e.algorithms: e for e in load_baselines(path)}
    assert entries[("mappo",)].values("noop") == before[0].values("noop")
    assert entries[("ippo",)].episodes == 1


def test_runs_evaluated_differently_get_their_own_entry(tmp_path, vmas):
    algo = {"ippo": ["+task_overrides.continuous_actions=false"]}
    suite = load_suite(write_suite(tmp_path, algorithm_overrides=algo, seeds=1))
    [mappo, ippo] = load_baselines(suite_baselines(suite, tmp_path))
    assert (mappo.algorithms, mappo.task_overrides) == (("mappo",), {})
    assert (ippo.algorithms, ippo.task_overrides) == (("ippo",), {"continuous_actions": False})
    assert ippo.mean("random") != mappo.mean("random")  # discrete random moves differ


def _counting(monkeypatch) -> list:
    """Replace the baselines' evaluation with one that records its settings."""
    calls = []

    def fake(settings):
        calls.append(settings)
        return {p: {"return": [0.5] * settings.episodes} for p in ("random", "noop")}

    monkeypatch.setattr(bench_baselines, "evaluate_baselines", fake)
    return calls


def test_a_cache_written_under_another_evaluator_is_computed_again(tmp_path, monkeypatch):
    # tictactoe is evaluated against a random player (evaluation: versus_random); caches
    # written before that held the mean over both players, always 0
    pytest.importorskip("pettingzoo")
    suite = load_suite(write_suite(tmp_path, tasks=["pettingzoo/tictactoe"], seeds=1,
                                   algorithms=["mappo"]))  # fmt: skip
    out = tmp_path / "out"
    out.mkdir()
    calls = _counting(monkeypatch)
    [fresh] = load_baselines(suite_baselines(suite, out))
    assert [c.evaluation for c in calls] == ["versus_random"]
    assert fresh.evaluation == "versus_random" and fresh.mean("random") == 0.5
    suite_baselines(suite, out)
    assert len(calls) == 1  # the same evaluator: reused
    stale = json.loads((out / "baselines.json").read_text())
    zero = {p: {"return": [[0.0, 0.0]]} for p in ("random", "noop")}
    for evaluation in ("plain", None):  # another evaluator; none recorded (an older file)
        entry = {**stale["entries"][0], "scores": zero, "evaluation": evaluation}
        if evaluation is None:
            del entry["evaluation"]
        (out / "baselines.json").write_text(json.dumps({**stale, "entries": [entry]}))
        [again] = load_baselines(suite_baselines(suite, out))
        assert calls[-1].evaluation == "versus_random"
        assert (again.evaluation, again.mean("random")) == ("versus_random", 0.5)
    assert len(calls) == 3


def test_the_evaluation_cut_is_part_of_the_baselines_settings(tmp_path, monkeypatch, vmas):
    suite = load_suite(write_suite(tmp_path, seeds=1, algorithms=["mappo"]))
    out = tmp_path / "out"
    out.mkdir()
    calls = _counting(monkeypatch)
    suite_baselines(suite, out)
    [cut] = load_baselines(suite_baselines(suite, out, ["experiment.evaluation_max_steps=3"]))
    assert [c.max_steps for c in calls] == [None, 3] and cut.max_steps == 3
    monkeypatch.undo()
    # the runs' cut reaches the baselines' episodes: 3 steps of random moves, not 100
    settings = EvalSettings.make("vmas/navigation", 0, 2)
    full = evaluate_baselines(settings)["random"]["return"]
    short = evaluate_baselines(dataclasses.replace(settings, max_steps=3))["random"]["return"]
    assert short != full


def test_failed_or_disabled_baselines(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_runner, "DEFAULT_RUNNER", tuple(FAKE))

    def fail(settings):
        raise ImportError("vmas is not installed")

    monkeypatch.setattr(bench_baselines, "evaluate_baselines", fail)
    out = tmp_path / "out"
    assert bench_cli.main([str(write_suite(tmp_path)), "--output", str(out), "--quiet"]) == 0
    assert "failed: ImportError: vmas is not installed" in capsys.readouterr().out
    [entry] = load_baselines(out / "baselines.json")
    assert entry.error == "ImportError: vmas is not installed" and not entry.scores
    # baselines that cannot be computed at all do not stop the runs
    monkeypatch.setattr(bench_baselines, "suite_baselines", lambda *a: 1 / 0)
    lines = []
    summary = run_suite(load_suite(write_suite(tmp_path, algorithms=["mappo"], seeds=1)),
                        tmp_path / "o1", runner=FAKE, on_message=lines.append)  # fmt: skip
    assert summary.ok and summary.baselines is None
    assert lines == ["baselines not computed: ZeroDivisionError: division by zero"]
    # runs that do not evaluate have no baselines
    (tmp_path / "o2").mkdir()
    path = suite_baselines(load_suite(write_suite(tmp_path)), tmp_path / "o2",
                           ["experiment.evaluation=false"])  # fmt: skip
    assert load_baselines(path) == []


def _experiment_eval_env(monkeypatch, tmp_path, task: str, seed: int, episodes: int) -> tuple:
    """(num_envs, seed) the experiment runner builds its evaluation env with."""
    from marl.experiment import Experiment

    calls = []

    def spy(self, num_envs, seed, render=False):
        calls.append((num_envs, seed))
        if len(calls) == 2:  # the evaluation env: nothing more to learn
            raise KeyboardInterrupt

    monkeypatch.setattr(Experiment, "make_env", spy)
    config = dict(evaluation_episodes=episodes, render=False, progress=False,
                  save_folder=str(tmp_path / task.replace("/", "_")))  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        Experiment(task, "mappo", seed=seed, config=config).run()
    return calls[1]


@pytest.mark.parametrize("task, episodes", [("vmas/navigation", 12), ("gymnasium/cartpole", 10)])
def test_eval_settings_are_the_experiment_runners(task, episodes, tmp_path, monkeypatch):
    run = Run("mappo", task, 3, (f"task={task}", "seed=3", "algorithm=mappo",
                                 f"experiment.evaluation_episodes={episodes}"))  # fmt: skip
    settings = evaluation_settings([run])[run]
    assert settings.episodes == episodes
    expected = _experiment_eval_env(monkeypatch, tmp_path, task, 3, episodes)
    assert (settings.num_envs, settings.eval_seed) == expected


def test_the_baselines_page(tmp_path, monkeypatch, capsys, vmas):
    real = bench_baselines.evaluate_baselines

    def some_fail(settings):
        if settings.task == "vmas/balance":
            raise RuntimeError("broken scenario")
        return real(settings)

    monkeypatch.setattr("marl.bench.baselines.page.evaluate_baselines", some_fail)
    page = tmp_path / "baselines.md"
    args = ["--out", str(page), "--tasks", "vmas/navigation,vmas/balance", "--episodes", "2"]
    assert page_main(args) == 0
    text = page.read_text()
    assert "| vmas/navigation | " in text and "| 0 ± 0 | 2 | 2 |" in text
    assert "- `vmas/balance`: `RuntimeError: broken scenario`" in text  # listed, not hidden
    assert f"python -m marl.bench.baselines {' '.join(args)}" in text
    assert "torch " in text and "vmas " in text
    assert "1 tasks, 1 failed" in capsys.readouterr().out
