"""build_report, markdown and compare on synthetic suites of known structure."""

from __future__ import annotations

import numpy as np
import pytest

from marl.report import ReportConfig, build_report, compare_results, load_results, render_comparison
from marl.report.cli import load_folders
from marl.report.markdown import render_markdown
from marl.report.results import RunKey, RunResults

from ._synthetic import make_suite

FAST = ReportConfig(reps=100)


def test_report_on_a_suite_with_a_missing_and_an_incomplete_run(tmp_path):
    make_suite(tmp_path, stop_early=("balance", "ippo", 1), skip=("navigation", "mappo", 2))
    table, _ = load_folders([tmp_path])
    rep = build_report(table, FAST)
    assert rep.algorithms == ["ippo", "mappo"]
    assert rep.task_ids == ["vmas/balance", "vmas/navigation"]
    assert rep.missing == [RunKey("vmas", "navigation", "mappo", "seed_2")]
    incomplete = [s for s in rep.statuses if not s.complete]
    assert [str(s.run) for s in incomplete] == ["vmas/balance/ippo/seed_1"]
    assert incomplete[0].reason == "stopped at 1000 of 3000 frames"
    # The incomplete run is left out of the final scores, the missing one is absent.
    assert sorted(rep.raw["vmas/balance"]["ippo"]) == ["seed_0", "seed_2"]
    assert sorted(rep.raw["vmas/navigation"]["mappo"]) == ["seed_0", "seed_1"]
    assert rep.aggregates["mappo"]["IQM"].point > rep.aggregates["ippo"]["IQM"].high
    ((ci, n_tasks),) = rep.improvement.values()
    assert ci.point == 0.0 and n_tasks == 2  # P(ippo > mappo)
    # Curves keep every run, the incomplete one included, at each frame count.
    curve = rep.curves["vmas/balance"]["ippo"]
    assert curve.step_counts.tolist() == [0, 1000, 2000, 3000]
    assert curve.n.tolist() == [3, 3, 2, 2]
    with_all = build_report(table, ReportConfig(reps=50, include_incomplete=True))
    assert sorted(with_all.raw["vmas/balance"]["ippo"]) == ["seed_0", "seed_1", "seed_2"]


def test_normalized_scores_use_task_bounds(tmp_path):
    make_suite(tmp_path, seeds=2)
    table, _ = load_folders([tmp_path])
    rep = build_report(table, FAST)
    for task, (lo, hi) in rep.bounds.items():
        for algo in rep.algorithms:
            raw = np.asarray(list(rep.raw[task][algo].values()))
            np.testing.assert_allclose(rep.normalized[algo][task], (raw - lo) / (hi - lo))
    user = build_report(
        table, ReportConfig(reps=50, bounds={"navigation": [0, 20], "vmas/balance": [0, 100]})
    )
    assert user.bounds == {"vmas/balance": (0.0, 100.0), "vmas/navigation": (0.0, 20.0)}
    assert user.bound_sources == {"vmas/balance": "user", "vmas/navigation": "user"}
    # mappo reaches about its task scale: half of the user max.
    assert user.aggregates["mappo"]["Mean"].point == pytest.approx(0.5, abs=0.05)


def test_score_absolute_and_metric_choice(tmp_path):
    paths = []
    for seed in range(2):
        run = RunResults("env", "task", "algo", seed)
        run.add_evaluation(10, [1.0], group_returns={"red": [7.0]})
        if seed == 0:
            run.set_absolute_metrics([3.0, 5.0])
        paths.append(run.write(tmp_path / f"{seed}.json"))
    table = load_results(paths)
    rep = build_report(table, ReportConfig(reps=20, score="absolute"))
    assert rep.raw == {"env/task": {"algo": {"seed_0": 4.0}}}
    assert any("seed_1` has no `absolute_metrics/return`" in n for n in rep.notes)
    rep = build_report(table, ReportConfig(reps=20, metric="red/return"))
    assert rep.raw["env/task"]["algo"] == {"seed_0": 7.0, "seed_1": 7.0}
    assert any("same red/return everywhere" in n for n in rep.notes)
    with pytest.raises(
        ValueError, match=r"no run has the metric 'blue/return'; found \['red/return', 'return'\]"
    ):
        build_report(table, ReportConfig(metric="blue/return"))
    with pytest.raises(ValueError, match="score must be"):
        ReportConfig(score="best")


def test_markdown_names_runs_tasks_and_figures(tmp_path):
    make_suite(tmp_path, seeds=2, skip=("balance", "ippo", 0))
    table, _ = load_folders([tmp_path])
    rep = build_report(table, FAST)
    text = render_markdown(
        rep, {"aggregate": "aggregate.png", "curve:vmas/balance": "c.png"}, "marl-report x"
    )
    assert text.startswith("# Benchmark report")
    assert "Made by `marl-report x`" in text
    assert "| vmas/navigation | mappo | seed_1 |" in text
    assert "- `vmas/balance/ippo/seed_0`" in text  # missing
    assert "| task | ippo | mappo |" in text
    assert "![Aggregate metrics](aggregate.png)" in text and "![vmas/balance](c.png)" in text
    assert "| ippo | mappo |" in text  # probability of improvement row


def test_compare_two_versions(tmp_path):
    make_suite(tmp_path / "a", algos={"mappo": 0.5}, seeds=3)
    make_suite(tmp_path / "b", algos={"mappo": 1.0}, seeds=3)
    make_suite(tmp_path / "c", algos={"mappo_v2": 1.0}, seeds=2)
    a, b, c = (load_folders([tmp_path / x])[0] for x in "abc")
    cmp = compare_results(a, b, FAST, "a", "b")
    assert cmp.pairs == [("mappo", "mappo")]
    assert [row[0] for row in cmp.per_task] == ["vmas/balance", "vmas/navigation"]
    for _task, _, _, mean_a, mean_b, diff, n_a, n_b in cmp.per_task:
        assert diff.point == pytest.approx(mean_b.point - mean_a.point)
        assert diff.low > 0 and (n_a, n_b) == (3, 3)
    ((_, _, n_tasks, diffs, poi),) = cmp.aggregate
    assert n_tasks == 2 and diffs["IQM"].low > 0 and poi.point == 1.0
    renamed = compare_results(a, c, FAST)
    assert renamed.pairs == [("mappo", "mappo_v2")]
    assert "| vmas/balance | mappo -> mappo_v2 |" in render_comparison(renamed)
    with pytest.raises(ValueError, match="no algorithm is in both"):
        make_suite(tmp_path / "d", algos={"x": 1.0, "y": 1.0}, seeds=1)
        compare_results(a, load_folders([tmp_path / "d"])[0], FAST)
