"""``marl-tune``: tune a search space with PBT, ASHA or random search on Ray Tune.

Examples (shell)::

    marl-tune navigation_mappo                           # a shipped space (marl/tune/spaces/)
    marl-tune my_space.yaml experiment.total_frames=60000 --scheduler asha --members 16
    marl-tune navigation_mappo --address auto            # on a running Ray cluster
    marl-tune --resume outputs/tune/2025-01-01_12-00-00_navigation_mappo_pbt
    marl-tune navigation_mappo --backend vectorized      # every member in this process

Positional arguments after the space are ``marl-run`` overrides for every member. The
flags override the space's ``tune:`` section (:class:`~marl.tune.TuneSettings`). At the
end it prints the best member's score and its configuration as a ``marl-run`` command
(also in ``best.json``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["main"]

PROGRAM = "marl-tune"


def _parser() -> argparse.ArgumentParser:
    from marl.tune.space import SCHEDULERS, SPACES_DIR

    shipped = ", ".join(sorted(p.stem for p in SPACES_DIR.glob("*.yaml")))
    p = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Tune marl runs with population-based training, ASHA or random search "
        "(Ray Tune, or one process: --backend vectorized). Each member is a marl-run run in "
        "<folder>/members/.",
        epilog=f"Shipped spaces: {shipped}.",
    )
    p.add_argument("space", nargs="?", help="a search-space YAML file or a shipped space's name")
    p.add_argument("overrides", nargs="*", help="marl-run overrides for every member")
    p.add_argument("--resume", metavar="FOLDER", help="continue a stopped tuning run")
    p.add_argument(
        "--folder", help="output folder (default: outputs/tune/<time>_<space>_<scheduler>)"
    )
    p.add_argument("--scheduler", help=f"one of {list(SCHEDULERS)}")
    p.add_argument("--members", type=int, help="population size / number of configurations")
    p.add_argument("--metric", help="the logged scalar to optimize (eval/episode_reward)")
    p.add_argument("--mode", choices=["max", "min"])
    p.add_argument("--interval", type=int, help="frames between reports (PBT's exploit interval)")
    p.add_argument("--max-concurrent", type=int, help="members trained at once")
    p.add_argument("--cpus-per-member", type=float, help="Ray CPUs per member (0.5: two per core)")
    p.add_argument("--gpus-per-member", type=float, help="Ray GPUs per member")
    p.add_argument("--seed", type=int, help="seed of the sampling and PBT's perturbations")
    p.add_argument("--address", help="a running Ray cluster (auto)")
    p.add_argument(
        "--backend",
        choices=["ray", "vectorized"],
        default="ray",
        help="ray: each member in a Ray Tune worker (default); vectorized: the whole "
        "population in this process, one env batch and one stacked update (pbt and random; "
        "searched keys: algorithm.<key> with <key> in "
        "marl.algorithms.updates.PER_RUN_SETTINGS: learning rates, entropy_coef, "
        "clip_epsilon, gamma, ...)",
    )
    p.add_argument("-v", "--verbose", action="count", default=0, help="Ray Tune's trial table")
    return p


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``marl-tune``."""
    args = _parser().parse_intermixed_args(argv)
    from marl.tune.run import resume_tuning, tune
    from marl.tune.space import load_space

    folder = args.resume
    try:
        if args.resume:
            if args.space or args.overrides:
                raise ValueError(
                    "--resume takes the tuning run's folder only (no space or overrides)"
                )
            # its backend is the one tune.json records
            result = resume_tuning(args.resume, verbose=args.verbose)
        else:
            if not args.space:
                raise ValueError(
                    "give a search space (a YAML file or a shipped name), or --resume FOLDER"
                )
            space = load_space(args.space).with_settings(
                scheduler=args.scheduler,
                members=args.members,
                metric=args.metric,
                mode=args.mode,
                interval=args.interval,
                max_concurrent=args.max_concurrent,
                cpus_per_member=args.cpus_per_member,
                gpus_per_member=args.gpus_per_member,
                seed=args.seed,
                address=args.address,
            )
            folder = args.folder or (
                Path("outputs")
                / "tune"
                / f"{time.strftime('%Y-%m-%d_%H-%M-%S')}_{Path(args.space).stem}_{space.settings.scheduler}"
            )
            result = tune(space, folder, args.overrides, verbose=args.verbose, backend=args.backend)
    except (ValueError, FileNotFoundError, FileExistsError, TypeError) as err:
        sys.stderr.write(f"{PROGRAM}: {err}\n")
        sys.exit(2)
    except KeyboardInterrupt as err:  # the vectorized backend's runs, after SIGINT/SIGTERM
        sys.stderr.write(
            f"{PROGRAM}: {err or 'interrupted'}; continue with: {PROGRAM} --resume {folder}\n"
        )
        sys.exit(getattr(err, "exit_code", 130))
    print(f"{PROGRAM}: {len(result.scores)} members in {result.folder}")
    sign = -1 if result.mode == "max" else 1
    ranked = sorted(result.scores.items(), key=lambda kv: sign * kv[1])
    print("scores: " + ", ".join(f"{m} {v:.3f}" for m, v in ranked))
    print(f"best: {result.best_member} ({result.best_score:.3f}); run it with:")
    print(result.command)


if __name__ == "__main__":  # pragma: no cover
    main()
