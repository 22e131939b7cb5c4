"""The wrapper-vs-raw timing loop shared by the env benchmarks.

Each env benchmark times marl's wrapper against the raw package's own step loop on
the same task, two ways (``MODES``):

- ``"step"``: the wrapper's own step loop (:func:`step_loop_rate`): random actions
  from the action spec, ``step_and_maybe_reset``, nothing kept, which is what the
  raw loops do. The wrapper's cost alone; the issue-18 target (>= 80% of raw)
  applies to it.
- ``"rollout"``: ``rollout`` (:func:`rollout_rate`), which also keeps every step and
  stacks them over time, as a collector does. With large observations (MAgent2's
  162 agents: 0.55 MB a step) that storage, mostly first-touch page faults of fresh
  memory, costs more than the wrapper.

Both sides are functions ``(steps, seed) -> env-steps/s``; :func:`paired_rates` warms
both up, then runs pairs of repetitions back to back in alternating order (so that a
slow spell of the shared machine hits both sides alike) and reports medians.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# (steps, seed) -> env-steps/s, summed over envs
Rate = Callable[[int, int], float]
MODES = ("step", "rollout")


def _check_num_envs(env: Any, num_envs: int) -> None:
    expected = torch.Size([] if num_envs == 1 else [num_envs])
    if torch.Size(env.batch_size) != expected:
        raise RuntimeError(f"env batch size {env.batch_size}, expected {expected}")


def step_loop_rate(env: Any, steps: int, num_envs: int = 1) -> float:
    """Env-steps/s (summed over envs) of the wrapper's own step loop, keeping nothing.

    Per step: ``rand_action`` (legal actions under action masks), then
    ``step_and_maybe_reset`` (the step's TensorDict, the next root, resets of the
    envs that ended). The env is reset first, outside the timed part.
    """
    _check_num_envs(env, num_envs)
    td = env.reset()
    start = time.perf_counter()
    for _ in range(steps):
        td = env.rand_action(td)
        _, td = env.step_and_maybe_reset(td)
    return steps * num_envs / (time.perf_counter() - start)


def wrapper_rate(env: Any, steps: int, num_envs: int, mode: str) -> float:
    """:func:`step_loop_rate` (``mode="step"``) or :func:`rollout_rate` (``"rollout"``)."""
    if mode == "step":
        return step_loop_rate(env, steps, num_envs)
    if mode == "rollout":
        return rollout_rate(env, steps, num_envs)
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def rollout_rate(env: Any, steps: int, num_envs: int = 1) -> float:
    """Env-steps/s (summed over envs) of ``env.rollout(steps, break_when_any_done=False)``.

    The env is reset first, outside the timed part. ``num_envs > 1`` means a batched env
    whose rollout has batch size ``[num_envs, steps]``; anything else raises.
    """
    env.reset()
    start = time.perf_counter()
    td = env.rollout(steps, break_when_any_done=False)
    elapsed = time.perf_counter() - start
    expected = torch.Size([steps] if num_envs == 1 else [num_envs, steps])
    if td.batch_size != expected:
        raise RuntimeError(f"unexpected rollout batch size {td.batch_size}, expected {expected}")
    return steps * num_envs / elapsed


def paired_rates(raw: Rate, wrapper: Rate, reps: int, steps: int, warmup: int = 20) -> dict:
    """Median env-steps/s of the raw loop and the wrapper, and the median paired ratio.

    Args:
        raw: the raw package's loop, ``raw(steps, seed)`` -> env-steps/s.
        wrapper: marl's wrapper, ``wrapper(steps, seed)`` -> env-steps/s.
        reps: pairs of repetitions; repetition ``rep`` uses seed ``rep``, and the raw
            loop goes first in even ones, the wrapper in odd ones.
        steps: steps per repetition.
        warmup: steps of the untimed warm-up run of each side (seed 0).

    Returns:
        ``{"raw": ..., "wrapper": ..., "ratio": ...}``: the two medians and the median of
        the per-pair ratios wrapper / raw.
    """
    raw(warmup, 0)
    wrapper(warmup, 0)
    raws, wrapped, ratios = [], [], []
    for rep in range(reps):
        if rep % 2 == 0:
            r = raw(steps, rep)
            w = wrapper(steps, rep)
        else:
            w = wrapper(steps, rep)
            r = raw(steps, rep)
        raws.append(r)
        wrapped.append(w)
        ratios.append(w / r)
    return {
        "raw": statistics.median(raws),
        "wrapper": statistics.median(wrapped),
        "ratio": statistics.median(ratios),
    }


def rate_row(name: str, baseline_name: str, m: dict) -> dict:
    """The ``python -m benchmarks.speed`` row of a :func:`paired_rates` result."""
    return {
        "name": name,
        "value": m["wrapper"],
        "unit": "env-steps/s",
        "baseline_name": baseline_name,
        "baseline_value": m["raw"],
        "ratio": m["ratio"],
    }


def verdict(ratio: float, target: float) -> str:
    """``median paired ratio  85.0% (target 80%) OK`` (or ``BELOW TARGET``)."""
    word = "OK" if ratio >= target else "BELOW TARGET"
    return f"median paired ratio {ratio:6.1%} (target {target:.0%}) {word}"


@dataclass(frozen=True)
class Case:
    """One wrapper-vs-raw comparison of an env benchmark.

    Attributes:
        label: the task's name in the printed lines and rows.
        baseline: the raw side's name (``"raw magent2 parallel loop"``).
        raw: ``(num_envs, steps, seed) -> env-steps/s`` of the package's own loop.
        make_env: ``(num_envs, seed) -> env``: marl's wrapper (a ``SerialEnv`` of
            ``num_envs`` copies past 1), seeded.
        warmup: steps of each side's untimed warm-up run.
    """

    label: str
    baseline: str
    raw: Callable[[int, int, int], float]
    make_env: Callable[[int, int], Any]
    warmup: int = 20


def measure(case: Case, num_envs: int, reps: int, steps: int, mode: str) -> dict:
    """:func:`paired_rates` of ``case``'s raw loop and its wrapper in ``mode``."""
    return paired_rates(
        lambda n, seed: case.raw(num_envs, n, seed),
        lambda n, seed: wrapper_rate(case.make_env(num_envs, seed), n, num_envs, mode),
        reps,
        steps,
        warmup=case.warmup,
    )


ENV_COUNTS = (1, 8)


def rows(cases: list[Case], steps: int, reps: int) -> list[dict]:
    """``python -m benchmarks.speed`` rows: every case, 1 and 8 envs, both modes.

    ``steps`` is per env with one env; 8 envs run ``steps // 8`` steps each.
    """
    out = []
    for case in cases:
        for num_envs in ENV_COUNTS:
            n = max(steps // num_envs, 1)
            for mode in MODES:
                m = measure(case, num_envs, reps, n, mode)
                name = f"{case.label} {mode} loop, {num_envs} env(s) x {n} steps"
                out.append(rate_row(name, case.baseline, m))
    return out


def print_table(cases: list[Case], steps: int, reps: int, target: float) -> None:
    """Print every case's paired rates, 1 and 8 envs, both modes, with the verdict."""
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, reps {reps}")
    for case in cases:
        for num_envs in ENV_COUNTS:
            n = max(steps // num_envs, 1)
            for mode in MODES:
                m = measure(case, num_envs, reps, n, mode)
                print(
                    f"{case.label}, {num_envs} env(s) x {n} steps, {mode:7s}: "
                    f"raw {m['raw']:7.0f} env-steps/s | marl {m['wrapper']:7.0f} env-steps/s | "
                    f"{verdict(m['ratio'], target)}"
                )


# --------------------------------------------------------------- native vs package
# The native-env benchmarks (bench_native_lbf.py, bench_native_rware.py): every side
# (the package's own loop, marl's wrapper, the native env at several batch sizes)
# timed in rounds, on each torch thread count, printed as a markdown table.


@dataclass(frozen=True)
class Side:
    """One timed side of a native-env benchmark.

    Attributes:
        name: the side's name in the table (``"lbforaging package loop"``).
        num_envs: envs it steps (one batch, or copies stepped one after another).
        rate: ``(steps, seed) -> env-steps/s`` summed over the envs.
        steps: steps per env in one repetition.
    """

    name: str
    num_envs: int
    rate: Rate
    steps: int


def set_threads(threads: int) -> None:
    """Torch's intra-op threads, and ``OMP_NUM_THREADS`` for any process started after."""
    import os

    torch.set_num_threads(threads)
    os.environ["OMP_NUM_THREADS"] = str(threads)


def round_medians(sides: list[Side], reps: int, warmup: int = 10) -> list[float]:
    """Median env-steps/s of each side over ``reps`` rounds.

    Each side first runs ``warmup`` untimed steps (seed 0). Round ``rep`` then runs every
    side once with seed ``rep``, in an order rotated by ``rep``, so that a slow spell of
    the shared machine hits every side alike.
    """
    for side in sides:
        side.rate(warmup, 0)
    rates: list[list[float]] = [[] for _ in sides]
    for rep in range(reps):
        for k in range(len(sides)):
            i = (k + rep) % len(sides)
            rates[i].append(sides[i].rate(sides[i].steps, rep))
    return [statistics.median(r) for r in rates]


def native_vs_package(
    sides: list[Side], reps: int, threads: list[int], package_1: int, package_8: int
) -> list[dict]:
    """:func:`round_medians` of ``sides`` on each thread count, with the ratios.

    ``package_1`` and ``package_8`` index the package's own loop with one env and with 8
    copies in ``sides``; every record's ``vs_1`` / ``vs_8`` is its median divided by
    theirs (ratios of medians, on the same thread count).

    Returns:
        One record per thread count and side: ``threads``, ``side``, ``envs``,
        ``steps``, ``rate``, ``vs_1``, ``vs_8``.
    """
    out = []
    for t in threads:
        set_threads(t)
        rates = round_medians(sides, reps)
        for side, rate in zip(sides, rates, strict=True):
            out.append(
                {
                    "threads": t,
                    "side": side.name,
                    "envs": side.num_envs,
                    "steps": side.steps,
                    "rate": rate,
                    "vs_1": rate / rates[package_1],
                    "vs_8": rate / rates[package_8],
                }
            )
    return out


def markdown_table(records: list[dict]) -> str:
    """:func:`native_vs_package`'s records as a markdown table (for the docs)."""
    head = (
        "threads",
        "side",
        "envs",
        "env-steps/s",
        "ratio vs package 1 env",
        "ratio vs package 8 copies",
    )
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join(["---:", "---", "---:", "---:", "---:", "---:"]) + "|",
    ]
    for r in records:
        cells = (
            str(r["threads"]),
            r["side"],
            str(r["envs"]),
            f"{r['rate']:,.0f}",
            f"{r['vs_1']:.2f}x",
            f"{r['vs_8']:.2f}x",
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass(frozen=True)
class NativeBench:
    """A native env against its package: what ``bench_native_lbf.py`` and
    ``bench_native_rware.py`` differ in; :meth:`sides`, :meth:`speed_rows` and
    :meth:`main` are the rest.

    Attributes:
        family: the package (``"lbforaging"``), as ``bench_epymarl_envs.raw_loop`` knows it.
        env_id: the gymnasium id both sides step.
        raw_name: the package's env class, for the speed rows (``"ForagingEnv"``).
        wrapper_name: marl's wrapper class, for the table (``"LBForagingEnv"``).
        native_name: the native env class, for the table (``"LBFEnv"``).
        native: ``(num_envs, seed, device) -> env`` (unbatched for 1 env).
        wrapper: ``(num_envs, seed) -> env``: the wrapper, a ``SerialEnv`` past 1.
    """

    family: str
    env_id: str
    raw_name: str
    wrapper_name: str
    native_name: str
    native: Callable[[int, int, str], Any]
    wrapper: Callable[[int, int], Any]
    batches: tuple[int, ...] = (1, 64, 1024)
    copies: tuple[int, ...] = (1, 8)  # the package loop's and the wrapper's env counts
    target: float = 30.0

    @property
    def package(self) -> str:
        return f"{self.family} package loop"

    def sides(self, steps: int, device: str = "cpu", wrappers: bool = True) -> list[Side]:
        """The package loop (1 env, 8 copies; indexes 0 and 1), the wrapper (1, 8; unless
        ``wrappers`` is false), the native env (:attr:`batches`), each ``steps`` steps a
        repetition (8 copies: ``max(steps // 4, 20)``, the ``SerialEnv`` being slow)."""
        from benchmarks.envs.bench_epymarl_envs import raw_loop  # it imports this module

        def copies_steps(n: int) -> int:
            return steps if n == 1 else max(steps // 4, 20)

        out = [
            Side(
                self.package,
                n,
                lambda k, seed, n=n: raw_loop(self.family, n, k, seed, env_id=self.env_id),
                copies_steps(n),
            )
            for n in self.copies
        ]
        if wrappers:
            out += [
                Side(
                    f"marl {self.wrapper_name}"
                    if n == 1
                    else f"marl SerialEnv of {self.wrapper_name}",
                    n,
                    lambda k, seed, n=n: step_loop_rate(self.wrapper(n, seed), k, n),
                    copies_steps(n),
                )
                for n in self.copies
            ]
        out += [
            Side(
                f"native {self.native_name} ({device})",
                n,
                lambda k, seed, n=n: step_loop_rate(self.native(n, seed, device), k, n),
                steps,
            )
            for n in self.batches
        ]
        return out

    def speed_rows(self, quick: bool = False) -> list[dict]:
        """Rows for ``python -m benchmarks.speed`` (its thread count): each native batch
        size vs the package's own loop with 1 env, and the largest batch vs 8 copies."""
        steps, reps = (50, 3) if quick else (400, 5)
        sides = self.sides(steps, wrappers=False)
        records = native_vs_package(sides, reps, [torch.get_num_threads()], 0, 1)
        base1, base8 = records[0]["rate"], records[1]["rate"]
        rows = [
            {
                "name": f"native {self.native_name} {self.env_id}, {r['envs']} env(s), step loop",
                "value": r["rate"],
                "unit": "env-steps/s",
                "baseline_name": f"{self.package} (raw {self.raw_name}), 1 env",
                "baseline_value": base1,
                "ratio": r["vs_1"],
            }
            for r in records[2:]
        ]
        rows.append(
            {
                **rows[-1],
                "name": rows[-1]["name"] + " (vs 8 copies)",
                "baseline_name": f"{self.package} (raw {self.raw_name}), 8 copies",
                "baseline_value": base8,
                "ratio": records[-1]["vs_8"],
            }
        )
        return rows

    def main(self, description: str) -> None:
        """The script's command line: the markdown table on each thread count, and the
        verdict of the largest batch against :attr:`target`."""
        import argparse

        parser = argparse.ArgumentParser(description=description)
        parser.add_argument("--reps", type=int, default=5)
        parser.add_argument("--steps", type=int, default=400, help="steps per env a repetition")
        parser.add_argument("--threads", default="1,2", help="torch thread counts, e.g. 1,2")
        parser.add_argument("--device", default="cpu", help="device of the native env")
        args = parser.parse_args()
        threads = [int(t) for t in args.threads.split(",")]
        print(f"torch {torch.__version__}, {self.env_id}, reps {args.reps}, steps {args.steps}")
        records = native_vs_package(self.sides(args.steps, args.device), args.reps, threads, 0, 1)
        print(markdown_table(records))
        largest = max(self.batches)
        for r in records:
            if r["side"].startswith("native") and r["envs"] == largest:
                ok = min(r["vs_1"], r["vs_8"]) >= self.target
                print(
                    f"threads {r['threads']}: native {largest} envs {r['vs_1']:.1f}x / "
                    f"{r['vs_8']:.1f}x the package loop (1 env / 8 copies), target "
                    f"{self.target:.0f}x: {'OK' if ok else 'BELOW TARGET'}"
                )
