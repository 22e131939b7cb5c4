// Entry point of the marl._C extension. Each concept lives in its own
// translation unit and registers its bindings through a bind_* function.
#include <nanobind/nanobind.h>

namespace nb = nanobind;

void bind_segment_tree(nb::module_& m);
void bind_scan(nb::module_& m);
void bind_replay_ops(nb::module_& m);

NB_MODULE(_C, m) {
  m.doc() = "marl's compiled kernels: segment trees, replay-buffer kernels and backward scans.";
  bind_segment_tree(m);
  bind_scan(m);
  bind_replay_ops(m);
}
