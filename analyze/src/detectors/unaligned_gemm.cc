// GEMMs whose M, N or K is not a multiple of 8: tensor cores want aligned tiles, so such GEMMs run below the rate
// the same trace's aligned GEMMs reach.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "../detector.h"

namespace reprise::analyze::detail {
namespace {

bool find(const WindowStats& s, Finding& f) {
  double unaligned_us = 0, gemm_us = 0, saving = 0;
  std::vector<Instance> all;
  size_t n = 0;
  std::vector<int64_t> sizes;
  size_t unreferenced = 0;  // unaligned GEMMs not held to an aligned rate (a CPU's, or no aligned GEMM of the dtype)
  for (const GemmOp& g : s.gemm_ops) {
    gemm_us += g.device_us;
    if (g.aligned) continue;
    ++n;
    unreferenced += !held_to_aligned_rate(*s.tl, g);
    unaligned_us += g.device_us;
    const double gain = g.device_us - aligned_gemm_us(*s.tl, g);
    if (gain <= 0) continue;  // padding it costs more FLOPs than it saves (a 9 padded to 16): not the fix's
    saving += gain;
    for (int64_t d : {g.m, g.n, g.k})
      if (d % 8 != 0) sizes.push_back(d);
    const KinetoEvent& e = s.tl->event(g.event);
    all.push_back({e.ts, e.ts + e.dur,
                   std::string(s.tl->name(g.event)) + " " + std::to_string(g.m) + "x" + std::to_string(g.k) + "x" +
                       std::to_string(g.n)});
  }
  const double at = std::max(50.0, 0.05 * gemm_us);
  f.score = unaligned_us / at;
  if (n == 0 || unaligned_us < at || saving < 10) return false;
  f.saving_us = saving;
  char share[16];
  std::snprintf(share, sizeof share, "%.2f", unaligned_gemm_share(*s.tl));
  const std::string assumed = std::string(" padded they are assumed to take ") + share + " of their time per FLOP: ";
  f.evidence = std::to_string(n) + " GEMM(s) with M, N or K not a multiple of 8, " + time_text(unaligned_us) +
               (unreferenced < n ? "; padded, at the rate of this trace's aligned GEMMs, they would take "
                : s.tl->gpu      ? "; the trace has no aligned GEMM of their dtype, so" + assumed
                                 : "; on a CPU" + assumed) +
               time_text(unaligned_us - saving);
  for (const Instance& i : all)
    if (f.ops.size() < 3 && std::find(f.ops.begin(), f.ops.end(), i.what) == f.ops.end()) f.ops.push_back(i.what);
  keep_instances(f, std::move(all));
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  f.sizes = std::move(sizes);
  return true;
}

// Each unaligned dimension N rounded up to a multiple of 8 wherever a tensor has it, propagated through every op by
// shape inference (`scale: dims`): what padding the hidden or vocabulary size does to the model. Dimensions below 8
// are left (a GEMV's 1 is not padded to 8 rows).
std::string fix(const std::vector<int64_t>& sizes) {
  std::string dims;
  for (int64_t d : sizes) {
    if (d < 8) continue;
    const std::string from = std::to_string(d);
    dims +=
        (dims.empty() ? "" : ", ") + ("d" + from) + ": {from: " + from + ", to: " + std::to_string(padded_dim(d)) + "}";
  }
  return dims.empty() ? "" : "scale: {dims: {" + dims + "}}";
}

// Four aligned fp16 GEMMs (rows x 1024 x 1024) and four with every dimension off a multiple of 8, queued behind the
// window's work; the unaligned ones run at `slowdown` times the aligned ones' time per FLOP. Every GEMM injected, in
// any window of any trace, runs at one rate (kRate): the trace's aligned rate, the median over its aligned GEMMs, is
// then that rate whichever windows were given GEMMs, and a decoy's unaligned GEMMs at it lose nothing (with the
// GEMMs' time fixed by the window and their FLOPs fixed by the shape, windows of other lengths gave other rates, and
// a decoy in the slower one read as slow). The GEMMs' rows grow with the window, so the pattern keeps its share. The
// host launches them and waits as long as the GPU takes, so the rest of the window keeps its shape.
// `large`: the unaligned GEMMs three times the FLOPs (about 1.44x each dimension).
bool gemms(Editor& e, const InjectSite& s, double slowdown, bool large) {
  const double t = s.launch_point(e, false);
  if (t < 0) return false;
  constexpr double kRate = 2.0 * 1024 * 1024 * 1024 / 40.0;         // FLOPs per microsecond: a 1024^3 GEMM in 40 us
  const double target_us = std::max(150.0, 0.05 * s.length()) / 4;  // each aligned GEMM, about
  const int64_t rows = 8 * std::max<int64_t>(1, std::llround(target_us * kRate / (2.0 * 1024 * 1024) / 8));
  const int64_t n = large ? 1475 : 1023, k = large ? 1477 : 1025;
  int64_t m = std::llround(static_cast<double>(rows) * (large ? 1443.0 : 1001.0) / 1024.0);
  if (m % 8 == 0) ++m;
  const double aligned_us = 2.0 * static_cast<double>(rows) * 1024 * 1024 / kRate;
  const double unaligned_us =
      slowdown * 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / kRate;
  const double start = std::max(e.drain(t), t + 8 * 10 + 4);
  const double end = start + 4 * (aligned_us + unaligned_us);
  e.shift(t, end - t, end - t);
  double g = start;
  for (int i = 0; i < 8; ++i) {
    const bool aligned = i % 2 == 0;
    const int32_t op = e.op("aten::mm", t + 10 * i, 9);
    if (aligned)
      e.inputs(op, {{rows, 1024}, {1024, 1024}}, {"c10::Half", "c10::Half"});
    else
      e.inputs(op, {{m, k}, {k, n}}, {"c10::Half", "c10::Half"});
    const int64_t corr = e.runtime("cudaLaunchKernel", t + 10 * i + 1, 6);
    const double dur = aligned ? aligned_us : unaligned_us;
    e.gpu(KinetoCat::Kernel,
          aligned ? "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32"
                  : "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize64x64x32_unaligned",
          corr, g, dur);
    g += dur;
  }
  return true;
}
bool inject(Editor& e, const InjectSite& s) { return gemms(e, s, 3.0, false); }
// As much GEMM time, unaligned too, but at the aligned GEMMs' rate (three times the FLOPs): nothing lost to the shapes.
bool decoy(Editor& e, const InjectSite& s) { return gemms(e, s, 1.0, true); }

}  // namespace

const Detector kUnalignedGemm{{"unaligned_gemm", "GEMM dimensions not multiples of 8",
                               "mm/addmm/bmm/baddbmm with recorded shapes where M, N or K is not a multiple of 8",
                               "pad the hidden, vocabulary or batch size to a multiple of 8 (64 is better)",
                               "the sizes padded to multiples of 8 throughout: more FLOPs, at the aligned rate",
                               "scale: {dims: {dN: {from: N, to: N rounded up to a multiple of 8}, ...}}, for each "
                               "dimension N (8 or more) of the findings' GEMMs that is not a multiple of 8"},
                              find,
                              inject,
                              decoy,
                              fix};

}  // namespace reprise::analyze::detail
