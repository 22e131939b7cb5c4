"""``experiment.runs``: several seeds trained in one process, each in an ordinary run folder."""

import csv
import json

import pytest
import yaml

from marl.experiment import Experiment, ExperimentConfig
from marl.experiment.runs import ExperimentRuns
from marl.report import load_results
from marl.testing import MultiAgentFakeEnv, run_cli


def fake_task(num_envs, seed, device):
    return MultiAgentFakeEnv(num_envs=num_envs, seed=seed)


CONFIG = dict(
    num_envs=4,
    frames_per_batch=64,
    total_frames=192,
    evaluation_interval=128,
    evaluation_episodes=2,
    checkpoint_interval=64,
    render=False,
    progress=False,
)


def scalars(folder):
    with open(folder / "scalars.csv") as f:
        return [(int(r["frames"]), r["key"], float(r["value"])) for r in csv.DictReader(f)]


def test_runs_is_value_checked_naming_the_key():
    with pytest.raises(ValueError, match=r"experiment\.runs: expected an integer >= 1, got 0"):
        ExperimentConfig(runs=0).validate()
    with pytest.raises(
        ValueError, match=r"experiment\.runs=2 .* needs experiment\.collector='inline'"
    ):
        ExperimentConfig(runs=2, collector="sync").validate()
    exp = Experiment(fake_task, "mappo", config={**CONFIG, "runs": 2}, task_name="fake/task")
    with pytest.raises(ValueError, match=r"experiment\.runs=2: an Experiment trains one run"):
        exp.run()
    with pytest.raises(ValueError, match=r"experiment\.restore_file with experiment\.runs=2"):
        ExperimentRuns.create(fake_task, config={**CONFIG, "runs": 2, "restore_file": "x.pt"})
    with pytest.raises(ValueError, match=r"experiment\.runs=2: recurrent networks"):
        ExperimentRuns.create(
            fake_task, model={"network": "gru"}, task_name="fake/task", config={**CONFIG, "runs": 2}
        )


def test_each_run_writes_an_ordinary_run_folder(tmp_path):
    single = Experiment(
        fake_task,
        "mappo",
        seed=3,
        task_name="fake/task",
        config={**CONFIG, "save_folder": str(tmp_path / "single")},
    )
    single.run()
    runs = ExperimentRuns.create(
        fake_task,
        "mappo",
        seed=3,
        task_name="fake/task",
        config={**CONFIG, "runs": 3, "save_folder": str(tmp_path / "runs")},
    )
    summaries = runs.run()
    assert [s["frames"] for s in summaries] == [192] * 3
    assert runs.hub.shares_collection and runs.hub.stacked  # one env batch, one update
    assert tuple(runs.hub.env.batch_size) == (12,)
    meta = json.loads((tmp_path / "runs" / "runs.json").read_text())
    assert meta["seeds"] == [3, 4, 5] and meta["folders"] == ["seed_3", "seed_4", "seed_5"]

    files = sorted(p.name for p in single.folder.iterdir())
    rows = scalars(single.folder)
    for seed in (3, 4, 5):
        folder = tmp_path / "runs" / f"seed_{seed}"
        assert sorted(p.name for p in folder.iterdir()) == files
        assert json.loads((folder / "status.json").read_text())["status"] == "complete"
        assert yaml.safe_load((folder / "config.yaml").read_text())["seed"] == seed
        # the same rows as a single run: every (frames, key) once, keyed alike
        mine = scalars(folder)
        assert sorted((f, k) for f, k, _ in mine) == sorted((f, k) for f, k, _ in rows)
    # marl-report's loader reads the folders as it reads single runs': one run per seed
    table = load_results(
        [single.folder / "results.json"]
        + [tmp_path / "runs" / f"seed_{s}" / "results.json" for s in (4, 5)]
    )
    assert sorted(r.seed for r in table.runs) == ["seed_3", "seed_4", "seed_5"]
    assert set(table.absolute) == set(table.runs)  # each with its absolute metric
    # the runs learn apart: each its own seed, batch and update
    losses = [
        [v for f, k, v in scalars(tmp_path / "runs" / f"seed_{s}") if k.endswith("loss_critic")]
        for s in (3, 4, 5)
    ]
    assert losses[0] != losses[1] != losses[2]


def test_off_policy_runs_update_as_one_stack_each_with_its_own_buffer(tmp_path):
    # MASAC's updates are stacked (StackedOffPolicy): a replay buffer, targets and Adam per run
    runs = ExperimentRuns.create(
        lambda num_envs, seed, device: MultiAgentFakeEnv(num_envs=num_envs, seed=seed),
        "masac",
        seed=0,
        algorithm_config={"learning_starts": 64, "batch_size": 32},
        task_name="fake/task",
        config={**CONFIG, "runs": 2, "save_folder": str(tmp_path), "evaluation": False},
    )
    runs.run()
    assert runs.hub.shares_collection and runs.hub.stacked
    assert {type(s).__name__ for s in runs.hub.stacks.values()} == {"StackedOffPolicy"}
    algorithms = [e.algorithm for e in runs.experiments]
    for label, _ in algorithms[0].group_learners():
        buffers = [a.learners[label].updater.buffer for a in algorithms]
        assert buffers[0] is not buffers[1] and len(buffers[0]) == len(buffers[1]) == 192
    losses = []
    for seed in (0, 1):
        rows = scalars(tmp_path / f"seed_{seed}")
        losses.append([v for _, k, v in rows if k.endswith("loss_actor")])
        assert losses[-1]
    assert losses[0] != losses[1]  # each run its own networks and samples


def test_a_run_learning_on_its_own_is_used_where_stacking_does_not_apply(tmp_path):
    # HAPPO's joint update (its agents' turns) is not stacked: each run updates itself
    runs = ExperimentRuns.create(
        lambda num_envs, seed, device: MultiAgentFakeEnv(num_envs=num_envs, seed=seed),
        "happo",
        seed=0,
        task_name="fake/task",
        config={**CONFIG, "runs": 2, "save_folder": str(tmp_path), "evaluation": False},
    )
    runs.run()
    assert runs.hub.shares_collection and not runs.hub.stacked
    for seed in (0, 1):
        keys = {k for _, k, _ in scalars(tmp_path / f"seed_{seed}")}
        assert any(k.endswith("loss_objective") for k in keys)


def test_runs_killed_and_interrupted_resume_together_with_one_line(tmp_path):
    """A real ``marl-run experiment.runs=2``: SIGKILLed when the runs' newest checkpoints
    differ, resumed (from the newest frame both have), stopped by SIGTERM, resumed to the end."""
    import signal

    pytest.importorskip("vmas")
    total = 1600
    run = [
        "experiment.runs=2",
        "seed=3",
        "+task_overrides.max_steps=50",
        "experiment.num_envs=4",
        "experiment.frames_per_batch=200",
        f"experiment.total_frames={total}",
        "experiment.checkpoint_interval=400",
        "experiment.evaluation_interval=400",
        "experiment.evaluation_episodes=2",
        "experiment.render=false",
        "experiment.progress=false",
    ]
    folder = tmp_path / "runs"
    seeds = [folder / "seed_3", folder / "seed_4"]

    def marl_run(*args, fault=None):
        return run_cli("marl.experiment", *args, cwd=tmp_path, fault=fault, timeout=600)

    def checkpoints(f):
        return sorted(int(p.stem.split("_")[1]) for p in (f / "checkpoints").glob("checkpoint_*"))

    # 1. SIGKILL after seed_3 renamed its checkpoint at 800 frames, before seed_4 wrote its own
    proc = marl_run(*run, f"hydra.run.dir={folder}", fault="latest@800")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert checkpoints(seeds[0]) == [400, 800] and checkpoints(seeds[1]) == [400]

    # 2. resumed together from 400 frames, the newest both have; SIGTERM during the round
    #    that ends at 1200: every run stops after that round, with its checkpoint there
    proc = marl_run("--resume", str(folder), fault="iteration@1200:TERM")
    assert proc.returncode == 143, proc.stderr[-3000:]
    assert "from 400 frames, the newest checkpoint every run has" in proc.stderr
    for f in seeds:
        st = json.loads((f / "status.json").read_text())
        assert (st["status"], st["frames"]) == ("interrupted", 1200), (f, st)
        assert checkpoints(f)[-1] == 1200

    # 3. resumed to the end
    proc = marl_run("--resume", str(folder))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # no new folder
    for seed, f in zip((3, 4), seeds):
        st = json.loads((f / "status.json").read_text())
        assert (st["status"], st["frames"], st["seed"]) == ("complete", total, seed)
        pairs = [(frames, key) for frames, key, _ in scalars(f)]
        assert len(pairs) == len(set(pairs)), "a (frames, key) row is duplicated"
        trained = sorted(fr for fr, key in pairs if key == "train/agent/loss_objective")
        assert trained == list(range(200, total + 1, 200))  # every iteration, once
        evals = sorted(fr for fr, key in pairs if key == "eval/episode_reward")
        assert evals == [0, 400, 800, 1200, 1600]
        table = load_results([f / "results.json"])
        assert [ev.step_count for ev in table.evaluations] == [0, 400, 800, 1200, 1600]

    # 4. one run's folder alone is refused (the runs restart together), with both ways out
    proc = marl_run("--resume", str(seeds[1]))
    assert proc.returncode == 2
    assert f"resume them all with marl-run --resume {folder}" in proc.stderr
    assert "this one alone with experiment.runs=1" in proc.stderr


def test_the_trainer_learns_through_its_learn_seam():
    from marl.algorithms import Algorithm, Trainer

    env = MultiAgentFakeEnv(num_envs=4, seed=0)
    algo = Algorithm("mappo").build(env, seed=0)
    seen = []

    def learn(batch):
        seen.append(batch.numel())
        return algo.process_batch(batch), {"walker/custom": 1.0}

    logs = list(Trainer(algo, env, frames_per_batch=64, total_frames=128, learn=learn).train())
    assert seen == [64, 64]
    assert [log["train/walker/custom"] for log in logs] == [1.0, 1.0]
    assert not any(k.endswith("loss_objective") for log in logs for k in log)


def test_a_failing_run_stops_the_others(tmp_path):
    from marl.algorithms import TrainerCallback

    class FailSecond(TrainerCallback):
        def on_iteration_end(self, trainer, logs):
            if trainer.algorithm is runs.experiments[1].algorithm and trainer.frames == 128:
                raise RuntimeError("boom")

    runs = ExperimentRuns.create(
        fake_task,
        "mappo",
        seed=3,
        task_name="fake/task",
        config={**CONFIG, "runs": 3, "save_folder": str(tmp_path)},
        callbacks=[FailSecond()],
    )
    with pytest.raises(RuntimeError, match="boom"):
        runs.run()
    statuses = [json.loads((tmp_path / f"seed_{s}" / "status.json").read_text()) for s in (3, 4, 5)]
    assert [st["status"] for st in statuses] == ["failed"] * 3
    assert "RuntimeError: boom" in statuses[1]["error"]
    for st in (statuses[0], statuses[2]):
        assert "the run seed_4, which failed" in st["error"]
    for s in (3, 4, 5):  # every folder released
        assert not (tmp_path / f"seed_{s}" / ".lock").exists()


def test_runs_into_a_folder_that_holds_runs_are_refused_untouched(tmp_path):
    config = {**CONFIG, "runs": 2, "total_frames": 64, "save_folder": str(tmp_path)}
    ExperimentRuns.create(fake_task, "mappo", seed=0, task_name="fake/task", config=config).run()
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    again = ExperimentRuns.create(fake_task, "ippo", seed=0, task_name="fake/task", config=config)
    with pytest.raises(FileExistsError, match="already holds a run"):
        again.run()
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_host_envs_keep_a_collector_per_run(tmp_path):
    pytest.importorskip("gymnasium")
    config = dict(CONFIG, runs=2, num_envs=2, total_frames=128, save_folder=str(tmp_path))
    runs = ExperimentRuns.create("gymnasium/cartpole", "ppo", seed=0, config=config)
    assert [s["frames"] for s in runs.run()] == [128, 128]
    assert not runs.hub.shares_collection and not runs.hub.stacked  # each run on its own
    for seed in (0, 1):
        assert json.loads((tmp_path / f"seed_{seed}" / "status.json").read_text())["status"] == (
            "complete"
        )


def member(folder, seed, **algorithm_config):
    """Member ``seed`` of a population of two (MAPPO on the fake task) in ``folder/m<seed>``."""
    return Experiment(
        fake_task,
        "mappo",
        seed=seed,
        task_name="fake/task",
        algorithm_config=algorithm_config,
        config={**CONFIG, "runs": 2, "save_folder": str(folder / f"m{seed}")},
    )


def test_members_may_differ_in_learning_rate_and_nothing_else(tmp_path):
    """A population's members: each run trains with its own ``lr`` (one stacked update)."""
    with pytest.raises(
        ValueError, match=r"differs from seed 0's in \['algorithm_config\.epochs'\]"
    ):
        ExperimentRuns([member(tmp_path, 0), member(tmp_path, 1, epochs=3)], tmp_path)
    runs = ExperimentRuns([member(tmp_path, 0, lr=1e-3), member(tmp_path, 1, lr=3e-4)], tmp_path)
    runs.run()
    assert runs.hub.stacked
    assert {type(s.optimizer).__name__ for s in runs.hub.stacks.values()} == {"StackedAdam"}
    for seed, lr in ((0, 1e-3), (1, 3e-4)):
        config = yaml.safe_load((tmp_path / f"m{seed}" / "config.yaml").read_text())
        assert config["algorithm_config"]["lr"] == lr
        exp = runs.experiments[seed]
        rates = {
            g["lr"]
            for _, learner in exp.algorithm.group_learners()
            for g in learner.updater.optimizer.param_groups
        }
        assert rates == {lr}


def test_members_may_differ_in_loss_hyperparameters(tmp_path):
    """A population's members with their own entropy bonus, clip range and discount: one
    stacked update, each run's loss (and config.yaml) with its own values."""
    own = {
        0: {"entropy_coef": 0.0, "clip_epsilon": 0.2, "gamma": 0.99, "max_grad_norm": 0.5},
        1: {"entropy_coef": 0.05, "clip_epsilon": 0.1, "gamma": 0.9, "max_grad_norm": None},
    }
    runs = ExperimentRuns([member(tmp_path, seed, **c) for seed, c in own.items()], tmp_path)
    runs.run()
    assert runs.hub.stacked
    for stack in runs.hub.stacks.values():  # kept per run in the stacked call
        assert sorted(stack.scalars.values) == ["clip_epsilon", "entropy_coef"]
        assert stack.scalars.values["entropy_coef"].tolist() == pytest.approx([0.0, 0.05])
    for seed, config in own.items():
        saved = yaml.safe_load((tmp_path / f"m{seed}" / "config.yaml").read_text())
        assert {k: saved["algorithm_config"][k] for k in config} == config
        for _, learner in runs.experiments[seed].algorithm.group_learners():
            loss = learner.loss
            assert (loss.entropy_coef, loss.clip_epsilon) == (
                config["entropy_coef"],
                config["clip_epsilon"],
            )
            assert loss.value_estimator.gamma == config["gamma"]
            assert learner.updater.gradient_step.max_grad_norm == config["max_grad_norm"]
