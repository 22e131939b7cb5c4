"""marl-report end to end: ``python -m marl.report`` in a subprocess, and main() in process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from marl.report import load_results
from marl.report.cli import main

from ._synthetic import make_suite


@pytest.fixture
def suite(tmp_path):
    """A folder of 2 algorithms x 2 tasks x 3 seeds, 4 evaluations each."""
    root = tmp_path / "runs"
    make_suite(root)
    return root


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "marl.report", *args], capture_output=True, text=True, timeout=120
    )


def test_report_end_to_end(suite, tmp_path):
    pytest.importorskip("matplotlib")
    make_suite(
        suite,
        algos={"masac": 0.3},
        tasks={"balance": 50.0},
        seeds=2,
        stop_early=("balance", "masac", 1),
    )
    out = tmp_path / "out"
    res = _cli(str(suite), "--out", str(out), "--reps", "200")
    assert res.returncode == 0, res.stderr
    assert "14 runs (1 incomplete, 4 missing), 2 tasks, 3 algorithms" in res.stdout
    text = (out / "report.md").read_text()
    for name in ("mappo", "ippo", "masac", "vmas/navigation", "vmas/balance", "seed_2"):
        assert name in text
    assert "- `vmas/navigation/masac/seed_0`" in text  # masac never ran navigation: missing
    assert "- `vmas/balance/masac/seed_2`" in text  # only seeds 0-1 of masac ran balance
    assert "- `vmas/balance/masac/seed_1`: stopped at 1000 of 3000 frames" in text
    figures = [
        "aggregate.png",
        "performance_profile.png",
        "probability_of_improvement.png",
        "curves_vmas_navigation.png",
        "curves_vmas_balance.png",
    ]
    for name in figures:
        assert (out / name).read_bytes()[:4] == b"\x89PNG", name
        assert f"]({name})" in text
    merged = load_results([out / "merged_results.json"])
    assert len(merged.runs) == 14


def test_compare_report_folders(tmp_path):
    make_suite(tmp_path / "old", algos={"mappo": 0.5}, seeds=2)
    make_suite(tmp_path / "new", algos={"mappo": 1.0}, seeds=2)
    # Report folders hold merged_results.json only; compare reads them too.
    for name in ("old", "new"):
        assert (
            main(
                [
                    str(tmp_path / name),
                    "--out",
                    str(tmp_path / f"{name}_report"),
                    "--no-figures",
                    "--quiet",
                    "--reps",
                    "50",
                ]
            )
            == 0
        )
    out = tmp_path / "cmp"
    res = _cli(
        "--compare",
        str(tmp_path / "old_report"),
        str(tmp_path / "new_report"),
        "--out",
        str(out),
        "--reps",
        "100",
    )
    assert res.returncode == 0, res.stderr
    text = (out / "compare.md").read_text()
    assert "| vmas/navigation | mappo |" in text and "P(B > A)" in text
    assert "| mappo | 2 |" in text


def test_bad_input_exits_2_naming_file_and_key(tmp_path, capsys):
    bad = tmp_path / "runs" / "x"
    bad.mkdir(parents=True)
    (bad / "results.json").write_text(
        json.dumps({"vmas": {"nav": {"mappo": {"seed_0": {"step_0": {"return": [1]}}}}}})
    )
    res = _cli(str(tmp_path / "runs"), "--no-figures")
    assert res.returncode == 2
    assert "marl-report: error:" in res.stderr
    assert (
        str(bad / "results.json") in res.stderr
        and "vmas/nav/mappo/seed_0/step_0/step_count" in res.stderr
    )

    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(empty), "--no-figures"]) == 2
    assert f"no results.json (or merged_results.json) under {empty}" in capsys.readouterr().err
    assert main([str(tmp_path / "nope"), "--no-figures"]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    bounds = tmp_path / "bounds.json"
    bounds.write_text('{"vmas/nav": [0]}')
    assert main([str(tmp_path / "runs"), "--bounds", str(bounds), "--no-figures"]) == 2
    assert "'vmas/nav' must map to [min, max]" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([])


def test_missing_matplotlib_names_the_extra(suite, monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    assert main([str(suite), "--out", str(tmp_path / "o")]) == 1
    assert 'pip install "marl[report]"' in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert (
        main([str(suite), "--out", str(tmp_path / "o"), "--no-figures", "--quiet", "--reps", "20"])
        == 0
    )
    assert (tmp_path / "o" / "report.md").exists()


def test_import_is_light():
    code = "import sys, marl, marl.report; print(','.join(m for m in ('matplotlib', 'torch', 'scipy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
