// Sum and min segment trees for prioritized experience replay.
//
// Layout: a 16-ary tree stored level by level in one 64-byte aligned array.
// A node is 16 consecutive slots; for float32 that is exactly one cache line,
// so a root-to-leaf walk touches one line per level: 5 lines for 2^20 leaves
// instead of 20 for a binary tree. That is what makes batched sampling fast.
//
//   level 2 (top)     [ t0  t1 ... t15 ]               one node: total() = agg(t0..t15)
//                       t0 = agg(level-1 node 0), t1 = agg(level-1 node 1), ...
//   level 1           [ s0 ... s15 ][ s16 ... s31 ] ...  s_j = agg(level-0 node j)
//                       s0 = agg(v0..v15), s1 = agg(v16..v31), ...
//   level 0 (leaves)  [ v0 ... v15 ][ v16 ... v31 ] ...  the stored values
//
// Leaf i's ancestor at level l is slot i >> (4 * l) of that level.
//
// Each level is padded to a multiple of 16 slots with the identity of the
// operation (0 for sum, +inf for min), so padding never changes an aggregate
// and never gets sampled. Every internal slot is always recomputed from its 16
// children with the same fixed pairwise order, so the internal levels are a
// pure function of the leaves: rebuilding from saved leaves is bit-exact.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace marl {

constexpr int64_t kFanout = 16;
constexpr int kFanoutBits = 4;
// Largest supported capacity; far above the 2^26 the replay buffers need.
constexpr int64_t kMaxCapacity = int64_t{1} << 40;

struct SumOp {
  template <typename T>
  static constexpr T identity() { return T(0); }
  template <typename T>
  static inline T combine(T a, T b) { return a + b; }
  static constexpr const char* name = "SumTree";
};

struct MinOp {
  template <typename T>
  static constexpr T identity() { return std::numeric_limits<T>::infinity(); }
  template <typename T>
  static inline T combine(T a, T b) { return b < a ? b : a; }
  static constexpr const char* name = "MinTree";
};

// Runs f(begin, end) over [0, n) on up to hardware_concurrency threads, but
// only when each thread gets at least `grain` items: thread start-up costs
// tens of microseconds, more than a small batch takes on one core.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  int64_t nt = std::min<int64_t>(hw, n / std::max<int64_t>(grain, 1));
  if (nt <= 1) {
    f(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(nt - 1);
  int64_t chunk = (n + nt - 1) / nt;
  for (int64_t t = 1; t < nt; ++t) {
    int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b < e) threads.emplace_back([&f, b, e] { f(b, e); });
  }
  f(int64_t{0}, std::min(n, chunk));
  for (auto& th : threads) th.join();
}

template <typename T, typename Op>
class SegmentTree {
 public:
  static constexpr int64_t kParallelGrain = 1 << 15;

  explicit SegmentTree(int64_t capacity) : capacity_(capacity) {
    if (capacity < 1 || capacity > kMaxCapacity)
      throw std::invalid_argument(std::string(Op::name) +
                                  ": capacity must be in [1, 2^40], got " +
                                  std::to_string(capacity));
    int64_t n = round_up(capacity);
    int64_t total = 0;
    while (true) {
      offset_.push_back(total);
      size_.push_back(n);
      total += n;
      if (n == kFanout) break;
      n = round_up(n / kFanout);
    }
    num_slots_ = total;
    data_ = static_cast<T*>(::operator new[](sizeof(T) * total, std::align_val_t(64)));
    std::fill(data_, data_ + total, Op::template identity<T>());
  }

  ~SegmentTree() { ::operator delete[](data_, std::align_val_t(64)); }
  SegmentTree(const SegmentTree&) = delete;
  SegmentTree& operator=(const SegmentTree&) = delete;

  int64_t capacity() const { return capacity_; }
  int num_levels() const { return static_cast<int>(offset_.size()); }
  std::shared_mutex& mutex() const { return mutex_; }

  T total() const { return agg16(level(num_levels() - 1)); }

  T leaf(int64_t i) const { return data_[i]; }
  const T* leaves() const { return data_; }

  void clear() { std::fill(data_, data_ + num_slots_, Op::template identity<T>()); }

  // Writes leaves then refreshes their ancestors, level by level. Callers
  // validate first; duplicates resolve to the last write because leaves are
  // written in batch order. A single value (nval == 1) is broadcast.
  void update(const int64_t* idx, const T* val, int64_t n, int64_t nval) {
    int levels = num_levels();
    int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
    if (n < kParallelGrain || hw < 2 || levels < 2) {
      update_range(idx, val, n, nval, 0, capacity_, false);
      return;
    }
    // Split by top-level slot: the subtrees below distinct top slots are
    // disjoint, so threads never write the same slot and need no locks.
    int64_t span = int64_t{1} << (kFanoutBits * (levels - 1));
    int64_t top_used = (capacity_ + span - 1) / span;
    parallel_for(top_used, 1, [&](int64_t b, int64_t e) {
      update_range(idx, val, n, nval, b * span, std::min(capacity_, e * span), true);
    });
  }

  // Inclusive-exclusive range aggregate over [lo, hi), bottom-up.
  T query(int64_t lo, int64_t hi) const {
    T res = Op::template identity<T>();
    for (int l = 0; l < num_levels() && lo < hi; ++l) {
      const T* v = level(l);
      while (lo < hi && (lo & (kFanout - 1))) res = Op::combine(res, v[lo++]);
      while (lo < hi && (hi & (kFanout - 1))) res = Op::combine(res, v[--hi]);
      lo >>= kFanoutBits;
      hi >>= kFanoutBits;
    }
    return res;
  }

  // For each mass, the first leaf whose inclusive prefix sum exceeds it. A
  // mass at or above the total (or one that rounding pushes past a subtree)
  // resolves to the last positive leaf of that subtree, so a zero-valued leaf
  // is never returned. Queries advance in groups, level by level, with the
  // group's nodes prefetched first, so their cache misses overlap.
  void scan_lower_bound(const T* masses, int64_t* out, int64_t n) const {
    constexpr int G = 16;
    const int levels = num_levels();
    for (int64_t b = 0; b < n; b += G) {
      const int g = static_cast<int>(std::min<int64_t>(G, n - b));
      int64_t node[G];
      T m[G];
      for (int q = 0; q < g; ++q) {
        node[q] = 0;
        m[q] = masses[b + q];
      }
      for (int l = levels - 1; l >= 0; --l) {
        const T* base = level(l);
        for (int q = 0; q < g; ++q) {
          const char* p = reinterpret_cast<const char*>(base + node[q] * kFanout);
          __builtin_prefetch(p);
          if (sizeof(T) * kFanout > 64) __builtin_prefetch(p + 64);
        }
        for (int q = 0; q < g; ++q) {
          const T* v = base + node[q] * kFanout;
          // Branch-free: prefix sums are non-decreasing (values >= 0), so the
          // first child whose prefix exceeds m is the count of prefixes <= m.
          // A data-dependent early exit mispredicts about once per node.
          T pre[kFanout];
          T acc = T(0);
          for (int k = 0; k < kFanout; ++k) pre[k] = acc = acc + v[k];
          int c = 0;
          for (int k = 0; k < kFanout; ++k) c += pre[k] <= m[q];
          if (c == kFanout) {
            c = kFanout - 1;
            while (c > 0 && !(v[c] > T(0))) --c;
            m[q] = std::numeric_limits<T>::infinity();
          } else if (c > 0) {
            m[q] -= pre[c - 1];
          }
          node[q] = node[q] * kFanout + c;
        }
      }
      for (int q = 0; q < g; ++q) out[b + q] = node[q];
    }
  }

  // Replaces every leaf (n == capacity) and rebuilds all internal levels.
  void load_leaves(const T* values) {
    std::memcpy(data_, values, sizeof(T) * capacity_);
    std::fill(data_ + capacity_, data_ + size_[0], Op::template identity<T>());
    for (int l = 0; l + 1 < num_levels(); ++l) {
      const T* src = level(l);
      T* dst = level(l + 1);
      int64_t nodes = size_[l] / kFanout;
      for (int64_t j = 0; j < nodes; ++j) dst[j] = agg16(src + j * kFanout);
      std::fill(dst + nodes, dst + size_[l + 1], Op::template identity<T>());
    }
  }

 private:
  static int64_t round_up(int64_t n) { return (n + kFanout - 1) / kFanout * kFanout; }
  const T* level(int l) const { return data_ + offset_[l]; }
  T* level(int l) { return data_ + offset_[l]; }

  // Fixed pairwise order: vectorizes, and is the same for every caller.
  static inline T agg16(const T* v) {
    T a[8];
    for (int k = 0; k < 8; ++k) a[k] = Op::combine(v[k], v[k + 8]);
    for (int k = 0; k < 4; ++k) a[k] = Op::combine(a[k], a[k + 4]);
    for (int k = 0; k < 2; ++k) a[k] = Op::combine(a[k], a[k + 2]);
    return Op::combine(a[0], a[1]);
  }

  void update_range(const int64_t* idx, const T* val, int64_t n, int64_t nval, int64_t lo,
                    int64_t hi, bool filter) {
    T* leaves = data_;
    constexpr int64_t kAhead = 8;
    for (int64_t i = 0; i < n; ++i) {
      // Random slots of a large tree miss the cache: prefetch (for writing) the
      // leaves a few updates ahead so that the misses overlap.
      if (i + kAhead < n) __builtin_prefetch(leaves + idx[i + kAhead], 1);
      int64_t k = idx[i];
      if (filter && (k < lo || k >= hi)) continue;
      leaves[k] = val[nval == 1 ? 0 : i];
    }
    for (int l = 0; l + 1 < num_levels(); ++l) {
      const T* src = level(l);
      T* dst = level(l + 1);
      const int shift = kFanoutBits * (l + 1);
      int64_t prev = -1;
      for (int64_t i = 0; i < n; ++i) {
        if (i + kAhead < n) {
          int64_t ka = idx[i + kAhead];
          __builtin_prefetch(src + ((ka >> shift) << kFanoutBits));
        }
        int64_t k = idx[i];
        if (filter && (k < lo || k >= hi)) continue;
        int64_t j = k >> shift;
        if (j == prev) continue;  // sorted or repeated batches: skip re-aggregation
        prev = j;
        dst[j] = agg16(src + j * kFanout);
      }
    }
  }

  int64_t capacity_;
  int64_t num_slots_ = 0;
  std::vector<int64_t> offset_;
  std::vector<int64_t> size_;
  T* data_ = nullptr;
  mutable std::shared_mutex mutex_;
};

}  // namespace marl
