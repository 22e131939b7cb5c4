"""marl-bench: suite validation, run expansion, skip/resume, launchers (on a fake runner)."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import types
from pathlib import Path

import pytest
import yaml

from marl.bench import SuiteError, list_suites, load_suite, plan_runs, run_suite
from marl.bench import cli as bench_cli
from marl.bench import runner as bench_runner
from marl.report.cli import main as report_main

FAKE = [sys.executable, str(Path(__file__).with_name("fake_runner.py"))]
SUITE = {
    "description": "tiny",
    "algorithms": ["mappo", "ippo"],
    "tasks": ["vmas/navigation"],
    "seeds": 2,
    "frames": 100,
    "overrides": ["experiment.frames_per_batch=50"],
}


def ref(**changes) -> dict:
    """A valid reference for SUITE, with ``changes`` (``None`` drops a field)."""
    data = {"task": "vmas/navigation", "algorithm": "mappo", "frames": 100, "value": 1.0,
            "tolerance": 0.5, "source": "a test"}  # fmt: skip
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def write_suite(tmp_path: Path, **changes) -> Path:
    data = {**SUITE, **changes}
    data = {k: v for k, v in data.items() if v is not None}
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"algos": ["x"]}, "unknown key(s) ['algos']"),
        ({"frames": None}, "missing required key(s) ['frames']"),
        ({"algorithms": ["mappo", "mapo"]}, "unknown algorithm 'mapo'; available: a2c, ddpg"),
        ({"tasks": ["vmas/nav"]}, "unknown task 'vmas/nav'; available: "),
        ({"seeds": 0}, "seeds: expected a count >= 1"),
        ({"frames": "many"}, "frames: expected an int >= 1, got 'many'"),
        ({"overrides": ["no_equals"]}, "expected hydra overrides 'key=value', got 'no_equals'"),
        ({"algorithm_overrides": {"qmix": ["a=1"]}}, "'qmix' is not one of the suite's algorithm"),
        ({"exclude": [{"algorithm": "mappo"}]}, "expected {algorithm: NAME, task: NAME}"),
        ({"references": {"task": "vmas/navigation"}}, "references: expected a list of references"),
        ({"references": [ref(source=None)]}, "references[0] (vmas/navigation mappo): missing field(s) ['source']"),
        ({"references": [ref(tolerance_rel=0.1)]}, "expected exactly one of tolerance (absolute) and tolerance_rel"),
        ({"references": [ref(value="good")]}, "references[0] (vmas/navigation mappo): value: expected a finite number, got 'good'"),
        ({"references": [ref(), ref(tolerance=2)]}, "references[1] (vmas/navigation mappo): duplicate of entry 0"),
        ({"references": [ref(algorithm="qmix")]}, "algorithm 'qmix' is not one of the suite's ['mappo', 'ippo']"),
        ({"references": [ref(task="vmas/balance")]}, "task 'vmas/balance' is not one of the suite's ['vmas/navigation']"),
        ({"references": [ref(frames=500)]}, "references[0] (vmas/navigation mappo): frames 500 is beyond the 100 frames these runs train for"),
        ({"references": [ref()], "exclude": [{"algorithm": "mappo", "task": "vmas/navigation"}]},
         "references[0] (vmas/navigation mappo): this combination is excluded from the suite"),
    ],
)  # fmt: skip
def test_suite_validation_errors(tmp_path, changes, message):
    with pytest.raises(SuiteError) as info:
        load_suite(write_suite(tmp_path, **changes))
    assert message in str(info.value)
    assert "suite.yaml" in str(info.value)


def test_unknown_suite_lists_the_shipped_ones():
    with pytest.raises(FileNotFoundError, match="ci_tiny, pettingzoo_mpe"):
        load_suite("no_such_suite")


def test_shipped_suites_load():
    assert set(list_suites()) >= {"ci_tiny", "vmas_small", "vmas_paper", "pettingzoo_mpe",
                                  "single_agent"}  # fmt: skip
    sizes = {name: len(load_suite(name).runs()) for name in list_suites()}
    # 6 algorithms x 3 tasks x 3 seeds, and 5 off-policy ones on navigation only
    assert sizes["vmas_small"] == 54 + 15 and sizes["ci_tiny"] == 4
    assert sizes["single_agent"] == 4 * 3  # ppo x 2 tasks, sac x pendulum, dqn x cartpole
    discrete = [r for r in load_suite("vmas_small").runs() if r.algorithm in ("qmix", "vdn", "iql")]
    assert len(discrete) == 9 + 3 + 3
    assert all("+task_overrides.continuous_actions=false" in r.overrides for r in discrete)
    paper = load_suite("vmas_paper").runs()[0].overrides
    assert "experiment.train_device=cuda" in paper


def test_run_expansion_and_override_precedence(tmp_path):
    path = write_suite(
        tmp_path,
        algorithm_overrides={"ippo": ["experiment.frames_per_batch=25", "algorithm.epochs=1"]},
        task_overrides={"vmas/navigation": ["+task_overrides.n_agents=2"]},
        exclude=[{"algorithm": "mappo", "task": "vmas/navigation"}],
    )
    runs = load_suite(path).runs(["algorithm.epochs=3"])
    assert [(r.algorithm, r.seed) for r in runs] == [("ippo", 0), ("ippo", 1)]
    assert runs[1].relpath == Path("ippo/vmas_navigation/seed_1")
    assert runs[0].overrides == (
        "algorithm=ippo",
        "task=vmas/navigation",
        "seed=0",
        "experiment.total_frames=100",
        "experiment.frames_per_batch=25",  # the algorithm's value replaces the suite's
        "+task_overrides.n_agents=2",
        "algorithm.epochs=3",  # extra (command-line) overrides win
    )
    assert runs[0].total_frames == 100


def test_runs_then_skips_complete_runs(tmp_path):
    suite = load_suite(write_suite(tmp_path))
    out = tmp_path / "out"
    first = run_suite(suite, out, runner=FAKE, baselines=False)
    assert first.ok and len(first.done) == 4, first.table()
    folder = out / "mappo" / "vmas_navigation" / "seed_1"
    assert (folder / "results.json").is_file() and (folder / "run.log").is_file()
    second = run_suite(suite, out, runner=FAKE, baselines=False)
    assert len(second.skipped) == 4 and not second.done
    assert len((folder / "calls.txt").read_text().splitlines()) == 1
    # more frames than a complete run reached: resumed from its checkpoint
    third = plan_runs(suite, out, ["experiment.total_frames=200"], runner=FAKE)
    assert {p.action for p in third} == {"resume"}


def test_resumes_an_interrupted_run(tmp_path):
    suite = load_suite(write_suite(tmp_path, algorithms=["mappo"], seeds=[3]))
    out = tmp_path / "out"
    interrupted = run_suite(
        suite, out, overrides=["+fake.stop_at=50"], runner=FAKE, baselines=False
    )
    assert len(interrupted.failed) == 1
    assert "not complete" in interrupted.failed[0].reason
    plan = plan_runs(suite, out, runner=FAKE)
    assert plan[0].action == "resume"
    ckpt = out.resolve() / "mappo" / "vmas_navigation" / "seed_3" / "checkpoints" / "latest.pt"
    assert plan[0].job.command[-1] == f"experiment.restore_file={ckpt}"
    resumed = run_suite(suite, out, runner=FAKE, baselines=False)
    assert resumed.ok and resumed.outcomes[0].action == "resume"
    calls = (ckpt.parent.parent / "calls.txt").read_text().splitlines()
    assert len(calls) == 2 and "experiment.restore_file=" in calls[1]


def test_restarts_a_run_that_left_outputs_but_no_checkpoint(tmp_path):
    """The experiment runner refuses a folder that holds a run (its rows would mix), so a
    run that failed before its first checkpoint is cleared, then run again."""
    suite = load_suite(write_suite(tmp_path, algorithms=["mappo"], seeds=[0]))
    out = tmp_path / "out"
    folder = out / "mappo" / "vmas_navigation" / "seed_0"
    (folder / "checkpoints").mkdir(parents=True)
    for name in ("status.json", "scalars.csv", "config.yaml"):
        (folder / name).write_text("{}")
    (folder / "run.log").write_text("the failed attempt\n")
    (plan,) = plan_runs(suite, out, runner=FAKE)
    assert plan.action == "restart" and "experiment.restore_file" not in str(plan.job.command)
    summary = run_suite(suite, out, runner=FAKE)
    assert summary.ok and summary.outcomes[0].action == "restart"
    assert not (folder / "scalars.csv").exists() and not (folder / "config.yaml").exists()
    log = (folder / "run.log").read_text()
    assert log.startswith("the failed attempt\n")
    assert (
        "removed the previous attempt's status.json, scalars.csv, config.yaml, checkpoints" in log
    )


def test_cli_failing_run_exits_nonzero_and_names_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_runner, "DEFAULT_RUNNER", tuple(FAKE))
    path = write_suite(tmp_path)
    out = tmp_path / "out"
    code = bench_cli.main(
        [str(path), "--output", str(out), "--quiet", "--no-baselines", "+fake.fail=ippo:1"]
    )
    captured = capsys.readouterr()
    assert code == 1
    assert "3 done, 0 skipped, 1 failed" in captured.out
    assert "FAILED ippo vmas/navigation seed=1 (exit code 1)" in captured.err
    assert "RuntimeError: fake failure" in captured.err
    assert "marl-report" in captured.out


def test_cli_dry_run_and_bad_input(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_runner, "DEFAULT_RUNNER", tuple(FAKE))
    path = write_suite(tmp_path)
    assert bench_cli.main([str(path), "--output", str(tmp_path / "o"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "[run] mappo vmas/navigation seed=0" in out and "4 runs: 4 to run" in out
    assert not (tmp_path / "o").exists()
    assert bench_cli.main([str(path), "--launcher", "slurm"]) == 2
    assert "unknown launcher 'slurm'; expected one of: local, joblib" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "submitit", None)  # not installed
    assert bench_cli.main([str(path), "--launcher", "submitit"]) == 2
    assert "pip install submitit" in capsys.readouterr().err
    with pytest.raises(ImportError, match="pip install submitit"):
        run_suite(path, tmp_path / "o", launcher="submitit")


def test_joblib_launcher_two_jobs(tmp_path):
    summary = run_suite(
        write_suite(tmp_path), tmp_path / "out", "joblib", jobs=2, runner=FAKE, baselines=False
    )
    assert summary.ok and len(summary.done) == 4
    assert [o.run.seed for o in summary.outcomes] == [0, 1, 0, 1]  # the suite's order


@pytest.mark.ray
def test_ray_launcher(tmp_path):
    pytest.importorskip("ray")
    suite = write_suite(tmp_path, algorithms=["mappo"])
    summary = run_suite(suite, tmp_path / "out", "ray", jobs=2, runner=FAKE, baselines=False)
    assert summary.ok and len(summary.done) == 2, summary.table()


def test_submitit_launcher_with_a_mocked_executor(tmp_path, monkeypatch):
    calls = {}

    class FakeJob:
        job_id = "42"

        def __init__(self, fn, arg):
            self._result = fn(arg)

        def done(self):
            return True

        def result(self):
            return self._result

    class AutoExecutor:
        def __init__(self, folder):
            calls["folder"] = folder

        def update_parameters(self, **params):
            calls["params"] = params

        @contextlib.contextmanager
        def batch(self):
            calls["batched"] = True
            yield

        def submit(self, fn, arg):
            return FakeJob(fn, arg)

    monkeypatch.setitem(sys.modules, "submitit", types.SimpleNamespace(AutoExecutor=AutoExecutor))
    path = write_suite(tmp_path, algorithms=["mappo"], slurm={"timeout_min": 60, "mem_gb": 8})
    out = tmp_path / "out"
    summary = run_suite(
        path, out, "submitit", jobs=2, slurm={"timeout_min": 30, "slurm_partition": "gpu"},
        runner=FAKE, baselines=False,
    )  # fmt: skip
    assert summary.ok and len(summary.done) == 2
    assert calls["folder"] == str(out.resolve() / ".submitit") and calls["batched"]
    assert calls["params"] == {
        "name": "marl-bench",
        "timeout_min": 30,
        "mem_gb": 8,
        "slurm_partition": "gpu",
        "slurm_array_parallelism": 2,
    }


def test_cli_report_on_fake_runs(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(bench_runner, "DEFAULT_RUNNER", tuple(FAKE))
    out = tmp_path / "out"
    code = bench_cli.main([str(write_suite(tmp_path)), "--output", str(out), "--quiet",
                           "--report", "--no-baselines"])  # fmt: skip
    assert code == 0, capsys.readouterr()
    report = (out / "report" / "report.md").read_text()
    assert "mappo" in report and "ippo" in report
    # an output folder without baselines.json (older ones) still gives a report, which says so
    assert not (out / "baselines.json").exists() and "No baselines" in report
    assert "## References" not in report  # the suite has none


def test_cli_subset_of_a_suite(tmp_path, capsys):
    out = str(tmp_path / "o")
    args = ["vmas_small", "--output", out, "--dry-run"]
    assert bench_cli.main([*args, "--algorithms", "ippo,mappo", "--seeds", "2"]) == 0
    text = capsys.readouterr().out
    assert "12 runs: 12 to run" in text  # 2 algorithms x 3 tasks x 2 seeds
    assert "masac" not in text and "seed=2" not in text
    assert bench_cli.main([*args, "--tasks", "vmas/balance"]) == 0
    assert "18 runs" in capsys.readouterr().out  # 6 algorithms x 1 task x 3 seeds
    assert bench_cli.main([*args, "--algorithms", "mapo"]) == 2
    assert "--algorithms: ['mapo'] not in suite 'vmas_small'" in capsys.readouterr().err
    assert bench_cli.main([*args, "--seeds", "9"]) == 2
    assert "--seeds: expected 1..3, got 9" in capsys.readouterr().err


def test_report_names_only_the_planned_runs_as_missing(tmp_path, monkeypatch, capsys):
    """A suite's excluded pairs are not missing runs; a planned run without results is."""
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(bench_runner, "DEFAULT_RUNNER", tuple(FAKE))
    path = write_suite(tmp_path, tasks=["vmas/navigation", "vmas/balance"],
                       exclude=[{"algorithm": "ippo", "task": "vmas/balance"}])  # fmt: skip
    out = tmp_path / "out"
    args = [str(path), "--output", str(out), "--quiet", "--no-baselines"]
    assert bench_cli.main(args) == 0, capsys.readouterr()
    plan = json.loads((out / "plan.json").read_text())["runs"]
    assert len(plan) == 6 and {"task": "vmas/balance", "algorithm": "ippo", "seed": 0} not in plan
    shutil.rmtree(out / "mappo" / "vmas_balance" / "seed_1")  # a run lost on the way
    assert report_main([str(out), "--out", str(out / "report"), "--no-figures"]) == 0
    text = (out / "report" / "report.md").read_text()
    assert "5 runs found, 5 complete, 1 missing of the 6 planned (`plan.json`)." in text
    assert "- `vmas/balance/mappo/seed_1`" in text
    assert "vmas/balance/ippo" not in text  # excluded by the suite: not missing
    assert (out / "report" / "plan.json").is_file()  # the report folder re-reads on its own
