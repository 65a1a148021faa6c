// Chains of elementwise kernels (or ops, on a CPU trace) back to back on one stream: each reads and writes its
// whole tensor, where one fused kernel would read the inputs once and write the result once.
#include "../detector.h"

namespace reprise::analyze::detail {
namespace {

bool find(const WindowStats& s, Finding& f) {
  double saving = 0;
  size_t kernels = 0;
  std::vector<Instance> all;
  std::vector<size_t> work;
  for (const Chain& c : s.chains) {
    saving += c.saving_us();
    kernels += c.members.size();
    all.push_back({c.begin, c.end, std::to_string(c.members.size()) + " in a row, " + time_text(c.busy_us) + " busy"});
    work.insert(work.end(), c.members.begin(), c.members.end());
  }
  const double at = threshold(s, 50, 0.02);
  f.score = saving / at;
  if (s.chains.empty() || saving < at) return false;
  f.saving_us = saving;
  f.evidence = std::to_string(s.chains.size()) + " chain(s) of " + std::to_string(kMinChain) + " or more elementwise " +
               (s.tl->gpu ? "kernels" : "ops") + " (" + std::to_string(kernels) +
               " in all); fused, each would cost about its longest member: " + time_text(saving) + " less";
  describe(f, *s.tl, work, 4, std::move(all));
  return true;
}

// Six elementwise kernels back to back (mul, add, tanh, mul, add, sigmoid), each 1.2% of the window.
// On a CPU capture the ops are the work: `ops` in a row at the instant, each 1.2% of the window.
bool ops_cpu(Editor& e, const InjectSite& s, const std::vector<const char*>& ops) {
  const double t = s.host_point(e);
  if (t < 0) return false;
  const double d = std::max(20.0, 0.012 * s.length());
  e.shift(t, double(ops.size()) * (d + 2), 0);
  for (size_t i = 0; i < ops.size(); ++i) e.work(std::string("aten::") + ops[i], t + (d + 2) * double(i), d);
  return true;
}

bool inject(Editor& e, const InjectSite& s) {
  if (!e.gpu()) return ops_cpu(e, s, {"mul", "add", "tanh", "mul", "add", "sigmoid"});
  const double t = s.launch_point(e, false);
  if (t < 0) return false;
  const double d = std::max(20.0, 0.012 * s.length()), start = std::max(e.drain(t), t + 7);
  const double delay = (start - t) + 6 * d + 60;  // the host as long as the chain: the queue stays as it was
  e.shift(t, delay, delay);
  const char* ops[] = {"mul", "add", "tanh", "mul", "add", "sigmoid"};
  for (int i = 0; i < 6; ++i) {
    e.op(std::string("aten::") + ops[i], t + 10 * i, 9);
    const int64_t corr = e.runtime("cudaLaunchKernel", t + 10 * i + 2, 5);
    e.gpu(KinetoCat::Kernel, std::string("void at::native::vectorized_elementwise_kernel<4, ") + ops[i] + "_functor>",
          corr, start + d * i, d);
  }
  return true;
}

// As many elementwise kernels, each pair cut off by a reduction (a norm's statistics, a loss): no three in a row.
bool decoy(Editor& e, const InjectSite& s) {
  // Reductions first and last too: the ops around the instant may be elementwise.
  if (!e.gpu()) return ops_cpu(e, s, {"sum", "mul", "add", "sum", "tanh", "mul", "mean", "add", "sigmoid", "sum"});
  const double t = s.launch_point(e, false);
  if (t < 0) return false;
  const double d = std::max(20.0, 0.012 * s.length()), start = std::max(e.drain(t), t + 7);
  const double delay = (start - t) + 9 * d + 90;
  e.shift(t, delay, delay);
  const char* ops[] = {"mul", "add", "sum", "tanh", "mul", "mean", "add", "sigmoid", "sum"};
  for (int i = 0; i < 9; ++i) {
    const bool reduce = i % 3 == 2;
    e.op(std::string("aten::") + ops[i], t + 10 * i, 9);
    const int64_t corr = e.runtime("cudaLaunchKernel", t + 10 * i + 2, 5);
    e.gpu(KinetoCat::Kernel,
          std::string(reduce ? "void at::native::reduce_kernel<512, 1, "
                             : "void at::native::vectorized_elementwise_kernel<4, ") +
              ops[i] + "_functor>",
          corr, start + d * i, d);
  }
  return true;
}
}  // namespace

const Detector kUnfusedElementwise{
    {"unfused_elementwise", "unfused elementwise chain",
     "3 or more elementwise kernels in a row on one stream, between GEMMs, reductions or copies",
     "fuse the chain (torch.compile, a fused op such as F.gelu/addcmul/a fused optimizer, a custom kernel)",
     "each chain as one op costing its longest member",
     "perturb: {fuse: {ops: '" + elementwise_op_regex() + "', min: " + std::to_string(kMinChain) +
         ", outside: '[Oo]ptimizer|OPTIMIZER'}}"},
    find,
    inject,
    decoy};

}  // namespace reprise::analyze::detail
