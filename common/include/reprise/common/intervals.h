// Time intervals, defined once: the host's waits, the spans a transform drops.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

namespace reprise {

// The union of `spans` ([begin, end] pairs) as disjoint intervals in time order; touching ones become one.
inline std::vector<std::pair<double, double>> merge_intervals(std::vector<std::pair<double, double>> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<double, double>> merged;
  for (const auto& x : spans)
    if (!merged.empty() && x.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, x.second);
    else
      merged.push_back(x);
  return merged;
}

}  // namespace reprise
