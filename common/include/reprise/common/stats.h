// The statistics every report and benchmark uses, defined once.
#pragma once

#include <algorithm>
#include <vector>

namespace reprise {

// The median of a sample: the middle value, or the mean of the two middle values of an even count; 0 when empty.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  double hi = v[mid];
  if (v.size() % 2) return hi;
  double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lo + hi);
}

}  // namespace reprise
