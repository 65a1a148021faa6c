#include "embedding_fit.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace reprise::predict::detail {
namespace {

// Least squares of y on the columns of x (n x k, k <= 3); false when singular.
bool least_squares(const std::vector<std::array<double, 3>>& x, const std::vector<double>& y, int k,
                   std::array<double, 3>& c) {
  double a[3][4] = {};
  for (size_t n = 0; n < y.size(); ++n)
    for (int i = 0; i < k; ++i) {
      for (int j = 0; j < k; ++j) a[i][j] += x[n][i] * x[n][j];
      a[i][3] += x[n][i] * y[n];
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
  for (int i = 0; i < k; ++i) c[static_cast<size_t>(i)] = a[i][3] / a[i][i];
  return true;
}

// busy = c0 + c1 lookups + c2 bags, each coefficient at least 0: the full fit, else without the bags, else through
// the origin.
bool fit_table(const std::vector<std::tuple<double, double, double>>& points, std::array<double, 3>& c) {
  // Relative residuals (each row over its time): a call of 64 lookups weighs as much as one of 262,144.
  std::vector<double> y;
  std::vector<std::array<double, 3>> x3, x2, x1;
  for (const auto& [lookups, bags, busy] : points) {
    const double w = 1 / busy;
    y.push_back(1);
    x3.push_back({w, lookups * w, bags * w});
    x2.push_back({w, lookups * w, 0});
    x1.push_back({lookups * w, 0, 0});
  }
  std::array<double, 3> f{};
  if (least_squares(x3, y, 3, f) && f[0] >= 0 && f[1] > 0 && f[2] >= 0) return c = f, true;
  if (least_squares(x2, y, 2, f) && f[0] >= 0 && f[1] > 0) return c = {f[0], f[1], 0}, true;
  if (least_squares(x1, y, 1, f) && f[0] > 0) return c = {0, f[0], 0}, true;
  return false;
}

// The coefficients at `at` along one axis of (value, coefficients) points sorted by value: interpolated between
// the two around it, held at the ends.
std::array<double, 3> along(const std::vector<std::pair<double, std::array<double, 3>>>& line, double at) {
  if (at <= line.front().first) return line.front().second;
  if (at >= line.back().first) return line.back().second;
  size_t k = 1;
  while (line[k].first < at) ++k;
  const double f = (at - line[k - 1].first) / (line[k].first - line[k - 1].first);
  std::array<double, 3> c{};
  for (size_t i = 0; i < 3; ++i) c[i] = line[k - 1].second[i] + f * (line[k].second[i] - line[k - 1].second[i]);
  return c;
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
    std::vector<double> lookups;
    for (const auto& p : points) lookups.push_back(std::get<0>(p));
    std::sort(lookups.begin(), lookups.end());
    if (points.size() < 4 || lookups.front() == lookups.back()) continue;
    Table t;
    t.log_dim = std::log2(dim);
    t.log_table = std::log2(table);
    if (fit_table(points, t.c)) fits_[group].push_back(t);
  }
}

bool EmbeddingFit::estimate(const std::string& op, const std::string& dtype, const std::array<double, 4>& key,
                            double& busy) const {
  auto it = fits_.find(op + "|" + dtype);
  if (it == fits_.end() || key[0] <= 0 || key[1] <= 0 || key[2] <= 0) return false;
  const double d = std::log2(key[1]), t = std::log2(key[2]);
  // For each swept width, the coefficients at this table size along its tables; then along the widths.
  std::map<double, std::vector<std::pair<double, std::array<double, 3>>>> by_dim;
  for (const Table& x : it->second) by_dim[x.log_dim].emplace_back(x.log_table, x.c);
  std::vector<std::pair<double, std::array<double, 3>>> widths;
  // c0 is taken a byte of table (a dense backward's zeroing grows with it): interpolated so, then scaled back.
  for (auto& [dim, line] : by_dim) {
    std::sort(line.begin(), line.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [log_table, c] : line) c[0] /= std::exp2(log_table);
    std::array<double, 3> at = along(line, t);
    at[0] *= key[2];
    widths.emplace_back(dim, at);
  }
  const std::array<double, 3> c = along(widths, d);
  // A lookup moves a row: its cost scales with the width between the swept ones, and beyond them.
  const double scale = std::exp2(d - std::clamp(d, widths.front().first, widths.back().first));
  busy = c[0] + (c[1] * key[0] + c[2] * key[3]) * scale;
  return busy > 0;
}

}  // namespace reprise::predict::detail
