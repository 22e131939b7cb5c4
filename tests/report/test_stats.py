"""Statistics checked against hand-computed cases (and scipy, where installed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marl.report import stats


def test_iqm_of_a_known_array():
    # n = 8: drop 2 at each end -> mean(3, 4, 5, 6) = 4.5, whatever the outliers.
    assert stats.iqm([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]]) == 4.5
    assert stats.iqm([[-100.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 1e9]]) == 4.5
    # n = 6: floor(1.5) = 1 dropped at each end -> mean(2, 3, 4, 5) = 3.5
    assert stats.iqm(np.array([[6.0, 1.0, 5.0, 2.0, 4.0, 3.0]]).T) == 3.5


def test_iqm_pools_tasks_and_matches_scipy_trim_mean():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(1)
    for runs, tasks in [(3, 3), (5, 2), (10, 4), (1, 7)]:
        x = rng.normal(size=(runs, tasks))
        assert math.isclose(stats.iqm(x), scipy_stats.trim_mean(x.ravel(), 0.25))


def test_other_point_metrics():
    x = [[0.0, 0.5], [1.0, 2.0], [0.0, 0.0, 0.0, 3.0]]  # three tasks; task means 0.25, 1.5, 0.75
    out = stats.aggregate_metrics({"a": x}, reps=10)["a"]
    assert out["Mean"].point == 2.5 / 3  # over tasks: each task weighs the same
    assert out["Median"].point == 0.75  # median of the task means
    assert out["Optimality gap"].point == 1.0 - (0.0 + 0.5 + 1.0 + 1.0 + 0.0 + 0.0 + 0.0 + 1.0) / 8
    assert out["IQM"].point == 1.5 / 4  # 8 runs pooled: 0 0 [0 0 0.5 1] 2 3


def test_stratified_bootstrap_collapses_when_runs_agree_within_each_task():
    # Task 0: three runs at 0; task 1: two runs at 1. A stratified replicate
    # keeps 3 + 2 runs, so its mean is always 2/5; a plain bootstrap over the
    # five pooled runs would vary.
    scores = [np.zeros(3), np.ones(2)]
    for metric in stats.AGGREGATE_METRICS:
        ci = stats.stratified_bootstrap_ci(scores, metric, reps=300, rng=3)
        assert ci.low == ci.point == ci.high, metric
    assert stats.stratified_bootstrap_ci(scores, "Mean", reps=300).point == 0.5
    assert stats.stratified_bootstrap_ci(scores, "IQM", reps=300).point == pytest.approx(1 / 3)


def test_bootstrap_ci_is_reproducible_and_covers_the_point():
    x = np.random.default_rng(0).normal(size=(5, 3))
    a = stats.stratified_bootstrap_ci(x, "IQM", reps=400, rng=7)
    b = stats.stratified_bootstrap_ci(x, "IQM", reps=400, rng=np.random.default_rng(7))
    c = stats.stratified_bootstrap_ci(x, "IQM", reps=400, rng=8)
    assert a == b and a != c
    assert a.low < a.point < a.high
    # A wider level gives a wider interval.
    wide = stats.stratified_bootstrap_ci(x, "IQM", reps=400, confidence=0.99, rng=7)
    assert wide.low <= a.low and wide.high >= a.high


def test_probability_of_improvement_hand_cases():
    poi = stats.probability_of_improvement
    assert poi([[1.0, 2.0]], [[0.0, 0.5]]) == 1.0
    assert poi([[0.0, 0.5]], [[1.0, 2.0]]) == 0.0
    assert poi([[1.0, 2.0]], [[1.0, 2.0]]) == 0.5
    assert poi([[1.0, 3.0]], [[2.0]]) == 0.5  # one of two pairs
    assert poi([[1.0, 2.0]], [[2.0, 2.0]]) == 0.25  # two ties at 1/2 out of four pairs
    # Averaged over tasks: task 0 gives 1, task 1 gives 0.
    assert poi([[5.0], [0.0]], [[1.0], [1.0]]) == 0.5
    # By task name, over the common tasks only.
    assert poi({"t": [2.0], "u": [0.0]}, {"t": [1.0]}) == 1.0


def test_probability_of_improvement_matches_mann_whitney():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(2)
    x, y = rng.integers(0, 4, size=6).astype(float), rng.integers(0, 4, size=4).astype(float)
    u = scipy_stats.mannwhitneyu(x, y).statistic
    assert stats.probability_of_improvement([x], [y]) == pytest.approx(u / (x.size * y.size))


def test_probability_of_improvement_ci():
    ci = stats.probability_of_improvement_ci(
        [[2.0, 3.0], [5.0, 6.0]], [[0.0, 1.0], [1.0, 2.0]], reps=200
    )
    assert (ci.point, ci.low, ci.high) == (1.0, 1.0, 1.0)
    x, y = np.random.default_rng(0).normal(size=(2, 6, 3))
    ci = stats.probability_of_improvement_ci(x, y, reps=300)
    assert 0.0 <= ci.low <= ci.point <= ci.high <= 1.0
    with pytest.raises(ValueError, match="2 tasks for X but 1"):
        stats.probability_of_improvement([[1.0], [2.0]], [[1.0]])


def test_pairwise_probability_of_improvement_uses_common_tasks():
    scores = {"a": {"t": [1.0], "u": [1.0]}, "b": {"t": [0.0]}, "c": {"v": [0.0]}}
    out = stats.pairwise_probability_of_improvement(scores, reps=20)
    assert set(out) == {("a", "b")}
    ci, n_tasks = out[("a", "b")]
    assert ci.point == 1.0 and n_tasks == 1


def test_performance_profile_on_a_tiny_set():
    prof = stats.performance_profile(
        {"a": [[0.0, 0.25, 0.5, 1.0]]}, [0.0, 0.5, 0.9, 1.0], reps=200
    )["a"]
    assert prof.point.tolist() == [0.75, 0.25, 0.25, 0.0]  # strictly above tau
    assert (prof.low <= prof.point).all() and (prof.point <= prof.high).all()
    flat = stats.performance_profile({"a": [np.zeros(3), np.ones(3)]}, [0.5], reps=50)["a"]
    assert (flat.point[0], flat.low[0], flat.high[0]) == (0.5, 0.5, 0.5)


def test_bootstrap_difference():
    d = stats.bootstrap_difference([[1.0, 1.0]], [[3.0, 3.0]], reps=20)
    assert (d.point, d.low, d.high) == (2.0, 2.0, 2.0)
    x, y = np.random.default_rng(0).normal(size=(2, 8, 2))
    d = stats.bootstrap_difference(x, y + 10.0, "IQM", reps=300)
    assert 9.0 < d.low < d.point < d.high < 11.0


def test_t_quantile_known_values():
    assert stats.t_quantile(0.95, 1) == pytest.approx(12.7062047, rel=1e-7)
    assert stats.t_quantile(0.95, 2) == pytest.approx(4.3026527, rel=1e-7)
    assert stats.t_quantile(0.95, 10) == pytest.approx(2.2281389, rel=1e-7)
    assert stats.t_quantile(0.99, 5) == pytest.approx(4.0321430, rel=1e-7)
    assert stats.t_quantile(0.95, 10_000) == pytest.approx(1.9602012, rel=1e-6)


def test_mean_confidence_interval():
    ci = stats.mean_confidence_interval([1.0, 2.0, 3.0])
    half = 4.3026527 * 1.0 / math.sqrt(3)
    assert ci.point == 2.0
    assert ci.low == pytest.approx(2.0 - half) and ci.high == pytest.approx(2.0 + half)
    one = stats.mean_confidence_interval([5.0])
    assert one.point == 5.0 and math.isnan(one.low) and one.format() == "5"
    same = stats.mean_confidence_interval([2.0, 2.0])
    assert same.low == same.high == 2.0


def test_normalization():
    assert stats.min_max_bounds({"t": [1.0, 5.0], "u": [0.0]}, {"u": (-1, 1), "other": (0, 1)}) == {
        "t": (1.0, 5.0),
        "u": (-1.0, 1.0),
    }
    with pytest.raises(ValueError, match="bounds for task 't'"):
        stats.min_max_bounds({"t": [1.0]}, {"t": (1.0, 1.0)})
    assert stats.normalize([1.0, 3.0, 5.0], (1.0, 5.0)).tolist() == [0.0, 0.5, 1.0]
    assert stats.normalize([2.0, 2.0], (2.0, 2.0)).tolist() == [0.0, 0.0]


def test_score_inputs_are_validated():
    with pytest.raises(ValueError, match="at least one task"):
        stats.iqm([])
    with pytest.raises(ValueError, match="task 1"):
        stats.iqm([[1.0], [float("nan")]])
    with pytest.raises(ValueError, match="reps"):
        stats.stratified_bootstrap_ci([[1.0]], reps=0)
    with pytest.raises(ValueError, match="confidence"):
        stats.stratified_bootstrap_ci([[1.0]], confidence=1.5, reps=5)
    # A 2-D array is [runs, tasks]; a nested list is one entry per task.
    assert stats.iqm(np.array([[0.0, 1.0]])) == stats.iqm([[0.0], [1.0]]) == 0.5
