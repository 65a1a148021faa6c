// Convolutions: FLOPs = 2 * N * Cout * prod(output spatial) * Cin/groups * prod(kernel); the backward computes the
// input and the weight gradients (twice the forward) unless its output mask says fewer.
#include "family.h"

namespace reprise::predict::detail {
namespace {

bool conv_work(const Trace& t, const Node& n, OpWork& w) {
  std::string_view name = t.name(n);
  const bool backward = name.find("backward") != std::string_view::npos;
  // forward: (input, weight, ...); convolution_backward: (grad_output, input, weight, ...)
  const Tensor* x = input_tensor(t, n, backward ? 1 : 0);
  const Tensor* wt = input_tensor(t, n, backward ? 2 : 1);
  const Tensor* y = backward ? input_tensor(t, n, 0) : output_tensor(t, n, 0);
  if (!x || !wt || !y || wt->rank < 3 || y->rank != wt->rank || x->rank != wt->rank) return false;
  std::vector<int64_t> sw = shape_of(t, *wt), sy = shape_of(t, *y);
  // weight [Cout, Cin/groups, k...]; output [N, Cout, spatial...]
  double kernel = 1, spatial = 1;
  for (size_t d = 2; d < sw.size(); ++d) kernel *= static_cast<double>(sw[d]);
  for (size_t d = 2; d < sy.size(); ++d) spatial *= static_cast<double>(sy[d]);
  double fwd =
      2.0 * static_cast<double>(sy[0]) * static_cast<double>(sy[1]) * spatial * static_cast<double>(sw[1]) * kernel;
  double passes = 1;
  if (backward) {
    std::vector<int64_t> mask = int_list(t, n, n.num_inputs - 1);  // output_mask: grad input, weight, bias
    passes = mask.size() >= 2 ? static_cast<double>((mask[0] != 0) + (mask[1] != 0)) : 2.0;
  }
  w.flops = fwd * std::max(passes, 1.0);
  w.bytes = io_bytes(t, n);
  w.key = {w.bytes, w.flops, 0, 0};
  w.dtype = dtype_of(t, *x);
  return w.flops > 0;
}

}  // namespace

const Family kConv{OpFamily::Conv,
                   {"convolution",
                    "_convolution",
                    "conv1d",
                    "conv2d",
                    "conv3d",
                    "cudnn_convolution",
                    "mkldnn_convolution",
                    "miopen_convolution",
                    "convolution_overrideable",
                    "_slow_conv2d_forward",
                    "thnn_conv2d",
                    "conv_transpose1d",
                    "conv_transpose2d",
                    "conv_transpose3d",
                    "cudnn_convolution_transpose",
                    "convolution_backward",
                    "_slow_conv2d_backward",
                    "cudnn_convolution_backward",
                    "mkldnn_convolution_backward",
                    "convolution_backward_overrideable"},
                   conv_work};

}  // namespace reprise::predict::detail
