// Python bindings of the sum and min segment trees (see segment_tree.h for the
// data structure). Four classes: SumTreeF32, SumTreeF64, MinTreeF32,
// MinTreeF64; marl.data wraps them behind SumTree(capacity, dtype) and
// MinTree(capacity, dtype).
//
// Every entry point validates all of its inputs before touching the tree, so
// a bad call raises (IndexError / ValueError) and leaves the tree unchanged.
// Array arguments are any-shape CPU arrays (numpy, or torch via DLPack). A
// C-contiguous array of the right dtype (int64 indices, the tree's float
// values) is read in place, without a copy; other integer/float dtypes and
// strided arrays are converted here. Float or bool indices are rejected with
// a TypeError rather than silently truncated. The GIL is released while the
// tree works; a reader-writer lock keeps concurrent Python threads safe.
#include "segment_tree.h"
#include "array_args.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <mutex>
#include <sstream>
#include <tuple>

namespace nb = nanobind;
using namespace nb::literals;

namespace {

void check_range(const char* who, int64_t lo, int64_t hi, int64_t cap) {
  if (lo < 0 || hi > cap || lo > hi) {
    std::ostringstream msg;
    msg << who << ".query: expected 0 <= lo <= hi <= " << cap << ", got lo=" << lo
        << ", hi=" << hi;
    throw std::out_of_range(msg.str());
  }
}

template <typename T, typename Op>
void bind_tree(nb::module_& m, const char* pyname, const char* doc) {
  using Tree = marl::SegmentTree<T, Op>;
  using RLock = std::shared_lock<std::shared_mutex>;
  using WLock = std::unique_lock<std::shared_mutex>;
  const char* who = Op::name;

  auto cls = nb::class_<Tree>(m, pyname, doc);
  cls.def(nb::init<int64_t>(), "capacity"_a)
      .def_prop_ro("capacity", &Tree::capacity)
      .def_prop_ro("dtype", [](const Tree&) { return std::string(dtype_name<T>()); })
      .def("__len__", &Tree::capacity)
      .def("__repr__",
           [who](const Tree& t) {
             std::ostringstream s;
             s << who << "(capacity=" << t.capacity() << ", dtype=" << dtype_name<T>()
               << ", total=" << t.total() << ")";
             return s.str();
           })
      .def(
          "total",
          [](const Tree& t) {
            RLock lock(t.mutex());
            return static_cast<double>(t.total());
          },
          "Aggregate of every leaf (sum, or min), in O(1).")
      .def(
          "clear",
          [](Tree& t) {
            nb::gil_scoped_release nogil;
            WLock lock(t.mutex());
            t.clear();
          },
          "Reset every leaf to the identity (0 for sum, +inf for min).")
      .def(
          "update",
          [who](Tree& t, AnyArray indices, AnyArray values) {
            Dense<int64_t> idx(indices, who, "indices");
            Dense<T> val(values, who, "values");
            int64_t n = idx.n, nv = val.n;
            if (nv != n && nv != 1) {
              std::ostringstream msg;
              msg << who << ".update: expected as many values as indices (or one value), got "
                  << n << " indices and " << nv << " values";
              throw std::invalid_argument(msg.str());
            }
            nb::gil_scoped_release nogil;
            check_indices(who, idx.ptr, n, t.capacity());
            check_values(who, "values", val.ptr, nv);
            WLock lock(t.mutex());
            if (n > 0) t.update(idx.ptr, val.ptr, n, nv);
          },
          "indices"_a, "values"_a,
          "Set leaves[indices] = values (duplicates: last write wins); a single value "
          "is broadcast.")
      .def(
          "update",
          [who](Tree& t, AnyArray indices, double value) {
            Dense<int64_t> idx(indices, who, "indices");
            T v = static_cast<T>(value);
            check_values(who, "values", &v, 1);
            int64_t n = idx.n;
            nb::gil_scoped_release nogil;
            check_indices(who, idx.ptr, n, t.capacity());
            WLock lock(t.mutex());
            if (n > 0) t.update(idx.ptr, &v, n, 1);
          },
          "indices"_a, "value"_a)
      .def(
          "update",
          [who](Tree& t, int64_t index, double value) {
            T v = static_cast<T>(value);
            check_indices(who, &index, 1, t.capacity());
            check_values(who, "values", &v, 1);
            WLock lock(t.mutex());
            t.update(&index, &v, 1, 1);
          },
          "index"_a, "value"_a)
      .def(
          "get",
          [who](const Tree& t, AnyArray indices) {
            Dense<int64_t> idx(indices, who, "indices");
            int64_t n = idx.n;
            T* out = new T[std::max<int64_t>(n, 1)];
            try {
              nb::gil_scoped_release nogil;
              check_indices(who, idx.ptr, n, t.capacity());
              RLock lock(t.mutex());
              const int64_t* ix = idx.ptr;
              marl::parallel_for(n, Tree::kParallelGrain, [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i) out[i] = t.leaf(ix[i]);
              });
            } catch (...) {
              delete[] out;
              throw;
            }
            return owned_array<T>(out, idx.shape);
          },
          "indices"_a, "The leaf values at `indices`, as a new numpy array of the same shape.")
      .def(
          "get",
          [who](const Tree& t, int64_t index) {
            check_indices(who, &index, 1, t.capacity());
            RLock lock(t.mutex());
            return static_cast<double>(t.leaf(index));
          },
          "index"_a)
      .def(
          "__getitem__",
          [who](const Tree& t, int64_t index) {
            check_indices(who, &index, 1, t.capacity());
            RLock lock(t.mutex());
            return static_cast<double>(t.leaf(index));
          },
          "index"_a)
      .def(
          "__setitem__",
          [who](Tree& t, int64_t index, double value) {
            T v = static_cast<T>(value);
            check_indices(who, &index, 1, t.capacity());
            check_values(who, "values", &v, 1);
            WLock lock(t.mutex());
            t.update(&index, &v, 1, 1);
          },
          "index"_a, "value"_a)
      .def(
          "query",
          [who](const Tree& t, int64_t lo, int64_t hi) {
            check_range(who, lo, hi, t.capacity());
            RLock lock(t.mutex());
            return static_cast<double>(t.query(lo, hi));
          },
          "lo"_a, "hi"_a, "Aggregate of leaves[lo:hi] (0 / +inf when empty).")
      .def(
          "query",
          [who](const Tree& t, AnyArray lo_arr, AnyArray hi_arr) {
            Dense<int64_t> lo(lo_arr, who, "lo"), hi(hi_arr, who, "hi");
            int64_t n = lo.n;
            if (hi.n != n) {
              std::ostringstream msg;
              msg << who << ".query: lo and hi must have the same size, got " << n << " and "
                  << hi.n;
              throw std::invalid_argument(msg.str());
            }
            T* out = new T[std::max<int64_t>(n, 1)];
            try {
              nb::gil_scoped_release nogil;
              for (int64_t i = 0; i < n; ++i) check_range(who, lo.ptr[i], hi.ptr[i], t.capacity());
              RLock lock(t.mutex());
              for (int64_t i = 0; i < n; ++i) out[i] = t.query(lo.ptr[i], hi.ptr[i]);
            } catch (...) {
              delete[] out;
              throw;
            }
            return owned_array<T>(out, lo.shape);
          },
          "lo"_a, "hi"_a)
      .def(
          "state_dict",
          [](const Tree& t) {
            T* out = new T[t.capacity()];
            {
              RLock lock(t.mutex());
              std::memcpy(out, t.leaves(), sizeof(T) * t.capacity());
            }
            nb::dict d;
            d["capacity"] = t.capacity();
            d["dtype"] = std::string(dtype_name<T>());
            d["values"] = owned_array<T>(out, {static_cast<size_t>(t.capacity())});
            return d;
          },
          "{'capacity', 'dtype', 'values'}: a copy of the leaves; the rest is rebuilt.")
      .def(
          "load_state_dict",
          [who](Tree& t, nb::dict d) {
            for (const char* k : {"capacity", "dtype", "values"})
              if (!d.contains(k))
                throw std::invalid_argument(std::string(who) +
                                            ".load_state_dict: missing key '" + k + "'");
            int64_t cap = nb::cast<int64_t>(d["capacity"]);
            std::string dt = nb::cast<std::string>(d["dtype"]);
            if (cap != t.capacity() || dt != dtype_name<T>()) {
              std::ostringstream msg;
              msg << who << ".load_state_dict: expected capacity=" << t.capacity()
                  << ", dtype=" << dtype_name<T>() << ", got capacity=" << cap
                  << ", dtype=" << dt;
              throw std::invalid_argument(msg.str());
            }
            AnyArray arr;
            if (!nb::try_cast<AnyArray>(d["values"], arr))
              throw nb::type_error((std::string(who) +
                                    ".load_state_dict: 'values' must be a CPU array (numpy or "
                                    "torch)").c_str());
            Dense<T> vals(arr, who, "values");
            if (vals.n != cap)
              throw std::invalid_argument(std::string(who) +
                                          ".load_state_dict: 'values' must have capacity "
                                          "elements");
            nb::gil_scoped_release nogil;
            check_values(who, "values", vals.ptr, cap, std::is_same_v<Op, marl::MinOp>);
            WLock lock(t.mutex());
            t.load_leaves(vals.ptr);
          },
          "state"_a)
      .def("__getstate__",
           [](const Tree& t) {
             RLock lock(t.mutex());
             return std::make_tuple(
                 t.capacity(),
                 nb::bytes(reinterpret_cast<const char*>(t.leaves()), sizeof(T) * t.capacity()));
           })
      .def("__setstate__", [who](Tree& t, const std::tuple<int64_t, nb::bytes>& state) {
        int64_t cap = std::get<0>(state);
        const nb::bytes& raw = std::get<1>(state);
        if (cap < 1 || cap > marl::kMaxCapacity ||
            raw.size() != sizeof(T) * static_cast<size_t>(cap))
          throw std::invalid_argument(std::string(who) + ".__setstate__: corrupt state");
        const T* v = reinterpret_cast<const T*>(raw.c_str());
        check_values(who, "values", v, cap, std::is_same_v<Op, marl::MinOp>);
        new (&t) Tree(cap);
        t.load_leaves(v);
      });

  if constexpr (std::is_same_v<Op, marl::SumOp>) {
    cls.def(
           "scan_lower_bound",
           [who](const Tree& t, AnyArray mass_arr) {
             Dense<T> masses(mass_arr, who, "masses");
             int64_t n = masses.n;
             int64_t* out = new int64_t[std::max<int64_t>(n, 1)];
             try {
               nb::gil_scoped_release nogil;
               check_values(who, "masses", masses.ptr, n);
               RLock lock(t.mutex());
               if (n > 0 && !(t.total() > T(0)))
                 throw std::invalid_argument(std::string(who) +
                                             ".scan_lower_bound: the tree's total is 0, "
                                             "there is nothing to sample");
               const T* ms = masses.ptr;
               marl::parallel_for(n, Tree::kParallelGrain, [&](int64_t b, int64_t e) {
                 t.scan_lower_bound(ms + b, out + b, e - b);
               });
             } catch (...) {
               delete[] out;
               throw;
             }
             return owned_array<int64_t>(out, masses.shape);
           },
           "masses"_a,
           "For each mass, the first index whose inclusive prefix sum exceeds it. A mass "
           ">= total() gives the last index with a positive value.")
        .def(
            "scan_lower_bound",
            [who](const Tree& t, double mass) {
              T m = static_cast<T>(mass);
              check_values(who, "masses", &m, 1);
              RLock lock(t.mutex());
              if (!(t.total() > T(0)))
                throw std::invalid_argument(std::string(who) +
                                            ".scan_lower_bound: the tree's total is 0, "
                                            "there is nothing to sample");
              int64_t out;
              t.scan_lower_bound(&m, &out, 1);
              return out;
            },
            "mass"_a);
  }
}

}  // namespace

void bind_segment_tree(nb::module_& m) {
  // Trees held by objects that are still alive when the interpreter exits
  // (e.g. doctest globals) are reported by nanobind as "leaks"; they are not.
  nb::set_leak_warnings(false);
  bind_tree<float, marl::SumOp>(m, "SumTreeF32", "Sum segment tree over float32 leaves.");
  bind_tree<double, marl::SumOp>(m, "SumTreeF64", "Sum segment tree over float64 leaves.");
  bind_tree<float, marl::MinOp>(m, "MinTreeF32", "Min segment tree over float32 leaves.");
  bind_tree<double, marl::MinOp>(m, "MinTreeF64", "Min segment tree over float64 leaves.");
}
