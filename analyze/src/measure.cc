// Measured savings: which classes of findings the generators can fix, and what each fix is estimated to save per
// step. `reprise analyze --measure` (reprise-torch) builds and replays the variants; this library never replays.
#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "detector.h"
#include "reprise/analyze/analyze.h"

namespace reprise::analyze {

std::vector<MeasuredFix> plan_fixes(const Analysis& a, bool every_rank) {
  std::map<int, size_t> steps;
  for (const RankInfo& r : a.ranks) steps[r.rank] = r.steps > 0 ? r.steps : 1;  // a trace without steps: its segments
  std::map<std::pair<int, std::string>, MeasuredFix> by;
  std::map<std::pair<int, std::string>, std::set<int64_t>> sizes;  // the findings' Finding::sizes, per fix
  for (const Finding& f : a.findings) {
    const int rank = f.ranks.empty() ? 0 : f.ranks.front();
    const std::pair<int, std::string> key{every_rank ? -1 : rank, f.detector};
    MeasuredFix& m = by[{rank, f.detector}];
    m.detector = f.detector;
    m.rank = rank;
    ++m.findings;
    m.estimated_us += f.saving_us;
    sizes[key].insert(f.sizes.begin(), f.sizes.end());
  }
  std::vector<MeasuredFix> out;
  for (auto& [key, m] : by) {
    m.estimated_us /= double(steps.count(m.rank) ? steps[m.rank] : 1);
    out.push_back(std::move(m));
  }
  if (every_rank) {
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
  }
  for (MeasuredFix& m : out) {
    if (const detail::Detector* d = detail::find_detector(m.detector); d && d->fix) {
      const std::set<int64_t>& s = sizes[{m.rank, m.detector}];
      m.transform = d->fix(std::vector<int64_t>(s.begin(), s.end()));
      if (m.transform.empty()) m.note = "no size of the findings can be fixed by the generators";
    } else if (d) {
      m.transform = d->info.transform;
    }
    if (m.transform.empty() && m.note.empty()) m.note = "no generator transform builds this fix yet";
  }
  return out;
}

}  // namespace reprise::analyze
