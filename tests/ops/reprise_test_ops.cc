// An op library as a user's own would be: an operator of its own namespace, registered with the dispatcher when the
// library is loaded (reprise replay --load-library; Replay.AnOpLibraryLoadedMakesItsOpsReplay).
#include <ATen/ATen.h>
#include <torch/library.h>

namespace {

at::Tensor scaled_add(const at::Tensor& a, const at::Tensor& b, double s) { return a + b * s; }

}  // namespace

TORCH_LIBRARY(reprise_test, m) { m.def("scaled_add(Tensor a, Tensor b, float s) -> Tensor", scaled_add); }
