// Shared by the benchmarks: the steady clock in seconds and the median of a sample.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace reprise::bench {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace reprise::bench
