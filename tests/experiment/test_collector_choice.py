"""``experiment.collector``: the inline, multi-process sync and async collectors in a run."""

import json
import multiprocessing as mp

import pytest

from marl.experiment import Experiment, ExperimentConfig, read_scalars
from marl.testing import MultiAgentFakeEnv


def fake_task(num_envs, seed, device):
    return MultiAgentFakeEnv(num_envs=num_envs, seed=seed)


def make(folder, algorithm="mappo", algorithm_config=None, **kw):
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
    return Experiment(
        fake_task,
        algorithm,
        seed=0,
        task_name="fake/multiagent",
        config=config,
        algorithm_config=algorithm_config,
    )


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
        tmp_path, algorithm, algo_config, collector=collector, collector_workers=workers
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
