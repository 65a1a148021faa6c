// Kernels shorter than their own launches, many in a row: the GPU finishes each before the host has launched the
// next, so the stretch runs at the host's launch rate.
#include <cmath>

#include "../detector.h"

namespace reprise::analyze::detail {
namespace {

bool find(const WindowStats& s, Finding& f) {
  if (!s.tl->gpu || s.stretches.empty()) return false;
  double saving = 0, kernel_us = 0, launch_us = 0;
  size_t kernels = 0;
  std::vector<Instance> all;
  for (const Stretch& r : s.stretches) {
    saving += r.saving_us();
    kernels += r.kernels;
    kernel_us += r.kernel_us;
    launch_us += r.launch_us;
    all.push_back({r.begin, r.end, std::to_string(r.kernels) + " kernels, " + time_text(r.kernel_us) + " busy"});
  }
  const double at = threshold(s, 100, 0.05);
  f.score = saving / at;
  if (saving < at) return false;
  std::vector<size_t> work;
  for (const Stretch& r : s.stretches)
    for (size_t w : work_in(*s.tl, r.begin, r.end)) work.push_back(w);
  const double mean_kernel = kernel_us / double(kernels), mean_launch = launch_us / double(kernels);
  f.saving_us = saving;
  f.evidence = std::to_string(s.stretches.size()) + " stretch(es) of " + std::to_string(kernels) +
               " kernels each shorter than its launch (means: kernel " + time_text(mean_kernel) + ", launch " +
               time_text(mean_launch) + "); " + time_text(saving) + " of them is launch overhead";
  describe(f, *s.tl, work, 3, std::move(all));
  return true;
}

// A run of 3 us kernels each launched by a 10 us call, long enough for twice the rule's threshold of overhead.
bool inject(Editor& e, const InjectSite& s) {
  const double t = s.launch_point(e, false);
  if (t < 0) return false;
  const size_t n = std::min<size_t>(5000, static_cast<size_t>(std::ceil(2 * std::max(100.0, 0.05 * s.length()) / 9)));
  const double host = 12.0 * double(n);
  double end = e.drain(t);
  e.shift(t, host, host);
  for (size_t i = 0; i < n; ++i) {
    const double h = t + 12.0 * double(i);
    e.op("aten::sum", h, 11.5);
    const int64_t corr = e.runtime("cudaLaunchKernel", h + 1, 10);
    const double start = std::max(h + 11.5, end);
    e.gpu(KinetoCat::Kernel,
          i % 2 ? "void at::native::reduce_kernel<512, 1>" : "void at::native::index_select_small_index_kernel", corr,
          start, 3);
    end = start + 3;
  }
  return true;
}

// Short kernels that wait in the queue behind the GPU's work: each shorter than its launch, but all launched while
// the GPU is still busy with what came before, so it never waits for them.
bool decoy(Editor& e, const InjectSite& s) {
  const double t = s.launch_point(e, true);
  if (t < 0) return false;
  const double queued = e.drain(t) - t;
  const size_t n = std::min<size_t>(5000, static_cast<size_t>(queued / 12));
  if (n < kMinStretch + 4) return false;
  double end = e.drain(t);
  e.shift(t, 12.0 * double(n), 3.0 * double(n));  // the queue absorbs the launches; the GPU runs the kernels
  for (size_t i = 0; i < n; ++i) {
    const double h = t + 12.0 * double(i);
    e.op("aten::sum", h, 11.5);
    const int64_t corr = e.runtime("cudaLaunchKernel", h + 1, 10);
    const double start = std::max(end, h + 11.5);
    e.gpu(KinetoCat::Kernel, "void at::native::reduce_kernel<512, 1>", corr, start, 3);
    end = start + 3;
  }
  return true;
}

}  // namespace

const Detector kLaunchBound{
    {"launch_bound", "launch-bound stretch",
     "16 or more kernels in a row, each shorter than the runtime call that launched it",
     "capture the stretch in a CUDA graph, fuse its ops (torch.compile), or batch the work",
     "the step as one CUDA graph launch: its kernels back to back, no launches between", kReplayAsCudaGraph},
    find,
    inject,
    decoy};

}  // namespace reprise::analyze::detail
