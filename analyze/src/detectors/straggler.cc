// One rank computes longer than the others in the same step, and they wait for it at the next collective.
#include <algorithm>
#include <cstdio>

#include "../detector.h"

namespace reprise::analyze::detail {
namespace {

bool find(const WindowStats& s, Finding& f) {
  f.score = std::max(0.0, (s.skew - 1) / 0.05);
  if (s.skew < 1.05 || s.skew_over_us < 100) return false;
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.2fx", s.skew);
  f.saving_us = s.skew_over_us;
  f.evidence = "rank " + std::to_string(s.tl->rank) + " computes " + time_text(s.compute_us) + " in this step, " +
               ratio + " the median rank (" + time_text(s.compute_us - s.skew_over_us) +
               "): the others wait that long at its next collective";
  f.instances.push_back({s.begin, s.end, "compute " + time_text(s.compute_us)});
  return true;
}

// The window's computation on this rank: its kernels other than communication.
double compute_in(const Editor& e, const InjectSite& s) {
  double us = 0;
  if (!e.gpu()) {  // a CPU capture: its top-level ops that do not communicate
    for (int32_t i : e.top_level_ops()) {
      const KinetoEvent& k = e.kineto().events[i];
      if (k.ts >= s.begin && k.ts < s.end && classify_op(e.trace().str(k.name)) != WorkClass::Comm) us += k.dur;
    }
    return us;
  }
  for (const KinetoEvent& k : e.kineto().events)
    if (k.cat == KinetoCat::Kernel && k.ts >= s.begin && k.ts < s.end &&
        classify_kernel(e.trace().str(k.name)) != WorkClass::Comm)
      us += k.dur;
  return us;
}

// This rank gets more work than the others (an uneven shard): an extra embedding kernel of 20% of the step's
// computation (at least 400 us) launched mid-step, delaying what follows. Only the rank's own timeline changes: the
// skew is its computation against the median rank's, so the corpus injects it into one rank of a job.
bool inject(Editor& e, const InjectSite& s) {
  if (!e.gpu()) {
    const double t = s.host_point(e);
    if (t < 0) return false;
    const double extra = std::max(400.0, 0.2 * compute_in(e, s));
    e.shift(t, extra + 2, 0);
    e.work("aten::embedding_bag", t, extra);
    return true;
  }
  const double t = s.launch_point(e, false);
  if (t < 0) return false;
  const double extra = std::max(400.0, 0.2 * compute_in(e, s)), start = std::max(e.drain(t), t + 8);
  const double delay = (start - t) + extra + 20;
  e.shift(t, delay, delay);
  e.op("aten::embedding_bag", t, 9);
  const int64_t corr = e.runtime("cudaLaunchKernel", t + 1, 6);
  e.gpu(KinetoCat::Kernel, "EmbeddingBag_updateOutputKernel_sum_mean", corr, start, extra);
  return true;
}

// A longer step that is not a straggler: this rank waits as long at a collective (another rank was late), its
// computation unchanged.
bool decoy(Editor& e, const InjectSite& s) {
  const auto& ev = e.kineto().events;
  if (!e.gpu()) {  // a CPU capture: the last collective op of the step waits as long
    int32_t comm = -1;
    for (int32_t i : e.top_level_ops())
      if (ev[i].ts >= s.begin && ev[i].ts < s.end && classify_op(e.trace().str(ev[i].name)) == WorkClass::Comm)
        comm = i;
    if (comm < 0) return false;
    const double wait = std::max(400.0, 0.2 * compute_in(e, s));
    e.shift(ev[comm].ts + ev[comm].dur, wait, 0);
    e.stretch(comm, wait);
    return true;
  }
  int32_t comm = -1;
  for (int32_t i = 0; i < static_cast<int32_t>(ev.size()); ++i)
    if (ev[i].cat == KinetoCat::Kernel && ev[i].launcher >= 0 && ev[ev[i].launcher].ts >= s.begin &&
        ev[ev[i].launcher].ts < s.end && classify_kernel(e.trace().str(ev[i].name)) == WorkClass::Comm &&
        (comm < 0 || ev[ev[i].launcher].ts > ev[ev[comm].launcher].ts))
      comm = i;  // the last collective the step launched
  if (comm < 0) return false;
  const double wait = std::max(400.0, 0.2 * compute_in(e, s));
  const KinetoEvent& launch = ev[ev[comm].launcher];
  // What was launched after the collective (the host waits with it at the step's end), on the host and the GPU.
  e.shift(launch.ts + launch.dur, wait, wait);
  e.stretch(comm, wait);
  return true;
}

}  // namespace

const Detector kStraggler{{"straggler", "straggler rank",
                           "a rank whose computation in a step is 5% and 100 us or more over the median rank's",
                           "balance the work (sharding, sequence lengths, embedding tables), check the rank's host",
                           "the rank's step at the median rank's computation time"},
                          find,
                          inject,
                          decoy};

}  // namespace reprise::analyze::detail
