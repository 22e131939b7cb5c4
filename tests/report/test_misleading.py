"""Reports that cannot mislead: aggregates over equal task sets, few-seed warnings,
normalization bounds no single episode sets, and results folders with bad files or
links out of them."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest

from marl.report import ReportConfig, build_report, load_results
from marl.report.cli import load_folders, main
from marl.report.markdown import render_markdown
from marl.report.report import MIN_SEEDS, AlgorithmGroup
from marl.report.results import RunResults, find_results_files
from marl.report.stats import mean_confidence_interval, probability_of_improvement_ci

from ._synthetic import make_suite

FAST = ReportConfig(reps=200)
ROOT = Path(__file__).resolve().parents[2]


def _runs(root: Path, scores: dict[str, list[float]], task: str = "navigation") -> None:
    """One run per score: its last evaluation's episodes all score that value."""
    for algo, values in scores.items():
        for seed, value in enumerate(values):
            run = RunResults("vmas", task, algo, seed)
            run.add_evaluation(0, [value - 1.0] * 4)
            run.add_evaluation(100, [value] * 4)
            folder = root / task / algo / f"seed_{seed}"
            folder.mkdir(parents=True)
            run.write(folder)


# ------------------------------------------------------------------ 1. task sets
def test_aggregates_compare_only_algorithms_on_the_same_tasks(tmp_path):
    make_suite(tmp_path)  # mappo, ippo on navigation and balance
    make_suite(tmp_path, algos={"iql": 1.5}, tasks={"navigation": 10.0})  # navigation only
    rep = build_report(load_folders([tmp_path])[0], FAST)
    assert rep.groups == [
        AlgorithmGroup(("vmas/balance", "vmas/navigation"), ("ippo", "mappo")),
        AlgorithmGroup(("vmas/navigation",), ("iql",)),
    ]
    assert rep.lacking == {"iql": ["vmas/balance"]}
    # iql's high score on its one task is never ranked against the two-task algorithms
    assert list(rep.improvement) == [("ippo", "mappo")]
    # ... but compared with each on navigation, in a table of its own that names the task
    assert {k: v[1] for k, v in rep.across_groups.items()} == {
        ("ippo", "iql"): ("vmas/navigation",),
        ("iql", "mappo"): ("vmas/navigation",),
    }
    assert any("did not all run the same tasks" in w for w in rep.warnings)
    text = render_markdown(rep, {"aggregate": "a.png", "aggregate:2": "a2.png"})
    assert "- `iql` has no scored run on `vmas/balance`" in text
    assert "### Across groups, on the tasks both ran" in text
    assert "| iql | mappo | 1.000 [1.000, 1.000] | `vmas/navigation` | 3 (few) |" in text
    group1 = text.index("### Group 1: ippo, mappo on `vmas/balance`, `vmas/navigation`")
    group2 = text.index("### Group 2: iql on `vmas/navigation`")
    assert group1 < text.index("| mappo | 2 |") < group2 < text.index("| iql | 1 |")
    assert text.index("](a.png)") < group2 < text.index("](a2.png)")


def test_committed_vmas_small_no_longer_ranks_navigation_only_algorithms_first():
    path = ROOT / "docs" / "results" / "vmas_small" / "merged_results.json"
    if not path.is_file():
        pytest.skip("no committed vmas_small results")
    rep = build_report(load_results([path]), ReportConfig(reps=50))
    by_tasks = {len(g.tasks): set(g.algorithms) for g in rep.groups}
    assert {"iql", "vdn"} <= by_tasks[1] and "mappo" in by_tasks[3]
    assert not any({"iql", "mappo"} == set(pair) for pair in rep.improvement)
    assert rep.lacking["iql"] == ["vmas/balance", "vmas/sampling"]


def test_figures_per_group(tmp_path):
    pytest.importorskip("matplotlib")
    from marl.report.plots import write_figures

    make_suite(tmp_path / "runs", seeds=2)
    make_suite(tmp_path / "runs", algos={"iql": 1.5, "vdn": 1.0}, tasks={"balance": 50.0}, seeds=2)
    rep = build_report(load_folders([tmp_path / "runs"])[0], ReportConfig(reps=20))
    figures = write_figures(rep, tmp_path / "out")
    for role, name in {
        "aggregate": "aggregate.png",
        "aggregate:2": "aggregate_2.png",
        "profile:2": "performance_profile_2.png",
        "improvement": "probability_of_improvement.png",
        "improvement:2": "probability_of_improvement_2.png",
    }.items():
        assert figures[role] == name
        assert (tmp_path / "out" / name).read_bytes()[:4] == b"\x89PNG"


# ------------------------------------------------------------------ 2. few seeds
def test_two_seed_probability_of_improvement_is_the_exact_bootstrap():
    # ci_tiny's numbers: ippo's 2 seeds both above mappo's 2, t-intervals overlapping.
    ippo, mappo = [0.020, 0.070], [-0.119, -0.080]
    t_ippo, t_mappo = mean_confidence_interval(ippo), mean_confidence_interval(mappo)
    assert t_ippo.low < t_mappo.high  # the per-task CIs overlap ...
    # ... yet every resample of ippo's seeds beats every resample of mappo's: P = 1 exactly
    ci = probability_of_improvement_ci([ippo], [mappo], reps=500)
    assert (ci.point, ci.low, ci.high) == (1.0, 1.0, 1.0)
    # Interleaved seeds: P(X > Y) over the resamples is 0, 1/2 or 1 with probabilities
    # 1/4, 1/2, 1/4 (X's resample decides: {x1, x1}, {x1, x2} or {x2, x2}).
    x, y = [0.02, 0.07], [0.03, 0.05]
    exact = {}
    for xs, ys in itertools.product(itertools.product(x, repeat=2), itertools.product(y, repeat=2)):
        p = np.mean([(a > b) + 0.5 * (a == b) for a in xs for b in ys])
        exact[p] = exact.get(p, 0) + 1 / 16
    assert exact == {0.0: 0.25, 0.5: 0.5, 1.0: 0.25}
    ci = probability_of_improvement_ci([x], [y], reps=2000)
    assert (ci.point, ci.low, ci.high) == (0.5, 0.0, 1.0)


def test_few_seeds_warn_in_report_markdown_and_stderr(tmp_path, capsys):
    _runs(tmp_path / "runs", {"ippo": [0.020, 0.070], "mappo": [-0.119, -0.080]})
    rep = build_report(load_folders([tmp_path / "runs"])[0], FAST)
    ((ci, _),) = rep.improvement.values()
    assert (ci.point, ci.low, ci.high) == (1.0, 1.0, 1.0)
    (warning,) = [w for w in rep.warnings if w.startswith("few seeds")]
    assert f"fewer than MIN_SEEDS = {MIN_SEEDS}" in warning and "as few as 2" in warning
    text = render_markdown(rep)
    assert "**Warnings**" in text and warning in text
    assert "| ippo | mappo | 1.000 [1.000, 1.000] | 1 | 2 (few) |" in text
    out = tmp_path / "out"
    assert main([str(tmp_path / "runs"), "--out", str(out), "--no-figures", "--reps", "50"]) == 0
    assert "marl-report: warning: few seeds" in capsys.readouterr().err
    # enough seeds: no warning
    _runs(tmp_path / "many", {"a": list(range(MIN_SEEDS)), "b": list(range(MIN_SEEDS))})
    rep = build_report(load_folders([tmp_path / "many"])[0], FAST)
    assert not any(w.startswith("few seeds") for w in rep.warnings)


# ------------------------------------------------------------------ 3. bounds
def test_one_outlier_episode_does_not_set_the_bounds(tmp_path):
    runs = tmp_path / "runs"
    _runs(runs, {"good": [1.0, 1.1, 1.2], "bad": [0.0, 0.1, 0.2]})
    run = RunResults("vmas", "navigation", "bad", 3)
    run.add_evaluation(0, [-1.0, -1.0, -1.0, -1.0])
    run.add_evaluation(100, [-24.87, 0.5, 0.5, 0.5])  # one outlier episode: mean -5.84
    (runs / "outlier").mkdir()
    run.write(runs / "outlier")
    rep = build_report(load_folders([runs])[0], FAST)
    lo, hi = rep.bounds["vmas/navigation"]
    assert (lo, hi) == (pytest.approx((-24.87 + 1.5) / 4), 1.2)  # evaluation means, not episodes
    scores = np.concatenate(list(rep.normalized["good"].values()))
    assert scores.min() >= 0.0 and scores.max() == 1.0
    assert rep.aggregates["good"]["Mean"].point - rep.aggregates["bad"]["Mean"].point > 0.1
    assert "smallest and largest *evaluation score*" in render_markdown(rep)
    # --bounds still wins
    bounds = tmp_path / "bounds.json"
    bounds.write_text(json.dumps({"navigation": [-1.0, 2.0]}))
    out = tmp_path / "out"
    argv = [str(runs), "--out", str(out), "--no-figures", "--reps", "20", "--bounds", str(bounds)]
    assert main(argv) == 0
    assert "| vmas/navigation | -1 | 2 | user |" in (out / "report.md").read_text()


# ------------------------------------------------------------------ 4. bad files, links
def test_a_bad_results_file_is_skipped_with_a_warning(tmp_path, capsys):
    runs = tmp_path / "runs"
    make_suite(runs, seeds=2)
    bad = runs / "broken" / "results.json"
    bad.parent.mkdir()
    bad.write_text('{"vmas": {"navigation": {"mappo": {"seed_9": {"step_0": {"return": [1]}}}}}}')
    half = runs / "half" / "results.json"  # a good run, then a bad one: neither is kept
    half.parent.mkdir()
    good = {"step_0": {"step_count": 0, "return": [1.0]}}
    half.write_text(json.dumps({"vmas": {"balance": {"x": {"seed_0": good, "seed_1": {"a": 1}}}}}))
    table, paths = load_folders([runs])
    assert len(paths) == 10 and len(table.runs) == 8
    assert [p for p, _ in table.skipped] == [bad.resolve(), half.resolve()]
    assert "step_0/step_count: expected an int >= 0" in table.skipped[0][1]
    assert "x" not in table.algorithms
    out = tmp_path / "out"
    assert main([str(runs), "--out", str(out), "--no-figures", "--reps", "20"]) == 0
    captured = capsys.readouterr()
    assert f"marl-report: warning: skipped {bad.resolve()}: " in captured.err
    assert "10 files (2 skipped), 8 runs" in captured.out
    assert f"skipped `{half.resolve()}`" in (out / "report.md").read_text()
    assert main([str(runs), "--out", str(out), "--no-figures", "--strict"]) == 2
    assert "marl-report: error:" in capsys.readouterr().err


def test_a_run_in_two_files_still_stops_the_report(tmp_path):
    make_suite(tmp_path / "runs", seeds=1)
    load_folders([tmp_path / "runs"])[0].write(tmp_path / "runs" / "copy" / "results.json")
    with pytest.raises(ValueError, match="each run must appear in one file only"):
        load_folders([tmp_path / "runs"])


def test_links_out_of_the_folder_are_not_followed(tmp_path):
    runs, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    make_suite(runs, seeds=1)
    make_suite(elsewhere, algos={"outside": 1.0}, seeds=1)
    os.symlink(elsewhere, runs / "linked_dir")
    os.symlink(elsewhere / "balance" / "outside" / "seed_0" / "results.json", runs / "results.json")
    inside = runs / "balance" / "mappo" / "seed_0" / "results.json"
    (runs / "again").mkdir()
    os.symlink(inside, runs / "again" / "results.json")  # inside the folder: read once
    skipped: list = []
    found = find_results_files([runs], skipped=skipped)
    assert all(p.is_relative_to(runs.resolve()) for p in found) and len(found) == 4
    reasons = {p.name: why for p, why in skipped}
    assert "a symlinked folder" in reasons["linked_dir"]
    assert "outside" in reasons["results.json"]
    table, _ = load_folders([runs])
    assert "outside" not in table.algorithms and len(table.skipped) == 2
