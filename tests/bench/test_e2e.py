"""End to end: ``ci_tiny`` with the real experiment runner, then ``marl-report`` on it."""

from __future__ import annotations

import importlib.util

import pytest

from marl.bench import run_suite

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("vmas") is None or importlib.util.find_spec("matplotlib") is None,
    reason="needs vmas and matplotlib",
)


def test_ci_tiny_then_report(tmp_path, monkeypatch):
    from marl.report.cli import main as report_main

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the runs are subprocesses
    out = tmp_path / "bench"
    summary = run_suite("ci_tiny", out, launcher="joblib", jobs=2)
    failed = "\n".join(f"{o.run.name}: {o.reason}\n{o.log_tail()}" for o in summary.failed)
    assert summary.ok and len(summary.done) == 4, failed
    for algorithm in ("mappo", "ippo"):
        for seed in (0, 1):
            folder = out / algorithm / "vmas_navigation" / f"seed_{seed}"
            for name in ("results.json", "status.json", "run.log", "checkpoints/latest.pt"):
                assert (folder / name).is_file(), folder / name
    # a second call finds every run complete
    assert len(run_suite("ci_tiny", out).skipped) == 4

    # the suite's references (2000-frame smoke values, tolerance 0.5) are reproduced
    assert report_main([str(out), "--quiet", "--reps", "200", "--check"]) == 0
    report = (out / "report" / "report.md").read_text()
    assert "2 of 2 references reproduced, 0 missed, 0 missing." in report
    # marl-bench computed the baselines before the runs, and the report shows them
    assert (out / "baselines.json").is_file() and (out / "references.json").is_file()
    assert "| task | ippo | mappo | random | no-op |" in report
    for algorithm in ("mappo", "ippo"):
        for seed in (0, 1):
            assert f"| vmas/navigation | {algorithm} | seed_{seed} |" in report
    assert "4 runs found, 4 complete, 0 missing" in report
    assert (out / "report" / "aggregate.png").is_file()
    assert (out / "report" / "curves_vmas_navigation.png").is_file()
