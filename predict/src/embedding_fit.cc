#include "embedding_fit.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "interpolate.h"

namespace reprise::predict::detail {
namespace {

// Least squares of y on the columns `cols` of x (at most 3); c holds each column's coefficient, 0 for the others.
// False when singular.
bool least_squares(const std::vector<std::array<double, 3>>& x, const std::vector<double>& y,
                   const std::vector<int>& cols, std::array<double, 3>& c) {
  const int k = static_cast<int>(cols.size());
  double a[3][4] = {};
  for (size_t n = 0; n < y.size(); ++n)
    for (int i = 0; i < k; ++i) {
      for (int j = 0; j < k; ++j) a[i][j] += x[n][cols[i]] * x[n][cols[j]];
      a[i][3] += x[n][cols[i]] * y[n];
    }
  for (int col = 0; col < k; ++col) {
    int pivot = col;
    for (int r = col + 1; r < k; ++r)
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    if (std::fabs(a[pivot][col]) < 1e-30) return false;
    for (int j = 0; j < 4; ++j) std::swap(a[col][j], a[pivot][j]);
    for (int r = 0; r < k; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (int j = col; j < 4; ++j) a[r][j] -= f * a[col][j];
    }
  }
  c = {0, 0, 0};
  for (int i = 0; i < k; ++i) c[static_cast<size_t>(cols[i])] = a[i][3] / a[i][i];
  return true;
}

// busy = c0 + c1 lookups + c2 bags, each coefficient at least 0: the full fit, else without the bags, else through
// the origin.
bool fit_table(const std::vector<std::tuple<double, double, double>>& points, EmbeddingFit::Coefficients& c) {
  // Relative residuals (each row over its time): a call of 64 lookups weighs as much as one of 262,144.
  std::vector<double> y;
  std::vector<std::array<double, 3>> x;
  for (const auto& [lookups, bags, busy] : points) {
    y.push_back(1);
    x.push_back({1 / busy, lookups / busy, bags / busy});
  }
  for (const std::vector<int>& cols : {std::vector<int>{0, 1, 2}, {0, 1}, {1}})
    if (least_squares(x, y, cols, c) && c[0] >= 0 && c[1] > 0 && c[2] >= 0) return true;
  return false;
}

}  // namespace

void EmbeddingFit::build(const std::vector<OpSample>& samples, const std::vector<double>& overhead_of) {
  fits_.clear();
  std::map<std::tuple<std::string, double, double>, std::vector<std::tuple<double, double, double>>> by_table;
  for (size_t i = 0; i < samples.size(); ++i) {
    const OpSample& s = samples[i];
    if (s.family != OpFamily::Embedding || s.seconds <= 0 || s.key[0] <= 0 || s.key[1] <= 0 || s.key[2] <= 0) continue;
    const double busy = s.seconds - overhead_of[i];
    if (busy <= 0) continue;
    by_table[{s.op + "|" + s.dtype, s.key[1], s.key[2]}].emplace_back(s.key[0], s.key[3], busy);
  }
  for (const auto& [k, points] : by_table) {
    const auto& [group, dim, table] = k;
    const auto [fewest, most] = std::minmax_element(
        points.begin(), points.end(), [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
    Coefficients c{};
    if (points.size() < 4 || std::get<0>(*fewest) == std::get<0>(*most) || !fit_table(points, c)) continue;
    c[0] /= table;  // a dense backward's zeroing grows with its table: interpolated a byte of it
    fits_[group][std::log2(dim)].emplace_back(std::log2(table), c);  // by_table's order: sorted by table
  }
}

bool EmbeddingFit::estimate(const std::string& op, const std::string& dtype, const std::array<double, 4>& key,
                            double& busy) const {
  auto it = fits_.find(op + "|" + dtype);
  if (it == fits_.end() || key[0] <= 0 || key[1] <= 0 || key[2] <= 0) return false;
  const double d = std::log2(key[1]);
  // For each swept width, the coefficients at this table size along its tables; then along the widths.
  std::vector<std::pair<double, Coefficients>> widths;
  for (const auto& [dim, tables] : it->second) widths.emplace_back(dim, interpolate_held(tables, std::log2(key[2])));
  const Coefficients c = interpolate_held(widths, d);
  // A lookup moves a row: its cost scales with the width between the swept ones, and beyond them.
  const double scale = std::exp2(d - std::clamp(d, widths.front().first, widths.back().first));
  busy = c[0] * key[2] + (c[1] * key[0] + c[2] * key[3]) * scale;
  return busy > 0;
}

}  // namespace reprise::predict::detail
