// Host-to-device copies from pageable memory inside the step: they block the host and move at about half the
// bandwidth of pinned memory.
#include "../detector.h"

namespace reprise::analyze::detail {

namespace {

bool find(const WindowStats& s, Finding& f) {
  f.score = s.h2d_pageable_us / 20;
  if (!s.tl->gpu || s.h2d_pageable == 0 || s.h2d_pageable_us < 20) return false;
  std::vector<Instance> all;
  double bytes = 0;
  for (size_t w : s.pageable_copies) {
    const Work& x = s.tl->work[w];
    const double b = std::max<int64_t>(0, s.tl->event(x.event).bytes);
    bytes += b;
    all.push_back({x.begin, x.end, std::to_string(int64_t(b)) + " bytes"});
  }
  f.saving_us = 0.5 * s.h2d_pageable_us;
  char mb[32];
  std::snprintf(mb, sizeof mb, "%.2f MB", bytes / 1e6);
  f.evidence = std::to_string(s.h2d_pageable) + " host-to-device copy(ies) from pageable memory, " + mb + " in " +
               time_text(s.h2d_pageable_us) + " (" + std::to_string(s.h2d) + " host-to-device copies in all)";
  f.ops = top_ops(*s.tl, s.pageable_copies, 3);
  keep_instances(f, std::move(all));
  return true;
}

// A host-to-device copy from pageable memory in the middle of the step; the host waits for it.
bool inject(Editor& e, const InjectSite& s) {
  const double t = s.launch_point(e, false);
  if (t < 0) return false;
  const double c = std::max(100.0, 0.03 * s.length()), start = std::max(t + 6, e.drain(t));
  const double host = start + c + 8 - t;
  e.shift(t, host, host);
  e.op("aten::copy_", t, host - 2);
  const int64_t corr = e.runtime("cudaMemcpyAsync", t + 3, start + c + 4 - (t + 3));
  e.gpu(KinetoCat::Memcpy, "Memcpy HtoD (Pageable -> Device)", corr, start, c, -1, static_cast<int64_t>(c * 6000));
  return true;
}

// Host-to-device copies from pinned memory, queued behind the work: as many bytes, none of the cost.
bool decoy(Editor& e, const InjectSite& s) {
  const double t = s.launch_point(e, false);
  if (t < 0) return false;
  double end = e.drain(t);
  e.shift(t, 6 * 8, 6 * 8);
  for (int i = 0; i < 6; ++i) {
    e.op("aten::copy_", t + 8 * i, 7);
    const int64_t corr = e.runtime("cudaMemcpyAsync", t + 8 * i + 1, 5);
    e.gpu(KinetoCat::Memcpy, "Memcpy HtoD (Pinned -> Device)", corr, end, 10, -1, 120000);
    end += 10;
  }
  return true;
}
}  // namespace

const Detector kPageableCopy{
    {"pageable_copy", "host-to-device copy from pageable memory", "Memcpy HtoD (Pageable -> Device) inside the step",
     "pin the source (DataLoader(pin_memory=True), tensor.pin_memory()) and copy with "
     "non_blocking=True, ahead of its use",
     "the copies from pinned memory: half their time, off the host's critical path", kReplayWithPinnedMemory},
    find,
    inject,
    decoy};

}  // namespace reprise::analyze::detail
