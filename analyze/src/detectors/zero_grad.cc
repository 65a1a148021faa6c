// Gradients zeroed with memsets (zero_grad(set_to_none=False)) rather than set to None.
#include <cstdio>

#include "../detector.h"

namespace reprise::analyze::detail {
namespace {

bool find(const WindowStats& s, Finding& f) {
  double saving = 0, bytes = 0;
  size_t zeros = 0;
  std::vector<Instance> all;
  for (const ScopeUse& u : s.zero_grad) {
    const size_t n = u.zero_ops ? u.zero_ops : u.memsets;  // an op and the memset it launched are one zeroing
    if (n == 0) continue;
    const double dur = u.scope->end - u.scope->begin;
    saving += std::max(dur, u.work_us);
    zeros += n;
    bytes += u.zero_bytes;
    all.push_back({u.scope->begin, u.scope->end, u.scope->name + ": " + std::to_string(n) + " zeroings"});
  }
  if (all.empty() || saving < 10) return false;
  char mb[32];
  std::snprintf(mb, sizeof mb, "%.2f MB", bytes / 1e6);
  f.saving_us = saving;
  f.score = double(zeros);
  f.evidence = std::to_string(zeros) + " zero_/fill_ op(s) or memset(s) in zero_grad" +
               (bytes > 0 ? std::string(", ") + mb + " written" : std::string("")) + ", " + time_text(saving);
  f.ops = {"aten::zero_"};
  keep_instances(f, std::move(all));
  return true;
}

}  // namespace

const Detector kZeroGrad{
    {"zero_grad", "gradients zeroed rather than set to None", "zero_ / fill_ ops or memsets under a zero_grad call",
     "optimizer.zero_grad(set_to_none=True) (the default since PyTorch 2.0)",
     "the zero_grad call without its zeroing ops"},
    find};

}  // namespace reprise::analyze::detail
