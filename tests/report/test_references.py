"""Reference scores in reports: the verdicts, the table, ``marl-report --check``, and the
baselines of ``baselines.json`` in the per-task table and the curves."""

from __future__ import annotations

import json

import numpy as np
import pytest

from marl.report import (
    BaselineEntry,
    ReportConfig,
    ResultsFormatError,
    build_report,
    load_baselines,
    load_results,
    parse_references,
    render_markdown,
    write_baselines,
    write_references,
)
from marl.report.cli import CHECK_FAILED, main
from marl.report.references import ReferenceFormatError, check_references

from ._synthetic import make_suite

FRAMES = 3000  # make_suite's last evaluation: 4 evaluations, 1000 frames apart


def _final_mean(table, task: str, algo: str, frames: int = FRAMES) -> float:
    """The mean over seeds of each run's mean return at ``frames``, computed here by hand."""
    means = []
    for run in table.runs:
        if run.task_id == task and run.algorithm == algo:
            ev = next(e for e in table.run_evaluations(run) if e.step_count == frames)
            means.append(float(np.mean(ev.metrics["return"])))
    return float(np.mean(means))


def _ref(task, algo, value, frames=FRAMES, **tol):
    return {"task": task, "algorithm": algo, "frames": frames, "value": value,
            "source": f"test {algo}", **(tol or {"tolerance": 0.5})}  # fmt: skip


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    make_suite(root)  # mappo and ippo on vmas/navigation and vmas/balance, 3 seeds
    return root, load_results(sorted(root.rglob("results.json")))


def _three(table):
    """One reference that passes, one that fails, one without runs."""
    nav = _final_mean(table, "vmas/navigation", "mappo")
    bal = _final_mean(table, "vmas/balance", "ippo")
    return [
        _ref("vmas/navigation", "mappo", nav + 0.4),  # within 0.5
        _ref("vmas/balance", "ippo", bal + 3.0, tolerance=1.0),  # the result is 3 below
        _ref("vmas/navigation", "masac", 1.0),  # masac never ran
    ]


def test_check_exits_nonzero_naming_the_missed_and_the_missing(runs, capsys):
    root, table = runs
    refs = _three(table)
    write_references(root / "references.json", parse_references(refs), "a test")
    out = root / "report"
    code = main([str(root), "--out", str(out), "--check", "--no-figures", "--quiet",
                 "--reps", "20"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == CHECK_FAILED == 3
    assert "vmas/balance ippo at 3000 frames: below: marl" in err
    assert "vmas/navigation masac at 3000 frames: missing: no runs" in err
    assert "vmas/navigation mappo" not in err  # the one that passed
    assert "1 of 3 references reproduced; 2 failed" in err

    text = (out / "report.md").read_text()
    section = text[text.index("## References") : text.index("## Aggregate")]
    rows = [line for line in section.splitlines() if line.startswith("| vmas/")]
    assert len(rows) == 3
    assert rows[0].startswith("| vmas/navigation | mappo | return | 3000 |")
    assert "| 3 |" in rows[0] and rows[0].endswith("| reproduced | test mappo |")
    assert "**missed (below)**" in rows[1] and "± 1 |" in rows[1]
    assert "**missing**: no runs" in rows[2]
    assert "1 of 3 references reproduced, 1 missed, 1 missing." in section
    # the report folder keeps the references it was made with
    assert (
        json.loads((out / "references.json").read_text())["references"][0]["algorithm"] == "mappo"
    )


def test_check_passes_with_only_the_reproduced_reference(runs, tmp_path, capsys):
    root, table = runs
    only = tmp_path / "refs.yaml"  # --references takes YAML too, e.g. a suite file
    only.write_text("description: x\nreferences:\n" + "".join(
        f"  - {json.dumps(r)}\n" for r in _three(table)[:1]))  # fmt: skip
    write_references(root / "references.json", parse_references(_three(table)))  # replaced
    code = main([str(root), "--out", str(tmp_path / "o"), "--check", "--no-figures", "--quiet",
                 "--reps", "20", "--references", str(only)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert "1 of 1 references reproduced" in capsys.readouterr().out


def test_verdict_definition(runs):
    _, table = runs
    nav = _final_mean(table, "vmas/navigation", "mappo")
    mid = _final_mean(table, "vmas/navigation", "mappo", 2000)
    refs = parse_references([
        _ref("vmas/navigation", "mappo", nav - 0.5),  # exactly at the edge: reproduced
        _ref("vmas/navigation", "mappo", nav - 0.6, frames=2000 + 1),  # above
        _ref("vmas/navigation", "mappo", mid * 1.1, frames=2000, tolerance_rel=0.05),
        _ref("vmas/navigation", "mappo", 1.0, frames=5000),  # beyond every run
    ])  # fmt: skip
    checks = check_references(table, refs)
    assert [c.verdict for c in checks] == ["reproduced", "above", "below", "missing"]
    assert checks[0].result.point == pytest.approx(nav)
    assert checks[0].seeds == ("seed_0", "seed_1", "seed_2")
    # between two evaluations: the first one at or after the frames counts
    assert set(checks[1].evaluated_at) == {3000} and checks[1].result.point == pytest.approx(nav)
    assert checks[2].result.point == pytest.approx(mid)
    assert checks[3].reason == "3 run(s), none reached 5000 frames (furthest: 3000)"
    # the CI is reported next to the verdict, without changing it
    lo, hi = checks[1].result.low, checks[1].result.high
    assert lo < checks[1].result.point < hi
    assert checks[1].ci_overlaps == (lo <= refs[1].value + 0.5 and hi >= refs[1].value - 0.5)


def test_check_without_references_is_an_error(runs, capsys):
    root, _ = runs
    assert main([str(root), "--check", "--no-figures", "--quiet", "--reps", "20"]) == 2
    assert "--check: no references to check: no references.json in" in capsys.readouterr().err


def test_bad_references_name_the_entry_and_the_field(runs, tmp_path, capsys):
    root, _ = runs
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([_ref("vmas/navigation", "mappo", 1.0, tolerance=-1)]))
    assert main([str(root), "--references", str(bad), "--no-figures", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}[0] (vmas/navigation mappo): tolerance: expected a finite number >= 0" in err
    with pytest.raises(
        ReferenceFormatError, match=r"references\[0\]: unknown field\(s\) \['tol'\]"
    ):
        parse_references([{"tol": 1}])
    with pytest.raises(ReferenceFormatError, match="task: expected 'env/task', got 'navigation'"):
        parse_references([_ref("navigation", "mappo", 1.0)])


def test_folders_whose_references_disagree(runs, tmp_path, capsys):
    root, table = runs
    other = tmp_path / "more"
    make_suite(other, algos={"masac": 0.3}, seeds=1)
    write_references(root / "references.json", parse_references(_three(table)[:1]))
    changed = _three(table)[:1]
    changed[0]["value"] += 1
    write_references(other / "references.json", parse_references(changed))
    assert main([str(root), str(other), "--no-figures", "--quiet", "--reps", "20"]) == 2
    assert "differs from the reference in" in capsys.readouterr().err


def _entry(task, algorithms, random, noop, overrides=None):
    return BaselineEntry(task, tuple(algorithms), overrides or {}, 2, 2, (0, 1, 2), (1, 2, 3),
                         {"random": {"return": [[random - 1, random + 1]] * 3},
                          "noop": {"return": [[noop, noop]] * 3}})  # fmt: skip


def test_baselines_in_the_per_task_table_and_the_curves(runs, tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    from marl.report.plots import _baseline_lines

    _, table = runs
    entries = [
        _entry("vmas/navigation", ["mappo", "ippo"], -2.5, 0.0),
        _entry("vmas/balance", ["mappo"], -7.0, -1.0),  # two evaluation settings on balance
        _entry("vmas/balance", ["ippo"], -9.0, -3.0, {"continuous_actions": False}),
        BaselineEntry("vmas/wheel", ("mappo",), {}, 2, 2, (0,), (1,), error="ImportError: x"),
    ]
    write_baselines(tmp_path / "baselines.json", entries)
    assert load_baselines(tmp_path / "baselines.json") == entries
    rep = build_report(table, ReportConfig(reps=20), baselines=entries)
    text = render_markdown(rep)
    text = text[text.index("## Final return per task") : text.index("## Aggregate")]
    assert "| task | ippo | mappo | random | no-op |" in text
    nav = next(line for line in text.splitlines() if line.startswith("| vmas/navigation |"))
    assert nav.endswith("| -2.5 | 0 |")
    bal = next(line for line in text.splitlines() if line.startswith("| vmas/balance |"))
    assert bal.endswith("| -7 (mappo); -9 (ippo) | -1 (mappo); -3 (ippo) |")
    assert "No baselines" not in text
    # a failed entry of a task not in the report is not shown; one of a task in it is a note
    rep2 = build_report(table, ReportConfig(reps=20), baselines=[
        BaselineEntry("vmas/balance", ("mappo",), {}, 2, 2, (0,), (1,), error="ImportError: x")])  # fmt: skip
    assert "The baselines of `vmas/balance` could not be computed: ImportError: x" in rep2.notes

    fig, ax = plt.subplots()
    _baseline_lines(ax, rep, "vmas/balance")
    lines = {line.get_label(): line.get_ydata()[0] for line in ax.get_lines()}
    plt.close(fig)
    assert lines == {"random (mappo)": -7.0, "no-op (mappo)": -1.0,
                     "random (ippo)": -9.0, "no-op (ippo)": -3.0}  # fmt: skip

    # two settings that score the same: one value in the table, one line in the plot
    same = [_entry("vmas/navigation", ["mappo"], -2.5, 0.0),
            _entry("vmas/navigation", ["ippo"], -2.5, 0.0, {"continuous_actions": False})]  # fmt: skip
    rep3 = build_report(table, ReportConfig(reps=20), baselines=same)
    text = render_markdown(rep3)
    text = text[text.index("## Final return per task") : text.index("## Aggregate")]
    nav = next(line for line in text.splitlines() if line.startswith("| vmas/navigation |"))
    assert nav.endswith("| -2.5 | 0 |")
    fig, ax = plt.subplots()
    _baseline_lines(ax, rep3, "vmas/navigation")
    lines = {line.get_label(): line.get_ydata()[0] for line in ax.get_lines()}
    plt.close(fig)
    assert lines == {"random": -2.5, "no-op": 0.0}


def test_report_cli_reads_baselines_next_to_the_runs(runs, tmp_path):
    pytest.importorskip("matplotlib")
    root, _ = runs
    write_baselines(
        root / "baselines.json", [_entry("vmas/navigation", ["mappo", "ippo"], -2.5, 0)]
    )
    out = tmp_path / "o"
    assert main([str(root), "--out", str(out), "--quiet", "--reps", "20"]) == 0
    assert "| -2.5 | 0 |" in (out / "report.md").read_text()
    assert load_baselines(out / "baselines.json")[0].mean("random") == -2.5  # copied along
    assert (out / "curves_vmas_navigation.png").is_file()


def test_malformed_baselines_name_the_key(tmp_path):
    path = tmp_path / "baselines.json"
    data = {"entries": [_entry("vmas/navigation", ["mappo"], -1, 0).to_dict()]}
    data["entries"][0]["scores"]["noop"]["return"] = [[0.0]]  # one seed of three
    path.write_text(json.dumps(data))
    with pytest.raises(
        ResultsFormatError, match=r"entries/0/scores/noop/return: expected a list of 3"
    ):
        load_baselines(path)
