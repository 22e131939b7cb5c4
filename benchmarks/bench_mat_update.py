"""MAT's update with one encoder pass per minibatch against two: seconds per batch.

MAT's loss reads the values from the policy's own encoder pass
(``PPOLoss(value_from_actor=True)``, :class:`~marl.objectives.ActorCritic`); before,
it called the policy (``get_dist``) and then the critic, and the transformer's
encoder ran twice per minibatch. ``loss.value_from_actor = False`` gives that
two-pass path back on the same learner, so both run in one process, alternating
batch by batch: MAT with its default configuration (64-wide tokens, 10 epochs of
400-transition minibatches) on VMAS ``navigation`` (3 agents, 60 envs x 100 steps a
batch, the ``vmas_small`` suite's settings), each update on a freshly collected batch.

Usage:
    python benchmarks/bench_mat_update.py [--batches 6] [--blocks 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=6, help="timed batches per path")
    parser.add_argument("--blocks", type=int, default=1, help="encoder and decoder blocks")
    args = parser.parse_args()
    torch.set_num_threads(1)

    from tensordict.nn import InteractionType, set_interaction_type

    from marl.algorithms import Algorithm
    from marl.envs import RewardSum, TransformedEnv, make_task

    env = TransformedEnv(make_task("vmas/navigation", num_envs=60, seed=0), RewardSum())
    algo = Algorithm("mat", config={"n_blocks": args.blocks}).build(env, seed=0)
    losses = [learner.loss for _, learner in algo.group_learners()]

    def batch():
        with torch.no_grad(), set_interaction_type(InteractionType.RANDOM):
            return env.rollout(100, algo.policy, break_when_any_done=False)

    def update(one_pass: bool) -> float:
        for loss in losses:
            loss.value_from_actor = one_pass
        data = algo.process_batch(batch())
        start = time.perf_counter()
        algo.update(data)
        return time.perf_counter() - start

    update(True)  # warm-up
    update(False)
    times: dict[bool, list[float]] = {True: [], False: []}
    for i in range(args.batches):
        for one_pass in (True, False) if i % 2 == 0 else (False, True):
            times[one_pass].append(update(one_pass))
    one, two = statistics.median(times[True]), statistics.median(times[False])
    print(
        f"torch {torch.__version__}, 1 thread, MAT n_blocks={args.blocks}, "
        f"{args.batches} batches each (6,000 frames, 10 epochs of 400 transitions)"
    )
    print(f"two encoder passes per minibatch: {two:6.2f} s per update (median)")
    print(f"one encoder pass per minibatch:   {one:6.2f} s per update (median)")
    print(f"one / two: {one / two:.2f}")


if __name__ == "__main__":
    main()
