// Array arguments of marl._C's bindings: any-shape CPU arrays (numpy, or torch
// through DLPack) read in place when they already have the wanted dtype and a
// C-contiguous layout, converted otherwise; plus the checks every entry point
// runs before touching its data. Internal linkage: each translation unit that
// includes this gets its own copy.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace nb = nanobind;

namespace {

using AnyArray = nb::ndarray<nb::ro, nb::device::cpu>;
namespace dl = nb::dlpack;

bool is_c_contig(const AnyArray& a) {
  int64_t expect = 1;
  for (size_t d = a.ndim(); d-- > 0;) {
    if (a.shape(d) != 1 && a.stride(d) != expect) return false;
    expect *= static_cast<int64_t>(a.shape(d));
  }
  return true;
}

// Copies any-strided elements of type Src into a dense Out buffer.
template <typename Src, typename Out>
void strided_copy(const AnyArray& a, Out* out) {
  const Src* base = static_cast<const Src*>(a.data());
  const size_t nd = a.ndim(), n = a.size();
  if (nd == 0) {
    if (n) out[0] = static_cast<Out>(base[0]);
    return;
  }
  std::vector<size_t> pos(nd, 0);
  int64_t off = 0;
  for (size_t k = 0; k < n; ++k) {
    out[k] = static_cast<Out>(base[off]);
    for (size_t d = nd; d-- > 0;) {
      off += a.stride(d);
      if (++pos[d] < a.shape(d)) break;
      off -= a.stride(d) * static_cast<int64_t>(a.shape(d));
      pos[d] = 0;
    }
  }
}

// Dispatches on the dtype; returns false for dtypes it does not read.
template <typename Out>
bool convert_array(const AnyArray& a, Out* out, bool allow_float) {
  dl::dtype t = a.dtype();
  if (t.lanes != 1) return false;
  auto code = static_cast<dl::dtype_code>(t.code);
  if (code == dl::dtype_code::Int) {
    switch (t.bits) {
      case 8: strided_copy<int8_t>(a, out); return true;
      case 16: strided_copy<int16_t>(a, out); return true;
      case 32: strided_copy<int32_t>(a, out); return true;
      case 64: strided_copy<int64_t>(a, out); return true;
    }
  } else if (code == dl::dtype_code::UInt) {
    switch (t.bits) {
      case 8: strided_copy<uint8_t>(a, out); return true;
      case 16: strided_copy<uint16_t>(a, out); return true;
      case 32: strided_copy<uint32_t>(a, out); return true;
      case 64: strided_copy<uint64_t>(a, out); return true;
    }
  } else if (code == dl::dtype_code::Float && allow_float) {
    switch (t.bits) {
      case 32: strided_copy<float>(a, out); return true;
      case 64: strided_copy<double>(a, out); return true;
    }
  }
  return false;
}

std::string describe_dtype(const AnyArray& a) {
  static const char* names[] = {"int", "uint", "float", "?", "bfloat", "complex", "bool"};
  dl::dtype t = a.dtype();
  std::string name = t.code <= 6 ? names[t.code] : "dtype code " + std::to_string(t.code);
  return t.code == 6 ? name : name + std::to_string(t.bits);
}

// A dense view of an array argument: the array's own memory when it already
// has the wanted dtype and layout, otherwise a converted copy.
template <typename T>
struct Dense {
  const T* ptr = nullptr;
  int64_t n = 0;
  std::vector<size_t> shape;
  std::vector<T> owned;

  Dense(const AnyArray& a, const char* who, const char* what) {
    n = static_cast<int64_t>(a.size());
    shape.resize(a.ndim());
    for (size_t i = 0; i < a.ndim(); ++i) shape[i] = a.shape(i);
    dl::dtype want = nb::dtype<T>();
    if (a.dtype() == want && is_c_contig(a)) {
      ptr = static_cast<const T*>(a.data());
      return;
    }
    owned.resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
    constexpr bool is_index = std::is_integral_v<T>;
    if (!convert_array(a, owned.data(), /*allow_float=*/!is_index)) {
      std::ostringstream msg;
      msg << who << ": " << what << " must be "
          << (is_index ? "an integer array" : "an integer or float32/float64 array")
          << ", got dtype " << describe_dtype(a);
      throw nb::type_error(msg.str().c_str());
    }
    ptr = owned.data();
  }
};

template <typename T>
const char* dtype_name() {
  return sizeof(T) == 4 ? "float32" : "float64";
}

template <typename T>
nb::ndarray<nb::numpy, T> owned_array(T* buf, const std::vector<size_t>& shape) {
  nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nb::ndarray<nb::numpy, T>(buf, shape.size(), shape.data(), owner);
}

void check_indices(const char* who, const int64_t* idx, int64_t n, int64_t cap) {
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= cap) {
      std::ostringstream msg;
      msg << who << ": index " << idx[i] << " (at position " << i
          << ") is out of range for capacity " << cap << "; expected 0 <= index < " << cap;
      throw std::out_of_range(msg.str());
    }
  }
}

// allow_inf: only for restoring a MinTree, whose empty leaves hold +inf.
template <typename T>
void check_values(const char* who, const char* what, const T* v, int64_t n,
                  bool allow_inf = false) {
  for (int64_t i = 0; i < n; ++i) {
    T x = v[i];
    bool ok = x >= T(0) && (allow_inf ? !std::isnan(x) : std::isfinite(x));
    if (!ok) {
      std::ostringstream msg;
      msg << who << ": " << what << " must be finite and >= 0, got " << x << " at position "
          << i;
      throw std::invalid_argument(msg.str());
    }
  }
}

}  // namespace
