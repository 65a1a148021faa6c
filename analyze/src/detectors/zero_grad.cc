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
  f.score = double(zeros);
  if (all.empty() || saving < 10) return false;
  char mb[32];
  std::snprintf(mb, sizeof mb, "%.2f MB", bytes / 1e6);
  f.saving_us = saving;
  f.evidence = std::to_string(zeros) + " zero_/fill_ op(s) or memset(s) in zero_grad" +
               (bytes > 0 ? std::string(", ") + mb + " written" : std::string("")) + ", " + time_text(saving);
  f.ops = {"aten::zero_"};
  keep_instances(f, std::move(all));
  return true;
}

// On a CPU capture: eight gradients zeroed by zero_ (with the fill_ it calls) under zero_grad, each 0.4% of the
// window; the decoy, eight aten::zeros outside it.
bool zeroings_cpu(Editor& e, const InjectSite& s, bool in_zero_grad) {
  const double t = s.host_point(e);
  if (t < 0) return false;
  const double z = std::max(12.0, 0.004 * s.length()), host = 8 * (z + 2) + 4;
  e.shift(t, host, 0);
  if (in_zero_grad) e.op("Optimizer.zero_grad#SGD.zero_grad", t, host - 2);
  for (int i = 0; i < 8; ++i) {
    const double h = t + 1 + (z + 2) * i;
    e.work(in_zero_grad ? "aten::zero_" : "aten::zeros", h, z);
    if (!in_zero_grad) e.op("aten::zero_", h + 0.5, z - 1);
    e.op("aten::fill_", h + 1, z - 2);
  }
  return true;
}

// optimizer.zero_grad(set_to_none=False): eight gradients zeroed by memsets.
bool inject(Editor& e, const InjectSite& s) {
  if (!e.gpu()) return zeroings_cpu(e, s, true);
  const double t = s.launch_point(e, false);
  if (t < 0) return false;
  const double host = 8 * 14 + 4;
  double end = e.drain(t);
  e.shift(t, host, host);
  e.op("Optimizer.zero_grad#SGD.zero_grad", t, host - 2);
  for (int i = 0; i < 8; ++i) {
    const double h = t + 1 + 14 * i;
    e.op("aten::zero_", h, 12);
    e.op("aten::fill_", h + 1, 10);
    const int64_t corr = e.runtime("cudaMemsetAsync", h + 2, 6);
    const double start = std::max(h + 8, end);
    e.gpu(KinetoCat::Memset, "Memset (Device)", corr, start, 4, -1, 1 << 20);
    end = start + 4;
  }
  return true;
}

// Memsets outside zero_grad: new zero-filled buffers (aten::zeros) in the forward.
bool decoy(Editor& e, const InjectSite& s) {
  if (!e.gpu()) return zeroings_cpu(e, s, false);
  const double t = s.launch_point(e, false);
  if (t < 0) return false;
  const double host = 8 * 14;
  double end = e.drain(t);
  e.shift(t, host, host);
  for (int i = 0; i < 8; ++i) {
    const double h = t + 14 * i;
    e.op("aten::zeros", h, 12);
    const int64_t corr = e.runtime("cudaMemsetAsync", h + 2, 6);
    const double start = std::max(h + 8, end);
    e.gpu(KinetoCat::Memset, "Memset (Device)", corr, start, 4, -1, 1 << 20);
    end = start + 4;
  }
  return true;
}
}  // namespace

const Detector kZeroGrad{
    {"zero_grad", "gradients zeroed rather than set to None", "zero_ / fill_ ops or memsets under a zero_grad call",
     "optimizer.zero_grad(set_to_none=True) (the default since PyTorch 2.0)",
     "the zero_grad call without its zeroing ops",
     "perturb: {drop: {ops: '^aten::(zero_|fill_)$', within: 'zero_grad'}}"},
    find,
    inject,
    decoy};

}  // namespace reprise::analyze::detail
