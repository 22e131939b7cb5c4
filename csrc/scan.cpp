// Backward-scan kernels for the value estimators (GAE, TD(lambda) and a generic
// discounted scan used by V-trace).
//
// Layout: the Python side reshapes every input to [R, T, F] (R independent rows,
// T time steps, F trailing feature/agent elements), C-contiguous on the CPU. The
// reward and the done/terminated flags may have F == 1 and are then broadcast
// over the feature axis here, so env-level flags never have to be expanded (and
// copied) over the agent dimension. Flags are passed as uint8 (a zero-copy view
// of a torch bool tensor).
//
// The recursions run backwards over T, with the feature axis innermost so the
// compiler can vectorise it. Rows are independent: large inputs are split over
// std::threads with the GIL released. All shapes are checked before any work is
// done and errors surface as Python ValueError, never as a crash.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace nb = nanobind;

namespace {

template <typename T>
using Arr3 = nb::ndarray<T, nb::ndim<3>, nb::c_contig, nb::device::cpu>;
using Flags3 = nb::ndarray<uint8_t, nb::ndim<3>, nb::c_contig, nb::device::cpu>;

// Below this many elements one thread is faster than spawning more. From about
// 2^17 elements (e.g. [600, 100, 4]) a second thread pays: the outputs are fresh
// allocations, and their first-touch page faults and the memory traffic then split
// over two cores (measured 1.3 -> 1.0 ms on that shape, alternated with a torch loop).
constexpr int64_t kParallelThreshold = int64_t(1) << 17;
// Rows processed together: the recursion is a serial dependency chain over time
// within a row, so interleaving independent rows gives the CPU parallel work.
constexpr size_t kRowBlock = 8;

std::string shape_str(size_t r, size_t t, size_t f) {
  return "[" + std::to_string(r) + ", " + std::to_string(t) + ", " + std::to_string(f) + "]";
}

// Checks that `a` is [R, T, F] (or [R, T, 1] when `allow_broadcast`).
template <typename A>
void check_shape(const A& a, const char* name, size_t R, size_t T, size_t F,
                 bool allow_broadcast) {
  const bool ok_rt = a.shape(0) == R && a.shape(1) == T;
  const bool ok_f = a.shape(2) == F || (allow_broadcast && a.shape(2) == 1);
  if (!ok_rt || !ok_f) {
    throw nb::value_error((std::string(name) + ": expected shape " + shape_str(R, T, F) +
                           (allow_broadcast ? " (or last dim 1)" : "") + ", got " +
                           shape_str(a.shape(0), a.shape(1), a.shape(2)))
                              .c_str());
  }
}

void check_coefficient(double x, const char* name) {
  if (!(x >= 0.0 && x <= 1.0)) {
    throw nb::value_error(
        (std::string(name) + " must be in [0, 1], got " + std::to_string(x)).c_str());
  }
}

// Runs fn(row_begin, row_end) over [0, R), on several threads when it pays off.
template <typename Fn>
void parallel_rows(size_t R, size_t work_per_row, Fn fn) {
  const int64_t total = int64_t(R) * int64_t(work_per_row);
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  size_t n_threads = 1;
  if (total >= kParallelThreshold) {
    n_threads = std::min<size_t>({hw, R, size_t(total / (kParallelThreshold / 4))});
    n_threads = std::max<size_t>(n_threads, 1);
  }
  nb::gil_scoped_release release;
  if (n_threads <= 1) {
    fn(size_t(0), R);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(n_threads - 1);
  const size_t chunk = (R + n_threads - 1) / n_threads;
  for (size_t i = 1; i < n_threads; ++i) {
    const size_t b = i * chunk, e = std::min(R, b + chunk);
    if (b >= e) break;
    try {
      pool.emplace_back([=] { fn(b, e); });
    } catch (const std::system_error&) {
      fn(b, e);  // no thread available: do this chunk here rather than fail
    }
  }
  fn(size_t(0), std::min(R, chunk));
  for (auto& th : pool) th.join();
}

// GAE when reward and flags are one value per (row, time) -- env-level flags and
// team rewards over F agents, or F == 1 -- with F fixed at compile time: the
// flags are read once per step, the accumulators of a block of rows stay in
// registers, and the feature loop unrolls.
template <typename T, size_t FF>
void gae_rows_scalar_flags(size_t r0, size_t r1, size_t TT, const T* v, const T* nv,
                           const T* rw, const uint8_t* dn, const uint8_t* tm, T* adv, T* tgt,
                           T g, T gl) {
  for (size_t rb = r0; rb < r1; rb += kRowBlock) {
    const size_t nr = std::min(kRowBlock, r1 - rb);
    T a[kRowBlock][FF] = {};
    for (size_t t = TT; t-- > 0;) {
      for (size_t i = 0; i < nr; ++i) {
        const size_t rt = (rb + i) * TT + t;
        const T rr = rw[rt];
        const T gnt = tm[rt] ? T(0) : g;
        const T gld = dn[rt] ? T(0) : gl;
        const size_t base = rt * FF;
        for (size_t f = 0; f < FF; ++f) {
          const T x = rr + gnt * nv[base + f] - v[base + f] + gld * a[i][f];
          a[i][f] = x;
          adv[base + f] = x;
          tgt[base + f] = x + v[base + f];
        }
      }
    }
  }
}

// GAE:  delta_t = r_t + gamma * (1 - term_t) * V(s_{t+1}) - V(s_t)
//       A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1},  A_T = 0
template <typename T>
void gae(Arr3<T> value, Arr3<T> next_value, Arr3<T> reward, Flags3 done, Flags3 terminated,
         Arr3<T> advantage, Arr3<T> value_target, double gamma, double lmbda) {
  const size_t R = value.shape(0), TT = value.shape(1), F = value.shape(2);
  check_shape(next_value, "next_value", R, TT, F, false);
  check_shape(reward, "reward", R, TT, F, true);
  check_shape(done, "done", R, TT, F, true);
  check_shape(terminated, "terminated", R, TT, F, true);
  check_shape(advantage, "advantage", R, TT, F, false);
  check_shape(value_target, "value_target", R, TT, F, false);
  check_coefficient(gamma, "gamma");
  check_coefficient(lmbda, "lmbda");
  const T* v = value.data();
  const T* nv = next_value.data();
  const T* rw = reward.data();
  const uint8_t* dn = done.data();
  const uint8_t* tm = terminated.data();
  T* adv = advantage.data();
  T* tgt = value_target.data();
  const size_t sr = reward.shape(2) == F ? 1 : 0;
  const size_t sd = done.shape(2) == F ? 1 : 0;
  const size_t st = terminated.shape(2) == F ? 1 : 0;
  const size_t Fr = reward.shape(2), Fd = done.shape(2), Ft = terminated.shape(2);
  const T g = T(gamma), gl = T(gamma * lmbda);
  if (Fr == 1 && Fd == 1 && Ft == 1 && (F == 1 || F == 2 || F == 3 || F == 4 || F == 8)) {
    parallel_rows(R, TT * F, [&](size_t r0, size_t r1) {
      switch (F) {
        case 1: gae_rows_scalar_flags<T, 1>(r0, r1, TT, v, nv, rw, dn, tm, adv, tgt, g, gl); break;
        case 2: gae_rows_scalar_flags<T, 2>(r0, r1, TT, v, nv, rw, dn, tm, adv, tgt, g, gl); break;
        case 3: gae_rows_scalar_flags<T, 3>(r0, r1, TT, v, nv, rw, dn, tm, adv, tgt, g, gl); break;
        case 4: gae_rows_scalar_flags<T, 4>(r0, r1, TT, v, nv, rw, dn, tm, adv, tgt, g, gl); break;
        default: gae_rows_scalar_flags<T, 8>(r0, r1, TT, v, nv, rw, dn, tm, adv, tgt, g, gl); break;
      }
    });
    return;
  }
  parallel_rows(R, TT * F, [&](size_t r0, size_t r1) {
    std::vector<T> acc(kRowBlock * F);
    for (size_t rb = r0; rb < r1; rb += kRowBlock) {
      const size_t re = std::min(r1, rb + kRowBlock);
      std::fill(acc.begin(), acc.end(), T(0));
      for (size_t t = TT; t-- > 0;) {
        for (size_t r = rb; r < re; ++r) {
          T* a = acc.data() + (r - rb) * F;
          const size_t base = (r * TT + t) * F;
          const T* rt = rw + (r * TT + t) * Fr;
          const uint8_t* dt = dn + (r * TT + t) * Fd;
          const uint8_t* mt = tm + (r * TT + t) * Ft;
          for (size_t f = 0; f < F; ++f) {
            const T not_term = mt[f * st] ? T(0) : T(1);
            const T not_done = dt[f * sd] ? T(0) : T(1);
            const T delta = rt[f * sr] + g * not_term * nv[base + f] - v[base + f];
            a[f] = delta + gl * not_done * a[f];
            adv[base + f] = a[f];
            tgt[base + f] = a[f] + v[base + f];
          }
        }
      }
    }
  });
}

// TD(lambda) return:
//   G_t = r_t + gamma * (1 - term_t) * ((1 - lambda) * V(s_{t+1}) + lambda * B_t)
//   B_t = V(s_{t+1}) if done_t or t == T - 1 else G_{t+1}
template <typename T>
void td_lambda(Arr3<T> next_value, Arr3<T> reward, Flags3 done, Flags3 terminated,
               Arr3<T> out, double gamma, double lmbda) {
  const size_t R = next_value.shape(0), TT = next_value.shape(1), F = next_value.shape(2);
  check_shape(reward, "reward", R, TT, F, true);
  check_shape(done, "done", R, TT, F, true);
  check_shape(terminated, "terminated", R, TT, F, true);
  check_shape(out, "out", R, TT, F, false);
  check_coefficient(gamma, "gamma");
  check_coefficient(lmbda, "lmbda");
  const T* nv = next_value.data();
  const T* rw = reward.data();
  const uint8_t* dn = done.data();
  const uint8_t* tm = terminated.data();
  T* o = out.data();
  const size_t Fr = reward.shape(2), Fd = done.shape(2), Ft = terminated.shape(2);
  const size_t sr = Fr == F ? 1 : 0, sd = Fd == F ? 1 : 0, st = Ft == F ? 1 : 0;
  const T g = T(gamma), l = T(lmbda);
  parallel_rows(R, TT * F, [&](size_t r0, size_t r1) {
    std::vector<T> next_return(kRowBlock * F);
    for (size_t rb = r0; rb < r1; rb += kRowBlock) {
      const size_t re = std::min(r1, rb + kRowBlock);
      for (size_t t = TT; t-- > 0;) {
        const bool last = t == TT - 1;
        for (size_t r = rb; r < re; ++r) {
          T* nr = next_return.data() + (r - rb) * F;
          const size_t base = (r * TT + t) * F;
          const T* rt = rw + (r * TT + t) * Fr;
          const uint8_t* dt = dn + (r * TT + t) * Fd;
          const uint8_t* mt = tm + (r * TT + t) * Ft;
          for (size_t f = 0; f < F; ++f) {
            const T boot = (last || dt[f * sd]) ? nv[base + f] : nr[f];
            const T not_term = mt[f * st] ? T(0) : T(1);
            const T ret = rt[f * sr] + g * not_term * ((T(1) - l) * nv[base + f] + l * boot);
            nr[f] = ret;
            o[base + f] = ret;
          }
        }
      }
    }
  });
}

// Generic linear recurrence: out_t = x_t + coef_t * out_{t+1}, out_T = 0.
template <typename T>
void discounted_scan(Arr3<T> x, Arr3<T> coef, Arr3<T> out) {
  const size_t R = x.shape(0), TT = x.shape(1), F = x.shape(2);
  check_shape(coef, "coef", R, TT, F, true);
  check_shape(out, "out", R, TT, F, false);
  const T* xs = x.data();
  const T* cs = coef.data();
  T* o = out.data();
  const size_t Fc = coef.shape(2), sc = Fc == F ? 1 : 0;
  parallel_rows(R, TT * F, [&](size_t r0, size_t r1) {
    std::vector<T> acc(kRowBlock * F);
    for (size_t rb = r0; rb < r1; rb += kRowBlock) {
      const size_t re = std::min(r1, rb + kRowBlock);
      std::fill(acc.begin(), acc.end(), T(0));
      for (size_t t = TT; t-- > 0;) {
        for (size_t r = rb; r < re; ++r) {
          T* a = acc.data() + (r - rb) * F;
          const size_t base = (r * TT + t) * F;
          const T* ct = cs + (r * TT + t) * Fc;
          for (size_t f = 0; f < F; ++f) {
            a[f] = xs[base + f] + ct[f * sc] * a[f];
            o[base + f] = a[f];
          }
        }
      }
    }
  });
}

template <typename T>
void bind_for(nb::module_& m) {
  m.def("gae_scan", &gae<T>, nb::arg("value"), nb::arg("next_value"), nb::arg("reward"),
        nb::arg("done"), nb::arg("terminated"), nb::arg("advantage").noconvert(),
        nb::arg("value_target").noconvert(), nb::arg("gamma"), nb::arg("lmbda"),
        "In-place GAE over [R, T, F] arrays; writes advantage and value_target.");
  m.def("td_lambda_scan", &td_lambda<T>, nb::arg("next_value"), nb::arg("reward"),
        nb::arg("done"), nb::arg("terminated"), nb::arg("out").noconvert(), nb::arg("gamma"),
        nb::arg("lmbda"), "In-place TD(lambda) returns over [R, T, F] arrays.");
  m.def("discounted_scan", &discounted_scan<T>, nb::arg("x"), nb::arg("coef"),
        nb::arg("out").noconvert(),
        "In-place out_t = x_t + coef_t * out_{t+1} over [R, T, F] arrays.");
}

}  // namespace

void bind_scan(nb::module_& m) {
  bind_for<float>(m);
  bind_for<double>(m);
}
