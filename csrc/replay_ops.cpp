// Fused kernels of the prioritized replay loop:
//
// - gather_rows: the storage gather of a sampled batch, every leaf in one call.
//   Sampled rows are random in a buffer far larger than the caches, so each row
//   is a cache (and often a TLB) miss; torch's index_select takes them one at a
//   time. Here the rows a few steps ahead are prefetched, so the misses overlap.
// - prioritized_sample / prioritized_update: PrioritizedSampler's sample and
//   priority update in one call each (scan, importance weights; validation,
//   (p + eps)^alpha, both trees), instead of a dozen small numpy calls.
//
// As everywhere in marl._C, every input is validated before anything is read or
// written, and bad input raises a Python exception (IndexError, ValueError,
// TypeError), never a crash. The GIL is released during the work.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <limits>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "array_args.h"
#include "segment_tree.h"

using namespace nb::literals;

namespace {

// Rows this far ahead are prefetched: enough misses in flight to hide the
// latency, few enough that the lines are still cached when copied.
constexpr int64_t kGatherAhead = 16;
// At most this many cache lines of a row are prefetched (rows are items: small).
constexpr int64_t kMaxPrefetchLines = 8;

struct Leaf {
  const char* src;
  int64_t rows;
  int64_t row_bytes;
  char* dst;
};

void copy_rows(const Leaf& leaf, const int64_t* idx, int64_t n) {
  const int64_t rb = leaf.row_bytes;
  if (rb == 0) return;
  const int64_t lines = std::min<int64_t>(kMaxPrefetchLines, (rb + 63) / 64);
  for (int64_t i = 0; i < n; ++i) {
    if (i + kGatherAhead < n) {
      const char* p = leaf.src + idx[i + kGatherAhead] * rb;
      for (int64_t l = 0; l < lines; ++l) __builtin_prefetch(p + 64 * l);
    }
    const char* s = leaf.src + idx[i] * rb;
    char* d = leaf.dst + i * rb;
    switch (rb) {  // fixed sizes compile to one load and store
      case 4: std::memcpy(d, s, 4); break;
      case 8: std::memcpy(d, s, 8); break;
      default: std::memcpy(d, s, static_cast<size_t>(rb));
    }
  }
}

nb::list gather_rows(const std::vector<AnyArray>& sources, AnyArray index) {
  const char* who = "gather_rows";
  Dense<int64_t> idx(index, who, "index");
  const int64_t n = idx.n;
  std::vector<Leaf> leaves;
  std::vector<std::vector<size_t>> shapes;
  leaves.reserve(sources.size());
  for (size_t s = 0; s < sources.size(); ++s) {
    const AnyArray& a = sources[s];
    if (a.ndim() < 1 || (a.size() > 0 && !is_c_contig(a))) {
      std::ostringstream msg;
      msg << who << ": source " << s << " must be a C-contiguous array with a row dimension, "
          << "got ndim=" << a.ndim();
      throw std::invalid_argument(msg.str());
    }
    int64_t row_elems = 1;
    std::vector<size_t> shape{static_cast<size_t>(n)};
    for (size_t d = 1; d < a.ndim(); ++d) {
      row_elems *= static_cast<int64_t>(a.shape(d));
      shape.push_back(a.shape(d));
    }
    const int64_t item = (a.dtype().bits * a.dtype().lanes + 7) / 8;
    leaves.push_back({static_cast<const char*>(a.data()), static_cast<int64_t>(a.shape(0)),
                      row_elems * item, nullptr});
    shapes.push_back(std::move(shape));
    check_indices(who, idx.ptr, n, leaves.back().rows);
  }
  // Allocate every output before copying: an allocation failure frees them all.
  std::vector<std::unique_ptr<char[]>> bufs;
  for (auto& leaf : leaves) {
    bufs.emplace_back(new char[std::max<int64_t>(1, n * leaf.row_bytes)]);
    leaf.dst = bufs.back().get();
  }
  {
    nb::gil_scoped_release nogil;
    for (const auto& leaf : leaves) copy_rows(leaf, idx.ptr, n);
  }
  nb::list out;
  for (size_t s = 0; s < leaves.size(); ++s) {
    char* buf = bufs[s].release();
    nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<char*>(p); });
    out.append(nb::ndarray<nb::numpy>(buf, shapes[s].size(), shapes[s].data(), owner, nullptr,
                                      sources[s].dtype()));
  }
  return out;
}

template <typename T>
using SumTreeT = marl::SegmentTree<T, marl::SumOp>;
template <typename T>
using MinTreeT = marl::SegmentTree<T, marl::MinOp>;

// PrioritizedSampler.sample's arithmetic, in the trees' dtype T: masses are
// uniforms * total, weights (leaf / min) ** -beta, returned as float32.
template <typename T>
std::pair<nb::ndarray<nb::numpy, int64_t>, nb::ndarray<nb::numpy, float>> prioritized_sample(
    const SumTreeT<T>& sum, const MinTreeT<T>& min, AnyArray uniforms, double beta) {
  const char* who = "prioritized_sample";
  Dense<T> u(uniforms, who, "uniforms");
  const int64_t n = u.n;
  std::unique_ptr<int64_t[]> index(new int64_t[std::max<int64_t>(n, 1)]);
  std::unique_ptr<float[]> weight(new float[std::max<int64_t>(n, 1)]);
  {
    nb::gil_scoped_release nogil;
    for (int64_t i = 0; i < n; ++i) {
      if (!(u.ptr[i] >= T(0) && u.ptr[i] < T(1))) {
        std::ostringstream msg;
        msg << who << ": uniforms must lie in [0, 1), got " << u.ptr[i] << " at position " << i;
        throw std::invalid_argument(msg.str());
      }
    }
    std::shared_lock<std::shared_mutex> ls(sum.mutex()), lm(min.mutex());
    const T total = sum.total();
    if (!(total > T(0)))
      throw std::invalid_argument(std::string(who) +
                                  ": every stored item has priority 0: nothing to sample");
    std::vector<T> masses(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) masses[i] = u.ptr[i] * total;
    sum.scan_lower_bound(masses.data(), index.get(), n);
    const T lowest = min.total();
    const T exponent = static_cast<T>(-beta);
    for (int64_t i = 0; i < n; ++i)
      weight[i] = static_cast<float>(std::pow(sum.leaf(index[i]) / lowest, exponent));
  }
  std::vector<size_t> shape{static_cast<size_t>(n)};
  int64_t* ip = index.release();
  float* wp = weight.release();
  return {owned_array<int64_t>(ip, shape), owned_array<float>(wp, shape)};
}

// PrioritizedSampler.update_priority after the agent reduction: checks every
// index against `bound` and every priority, then writes (p + eps)^alpha to the
// sum tree and to the min tree (there, 0 becomes the largest float: an item of
// value 0 is never drawn, so it must not set the max weight). Returns max(p).
template <typename T>
double prioritized_update(SumTreeT<T>& sum, MinTreeT<T>& min, AnyArray index, AnyArray priority,
                          double eps, double alpha, int64_t bound) {
  const char* who = "PrioritizedSampler.update_priority";
  Dense<int64_t> idx(index, who, "index");
  Dense<double> p(priority, who, "priority");
  const int64_t n = idx.n;
  if (p.n != n) {
    std::ostringstream msg;
    msg << who << ": expected one priority per index, got " << n << " indices and " << p.n
        << " priorities";
    throw std::invalid_argument(msg.str());
  }
  if (bound > sum.capacity() || bound > min.capacity())
    throw std::invalid_argument(std::string(who) + ": bound exceeds the trees' capacity");
  double top = 0.0;
  {
    nb::gil_scoped_release nogil;
    check_indices(who, idx.ptr, n, bound);
    for (int64_t i = 0; i < n; ++i) {
      const double x = p.ptr[i];
      if (!(x >= 0.0 && std::isfinite(x))) {
        std::ostringstream msg;
        msg << "priorities must be finite and >= 0, got " << x << " at position " << i;
        throw std::invalid_argument(msg.str());
      }
      top = std::max(top, x);
    }
    if (n == 0) return top;
    std::vector<T> value(static_cast<size_t>(n)), low(static_cast<size_t>(n));
    const T largest = std::numeric_limits<T>::max();
    for (int64_t i = 0; i < n; ++i) {
      value[i] = static_cast<T>(std::pow(p.ptr[i] + eps, alpha));
      low[i] = value[i] > T(0) ? value[i] : largest;
    }
    std::unique_lock<std::shared_mutex> ls(sum.mutex()), lm(min.mutex());
    sum.update(idx.ptr, value.data(), n, n);
    min.update(idx.ptr, low.data(), n, n);
  }
  return top;
}

template <typename T>
void bind_prioritized(nb::module_& m) {
  m.def("prioritized_sample", &prioritized_sample<T>, "sum"_a, "min"_a, "uniforms"_a, "beta"_a,
        "(index, weight): the leaves whose prefix sums hold uniforms * total, and their "
        "importance weights (leaf / min) ** -beta as float32.");
  m.def("prioritized_update", &prioritized_update<T>, "sum"_a, "min"_a, "index"_a, "priority"_a,
        "eps"_a, "alpha"_a, "bound"_a,
        "Writes (priority + eps) ** alpha at index in both trees (0 as the largest float in "
        "the min tree) after checking 0 <= index < bound and 0 <= priority < inf; returns "
        "max(priority) (0 for none).");
}

}  // namespace

void bind_replay_ops(nb::module_& m) {
  m.def("gather_rows", &gather_rows, "sources"_a, "index"_a,
        "[source[index] for source in sources] for C-contiguous CPU arrays, as new numpy "
        "arrays of shape [len(index), *source.shape[1:]].");
  bind_prioritized<float>(m);
  bind_prioritized<double>(m);
}
