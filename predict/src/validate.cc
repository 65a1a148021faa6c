// Pairing predictions with measurements and the statistics over them; docs/validate.md defines each figure.
#include "reprise/predict/validate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "reprise/common/error.h"

namespace reprise::predict {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// |p/m - 1| below this counts as this in the geometric mean: one exact prediction would otherwise make it 0.
constexpr double kErrorFloor = 1e-4;

Error error_of(const RankTime& predicted, double measured) {
  Error e;
  e.predicted = predicted.seconds;
  e.measured = measured;
  e.error = measured > 0 ? (predicted.seconds - measured) / measured : kNaN;
  if (predicted.lo >= 0) e.in_interval = predicted.lo <= measured && measured <= predicted.hi ? 1 : 0;
  return e;
}

// "gpt.replay.json" -> "gpt": the label of a workload nothing else names.
std::string stem_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = base.find('.');
  return dot == 0 || dot == std::string::npos ? base : base.substr(0, dot);
}

WorkloadCheck check(Timing predicted, Timing measured, std::string label) {
  WorkloadCheck c;
  c.label = std::move(label);
  c.total = error_of(predicted.total, measured.total.seconds);
  for (const RankTime& p : predicted.ranks)
    for (const RankTime& m : measured.ranks)
      if (p.rank == m.rank) c.ranks.emplace_back(p.rank, error_of(p, m.seconds));
  // A prediction of other ranks than were measured (another world size, an ASTRA-sim log cut short) is compared
  // on the ranks both give, and said.
  if (!predicted.ranks.empty() && !measured.ranks.empty() &&
      (c.ranks.size() != predicted.ranks.size() || c.ranks.size() != measured.ranks.size()))
    c.notes.push_back("the prediction gives " + std::to_string(predicted.ranks.size()) + " rank(s), the measurement " +
                      std::to_string(measured.ranks.size()) + ": " + std::to_string(c.ranks.size()) +
                      " compared rank by rank");
  // Families only when both sides have some: a replay without --per-op, or a simulator that models no families,
  // would otherwise show every family as a 100% error.
  std::map<std::string, bool> names;
  if (!predicted.families.empty() && !measured.families.empty()) {
    for (const auto& f : predicted.families) names[f.first] = true;
    for (const auto& f : measured.families) names[f.first] = true;
  }
  for (const auto& [name, unused] : names) {
    RankTime p;
    auto pi = predicted.families.find(name);
    auto mi = measured.families.find(name);
    p.seconds = pi == predicted.families.end() ? 0 : pi->second;
    c.families.emplace_back(name, error_of(p, mi == measured.families.end() ? 0 : mi->second));
  }
  c.predicted = std::move(predicted);
  c.measured = std::move(measured);
  return c;
}

int sign(double x) { return (x > 0) - (x < 0); }

// Kendall's tau-b: (concordant - discordant) / sqrt((n0 - ties in x) (n0 - ties in y)), n0 = n(n-1)/2 pairs.
double kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y) {
  double concordant = 0, discordant = 0, tied_x = 0, tied_y = 0, pairs = 0;
  for (size_t i = 0; i < x.size(); ++i)
    for (size_t j = i + 1; j < x.size(); ++j) {
      ++pairs;
      const int s = sign(x[i] - x[j]) * sign(y[i] - y[j]);
      if (x[i] == x[j]) ++tied_x;
      if (y[i] == y[j]) ++tied_y;
      if (s > 0) ++concordant;
      if (s < 0) ++discordant;
    }
  const double denominator = std::sqrt((pairs - tied_x) * (pairs - tied_y));
  return denominator > 0 ? (concordant - discordant) / denominator : kNaN;
}

Summary summarize(const std::vector<WorkloadCheck>& checks) {
  Summary s;
  s.gmape = s.geomean_ratio = s.mape = s.max_abs_error = s.mean_spread = s.kendall_tau = kNaN;
  std::vector<const WorkloadCheck*> settled;  // a positive prediction and measurement
  double spread_sum = 0;
  int spreads = 0;
  for (const WorkloadCheck& c : checks) {
    if (c.total.predicted > 0 && c.total.measured > 0) settled.push_back(&c);
    if (c.measured.spread >= 0) spread_sum += c.measured.spread, ++spreads;
    if (c.total.in_interval >= 0) ++s.with_interval, s.in_interval += c.total.in_interval;
  }
  if (spreads > 0) s.mean_spread = spread_sum / spreads;
  if (settled.empty()) return s;
  double log_error = 0, log_ratio = 0, sum_error = 0;
  s.max_abs_error = -1;
  std::vector<double> p, m;
  for (const WorkloadCheck* c : settled) {
    const double ratio = c->total.predicted / c->total.measured;
    const double error = std::abs(ratio - 1);
    log_error += std::log(std::max(error, kErrorFloor));
    log_ratio += std::log(ratio);
    sum_error += error;
    if (error > s.max_abs_error) s.max_abs_error = error, s.max_abs_error_workload = c->label;
    p.push_back(c->total.predicted);
    m.push_back(c->total.measured);
  }
  const double n = static_cast<double>(settled.size());
  s.gmape = std::exp(log_error / n);
  s.geomean_ratio = std::exp(log_ratio / n);
  s.mape = sum_error / n;
  // The fastest: every workload at the smallest time, ties named together. A tie in the prediction is no pick, so
  // it counts against it: the pick matches only if each tied workload is a measured fastest, and is within 5% only
  // if the slowest of them measures within 5% of the fastest.
  auto fastest = [&](const std::vector<double>& t) {
    const double least = *std::min_element(t.begin(), t.end());
    std::vector<size_t> at;
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i] == least) at.push_back(i);
    return at;
  };
  auto labels = [&](const std::vector<size_t>& at) {
    std::string out;
    for (size_t i : at) out += (out.empty() ? "" : ", ") + settled[i]->label;
    return out;
  };
  const std::vector<size_t> fastest_p = fastest(p), fastest_m = fastest(m);
  s.fastest_predicted = labels(fastest_p);
  s.fastest_measured = labels(fastest_m);
  if (settled.size() >= 2) {
    s.kendall_tau = kendall_tau_b(p, m);
    const double least_m = m[fastest_m.front()];
    bool match = true, within = true;
    for (size_t i : fastest_p) {
      match = match && m[i] == least_m;
      within = within && m[i] <= 1.05 * least_m;
    }
    s.fastest_match = match;
    s.fastest_within_5pct = within;
  }
  return s;
}

}  // namespace

OpFamily family_of_replay_op(std::string_view op) {
  const std::string_view head = op.substr(0, op.find(' '));
  if (head.find(':') != std::string_view::npos) return family_of_name(op);
  return head == "wait" ? OpFamily::Sync : OpFamily::Collective;
}

Validation compare(std::vector<Timing> predicted, std::vector<Timing> measured,
                   const std::vector<std::string>& labels) {
  if (predicted.size() != measured.size())
    throw UserError(std::to_string(predicted.size()) + " predicted workload(s) but " + std::to_string(measured.size()) +
                    " measurement(s): they pair by position");
  if (!labels.empty() && labels.size() != predicted.size())
    throw UserError(std::to_string(labels.size()) + " label(s) for " + std::to_string(predicted.size()) +
                    " workload(s)");
  Validation v;
  for (size_t k = 0; k < predicted.size(); ++k) {
    std::string label = !labels.empty()              ? labels[k]
                        : !predicted[k].name.empty() ? predicted[k].name
                                                     : stem_of(measured[k].source);
    v.workloads.push_back(check(std::move(predicted[k]), std::move(measured[k]), std::move(label)));
  }
  v.summary = summarize(v.workloads);
  return v;
}

Validation validate(const std::vector<std::string>& predicted_files, const std::vector<std::string>& measured_files,
                    const std::vector<std::string>& labels) {
  std::vector<Timing> predicted, measured;
  for (const std::string& f : predicted_files)
    for (Timing& t : read_predictions(f)) predicted.push_back(std::move(t));
  for (const std::string& f : measured_files) measured.push_back(read_measurement(f));
  return compare(std::move(predicted), std::move(measured), labels);
}

}  // namespace reprise::predict
