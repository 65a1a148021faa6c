#include "backend_ops.h"

#include <functional>

namespace reprise::replay::detail {

RemapArg remap_source(int source) {
  RemapArg a;
  a.source = source;
  return a;
}
RemapArg remap_constant(c10::IValue value) {
  RemapArg a;
  a.constant = std::move(value);
  return a;
}

namespace {

RemapArg arg(int source) { return remap_source(source); }
RemapArg constant(c10::IValue v) { return remap_constant(std::move(v)); }

size_t list_length(const Trace& t, Span<Value> in, size_t i) {
  return i < in.size() && (in[i].kind == ValueKind::List || in[i].kind == ValueKind::Tuple) ? t.items(in[i]).size() : 2;
}

c10::IValue zeros_list(size_t n) {
  c10::List<int64_t> l;
  for (size_t k = 0; k < n; ++k) l.push_back(0);
  return l;
}

c10::IValue all_true3() {
  c10::List<bool> l;
  for (int k = 0; k < 3; ++k) l.push_back(true);
  return l;
}

struct Descriptor {
  const char* from;
  std::function<Remap(const Trace&, Span<Value>)> build;
};

// cudnn_convolution(self, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32)
// -> convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
Remap cudnn_convolution(const Trace& t, Span<Value> in) {
  return {"aten::convolution",
          "",
          {arg(0), arg(1), constant(c10::IValue()), arg(3), arg(2), arg(4), constant(false),
           constant(zeros_list(list_length(t, in, 3))), arg(5)}};
}

// miopen_convolution(self, weight, bias, padding, stride, dilation, groups, benchmark, deterministic)
Remap miopen_convolution(const Trace& t, Span<Value> in) {
  return {"aten::convolution",
          "",
          {arg(0), arg(1), arg(2), arg(4), arg(3), arg(5), constant(false), constant(zeros_list(list_length(t, in, 4))),
           arg(6)}};
}

// cudnn_batch_norm / miopen_batch_norm(input, weight, bias, running_mean, running_var, training, factor, eps)
// -> native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)
Remap batch_norm(const Trace&, Span<Value>) {
  return {"aten::native_batch_norm", "", {arg(0), arg(1), arg(2), arg(3), arg(4), arg(5), arg(6), arg(7)}};
}

// cudnn_batch_norm_backward(input, grad_output, weight, running_mean, running_var, save_mean, save_var, eps,
// reserve) -> native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
// save_invstd, train, eps, output_mask). cudnn's save_var is the inverse std, as native's save_invstd.
Remap batch_norm_backward(const Trace&, Span<Value>) {
  return {"aten::native_batch_norm_backward",
          "",
          {arg(1), arg(0), arg(2), arg(3), arg(4), arg(5), arg(6), constant(true), arg(7), constant(all_true3())}};
}

// _fused_dropout(self, p_keep, generator) -> native_dropout(input, p_drop, train)
Remap fused_dropout(const Trace&, Span<Value> in) {
  double keep = in.size() > 1 && in[1].kind == ValueKind::Double ? in[1].d : 0.9;
  return {"aten::native_dropout", "", {arg(0), constant(1.0 - keep), constant(true)}};
}

const std::vector<Descriptor>& descriptors() {
  static const std::vector<Descriptor> table = {
      {"aten::cudnn_convolution", cudnn_convolution},
      {"aten::miopen_convolution", miopen_convolution},
      {"aten::cudnn_batch_norm", batch_norm},
      {"aten::miopen_batch_norm", batch_norm},
      {"aten::cudnn_batch_norm_backward", batch_norm_backward},
      {"aten::miopen_batch_norm_backward", batch_norm_backward},
      {"aten::_fused_dropout", fused_dropout},
  };
  return table;
}

}  // namespace

bool remap_backend_op(std::string_view name, const Trace& trace, Span<Value> inputs, Remap& out) {
  for (const Descriptor& d : descriptors())
    if (name == d.from) {
      out = d.build(trace, inputs);
      return true;
    }
  return false;
}

bool is_backend_specific(std::string_view name) {
  for (std::string_view p : {"aten::cudnn_", "aten::_cudnn_", "aten::miopen_", "aten::_miopen_", "aten::_fused_",
                             "aten::_flash_attention", "aten::_efficient_attention", "aten::_scaled_dot_product_flash",
                             "aten::_scaled_dot_product_efficient", "aten::_scaled_dot_product_cudnn"})
    if (name.substr(0, p.size()) == p) return true;
  return false;
}

}  // namespace reprise::replay::detail
