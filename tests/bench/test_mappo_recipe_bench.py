"""The marl side of ``benchmarks/crosscheck/bench_mappo_recipe.py`` (TorchRL is never run here).

The comparison with TorchRL's MAPPO recipe is only as good as marl's settings: these tests
check that the overrides it passes to ``marl-run`` compose into the recipe's config, that
the timers and the return curve are read from ``scalars.csv`` as the run logs them, and
that the rounds alternate with the compiled runs kept cold first.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest
import yaml

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks/crosscheck/bench_mappo_recipe.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_mappo_recipe", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rounds_alternate_and_compiled_runs_start_cold(bench):
    variants = ["torchrl", "eager", "async", "compile_cold", "compile_warm", "compile_async"]
    assert bench.round_order(variants, 1) == variants
    assert bench.round_order(variants, 2) == [
        "compile_cold",
        "compile_warm",
        "compile_async",
        "async",
        "eager",
        "torchrl",
    ]


def test_scalars_give_the_timers_sums_and_the_return_curve(bench, tmp_path):
    rows = ["frames,key,value"]
    for frames, ret in ((6000, -0.5), (12000, 0.25)):
        rows += [
            f"{frames},train/episode_reward,{ret}",
            f"{frames},train/agent/episode_reward,{ret}",
            f"{frames},time/collect,1.5",
            f"{frames},time/update,2.0",
            f"{frames},time/total,3.5",
        ]
    (tmp_path / "scalars.csv").write_text("\n".join(rows) + "\n")
    got = bench.read_scalars(tmp_path / "scalars.csv")
    assert got == {
        "frames": 12000,
        "collect_s": 3.0,
        "update_s": 4.0,
        "curve": [(6000, -0.5), (12000, 0.25)],
    }


def test_the_overrides_compose_into_the_recipe(bench):
    """``marl-run --cfg job`` with the benchmark's overrides prints the recipe's settings."""
    marl_run = bench.marl_run_bin()
    overrides = [*bench.COMMON, *bench.RECIPE, *bench.NO_EXTRAS, "experiment.total_frames=300000"]
    env = dict(os.environ, HYDRA_FULL_ERROR="1")
    out = subprocess.run(
        [marl_run, *overrides, "--cfg", "job"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    cfg = yaml.safe_load(out.stdout)
    algo, exp = cfg["algorithm"], cfg["experiment"]
    assert cfg["task"] == "vmas/navigation"
    assert algo["name"] == "mappo"
    assert algo["actor_cells"] == algo["critic_cells"] == [256, 256]
    assert algo["activation"] == "tanh" and algo["share_policy_params"] is True
    assert (algo["lr"], algo["clip_epsilon"], algo["gamma"], algo["lmbda"]) == (
        3e-4,
        0.2,
        0.99,
        0.9,
    )
    assert (algo["entropy_coef"], algo["max_grad_norm"]) == (1e-4, 1.0)
    assert (algo["epochs"], algo["minibatch_size"]) == (10, 400)
    assert algo["normalize_advantage"] is False and algo["loss_critic_type"] == "smooth_l1"
    assert (exp["num_envs"], exp["frames_per_batch"]) == (60, 6000)
    assert (exp["total_frames"], exp["num_threads"]) == (300000, 1)
    assert exp["evaluation"] is False and exp["render"] is False
    assert exp["checkpoint_interval"] == 0 and exp["checkpoint_at_end"] is False
