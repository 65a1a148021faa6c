// GEMMs in full fp32 on the CUDA cores (SIMT sgemm kernels) where TF32 or bf16 tensor cores would serve.
#include "../detector.h"

namespace reprise::analyze::detail {
namespace {

bool find(const WindowStats& s, Finding& f) {
  if (!s.tl->gpu || s.gemm_fp32_us <= 0) return false;
  const double at = std::max(100.0, 0.10 * s.gemm_us);
  f.score = s.gemm_fp32_us / at;
  if (s.gemm_fp32_us < at) return false;
  std::vector<Instance> all;
  for (size_t w : s.fp32_gemms) all.push_back({s.tl->work[w].begin, s.tl->work[w].end, "fp32 GEMM"});
  f.saving_us = 0.5 * s.gemm_fp32_us;
  char share[32];
  std::snprintf(share, sizeof share, "%.0f%%", s.gemm_us > 0 ? 100 * s.gemm_fp32_us / s.gemm_us : 0);
  f.evidence = std::to_string(s.fp32_gemms.size()) + " fp32 SIMT GEMM kernel(s), " + time_text(s.gemm_fp32_us) + " (" +
               share + " of GEMM time)";
  describe(f, *s.tl, s.fp32_gemms, 3, std::move(all));
  return true;
}

// The window's GEMMs as SIMT fp32 kernels (TF32 and bf16 off); needs 100 us of GEMMs.
bool inject(Editor& e, const InjectSite& s) {
  const auto& ev = e.kineto().events;
  std::vector<int32_t> gemms;
  double us = 0;
  for (int32_t i = 0; i < static_cast<int32_t>(ev.size()); ++i) {
    const KinetoEvent& k = ev[i];
    if (k.cat != KinetoCat::Kernel || k.ts < s.begin || k.ts >= s.end) continue;
    if (classify_kernel(e.trace().str(k.name)) != WorkClass::Gemm) continue;
    gemms.push_back(i);
    us += k.dur;
  }
  if (us < 300) return false;
  for (int32_t i : gemms) e.rename(i, "ampere_sgemm_128x64_nn");
  return true;
}

// More GEMM time, all of it on tensor cores: long bf16 GEMMs queued behind the work.
bool decoy(Editor& e, const InjectSite& s) {
  const double t = s.launch_point(e, false);
  if (t < 0) return false;
  const double g = std::max(300.0, 0.1 * s.length()) / 4, start = std::max(e.drain(t), t + 8);
  const double delay = (start - t) + 4 * g + 40;
  e.shift(t, delay, delay);
  for (int i = 0; i < 4; ++i) {
    e.op("aten::mm", t + 10 * i, 9);
    const int64_t corr = e.runtime("cudaLaunchKernel", t + 10 * i + 1, 6);
    e.gpu(KinetoCat::Kernel, "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32", corr, start + g * i, g);
  }
  return true;
}
}  // namespace

const Detector kFp32Gemm{{"fp32_gemm", "fp32 GEMMs on CUDA cores",
                          "GEMM kernels named sgemm without tensor-op, 1688, tf32 or xmma in the name",
                          "allow TF32 (torch.backends.cuda.matmul.allow_tf32 = True) or train in bf16 (autocast)",
                          "the GEMMs cast to bf16: half their time",
                          "perturb: {dtype: {from: fp32, to: bf16, ops: '^aten::(mm|addmm|bmm|matmul|linear)$'}}"},
                         find,
                         inject,
                         decoy};

}  // namespace reprise::analyze::detail
