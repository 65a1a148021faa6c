#include "rate_index.h"

#include <algorithm>
#include <cmath>

namespace reprise::predict::detail {
namespace {

std::string group_key(const std::string& a, const std::string& b) { return a + "|" + b; }

}  // namespace

double work_measure(const OpWork& w) {
  switch (w.family) {
    case OpFamily::Gemm:
    case OpFamily::Conv:
    case OpFamily::Attention:
      return w.flops;
    case OpFamily::Memory:
    case OpFamily::Embedding:
      return w.bytes;
    default:
      return 0;
  }
}

std::array<double, 4> log_key(const std::array<double, 4>& key) {
  std::array<double, 4> out{};
  for (size_t i = 0; i < 4; ++i) out[i] = std::log2(std::max(key[i], 1.0));
  return out;
}

void RateIndex::build(const std::vector<OpSample>& samples, const std::vector<double>& overhead_of) {
  groups_.clear();
  for (size_t i = 0; i < samples.size(); ++i) {
    const OpSample& s = samples[i];
    const double work = work_measure(s);
    if (work <= 0 || s.seconds <= 0) continue;
    // A call less than a tenth of which is work says little about the rate, and an overhead fitted slightly high
    // would make its rate explode: it is left out, and the op's other sizes (or its family) give the rate there.
    const double busy = s.seconds - overhead_of[i];
    if (busy < 0.1 * s.seconds) continue;
    Point p{log_key(s.key), std::log(work / busy), i};
    const std::string fam = family_name(s.family);
    for (const std::string& g : {group_key(s.op, s.dtype), group_key(s.op, ""), group_key(fam, s.dtype), fam})
      groups_[g].push_back(p);
  }
}

bool RateIndex::estimate(const std::string& op, OpFamily family, const std::string& dtype,
                         const std::array<double, 4>& key, double& log_rate, bool leave_out) const {
  const std::array<double, 4> at = log_key(key);
  const std::string fam = family_name(family);
  for (const std::string& g : {group_key(op, dtype), group_key(op, ""), group_key(fam, dtype), fam}) {
    auto it = groups_.find(g);
    if (it == groups_.end()) continue;
    // The nearest kNeighbours points and those tied with the last, weighted by 1/distance; an exact match wins
    // outright.
    std::array<std::pair<double, const Point*>, kCandidates> best;
    best.fill({INFINITY, nullptr});
    for (const Point& p : it->second) {
      double d2 = 0;
      for (size_t i = 0; i < 4; ++i) d2 += (p.at[i] - at[i]) * (p.at[i] - at[i]);
      if (leave_out && d2 == 0) continue;  // leave-one-out: the point under test and its repeats
      if (d2 >= best.back().first) continue;
      size_t j = kCandidates - 1;  // insertion: equal distances keep their order
      for (; j > 0 && best[j - 1].first > d2; --j) best[j] = best[j - 1];
      best[j] = {d2, &p};
    }
    if (!best.front().second) continue;
    const double last = best[kNeighbours - 1].first * (1 + 1e-9);  // INFINITY when fewer points
    double wsum = 0, sum = 0;
    for (const auto& [d2, p] : best) {
      if (!p || d2 > last) break;
      if (best.front().first == 0 && d2 > 0) break;
      const double w = 1.0 / (std::sqrt(d2) + 1e-3);
      wsum += w;
      sum += w * p->log_rate;
    }
    log_rate = sum / wsum;
    return true;
  }
  return false;
}

}  // namespace reprise::predict::detail
