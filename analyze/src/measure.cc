// Measured savings: which classes of findings the generators can fix, and what each fix is estimated to save per
// step. `reprise analyze --measure` (reprise-torch) builds and replays the variants; this library never replays.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "detector.h"
#include "reprise/analyze/analyze.h"

namespace reprise::analyze {

MedianInterval median_interval(std::vector<double> xs, double confidence) {
  MedianInterval r;
  const size_t n = xs.size();
  if (n == 0) return r;
  std::sort(xs.begin(), xs.end());
  // below[k]: P(B < k + 1) for B ~ Binomial(n, 1/2), k = 0 .. n/2, built from the binomial coefficients in doubles.
  std::vector<double> below;
  double term = std::pow(0.5, double(n)), sum = 0;
  for (size_t k = 0; k <= n / 2; ++k) {
    sum += term;
    below.push_back(sum);
    term = term * double(n - k) / double(k + 1);
  }
  size_t k = 1;  // 1-based order statistic: x(1) .. x(n) at the least
  for (size_t c = 2; c <= (n + 1) / 2; ++c)
    if (1 - 2 * below[c - 1] >= confidence) k = c;
  r.lo = xs[k - 1];
  r.hi = xs[n - k];
  r.coverage = n == 1 ? 0 : 1 - 2 * below[k - 1];
  return r;
}

bool MeasuredFix::too_few_pairs() const { return pairs > 0 && interval_coverage < kMeasureConfidence; }

bool MeasuredFix::resolved() const {
  return pairs > 0 && !too_few_pairs() && (interval_lo_us > 0 || interval_hi_us < 0);
}

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
