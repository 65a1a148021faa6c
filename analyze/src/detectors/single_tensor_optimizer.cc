// An optimizer step that updates its parameters one tensor at a time: a few small kernels per parameter, launched
// one by one, where the foreach or fused implementation updates them all in a few launches.
#include "../detector.h"

namespace reprise::analyze::detail {
namespace {

constexpr size_t kMinOps = 32;
constexpr double kHostOpUs = 3;  // the dispatcher's cost per op on a CPU trace

bool find(const WindowStats& s, Finding& f) {
  double saving = 0;
  std::vector<Instance> all;
  size_t ops = 0;
  for (const ScopeUse& u : s.optimizer) {
    if (u.multi_tensor || u.work < kMinOps) continue;
    const double dur = u.scope->end - u.scope->begin;
    saving += s.tl->gpu ? 0.9 * std::max(0.0, dur - u.work_us) : std::min(0.9 * dur, kHostOpUs * double(u.work));
    ops += u.work;
    all.push_back({u.scope->begin, u.scope->end, u.scope->name + ": " + std::to_string(u.work) + " launches"});
    for (const std::string& t : u.top)
      if (f.ops.size() < 4) f.ops.push_back(t);
  }
  f.score = double(ops) / kMinOps;
  if (all.empty() || saving < 20) return false;
  f.saving_us = saving;
  f.evidence = std::to_string(all.size()) + " optimizer step(s) with " + std::to_string(ops) + " " +
               (s.tl->gpu ? "kernels" : "ops") + " and no _foreach_, fused or multi_tensor_apply op or kernel";
  keep_instances(f, std::move(all));
  return true;
}

// An optimizer step over 48 parameters, one launch each: `op` launches `kernel` per parameter.
bool optimizer_step(Editor& e, const InjectSite& s, const char* step, const char* op, const char* kernel) {
  if (!e.gpu()) {  // a CPU capture: the 48 ops are the work
    const double t = s.host_point(e);
    if (t < 0) return false;
    const double d = std::max(6.0, 0.002 * s.length()), host = 48 * (d + 1) + 4;
    e.shift(t, host, 0);
    e.op(step, t, host - 2);
    for (int i = 0; i < 48; ++i) e.work(op, t + 1 + (d + 1) * i, d);
    return true;
  }
  const double t = s.launch_point(e, false);
  if (t < 0) return false;
  const double host = 48 * 10 + 4;
  double end = e.drain(t);
  e.shift(t, host, host);
  e.op(step, t, host - 2);
  for (int i = 0; i < 48; ++i) {
    const double h = t + 1 + 10 * i;
    e.op(op, h, 9);
    const int64_t corr = e.runtime("cudaLaunchKernel", h + 1, 4);
    const double start = std::max(h + 6, end);
    e.gpu(KinetoCat::Kernel, kernel, corr, start, 6);
    end = start + 6;
  }
  return true;
}

// SGD one tensor at a time: an add_ per parameter.
bool inject(Editor& e, const InjectSite& s) {
  return optimizer_step(e, s, "Optimizer.step#SGD.step", "aten::add_",
                        "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>");
}

// A foreach optimizer over many parameter groups: as many launches, each a multi-tensor kernel.
bool decoy(Editor& e, const InjectSite& s) {
  return optimizer_step(e, s, "Optimizer.step#AdamW.step", "aten::_foreach_add_",
                        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<add>");
}

}  // namespace

const Detector kSingleTensorOptimizer{
    {"single_tensor_optimizer", "single-tensor optimizer loop",
     "an optimizer step of 32 or more launches without any _foreach_, fused or multi_tensor_apply op or kernel",
     "use the foreach or fused implementation (torch.optim.AdamW(..., foreach=True) or fused=True)",
     "the step's kernels as a few multi-tensor launches: its device time without the launch gaps",
     "perturb: {foreach: 'Optimizer\\.step#'}"},
    find,
    inject,
    decoy};

}  // namespace reprise::analyze::detail
