"""The results.json writer and reader: exact format, round trips, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from marl.report.results import ResultsFormatError, RunResults, find_results_files, load_results


def test_writer_produces_the_marl_eval_layout(tmp_path):
    run = RunResults("vmas", "navigation", "mappo", seed=2)
    run.add_evaluation(
        0, [1.0, 2.0], group_returns={"agents": np.array([1.0, 2.0])}, elapsed_time=0.5
    )
    run.add_evaluation(600, [np.float32(3.0)], win_rate=np.ones(1, dtype=np.float32))
    run.set_absolute_metrics([4.0, 5.0])
    path = run.write(tmp_path)
    assert path == tmp_path / "results.json"
    assert json.loads(path.read_text()) == {
        "vmas": {
            "navigation": {
                "mappo": {
                    "seed_2": {
                        "step_0": {
                            "step_count": 0,
                            "return": [1.0, 2.0],
                            "agents/return": [1.0, 2.0],
                            "elapsed_time": 0.5,
                        },
                        "step_1": {"step_count": 600, "return": [3.0], "win_rate": [1.0]},
                        "absolute_metrics": {"return": [4.0, 5.0]},
                    }
                }
            }
        }
    }
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temp file left


def test_round_trip_and_resume(tmp_path):
    run = RunResults("env", "task", "algo", seed=0)
    run.add_evaluation(10, [1.0], elapsed_time=1.0)
    path = run.write(tmp_path / "r.json")
    again = RunResults.load(path)
    again.add_evaluation(20, [2.0])
    table = load_results([again.write(path)])
    assert [(e.step, e.step_count) for e in table.evaluations] == [(0, 10), (1, 20)]
    assert table.evaluations[0].elapsed_time == 1.0


def test_merge_several_files_into_one_table(tmp_path):
    paths = []
    for algo in ("a", "b"):
        for seed in (0, 1):
            run = RunResults("env", "task", algo, seed)
            for i in range(3):
                run.add_evaluation(100 * i, [float(i)])
            paths.append(run.write(tmp_path / f"{algo}{seed}.json"))
    table = load_results(paths)
    assert [str(r) for r in table.runs] == [
        "env/task/a/seed_0",
        "env/task/a/seed_1",
        "env/task/b/seed_0",
        "env/task/b/seed_1",
    ]
    assert len(table.evaluations) == 12
    keys = [(e.run.algorithm, e.run.seed, e.step) for e in table.evaluations]
    assert keys == sorted(keys)
    merged = load_results([table.write(tmp_path / "merged.json")])
    assert merged.to_dict() == table.to_dict()
    assert find_results_files([tmp_path], "merged.json") == [(tmp_path / "merged.json").resolve()]


def test_writer_rejects_bad_evaluations():
    run = RunResults("env", "task", "algo", 0)
    run.add_evaluation(100, [1.0])
    with pytest.raises(ResultsFormatError, match="previous one"):
        run.add_evaluation(50, [1.0])
    with pytest.raises(ResultsFormatError, match="non-empty list"):
        run.add_evaluation(200, [])
    with pytest.raises(ResultsFormatError, match="non-finite"):
        run.add_evaluation(200, [float("nan")])
    with pytest.raises(ValueError, match="env must be"):
        RunResults("", "task", "algo", 0)


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


GOOD_RUN = {"step_0": {"step_count": 0, "return": [1.0]}}


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ({"step_0": {"step_count": 0}}, "env/task/algo/seed_0/step_0: missing 'return'"),
        (
            {"step_0": {"step_count": 0, "return": "high"}},
            "step_0/return: expected a non-empty list",
        ),
        ({"step_0": {"step_count": 0, "return": [1, "x"]}}, "step_0/return: expected numbers"),
        ({"step_0": {"step_count": -1, "return": [1]}}, "step_0/step_count: expected an int >= 0"),
        ({"step_0": {"return": [1]}}, "step_0/step_count"),
        ({"last": {"step_count": 0, "return": [1]}}, "seed_0/last: expected 'step_<int>'"),
        (
            {
                "step_0": {"step_count": 9, "return": [1]},
                "step_1": {"step_count": 3, "return": [1]},
            },
            "step_1: step_count 3 is below step_0's 9",
        ),
        (
            {"step_0": {"step_count": 0, "return": [1]}, "absolute_metrics": {}},
            "absolute_metrics: missing",
        ),
        ([1, 2], "seed_0: expected an object"),
    ],
)
def test_reader_errors_name_the_file_and_the_key(tmp_path, run, message):
    path = _write(tmp_path / "results.json", {"env": {"task": {"algo": {"seed_0": run}}}})
    with pytest.raises(ResultsFormatError) as info:
        load_results([path])
    assert str(path) in str(info.value)
    assert message in str(info.value)


def test_reader_rejects_nan_bad_json_and_duplicates(tmp_path):
    path = _write(
        tmp_path / "nan.json",
        '{"e": {"t": {"a": {"s": {"step_0": {"step_count": 0, "return": [NaN]}}}}}}',
    )
    with pytest.raises(ResultsFormatError, match=r"nan.json: e/t/a/s/step_0/return: non-finite"):
        load_results([path])
    path = _write(tmp_path / "broken.json", '{"e": ')
    with pytest.raises(ResultsFormatError, match=r"broken\.json: cannot read JSON"):
        load_results([path])
    dup = '{"e": {"t": {"a": {"s": {"step_0": {"step_count": 0, "return": [1]}, "step_0": {}}}}}}'
    with pytest.raises(ResultsFormatError, match=r"dup\.json: duplicate key 'step_0'"):
        load_results([_write(tmp_path / "dup.json", dup)])
    one = _write(tmp_path / "one.json", {"e": {"t": {"a": {"seed_0": GOOD_RUN}}}})
    two = _write(tmp_path / "two.json", {"e": {"t": {"a": {"seed_0": GOOD_RUN}}}})
    with pytest.raises(
        ResultsFormatError, match=r"two.json: run e/t/a/seed_0 is also in .*one.json"
    ):
        load_results([one, two])


def test_a_run_without_evaluations_loads(tmp_path):
    table = load_results([_write(tmp_path / "r.json", {"e": {"t": {"a": {"seed_0": {}}}}})])
    assert len(table.runs) == 1 and table.evaluations == []


def test_find_results_files_errors_on_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        find_results_files([tmp_path / "nope"])
