// Measured savings: which classes of findings the generators can fix, and what each fix is estimated to save per
// step. `reprise analyze --measure` (reprise-torch) builds and replays the variants; this library never replays.
#include <algorithm>
#include <map>
#include <utility>

#include "reprise/analyze/analyze.h"

namespace reprise::analyze {

std::vector<MeasuredFix> plan_fixes(const Analysis& a, bool every_rank) {
  std::map<int, size_t> steps;
  for (const RankInfo& r : a.ranks) steps[r.rank] = r.steps > 0 ? r.steps : 1;  // a trace without steps: its segments
  std::map<std::pair<int, std::string>, MeasuredFix> by;
  for (const Finding& f : a.findings) {
    const int rank = f.ranks.empty() ? 0 : f.ranks.front();
    MeasuredFix& m = by[{rank, f.detector}];
    m.detector = f.detector;
    m.rank = rank;
    ++m.findings;
    m.estimated_us += f.saving_us;
  }
  std::vector<MeasuredFix> out;
  for (auto& [key, m] : by) {
    m.estimated_us /= double(steps.count(m.rank) ? steps[m.rank] : 1);
    for (const DetectorInfo& d : detectors())
      if (d.id == m.detector) m.transform = d.transform;
    if (m.transform.empty()) m.note = "no generator transform builds this fix yet";
    out.push_back(std::move(m));
  }
  if (!every_rank) return out;
  std::map<std::string, MeasuredFix> job;
  for (const MeasuredFix& m : out) {
    auto [it, fresh] = job.emplace(m.detector, m);
    it->second.rank = -1;
    if (fresh) continue;
    it->second.findings += m.findings;
    it->second.estimated_us = std::max(it->second.estimated_us, m.estimated_us);
  }
  out.clear();
  for (auto& [id, m] : job) out.push_back(std::move(m));
  return out;
}

}  // namespace reprise::analyze
