"""The Python API of the experiment runner on small envs: outputs, determinism, resume, collectors."""

import json
import multiprocessing as mp

import pytest

from marl.experiment import Experiment, ExperimentConfig, read_scalars
from marl.experiment.checkpoint import load_checkpoint
from marl.report import load_results
from marl.testing import MultiAgentFakeEnv


def fake_task(num_envs, seed, device):
    return MultiAgentFakeEnv(num_envs=num_envs, seed=seed)


def small(folder, **kw):
    config = dict(
        num_envs=4,
        frames_per_batch=64,
        total_frames=256,
        evaluation_interval=128,
        evaluation_episodes=4,
        checkpoint_interval=128,
        render=False,
        progress=False,
        save_folder=str(folder),
    )
    config.update(kw)
    return config


def make(folder, algorithm="mappo", seed=0, algorithm_config=None, **kw):
    return Experiment(
        fake_task,
        algorithm,
        seed=seed,
        task_name="fake/multiagent",
        config=small(folder, **kw),
        algorithm_config=algorithm_config,
    )


def test_output_folder(tmp_path):
    summary = make(tmp_path).run()
    assert summary["frames"] == 256
    names = {p.name for p in tmp_path.iterdir()}
    assert {"config.yaml", "scalars.csv", "results.json", "curves.png", "status.json"} <= names
    assert json.loads((tmp_path / "status.json").read_text())["status"] == "complete"
    for name in ("results.json", "status.json"):  # atomic writes, readable by all
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o644, name
    scalars = read_scalars(tmp_path / "scalars.csv")
    # per-group metrics next to the overall ones
    for key in (
        "train/walker/episode_reward",
        "train/picker/episode_reward",
        "eval/episode_reward",
    ):
        assert key in scalars, key
    # the untrained policy is evaluated first, at 0 frames
    assert [f for f, _ in scalars["eval/episode_reward"]] == [0, 128, 256]
    table = load_results([tmp_path / "results.json"])
    (run,) = table.runs
    assert (run.env, run.task, run.algorithm, run.seed) == ("fake", "multiagent", "mappo", "seed_0")
    steps = [ev.step_count for ev in table.evaluations]
    assert steps == [0, 128, 256]
    assert set(table.evaluations[0].metrics) == {"return", "walker/return", "picker/return"}
    assert len(table.evaluations[0].metrics["return"]) >= 4
    ckpts = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert ckpts == ["checkpoint_128.pt", "checkpoint_256.pt", "latest.pt"]


def test_same_seed_same_first_iteration(tmp_path):
    """Same seed and config on CPU: identical first-iteration losses and rewards."""
    runs = []
    for name in ("a", "b", "c"):
        seed = 1 if name == "c" else 0
        make(tmp_path / name, algorithm="ippo", seed=seed, total_frames=64, evaluation=False).run()
        scalars = read_scalars(tmp_path / name / "scalars.csv")
        first = {k: v[0][1] for k, v in scalars.items() if not k.startswith(("time/", "fps"))}
        runs.append(first)
    assert any("loss" in k for k in runs[0])
    assert "train/episode_reward" in runs[0]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_resume_continues_counting(tmp_path):
    make(tmp_path, total_frames=128, evaluation_interval=64, checkpoint_interval=64).run()
    assert json.loads((tmp_path / "status.json").read_text())["frames"] == 128
    resumed = make(
        tmp_path,
        total_frames=256,
        evaluation_interval=64,
        checkpoint_interval=64,
        restore_file=str(tmp_path / "checkpoints" / "latest.pt"),
    )
    assert resumed.run()["frames"] == 256
    scalars = read_scalars(tmp_path / "scalars.csv")
    frames = [f for f, _ in scalars["train/walker/loss_objective"]]
    assert frames == [64, 128, 192, 256]  # continued, not restarted, no duplicates
    table = load_results([tmp_path / "results.json"])
    assert [ev.step_count for ev in table.evaluations] == [0, 64, 128, 192, 256]
    # the wall time counts on from the checkpoint's (marl-report's time column), not from 0
    elapsed = [ev.elapsed_time for ev in table.evaluations]
    before = load_checkpoint(tmp_path / "checkpoints" / "checkpoint_128.pt")["elapsed_time"]
    assert elapsed == sorted(elapsed) and elapsed[3] > before >= elapsed[2] > 0


def test_resume_rejects_a_checkpoint_of_another_algorithm(tmp_path):
    make(tmp_path, total_frames=64, evaluation=False).run()
    other = make(
        tmp_path / "other",
        algorithm="ippo",
        total_frames=128,
        evaluation=False,
        restore_file=str(tmp_path / "checkpoints" / "latest.pt"),
    )
    with pytest.raises(
        ValueError, match="algorithm: the checkpoint's run has 'mappo', this run 'ippo'"
    ):
        other.run()
    assert not (tmp_path / "other").exists()  # refused before anything was written


def test_one_algorithm_per_group(tmp_path):
    exp = Experiment(
        fake_task,
        {"walker": "mappo", "picker": "iql"},
        task_name="fake/multiagent",
        config=small(tmp_path, total_frames=128),
    )
    exp.run()
    table = load_results([tmp_path / "results.json"])
    assert table.runs[0].algorithm == "picker-iql_walker-mappo"  # as in marl-run's folder names


def test_vmas_video_is_recorded(tmp_path):
    import imageio.v2 as imageio

    Experiment(
        "vmas/navigation",
        "mappo",
        config=small(
            tmp_path,
            num_envs=4,
            frames_per_batch=80,
            total_frames=80,
            evaluation_episodes=2,
            render=True,
        ),
        task_overrides={"max_steps": 20},
    ).run()
    videos = sorted((tmp_path / "videos").glob("*.mp4"))
    assert [v.name for v in videos] == ["eval_0.mp4", "eval_80.mp4"]
    reader = imageio.get_reader(videos[-1])
    frames = [f for f in reader]
    reader.close()
    assert len(frames) == 21 and frames[0].shape == (700, 700, 3)
    assert frames[0].std() > 0  # not a blank image


# ------------------------------------------------------------ experiment.collector
@pytest.mark.parametrize(
    ("collector", "workers", "algorithm"),
    [("async", 1, "mappo"), ("async", 2, "masac"), ("sync", 2, "mappo")],
)
def test_a_run_with_worker_collectors_trains_every_batch_and_stops_its_workers(
    tmp_path, collector, workers, algorithm
):
    before = set(mp.active_children())
    # the off-policy learner updates from the first batch on
    algo_config = {"learning_starts": 0, "batch_size": 32} if algorithm == "masac" else None
    experiment = make(
        tmp_path,
        algorithm,
        algorithm_config=algo_config,
        collector=collector,
        collector_workers=workers,
    )
    summary = experiment.run()
    assert summary["frames"] == 256
    assert json.loads((tmp_path / "status.json").read_text())["status"] == "complete"
    scalars = read_scalars(tmp_path / "scalars.csv")
    losses = [k for k in scalars if "loss" in k]
    assert losses, sorted(scalars)
    # one update per 64-frame batch, none lost or repeated
    assert [f for f, _ in scalars[losses[0]]] == [64, 128, 192, 256]
    assert [f for f, _ in scalars["eval/episode_reward"]] == [0, 128, 256]
    alive = [p for p in mp.active_children() if p not in before]
    assert not alive, f"collector workers still running after the run: {alive}"


def test_an_async_run_resumes_and_keeps_counting(tmp_path):
    kw = dict(collector="async", evaluation_interval=64, checkpoint_interval=64)
    make(tmp_path, total_frames=128, **kw).run()
    resumed = make(
        tmp_path, total_frames=256, restore_file=str(tmp_path / "checkpoints" / "latest.pt"), **kw
    )
    assert resumed.run()["frames"] == 256
    scalars = read_scalars(tmp_path / "scalars.csv")
    assert [f for f, _ in scalars["train/walker/loss_objective"]] == [64, 128, 192, 256]


def test_the_async_learner_trains_on_batches_one_update_behind(tmp_path):
    """With one async worker, batch k+1 is collected while update k runs: its actions'
    stored log-probabilities come from the weights before update k, not after."""
    import torch

    from marl.algorithms import Algorithm
    from marl.collectors import MultiAsyncCollector

    env = MultiAgentFakeEnv(num_envs=4, seed=0)
    algo = Algorithm("ippo", config={"lr": 1e-2})
    algo.build(env, seed=0)
    with MultiAsyncCollector(
        lambda: MultiAgentFakeEnv(num_envs=4, seed=0),
        algo.policy,
        num_workers=1,
        frames_per_batch=64,
        total_frames=-1,
        seed=0,
    ) as collector:
        batches = iter(collector)
        first = next(batches)
        initial = {k: v.clone() for k, v in algo.policy.state_dict().items()}
        algo.update(algo.process_batch(first))
        collector.update_policy_weights_()
        second = next(batches)  # dispatched before the update: the initial weights
        third = next(batches)  # dispatched after it: the updated weights
    updated = {k: v.clone() for k, v in algo.policy.state_dict().items()}
    assert any(not torch.equal(initial[k], updated[k]) for k in initial)

    def log_prob(batch, weights):
        """Log-probability of the batch's stored walker actions under ``weights``."""
        algo.policy.load_state_dict(weights)
        with torch.no_grad():
            dist = algo.policy[0].get_dist(batch.exclude("next"))
            return dist.log_prob(batch["walker", "action"])

    for batch, used, other in ((second, initial, updated), (third, updated, initial)):
        stored = batch["walker", "action_log_prob"]
        torch.testing.assert_close(log_prob(batch, used), stored, rtol=1e-4, atol=1e-4)
        assert (log_prob(batch, other) - stored).abs().max() > 1e-3


def test_collector_options_are_checked():
    with pytest.raises(ValueError, match=r"experiment\.collector: expected one of"):
        ExperimentConfig(collector="ray").validate()
    with pytest.raises(ValueError, match="collector_workers"):
        ExperimentConfig(collector="async", collector_workers=0).validate()
    with pytest.raises(ValueError, match="forked"):
        ExperimentConfig(collector="async", sampling_device="cuda").validate()


def test_sync_needs_envs_divisible_by_its_workers(tmp_path):
    with pytest.raises(ValueError, match="divisible"):
        make(tmp_path, collector="sync", collector_workers=3).run()
