// Sum and min segment trees: filled in by the replay-buffer work.
#include <nanobind/nanobind.h>
namespace nb = nanobind;
void bind_segment_tree(nb::module_& m) { (void)m; }
