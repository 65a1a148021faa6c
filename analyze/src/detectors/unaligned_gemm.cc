// GEMMs whose M, N or K is not a multiple of 8: tensor cores want aligned tiles, so such GEMMs run below the rate
// the same trace's aligned GEMMs reach.
#include "../detector.h"

namespace reprise::analyze::detail {
namespace {

bool find(const WindowStats& s, Finding& f) {
  double unaligned_us = 0, gemm_us = 0, saving = 0;
  std::vector<Instance> all;
  size_t n = 0;
  for (const GemmOp& g : s.gemm_ops) {
    gemm_us += g.device_us;
    if (g.aligned) continue;
    ++n;
    unaligned_us += g.device_us;
    auto ref = s.tl->aligned_gemm_rate.find(g.dtype);
    const double expected =
        ref != s.tl->aligned_gemm_rate.end() && ref->second > 0 ? g.flops / ref->second : 0.8 * g.device_us;
    saving += std::max(0.0, g.device_us - expected);
    const KinetoEvent& e = s.tl->event(g.event);
    all.push_back({e.ts, e.ts + e.dur,
                   std::string(s.tl->name(g.event)) + " " + std::to_string(g.m) + "x" + std::to_string(g.k) + "x" +
                       std::to_string(g.n)});
  }
  const double at = std::max(50.0, 0.05 * gemm_us);
  f.score = unaligned_us / at;
  if (n == 0 || unaligned_us < at || saving < 10) return false;
  f.saving_us = saving;
  f.evidence = std::to_string(n) + " GEMM(s) with M, N or K not a multiple of 8, " + time_text(unaligned_us) +
               "; at the rate of this trace's aligned GEMMs they would take " + time_text(unaligned_us - saving);
  for (const Instance& i : all)
    if (f.ops.size() < 3 && std::find(f.ops.begin(), f.ops.end(), i.what) == f.ops.end()) f.ops.push_back(i.what);
  keep_instances(f, std::move(all));
  return true;
}

}  // namespace

const Detector kUnalignedGemm{{"unaligned_gemm", "GEMM dimensions not multiples of 8",
                               "mm/addmm/bmm/baddbmm with recorded shapes where M, N or K is not a multiple of 8",
                               "pad the hidden, vocabulary or batch size to a multiple of 8 (64 is better)",
                               "the GEMMs padded to multiples of 8: their FLOPs at the aligned GEMMs' rate"},
                              find};

}  // namespace reprise::analyze::detail
