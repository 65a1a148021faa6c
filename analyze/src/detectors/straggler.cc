// One rank computes longer than the others in the same step, and they wait for it at the next collective.
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

}  // namespace

const Detector kStraggler{{"straggler", "straggler rank",
                           "a rank whose computation in a step is 5% and 100 us or more over the median rank's",
                           "balance the work (sharding, sequence lengths, embedding tables), check the rank's host",
                           "the rank's step at the median rank's computation time"},
                          find};

}  // namespace reprise::analyze::detail
