// Backward-scan kernels (GAE, TD(lambda)): filled in by the learning-core work.
#include <nanobind/nanobind.h>
namespace nb = nanobind;
void bind_scan(nb::module_& m) { (void)m; }
