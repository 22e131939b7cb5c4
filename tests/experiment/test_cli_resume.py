"""``marl-run``'s config logic in process (hydra's compose API): per-group algorithms,
resume overrides, ``--resume``. The subprocess runs are in test_cli.py and
test_fault_injection.py."""

import json

import pytest
import yaml
from hydra.errors import ConfigCompositionException

from marl.experiment import Experiment
from marl.experiment.argv import prepare_resume
from marl.experiment.cli import compose_config, run_config

SMALL = dict(
    num_envs=2,
    frames_per_batch=40,
    total_frames=80,
    evaluation_interval=40,
    evaluation_episodes=2,
    checkpoint_interval=40,
    render=False,
    progress=False,
)


def composed(*overrides):
    return compose_config(overrides)


def run(*overrides, folder=None):
    """What ``marl-run <overrides>`` runs, in this process."""
    return run_config(composed(*overrides), folder=folder, overrides=list(overrides))


PER_GROUP = [
    "task=pettingzoo/simple_tag",
    "+algorithm@algorithm.groups.adversary=mappo",
    "+algorithm@algorithm.groups.agent=iql",
]


@pytest.mark.parametrize(
    "extra,named",
    [
        (["algorithm.lr=0.123"], "algorithm.lr=0.123"),
        (["+algorithm.learning_starts=100"], "algorithm.learning_starts=100"),
        (["algorithm=qmix"], "algorithm=qmix"),
    ],
)
def test_flat_settings_next_to_per_group_algorithms_are_refused(extra, named, monkeypatch):
    """Finding 3: they were dropped without a word (lr stayed 5e-05)."""
    built = []
    monkeypatch.setattr("marl.experiment.parts.make_task", lambda *a, **k: built.append(1))
    with pytest.raises(ValueError) as err:
        run(*PER_GROUP, *extra)
    message = str(err.value)
    assert "with one algorithm per group (adversary=mappo, agent=iql)" in message
    assert f"would reach no group: {named}" in message
    if "." in named:
        key = named.split("=")[0].split(".")[1]
        assert f"algorithm.groups.adversary.{key}=" in message  # the per-group form
    assert not built


def test_the_old_dict_syntax_is_refused_while_composing():
    with pytest.raises(ConfigCompositionException) as err:
        composed("task=pettingzoo/simple_tag", "algorithm.name={adversary:mappo,agent:iql}")
    assert "full_key: algorithm.name" in str(err.value.__cause__)


def test_per_group_settings_reach_their_group(tmp_path, monkeypatch):
    seen = {}

    def capture(self):
        seen.update(self.describe())
        return {}

    monkeypatch.setattr(Experiment, "run", capture)
    run(*PER_GROUP, "algorithm.groups.adversary.lr=1e-4", "model.activation=relu")
    assert seen["algorithm"] == {"adversary": "mappo", "agent": "iql"}
    assert seen["algorithm_config"]["adversary"]["lr"] == 1e-4
    assert seen["algorithm_config"]["agent"]["lr"] == 5e-4
    assert {c["activation"] for c in seen["algorithm_config"].values()} == {"relu"}  # model


@pytest.fixture(scope="module")
def vmas_run(tmp_path_factory):
    """A short vmas/navigation run with seed 7 and lr 1e-3, as a checkpointed run folder."""
    pytest.importorskip("vmas")
    folder = tmp_path_factory.mktemp("run")
    Experiment(
        "vmas/navigation",
        "mappo",
        seed=7,
        algorithm_config={"lr": 1e-3},
        config=dict(SMALL, save_folder=str(folder)),
        task_overrides={"max_steps": 20},
    ).run()
    return folder


def test_resume_refuses_overrides_that_contradict_the_checkpoint(vmas_run):
    """Each contradiction is named; nothing runs or changes."""
    before = (vmas_run / "status.json").read_text()
    with pytest.raises(ValueError) as err:
        run(
            f"experiment.restore_file={vmas_run}/checkpoints/latest.pt",
            "seed=3",
            "algorithm.lr=0.1",
            "algorithm.epochs=10",  # the checkpoint's value: no contradiction
            "task=vmas/balance",
            "model=small",
            "experiment.frames_per_batch=60",
            "experiment.total_frames=160",  # may change
            folder=vmas_run,
        )
    lines = str(err.value).splitlines()
    assert lines[0].startswith("these overrides contradict the checkpoint ")
    assert sorted(line for line in lines if line.startswith("  ")) == [
        "  algorithm.lr: the checkpoint's run has 0.001, the command line 0.1",
        "  experiment.frames_per_batch: the checkpoint's run has 40, the command line 60",
        "  model.actor_cells: the checkpoint's run has None, the command line [64, 64]",
        "  model.critic_cells: the checkpoint's run has None, the command line [64, 64]",
        "  seed: the checkpoint's run has 7, the command line 3",
        "  task: the checkpoint's run has 'vmas/navigation', the command line 'vmas/balance'",
    ]
    assert (vmas_run / "status.json").read_text() == before


def test_resume_applies_and_records_allowed_overrides(vmas_run):
    """The one-liner takes seed, task, algorithm and its lr from the checkpoint."""
    summary = run(
        f"experiment.restore_file={vmas_run}/checkpoints/latest.pt",
        "experiment.total_frames=120",
        "experiment.evaluation_interval=80",
        folder=vmas_run,
    )
    assert summary["frames"] == 120
    config = yaml.safe_load((vmas_run / "config.yaml").read_text())
    assert (config["seed"], config["algorithm_config"]["lr"]) == (7, 1e-3)
    assert config["task_overrides"] == {"max_steps": 20}
    assert config["experiment"]["total_frames"] == 120
    assert config["experiment"]["evaluation_interval"] == 80
    status = json.loads((vmas_run / "status.json").read_text())
    assert (status["status"], status["frames"], status["seed"]) == ("complete", 120, 7)


def test_prepare_resume_runs_in_the_checkpoints_folder(vmas_run, tmp_path):
    latest = vmas_run / "checkpoints" / "latest.pt"
    newest = max((vmas_run / "checkpoints").glob("checkpoint_*.pt"), key=lambda p: int(p.stem[11:]))
    tail = [f"hydra.run.dir={vmas_run}", "hydra.output_subdir=null"]
    # a folder stays a folder: its newest intact checkpoint is chosen when it loads
    assert newest.is_file()
    from_folder = ["seed=7", f"experiment.restore_file={vmas_run.resolve()}", *tail]
    assert prepare_resume(["seed=7", "--resume", str(vmas_run)]) == from_folder
    assert prepare_resume(["seed=7", f"--resume={vmas_run}"]) == from_folder
    from_file = ["seed=7", f"experiment.restore_file={latest}", *tail]
    assert prepare_resume(["seed=7", f"experiment.restore_file={latest}"]) == from_file
    assert prepare_resume(["seed=7"]) == ["seed=7"]
    assert prepare_resume(["experiment.restore_file=null"]) == ["experiment.restore_file=null"]
    given = prepare_resume(["--resume", str(vmas_run), f"hydra.run.dir={tmp_path}"])
    assert f"hydra.run.dir={tmp_path}" in given and f"hydra.run.dir={vmas_run}" not in given
    spaced = tmp_path / "a b" / "checkpoints"
    spaced.mkdir(parents=True)
    (spaced / "latest.pt").write_bytes(b"")
    assert f"hydra.run.dir='{tmp_path}/a b'" in prepare_resume(["--resume", str(spaced.parent)])


def test_resume_picks_the_newest_checkpoint_of_a_folder(tmp_path):
    """A run killed between writing checkpoint N and pointing latest.pt at it resumes
    from N: each numbered checkpoint is complete once it has its name."""
    from marl.experiment.resume import checkpoint_path

    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for name in ("checkpoint_400.pt", "checkpoint_1200.pt", "checkpoint_800.pt", "latest.pt"):
        (folder / name).write_bytes(b"")
    assert checkpoint_path(tmp_path) == folder / "checkpoint_1200.pt"
    assert checkpoint_path(folder / "latest.pt") == folder / "latest.pt"


@pytest.mark.parametrize(
    "args,message",
    [
        (["hydra.run.dir={run}"], "{run} already holds a run of mappo on vmas/navigation (seed 7)"),
        (["--resume"], "--resume needs a run folder"),
        (["--resume", "{empty}"], "holds no checkpoint: expected {empty}/checkpoints/latest.pt"),
        (["experiment.restore_file={empty}/x.pt"], "no checkpoint at {empty}/x.pt"),
        (["--resume", "{run}", "experiment.restore_file={run}"], "not both"),
        (["-m", "--resume", "{run}"], "resume one run at a time"),
    ],
)
def test_prepare_resume_errors(args, message, vmas_run, tmp_path):
    args = [a.format(run=vmas_run, empty=tmp_path) for a in args]
    with pytest.raises((ValueError, FileNotFoundError)) as err:
        prepare_resume(args)
    assert message.format(empty=tmp_path, run=vmas_run) in str(err.value)
