"""Probe the README's QMIX example for divergence: ``q_tot_mean`` per iteration.

Every reward of PettingZoo's ``simple_spread`` is <= 0, so a sound ``Q_tot`` is <= 0;
this trains QMIX (seed 3, as the README) for a few iterations with the given config
overrides and prints ``q_tot_mean``, the TD loss and the training return per iteration
(issue 32, finding 10; see ``tests/algorithms/test_qmix_simple_spread.py``).

    python benchmarks/probe_qmix_simple_spread.py max_grad_norm=10 lr=5e-5
    python benchmarks/probe_qmix_simple_spread.py --frames 60000 loss_function=smooth_l1

About 4 minutes per 30k frames on one thread of this 2-core machine.
"""

from __future__ import annotations

import argparse
import ast
import csv
import tempfile

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("overrides", nargs="*", help="QMIX config fields, e.g. lr=5e-5")
    parser.add_argument("--frames", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    config = {}
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"expected key=value, got {item!r}")
        try:
            config[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            config[key] = value  # a plain string (loss_function=smooth_l1)
    torch.set_num_threads(1)
    from marl.experiment import Experiment

    folder = tempfile.mkdtemp(prefix="qmix_probe_")
    Experiment(
        "pettingzoo/simple_spread",
        "qmix",
        seed=args.seed,
        algorithm_config=config,
        config=dict(
            total_frames=args.frames,
            evaluation=False,
            render=False,
            progress=False,
            checkpoint_at_end=False,
            save_folder=folder,
        ),
    ).run()
    with open(f"{folder}/scalars.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    print(f"qmix simple_spread seed {args.seed}, overrides {config or 'none'}:")
    for key in ("train/agent/q_tot_mean", "train/agent/loss_qvalue", "train/episode_reward"):
        values = [round(float(r["value"]), 2) for r in rows if r["key"] == key]
        print(f"  {key}: {values}")


if __name__ == "__main__":
    main()
