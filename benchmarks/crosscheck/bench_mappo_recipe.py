"""marl's MAPPO against TorchRL 0.14's on TorchRL's multi-agent recipe, side by side.

Run with marl's venv, from the repository root::

    python benchmarks/crosscheck/bench_mappo_recipe.py --rounds 1 --frames 300000 \\
        --variants torchrl,async

Every run is a fresh process with ``OMP_NUM_THREADS=1`` and one torch thread
(``experiment.num_threads=1`` for marl, ``torch.set_num_threads(1)`` in the TorchRL
script). The sides alternate in rounds (round 2 runs the variants in the reverse order
of round 1), so a change of the machine's load hits both. Sides (``--variants``):

- ``torchrl``: ``mappo_recipe_torchrl.py`` in the TorchRL venv (``setup_venv.sh``), with
  the ``vmas`` package of marl's venv (pure Python) put on its path through a folder of
  links, so the two sides step the same VMAS.
- ``eager``: ``marl-run`` with the recipe's settings (``RECIPE`` below), inline collector.
- ``async``: the same with ``experiment.collector=async``.
- ``compile_cold``: ``experiment.compile=true`` with a fresh ``TORCHINDUCTOR_CACHE_DIR``
  (what a first run pays); ``compile_warm``: the same again with that folder (what the
  next runs pay); ``compile_async``: compiled and async, on the warm folder.

With ``--workload default`` the marl variants run marl's default ``marl-run`` instead
(64x64 networks, marl's own hyperparameters; only ``experiment.total_frames`` and the
outputs are set) and ``torchrl`` is not run.

Each run records its process wall time (start to exit, imports and compilation
included), its CPU time (user + system, worker processes included), the load average before and after, marl's ``time/collect`` and
``time/update`` sums from ``scalars.csv`` (the TorchRL script's own timers), frames/s
(frames over the wall time), the ratio to the TorchRL run of the same round, and the
training return of the last 5 batches. Everything goes to ``--out``/results.json and a
markdown table is printed.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
VENV = Path(os.environ.get("MARL_CROSSCHECK_VENV", Path.home() / ".cache/marl-crosscheck/venv"))

# The TorchRL recipe's settings (issue 32) as marl-run overrides. marl's MAPPO defaults
# already match gamma 0.99, lambda 0.9, clip 0.2, 10 epochs, minibatches of 400 and
# 6,000 frames a batch (60 envs x VMAS max_steps 100); the rest is set here.
# normalize_advantage and the smooth-L1 critic loss follow the recipe's ClipPPOLoss.
RECIPE = [
    "algorithm=mappo",
    "task=vmas/navigation",
    "algorithm.actor_cells=[256,256]",
    "algorithm.critic_cells=[256,256]",
    "algorithm.activation=tanh",
    "algorithm.share_policy_params=true",
    "algorithm.lr=3e-4",
    "algorithm.clip_epsilon=0.2",
    "algorithm.gamma=0.99",
    "algorithm.lmbda=0.9",
    "algorithm.entropy_coef=1e-4",
    "algorithm.max_grad_norm=1.0",
    "algorithm.epochs=10",
    "algorithm.minibatch_size=400",
    "algorithm.normalize_advantage=false",
    "algorithm.loss_critic_type=smooth_l1",
    "experiment.num_envs=60",
    "experiment.frames_per_batch=6000",
]
# Work the TorchRL script does not do, switched off on marl's side of the recipe runs:
# evaluation rollouts, videos and checkpoints. The console status line is off on both.
NO_EXTRAS = [
    "experiment.evaluation=false",
    "experiment.render=false",
    "experiment.checkpoint_interval=0",
    "experiment.checkpoint_at_end=false",
]
COMMON = ["experiment.num_threads=1", "experiment.progress=false"]

VARIANTS = {
    "eager": [],
    "async": ["experiment.collector=async"],
    "compile_cold": ["experiment.compile=true"],
    "compile_warm": ["experiment.compile=true"],
    "compile_async": ["experiment.compile=true", "experiment.collector=async"],
}
ALL = ("torchrl", *VARIANTS)


def loadavg() -> float:
    """The 1-minute load average (the machine is shared: every figure carries it)."""
    return os.getloadavg()[0]


def child_cpu() -> float:
    """CPU seconds (user + system) of every finished child process, their workers included.

    On a shared machine the CPU time of a one-thread run moves less with the load than its
    wall time; an async run's is the sum of its learner's and its worker's.
    """
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def vmas_path(out: Path) -> Path:
    """A folder of links to marl's ``vmas`` and its pure-Python imports, for the TorchRL venv.

    The TorchRL venv has no ``vmas``; linking the copy of this venv (rather than installing
    one) makes both sides step the same VMAS code.
    """
    folder = out / "vmas-path"
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("vmas", "gym", "gym_notices", "six"):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"marl's venv needs the package {name!r} for the TorchRL side")
        origin = Path(spec.origin)
        src = origin.parent if origin.name == "__init__.py" else origin
        link = folder / src.name
        if not link.exists():
            link.symlink_to(src)
    return folder


def marl_run_bin() -> str:
    """marl-run next to this interpreter (the worktree's venv), else the one on PATH."""
    cand = Path(sys.executable).parent / "marl-run"
    found = str(cand) if cand.exists() else shutil.which("marl-run")
    if found is None:
        raise RuntimeError("marl-run not found next to the interpreter or on PATH")
    return found


def read_scalars(path: Path) -> dict:
    """Sum marl's per-batch timers and collect the training-return curve from scalars.csv."""
    collect = update = 0.0
    curve = []
    frames = 0
    with open(path) as f:
        for row in csv.DictReader(f):
            key, value, fr = row["key"], float(row["value"]), int(float(row["frames"]))
            if key == "time/collect":
                collect += value
            elif key == "time/update":
                update += value
            elif key == "train/episode_reward":
                curve.append((fr, value))
            frames = max(frames, fr)
    return {"frames": frames, "collect_s": collect, "update_s": update, "curve": curve}


def run_one(variant: str, args: argparse.Namespace, out: Path, tag: str) -> dict:
    """Run one side in a fresh process; return its timings, load and curve."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    folder = out / tag
    if folder.exists():
        shutil.rmtree(folder)
    if variant == "torchrl":
        json_path = out / f"{tag}.json"
        env["PYTHONPATH"] = str(vmas_path(out))
        cmd = [
            str(VENV / "bin/python"),
            str(HERE / "mappo_recipe_torchrl.py"),
            f"--frames={args.frames}",
            f"--seed={args.seed}",
            f"--json={json_path}",
        ]
    else:
        overrides = [*COMMON, f"seed={args.seed}", f"experiment.total_frames={args.frames}"]
        if args.workload == "recipe":
            overrides += RECIPE + NO_EXTRAS
        overrides += VARIANTS[variant] + [f"hydra.run.dir={folder}"]
        cmd = [marl_run_bin(), *overrides]
        if variant.startswith("compile"):
            cache = out / f"inductor-{tag.split('-')[0]}"
            if variant == "compile_cold" and cache.exists():
                shutil.rmtree(cache)
            env["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    log = out / f"{tag}.log"
    load_before = loadavg()
    cpu_before = child_cpu()
    start = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, cwd=out)
    wall = time.perf_counter() - start
    cpu = child_cpu() - cpu_before
    load_after = loadavg()
    if proc.returncode:
        raise RuntimeError(f"{variant} failed (exit {proc.returncode}); see {log}")
    if variant == "torchrl":
        data = json.loads(json_path.read_text())
        stats = {k: data[k] for k in ("frames", "collect_s", "update_s", "curve")}
    else:
        stats = read_scalars(folder / "scalars.csv")
    last = [r for _, r in stats["curve"][-5:]]
    return {
        "variant": variant,
        "command": " ".join(cmd),
        "wall_s": wall,
        "cpu_s": cpu,
        "frames_per_s": stats["frames"] / wall,
        "load_before": load_before,
        "load_after": load_after,
        "final_return": sum(last) / len(last) if last else float("nan"),
        **stats,
    }


def round_order(variants: list[str], rnd: int) -> list[str]:
    """The variants in the order of round ``rnd``: as given in odd rounds, reversed in even ones.

    The compiled variants move as one block, cold first, since the warm ones reuse the
    cache the cold run of the same round fills.

    >>> round_order(["torchrl", "eager", "compile_cold", "compile_warm"], 2)
    ['compile_cold', 'compile_warm', 'eager', 'torchrl']
    """
    blocks: list[list[str]] = []
    compiled: list[str] = []
    for v in variants:
        if v.startswith("compile"):
            if not compiled:
                blocks.append(compiled)
            compiled.append(v)
        else:
            blocks.append([v])
    compiled.sort(key=lambda v: v != "compile_cold")
    if rnd % 2 == 0:
        blocks.reverse()
    return [v for block in blocks for v in block]


def table(results: list[dict]) -> str:
    """One markdown row per run, with the ratio to the TorchRL run of the same round."""
    lines = [
        "| round | variant | wall s | CPU s | collect s | update s | frames/s | / TorchRL | "
        "return (last 5) | load before, after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        base = [
            x["wall_s"] for x in results if x["round"] == r["round"] and x["variant"] == "torchrl"
        ]
        ratio = f"{r['wall_s'] / base[0]:.2f}x" if base else "-"
        cpu = f"{r['cpu_s']:.1f}" if "cpu_s" in r else "-"  # older results have none
        lines.append(
            f"| {r['round']} | {r['variant']} | {r['wall_s']:.1f} | {cpu} | "
            f"{r['collect_s']:.1f} | "
            f"{r['update_s']:.1f} | {r['frames_per_s']:,.0f} | {ratio} | "
            f"{r['final_return']:.3f} | {r['load_before']:.1f}, {r['load_after']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--frames", type=int, default=300_000, help="total frames of every run")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--variants", default=",".join(ALL), help=f"comma-separated, of {ALL}")
    p.add_argument(
        "--workload",
        choices=("recipe", "default"),
        default="recipe",
        help="recipe: TorchRL's MAPPO recipe; default: marl-run's default run (marl only)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="bench_mappo_recipe_out", help="run folders and results")
    p.add_argument(
        "--table-only",
        action="store_true",
        help="print the table of --out/results.json, run nothing",
    )
    args = p.parse_args(argv)
    if args.table_only:
        print(table(json.loads((Path(args.out) / "results.json").read_text())))
        return 0
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in ALL]
    if unknown:
        p.error(f"--variants: unknown {unknown}; expected some of {list(ALL)}")
    if args.workload == "default" and "torchrl" in variants:
        p.error("--workload default runs marl only: drop torchrl from --variants")
    if "compile_warm" in variants and "compile_cold" not in variants:
        p.error("--variants: compile_warm reuses compile_cold's cache; name compile_cold too")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)

    results: list[dict] = []
    for rnd in range(1, args.rounds + 1):
        for variant in round_order(variants, rnd):
            tag = f"r{rnd}-{variant}"
            print(f"{time.strftime('%H:%M:%S')} {tag} (load {loadavg():.2f}) ...", flush=True)
            r = run_one(variant, args, out, tag)
            r["round"] = rnd
            results.append(r)
            print(
                f"  wall {r['wall_s']:.1f}s, CPU {r['cpu_s']:.1f}s, collect {r['collect_s']:.1f}s, update "
                f"{r['update_s']:.1f}s, return {r['final_return']:.3f} "
                f"(load {r['load_before']:.2f} -> {r['load_after']:.2f})",
                flush=True,
            )
            (out / "results.json").write_text(json.dumps(results, indent=1))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
