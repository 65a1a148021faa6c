// Piecewise-linear interpolation along one axis, held at the ends: the calibration's contention and jitter curves
// (over log working set, log seconds) and the embedding fits' coefficients (over log table size and log width).
#pragma once

#include <array>
#include <cstddef>
#include <utility>
#include <vector>

namespace reprise::predict::detail {

inline double mix(double a, double b, double f) { return a + f * (b - a); }
template <size_t N>
std::array<double, N> mix(const std::array<double, N>& a, const std::array<double, N>& b, double f) {
  std::array<double, N> c{};
  for (size_t i = 0; i < N; ++i) c[i] = mix(a[i], b[i], f);
  return c;
}

// The value at `at` of (position, value) points sorted by position (at least one): interpolated between the two
// around it, the first or last value outside them.
template <typename V>
V interpolate_held(const std::vector<std::pair<double, V>>& points, double at) {
  if (at <= points.front().first) return points.front().second;
  if (at >= points.back().first) return points.back().second;
  size_t k = 1;
  while (points[k].first < at) ++k;
  const auto& [x0, v0] = points[k - 1];
  const auto& [x1, v1] = points[k];
  return mix(v0, v1, (at - x0) / (x1 - x0));
}

}  // namespace reprise::predict::detail
