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


def test_vectorized_seeds_write_the_same_folders_then_resume_as_a_group(tmp_path, monkeypatch):
    """``--vectorize-seeds``: one ``experiment.runs=2`` job writes the seed folders that two
    jobs would, ``marl-report`` reads them, and more frames resume the group as a group."""
    import dataclasses
    import json

    from marl.bench import load_suite, plan_runs
    from marl.report.cli import main as report_main

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    suite = dataclasses.replace(load_suite("ci_tiny"), algorithms=["mappo"])
    out = tmp_path / "bench"
    fewer = ["experiment.evaluation_episodes=2"]  # a cheaper absolute metric
    summary = run_suite(suite, out, overrides=fewer, baselines=False, vectorize_seeds=True)
    failed = "\n".join(f"{o.run.name}: {o.reason}\n{o.log_tail()}" for o in summary.failed)
    assert summary.ok and len(summary.done) == 2, failed
    group = (out / "mappo" / "vmas_navigation").resolve()
    assert {o.group for o in summary.outcomes} == {group}
    table = summary.table().splitlines()  # a row per seed, naming its group
    assert table[0].split()[-1] == "group" and table[-1].startswith("a group's seeds trained")
    assert [row.split()[2::4] for row in table[2:4]] == [["0", "mappo/vmas_navigation"],
                                                          ["1", "mappo/vmas_navigation"]]  # fmt: skip
    assert json.loads((group / "runs.json").read_text())["seeds"] == [0, 1]
    # the same run folders as one job per seed, each an ordinary run
    expected = {p.folder for p in plan_runs(suite, out, fewer)}
    assert {p.parent for p in out.resolve().rglob("results.json")} == expected
    for folder in expected:
        for name in ("results.json", "status.json", "run.log", "checkpoints/latest.pt"):
            assert (folder / name).is_file(), folder / name
        assert json.loads((folder / "status.json").read_text())["status"] == "complete"
    assert "experiment.runs=2" in (group / "run.log").read_text()
    assert report_main([str(out), "--quiet", "--reps", "200"]) == 0
    report = (out / "report" / "report.md").read_text()
    assert "2 runs found, 2 complete, 0 missing" in report
    for seed in (0, 1):
        assert f"| vmas/navigation | mappo | seed_{seed} |" in report

    # more frames: the group's runs are incomplete, with checkpoints: resumed together
    more = [*fewer, "experiment.total_frames=3000"]
    planned = plan_runs(suite, out, more, vectorize_seeds=True)
    assert planned[0].job is planned[1].job and "--resume" in planned[0].job.command
    resumed = run_suite(suite, out, overrides=more, baselines=False, vectorize_seeds=True)
    failed = "\n".join(f"{o.run.name}: {o.reason}\n{o.log_tail()}" for o in resumed.failed)
    assert resumed.ok and [o.action for o in resumed.outcomes] == ["resume"] * 2, failed
    for folder in expected:
        status = json.loads((folder / "status.json").read_text())
        assert (status["status"], status["frames"]) == ("complete", 3000)
    assert f"--resume {group}" in (group / "run.log").read_text()
