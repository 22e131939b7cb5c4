"""GAE speed: marl's estimator vs a plain reverse loop over time in torch, in the same run.

Shapes (float32, random dones and truncations):
  - [256 envs, 128 steps, 1]
  - [600 envs, 100 steps, 4 agents, 1]   (env-level reward/done [600, 100, 1])

Run: ``python benchmarks/bench_gae.py [--device cpu|cuda] [--repeats N]``.
Prints the median milliseconds per call and the speed-up over the loop.
Target (CPU): >= 5x faster than the loop on both shapes.

Two loops are timed. The headline one, ``plain_loop_gae``, takes the same inputs
as marl's function and returns the same outputs, as a user's loop would. The
second, ``loop_gae``, gets its inputs already broadcast and moved time-first,
with that preparation left out of the timing: a best-case loop, shown for
reference.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from marl.objectives.value import generalized_advantage_estimate


def prepare_loop_inputs(value, next_value, reward, done, terminated, time_dim):
    """Untimed set-up for the baseline: broadcast, convert flags, move time first.

    Doing this outside the timed region makes the loop a best-case baseline: what
    remains is the reverse recursion itself over dense, contiguous time slabs.
    """

    def tfirst(x):
        x = x.unsqueeze(time_dim + 1).expand_as(value) if x.ndim < value.ndim else x
        return x.movedim(time_dim, 0).contiguous()

    not_done = (~done).to(value.dtype)
    not_term = (~terminated).to(value.dtype)
    return [tfirst(x) for x in (value, next_value, reward, not_done, not_term)]


def loop_gae(gamma, lmbda, v, nv, r, not_done, not_term, time_dim):
    """The baseline: a reverse Python loop over time (one set of torch ops per step)."""
    adv = torch.empty_like(v)
    last = torch.zeros_like(v[0])
    for t in reversed(range(v.shape[0])):
        delta = r[t] + gamma * not_term[t] * nv[t] - v[t]
        last = delta + gamma * lmbda * not_done[t] * last
        adv[t] = last
    adv = adv.movedim(0, time_dim)
    return adv, adv + v.movedim(0, time_dim)


def plain_loop_gae(gamma, lmbda, v, nv, r, done, terminated, time_dim):
    """The plain loop as a user writes it: same inputs and outputs as marl's function.

    It broadcasts the env-level reward and flags itself and steps over the time dim
    of the data as given (no untimed preparation).
    """
    r, done, terminated = (
        x.unsqueeze(time_dim + 1).expand_as(v) if x.ndim < v.ndim else x
        for x in (r, done, terminated)
    )
    not_done = (~done).to(v.dtype)
    not_term = (~terminated).to(v.dtype)
    adv = torch.empty_like(v)
    last = torch.zeros_like(v.select(time_dim, 0))
    for t in reversed(range(v.shape[time_dim])):
        delta = (
            r.select(time_dim, t)
            + gamma * not_term.select(time_dim, t) * nv.select(time_dim, t)
            - v.select(time_dim, t)
        )
        last = delta + gamma * lmbda * not_done.select(time_dim, t) * last
        adv.select(time_dim, t).copy_(last)
    return adv, adv + v


def make(shape_v, shape_env, device):
    g = torch.Generator().manual_seed(0)
    value = torch.randn(shape_v, generator=g)
    next_value = torch.randn(shape_v, generator=g)
    reward = torch.randn(shape_env, generator=g)
    terminated = torch.rand(shape_env, generator=g) < 0.02
    done = terminated | (torch.rand(shape_env, generator=g) < 0.01)
    return [x.to(device) for x in (value, next_value, reward, done, terminated)]


def timeit_pair(fn_a, fn_b, repeats, device):
    """Median ms of two functions, timed alternately so both see the same machine load."""
    for _ in range(5):
        fn_a(), fn_b()
    times = ([], [])
    for _ in range(repeats):
        for fn, out in ((fn_a, times[0]), (fn_b, times[1])):
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            if device == "cuda":
                torch.cuda.synchronize()
            out.append(time.perf_counter() - t0)
    return statistics.median(times[0]) * 1e3, statistics.median(times[1]) * 1e3


def measure_case(sv, se, tdim, device, repeats):
    """Median ms of marl's GAE, of the plain loop, and of the best-case loop (paired)."""
    value, next_value, reward, done, term = make(sv, se, device)
    t = len(sv) + tdim
    loop_inputs = prepare_loop_inputs(value, next_value, reward, done, term, t)

    def ours():
        return generalized_advantage_estimate(
            0.99, 0.95, value, next_value, reward, done, term, time_dim=tdim
        )

    def base():
        return loop_gae(0.99, 0.95, *loop_inputs, time_dim=t)

    def plain():
        return plain_loop_gae(0.99, 0.95, value, next_value, reward, done, term, t)

    torch.testing.assert_close(ours()[0], base()[0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ours()[0], plain()[0], rtol=1e-4, atol=1e-4)
    ms_ours, ms_plain = timeit_pair(ours, plain, repeats, device)
    ms_ours2, ms_loop = timeit_pair(ours, base, repeats, device)
    return {"ours": ms_ours, "plain": ms_plain, "ours2": ms_ours2, "loop": ms_loop}


def run_case(name, sv, se, tdim, device, repeats):
    m = measure_case(sv, se, tdim, device, repeats)
    print(
        f"GAE {name:>18}: marl {m['ours']:7.3f} ms | plain torch loop {m['plain']:7.3f} ms "
        f"| speed-up {m['plain'] / m['ours']:5.1f}x   (loop on time-major inputs prepared "
        f"outside the timing: {m['loop']:.3f} ms vs marl {m['ours2']:.3f} ms, "
        f"{m['loop'] / m['ours2']:.1f}x)"
    )


CASES = [
    ("[256, 128, 1]", (256, 128, 1), (256, 128, 1), -2),
    ("[600, 100, 4, 1]", (600, 100, 4, 1), (600, 100, 1), -3),
]


def run(quick: bool = False, device: str = "cpu") -> list[dict]:
    """Rows for ``python -m benchmarks.speed``: marl's GAE vs the plain loop, per shape."""
    rows = []
    for name, sv, se, tdim in CASES:
        m = measure_case(sv, se, tdim, device, 30 if quick else 300)
        rows.append(
            {
                "name": f"GAE {name}",
                "value": m["ours"],
                "unit": "ms",
                "baseline_name": "plain torch loop over time",
                "baseline_value": m["plain"],
                "higher_is_better": False,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, device {args.device}")
    for name, sv, se, tdim in CASES:
        run_case(name, sv, se, tdim, args.device, args.repeats)


if __name__ == "__main__":
    main()
