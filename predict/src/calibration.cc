#include "reprise/predict/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "input_file.h"
#include "interpolate.h"
#include "rate_index.h"
#include "reprise/common/error.h"
#include "reprise/common/stats.h"
#include "reprise/comms/collective.h"
#include "reprise/trace/trace.h"
#include "reprise/trace/write.h"

namespace reprise::predict {
namespace {

using json = nlohmann::json;

// Host overhead of one op name: the intercept of time against work over its three smallest sizes, kept between
// zero and its fastest call. Ops measured at one size only get the median of the others (at most their fastest).
std::map<std::string, double> fit_overheads(const std::vector<OpSample>& samples, double& fallback) {
  std::map<std::string, std::map<double, std::vector<double>>> by_op;  // op -> work -> seconds
  for (const OpSample& s : samples) by_op[s.op][detail::work_measure(s)].push_back(s.seconds);
  std::map<std::string, double> fitted, single;
  std::vector<double> intercepts;
  for (auto& [op, sizes] : by_op) {
    std::vector<std::pair<double, double>> pts;  // work, median seconds
    double fastest = INFINITY;
    for (auto& [work, secs] : sizes) {
      pts.emplace_back(work, median(secs));
      fastest = std::min(fastest, *std::min_element(secs.begin(), secs.end()));
    }
    if (pts.size() == 1 || pts.front().first <= 0) {
      single[op] = pts.front().first <= 0 ? pts.front().second : fastest;  // no work: the call is all overhead
      if (pts.front().first <= 0) intercepts.push_back(single[op]);
      continue;
    }
    pts.resize(std::min<size_t>(pts.size(), 3));
    double mx = 0, my = 0;
    for (auto& [x, y] : pts) mx += x / pts.size(), my += y / pts.size();
    double sxx = 0, sxy = 0;
    for (auto& [x, y] : pts) sxx += (x - mx) * (x - mx), sxy += (x - mx) * (y - my);
    const double slope = sxx > 0 ? std::max(sxy / sxx, 0.0) : 0;
    const double a = std::clamp(my - slope * mx, 0.0, fastest);
    fitted[op] = a;
    intercepts.push_back(a);
  }
  fallback = intercepts.empty() ? 0 : median(intercepts);
  for (auto& [op, fastest] : single)
    if (!fitted.count(op)) fitted[op] = std::min(fastest, std::max(fallback, 0.0));
  return fitted;
}

// A memory-bound op moving more bytes cannot take less time: each memory or embedding sample's time is the least of
// its own and every larger size's of the same op and dtype. This drops the outliers (a first call after the large
// ops freed their memory, a neighbour's burst) that would otherwise read as a rate.
void monotone_in_bytes(std::vector<OpSample>& samples) {
  std::map<std::pair<std::string, std::string>, std::vector<OpSample*>> by_op;
  for (OpSample& s : samples)
    if (s.family == OpFamily::Memory) by_op[{s.op, s.dtype}].push_back(&s);
  for (auto& [op, v] : by_op) {
    std::sort(v.begin(), v.end(), [](const OpSample* a, const OpSample* b) { return a->bytes > b->bytes; });
    double least = INFINITY;
    for (OpSample* s : v) {
      least = s->seconds = std::min(s->seconds, least);
      s->host_seconds = std::min(s->host_seconds, s->seconds);  // a part of the call (-1: none)
    }
  }
}

// A GPU's host part of each op (samples with host_seconds), from its sizes' medians (of the call and of its host
// part). An op waits for its device work when its host part grows with its size as its call does: from its k
// smallest sizes to its k largest (k = 3, fewer for an op of under six sizes; an op of one size says nothing), the
// host part grows by at least half what the call grows (an op that only launches returns as soon as it has, however
// long its kernels run), and the call by at least a fifth and 10 us (sizes that change nothing say nothing). Its
// dispatch is its host part over its three smallest sizes, where the least device work can hide in it; a waiting
// op's less the device time it waited for there (the call less its overhead), which the simulator adds back.
void fit_dispatch(Calibration& c) {
  std::map<std::string, std::map<double, std::vector<const OpSample*>>> by_op;  // op -> work -> samples
  for (const OpSample& s : c.samples)
    if (s.host_seconds >= 0) by_op[s.op][detail::work_measure(s)].push_back(&s);
  for (const auto& [op, sizes] : by_op) {
    // The medians of the call and of its host part over the first `k` sizes from one end.
    auto ends = [](auto first, auto last, size_t k) {
      std::vector<double> call, host;
      for (size_t taken = 0; first != last && taken < k; ++first, ++taken)
        for (const OpSample* s : first->second) call.push_back(s->seconds), host.push_back(s->host_seconds);
      return std::make_pair(median(call), median(host));
    };
    const auto o = c.overheads.find(op);
    const double overhead = o != c.overheads.end() ? o->second : c.default_overhead;
    const auto [call_small, host_small] = ends(sizes.begin(), sizes.end(), 3);
    double dispatch = host_small;
    const size_t k = std::min<size_t>(3, sizes.size() / 2);
    if (k > 0) {
      const auto [call_lo, host_lo] = ends(sizes.begin(), sizes.end(), k);
      const auto [call_hi, host_hi] = ends(sizes.rbegin(), sizes.rend(), k);
      const double grew = call_hi - call_lo;
      if (grew >= std::max(10e-6, 0.2 * call_lo) && host_hi - host_lo >= 0.5 * grew) {
        c.waits_device.insert(op);
        dispatch = std::max(0.0, host_small - std::max(0.0, call_small - overhead));
      }
    }
    c.dispatch[op] = dispatch;
  }
}

std::vector<double> overhead_per_sample(const Calibration& c) {
  std::vector<double> out;
  out.reserve(c.samples.size());
  for (const OpSample& s : c.samples) {
    auto it = c.overheads.find(s.op);
    out.push_back(it != c.overheads.end() ? it->second : c.default_overhead);
  }
  return out;
}

// Leave-one-out: each sample's time predicted from the others, by family.
std::map<std::string, double> fit_residuals(const Calibration& c, const std::vector<double>& overhead) {
  detail::RateIndex index;
  index.build(c.samples, overhead);
  std::map<std::string, std::pair<double, int>> acc;
  for (size_t i = 0; i < c.samples.size(); ++i) {
    const OpSample& s = c.samples[i];
    const double work = detail::work_measure(s);
    double log_rate = 0;
    if (work <= 0 || s.seconds <= 0 || !index.estimate(s.op, s.family, s.dtype, s.key, log_rate, true)) continue;
    const double predicted = overhead[i] + work / std::exp(log_rate);
    const double r = std::log(s.seconds / predicted);
    auto& [sum, n] = acc[family_name(s.family)];
    sum += r * r;
    ++n;
  }
  std::map<std::string, double> sigma;
  for (auto& [fam, sn] : acc) sigma[fam] = std::sqrt(sn.first / sn.second);
  return sigma;
}

double curve_log_error(const CollectiveCurve& c, const std::vector<CommPoint>& pts, double factor) {
  double e = 0;
  for (const CommPoint& p : pts) {
    const double r = std::log(p.seconds / c.seconds(p.bytes, factor));
    e += r * r;
  }
  return e;
}

const char* family_json_name(OpFamily f) { return family_name(f); }

OpFamily family_from_name(const std::string& name, const std::string& where) {
  for (int k = 0; k < kOpFamilyCount; ++k)
    if (name == family_name(static_cast<OpFamily>(k))) return static_cast<OpFamily>(k);
  throw UserError(where + ": unknown op family '" + name + "'");
}

}  // namespace

double Calibration::median_dispatch() const {
  std::vector<double> d;
  for (const auto& [op, s] : dispatch) d.push_back(s);
  return d.empty() ? -1 : median(d);
}

double Calibration::contention_factor(std::string_view family, int64_t ranks, double working_set_bytes) const {
  int measured = 0;  // the largest rank count measured for the family, not above `ranks`
  for (const Contention& x : contention)
    if (x.family == family && x.ranks <= ranks) measured = std::max(measured, x.ranks);
  if (measured < 2) return 1;
  std::vector<std::pair<double, double>> curve;  // (log working set, factor)
  for (const Contention& x : contention)
    if (x.family == family && x.ranks == measured)
      curve.emplace_back(std::log(std::max(x.working_set_bytes, 1.0)), x.factor);
  std::sort(curve.begin(), curve.end());
  return detail::interpolate_held(curve, std::log(std::max(working_set_bytes, 1.0)));
}

double expected_max_normal(int64_t n) {
  // E[max] of n standard normals for n = 2..16 (tabulated), then the asymptotic expansion (within 5% past 16).
  static const double kTable[] = {0,     0,     0.564, 0.846, 1.029, 1.163, 1.267, 1.352, 1.424,
                                  1.485, 1.539, 1.586, 1.629, 1.668, 1.703, 1.736, 1.766};
  if (n < 2) return 0;
  if (n <= 16) return kTable[n];
  const double l = std::sqrt(2 * std::log(static_cast<double>(n)));
  return l - (std::log(std::log(static_cast<double>(n))) + std::log(4 * M_PI)) / (2 * l) + 0.5772 / l;
}

double Calibration::jitter_excess(int64_t group, double seconds) const {
  if (group < 2 || jitter.empty() || seconds <= 0) return 0;
  int measured = 0;  // the most ranks measured
  for (const Jitter& j : jitter) measured = std::max(measured, j.ranks);
  std::vector<std::pair<double, double>> curve;  // (log seconds, excess)
  for (const Jitter& j : jitter)
    if (j.ranks == measured) curve.emplace_back(std::log(std::max(j.seconds, 1e-9)), j.excess);
  std::sort(curve.begin(), curve.end());
  return detail::interpolate_held(curve, std::log(seconds)) * expected_max_normal(group) /
         expected_max_normal(measured);
}

double CollectiveCurve::seconds(double bytes, double factor) const {
  if (bytes <= 0 || bandwidth <= 0) return latency;
  double bw = bandwidth;
  if (width > 0) bw = bandwidth / (1 + std::exp(-(std::log2(bytes) - mid) / width));
  return latency + bytes * factor / bw;
}

std::vector<OpSample> samples_from_trace(const Trace& t, const std::vector<std::pair<uint32_t, double>>& measured,
                                         const std::vector<double>& host, double fresh_page_seconds_per_byte) {
  std::vector<OpSample> out;
  out.reserve(measured.size());
  for (size_t i = 0; i < measured.size(); ++i) {
    const auto& [node, seconds] = measured[i];
    const Node& n = t.nodes[node];
    if (n.kind != NodeKind::Operator || seconds <= 0) continue;
    const OpWork w = op_work(t, node);
    OpSample s;
    s.op = std::string(t.name(n));
    s.family = w.family;
    s.dtype = dtype_itemsize(w.dtype) ? w.dtype : "";  // a spelling the reader would refuse: no dtype
    s.key = w.key;
    s.flops = w.flops;
    s.bytes = w.bytes;
    s.seconds = std::max(seconds - w.fresh_bytes * std::max(fresh_page_seconds_per_byte, 0.0), seconds / 10);
    if (i < host.size() && host[i] >= 0) s.host_seconds = std::min(host[i], s.seconds);
    out.push_back(std::move(s));
  }
  return out;
}

std::pair<std::string, int64_t> curve_of(std::string_view op, int64_t group) {
  comms::Kind kind;
  if (!comms::parse_kind(op, kind)) return {std::string(op), group};
  if (comms::describe(kind).p2p) return {"send", 2};
  return {comms::describe(kind).name, group};
}

CollectiveCurve fit_collective(const std::vector<CommPoint>& points, double factor) {
  if (points.empty()) throw UserError("collective fit: no points");
  std::vector<CommPoint> pts = points;
  std::sort(pts.begin(), pts.end(), [](const CommPoint& a, const CommPoint& b) { return a.bytes < b.bytes; });
  CollectiveCurve c;
  c.op = pts.front().op;
  c.group = pts.front().group;
  c.level = pts.front().level;
  c.points = static_cast<int>(pts.size());
  // The step through the smallest and the largest point: the answer for one point, the candidate to beat for more.
  c.latency = pts.front().seconds;
  c.bandwidth = pts.back().bytes * factor / std::max(pts.back().seconds - c.latency, 1e-12);
  if (pts.size() < 2) return c;
  // For each turning point and width on a grid (and the step: no sigmoid), t = latency + x / bandwidth is linear in
  // latency and 1 / bandwidth, so those two are least squares on the relative error; the candidate with the lowest
  // squared log error wins. Points just above the smallest size give no bandwidth of their own (their time is
  // mostly latency, and noise puts some below it), so the curve is fitted to all points at once.
  const double lo = std::log2(std::max(pts.front().bytes, 1.0)), hi = std::log2(std::max(pts.back().bytes, 1.0));
  std::vector<std::pair<double, double>> grid{{0, 0}};  // (mid, width)
  for (double width : {0.25, 0.5, 1.0, 1.5, 2.0, 3.0})
    for (double mid = lo - 2; mid <= hi + 2; mid += 0.25) grid.emplace_back(mid, width);
  CollectiveCurve best = c;
  double best_err = curve_log_error(c, pts, factor);
  for (const auto& [mid, width] : grid) {
    CollectiveCurve t = c;
    t.mid = mid, t.width = width, t.latency = 0, t.bandwidth = 1;
    // Rows (1 / s_i, x_i / s_i) against 1, x_i the transfer time at unit bandwidth.
    double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
    for (const CommPoint& p : pts) {
      const double r1 = 1 / p.seconds, r2 = t.seconds(p.bytes, factor) / p.seconds;
      a11 += r1 * r1, a12 += r1 * r2, a22 += r2 * r2, b1 += r1, b2 += r2;
    }
    const double det = a11 * a22 - a12 * a12;
    double latency = det > 0 ? (b1 * a22 - b2 * a12) / det : -1, inv_bw = det > 0 ? (a11 * b2 - a12 * b1) / det : 0;
    if (latency < 0) latency = 0, inv_bw = a22 > 0 ? b2 / a22 : 0;
    if (!(inv_bw > 0)) continue;
    t.latency = latency;
    t.bandwidth = 1 / inv_bw;
    const double e = curve_log_error(t, pts, factor);
    if (e < best_err) best = t, best_err = e;
  }
  best.sigma = std::sqrt(best_err / static_cast<double>(pts.size()));
  return best;
}

Calibration fit_calibration(std::vector<OpSample> samples, const std::vector<CommPoint>& comms) {
  if (samples.empty() && comms.empty()) throw UserError("calibration: no measured ops to fit");
  Calibration c;
  c.samples = std::move(samples);
  monotone_in_bytes(c.samples);
  c.overheads = fit_overheads(c.samples, c.default_overhead);
  fit_dispatch(c);
  c.sigma = fit_residuals(c, overhead_per_sample(c));
  std::map<std::tuple<std::string, int64_t, std::string>, std::vector<CommPoint>> by_curve;
  for (const CommPoint& p : comms) by_curve[{p.op, p.group, p.level}].push_back(p);
  for (auto& [key, pts] : by_curve) {
    comms::Kind kind;
    if (!comms::parse_kind(std::get<0>(key), kind))
      throw UserError("calibration: unknown collective '" + std::get<0>(key) + "'");
    c.collectives.push_back(
        fit_collective(pts, comms::describe(kind).busbw_factor(static_cast<int>(std::get<1>(key)))));
  }
  return c;
}

void write_calibration(const Calibration& c, const std::string& path) {
  json j;
  j["format"] = "reprise-calibration/1";
  j["source"] = c.source;
  j["device"] = c.device;
  j["machine"] = c.machine;
  j["torch_version"] = c.torch_version;
  j["threads"] = c.threads;
  j["concurrent_ranks"] = c.concurrent_ranks;
  json contention = json::array();
  for (const Contention& x : c.contention)
    contention.push_back(
        {{"family", x.family}, {"ranks", x.ranks}, {"working_set_bytes", x.working_set_bytes}, {"factor", x.factor}});
  j["contention"] = contention;
  json jitter = json::array();
  for (const Jitter& x : c.jitter) jitter.push_back({{"ranks", x.ranks}, {"seconds", x.seconds}, {"excess", x.excess}});
  j["jitter"] = jitter;
  if (c.fresh_page_seconds_per_byte >= 0) j["fresh_page_seconds_per_byte"] = c.fresh_page_seconds_per_byte;
  j["default_overhead"] = c.default_overhead;
  j["overheads"] = c.overheads;
  if (!c.dispatch.empty()) j["dispatch"] = c.dispatch;
  if (!c.waits_device.empty()) j["waits_device"] = c.waits_device;
  j["sigma"] = c.sigma;
  json curves = json::array();
  for (const CollectiveCurve& k : c.collectives)
    curves.push_back({{"op", k.op},
                      {"group", k.group},
                      {"level", k.level},
                      {"latency", k.latency},
                      {"bandwidth", k.bandwidth},
                      {"mid", k.mid},
                      {"width", k.width},
                      {"sigma", k.sigma},
                      {"points", k.points}});
  j["collectives"] = curves;
  if (!c.host.empty()) {
    // Per key: [gap_before, to_first_launch, launch, between_launches, after_last_launch, launches, launching,
    // waiting, no_launch, samples].
    auto rows_of = [](const std::map<std::string, HostKinds>& m) {
      json o = json::object();
      for (const auto& [key, k] : m)
        o[key] = {k.gap_before, k.to_first_launch, k.launch,  k.between_launches, k.after_last_launch,
                  k.launches,   k.launching,       k.waiting, k.no_launch,        k.samples};
      return o;
    };
    j["host_overheads"] = {
        {"source", c.host.source}, {"by_op", rows_of(c.host.by_op)}, {"by_shape", rows_of(c.host.by_shape)}};
  }
  // Samples as rows: op, family, dtype, key (4), flops, bytes, seconds[, host_seconds on a GPU].
  json rows = json::array();
  for (const OpSample& s : c.samples) {
    rows.push_back({s.op, family_json_name(s.family), s.dtype, s.key, s.flops, s.bytes, s.seconds});
    if (s.host_seconds >= 0) rows.back().push_back(s.host_seconds);
  }
  j["samples"] = rows;
  write_text_file(path, j.dump(1) + "\n");
}

Calibration read_calibration(const std::string& path) {
  const json j = detail::read_json(path);
  if (!j.is_object() || j.value("format", "") != "reprise-calibration/1")
    throw UserError(path + ": not a Reprise calibration (format reprise-calibration/1)");
  Calibration c;
  using detail::json_integer;
  using detail::json_number;
  using detail::json_string;
  using detail::json_value_number;
  constexpr double kBig = std::numeric_limits<double>::max();
  // A per-family or per-op map of numbers from lo to hi.
  auto numbers = [&](const char* key, double lo, double hi, bool required) {
    std::map<std::string, double> m;
    const auto it = j.find(key);
    if (it == j.end()) {
      if (required) throw UserError(path + ": " + key + ": missing");
      return m;
    }
    if (!it->is_object()) throw UserError(path + ": " + key + ": expected an object of numbers");
    for (const auto& [name, v] : it->items()) m[name] = json_value_number(v, path + ": " + key + ": " + name, lo, hi);
    return m;
  };
  c.source = json_string(j, "source", path, "");
  c.device = json_string(j, "device", path, "");
  c.machine = json_string(j, "machine", path, "");
  c.torch_version = json_string(j, "torch_version", path, "");
  c.threads = static_cast<int>(json_integer(j, "threads", path, 1, 4096, 1));
  c.concurrent_ranks = static_cast<int>(json_integer(j, "concurrent_ranks", path, 1, 1 << 20, 1));
  if (j.contains("memory_contention") && !j.contains("contention")) {  // before 2026-11-28: 64 MiB copies (128 MiB)
    if (!j["memory_contention"].is_object())
      throw UserError(path + ": memory_contention: expected {ranks: factor >= 1}");
    for (const auto& [ranks, factor] : j["memory_contention"].items()) {
      char* end = nullptr;
      const long k = std::strtol(ranks.c_str(), &end, 10);
      if (ranks.empty() || *end != '\0' || k < 1 || k > (1 << 20))
        throw UserError(path + ": memory_contention: the key \"" + ranks + "\" is not a rank count of at least 1");
      c.contention.push_back({"memory", static_cast<int>(k), 128.0 * 1024 * 1024,
                              json_value_number(factor, path + ": memory_contention: " + ranks, 1, 1000)});
    }
  }
  if (const auto it = j.find("contention"); it != j.end()) {
    if (!it->is_array())
      throw UserError(path + ": contention: expected a list of {family, ranks, working_set_bytes, factor}");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& x = (*it)[i];
      const std::string where = path + ": contention[" + std::to_string(i) + "]";
      if (!x.is_object()) throw UserError(where + ": expected {family, ranks, working_set_bytes, factor}");
      Contention k;
      k.family = json_string(x, "family", where);
      if (k.family != "memory" && k.family != "embedding")
        throw UserError(where + ": family: expected memory or embedding, got \"" + k.family + "\"");
      k.ranks = static_cast<int>(json_integer(x, "ranks", where, 1, 1 << 20));
      k.working_set_bytes = json_number(x, "working_set_bytes", where, 1, kBig);
      k.factor = json_number(x, "factor", where, 1, 1000);
      c.contention.push_back(k);
    }
  }
  if (const auto it = j.find("jitter"); it != j.end()) {
    if (!it->is_array()) throw UserError(path + ": jitter: expected a list of {ranks, seconds, excess}");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& x = (*it)[i];
      const std::string where = path + ": jitter[" + std::to_string(i) + "]";
      if (!x.is_object()) throw UserError(where + ": expected {ranks, seconds, excess}");
      Jitter k;
      k.ranks = static_cast<int>(json_integer(x, "ranks", where, 2, 1 << 20));
      k.seconds = json_number(x, "seconds", where, 1e-9, kLongestSeconds);
      k.excess = json_number(x, "excess", where, 0, 10);
      c.jitter.push_back(k);
    }
  }
  c.fresh_page_seconds_per_byte =
      j.contains("fresh_page_seconds_per_byte") ? json_number(j, "fresh_page_seconds_per_byte", path, 0, 1e-6) : -1;
  c.default_overhead = json_number(j, "default_overhead", path, 0, kLongestSeconds);
  c.overheads = numbers("overheads", 0, kLongestSeconds, true);
  c.sigma = numbers("sigma", 0, 10, false);
  c.dispatch = numbers("dispatch", 0, kLongestSeconds, false);
  if (const auto w = j.find("waits_device"); w != j.end()) {
    if (!w->is_array()) throw UserError(path + ": waits_device: expected a list of op names");
    for (size_t i = 0; i < w->size(); ++i) {
      if (!(*w)[i].is_string())
        throw UserError(path + ": waits_device[" + std::to_string(i) + "]: expected an op name, got " + (*w)[i].dump());
      c.waits_device.insert((*w)[i].get<std::string>());
    }
  }
  const auto curves = j.find("collectives");
  if (curves == j.end() || !curves->is_array()) throw UserError(path + ": collectives: expected a list");
  for (size_t i = 0; i < curves->size(); ++i) {
    const json& k = (*curves)[i];
    const std::string where = path + ": collectives[" + std::to_string(i) + "]";
    CollectiveCurve x;
    x.op = json_string(k, "op", where);
    x.group = json_integer(k, "group", where, 1, int64_t{1} << 24);
    x.level = json_string(k, "level", where, "");
    x.latency = json_number(k, "latency", where, 0, kLongestSeconds);
    x.bandwidth = json_number(k, "bandwidth", where, 0, kBig);  // bytes/s; 0: the latency alone
    x.mid = json_number(k, "mid", where, -64, 128, 0.0);        // log2(bytes)
    x.width = json_number(k, "width", where, 0, 64, 0.0);       // 0: a step
    if (x.width > 0 && x.width < 1e-3) throw UserError(where + ": width: expected 0 (a step) or at least 0.001");
    x.sigma = json_number(k, "sigma", where, 0, 10, 0.0);
    x.points = static_cast<int>(json_integer(k, "points", where, 0, 1 << 30, 0));
    c.collectives.push_back(x);
  }
  if (const auto host = j.find("host_overheads"); host != j.end()) {
    if (!host->is_object()) throw UserError(path + ": host_overheads: expected {source, by_op, by_shape}");
    c.host.source = json_string(*host, "source", path + ": host_overheads", "");
    for (const char* part : {"by_op", "by_shape"}) {
      const auto m = host->find(part);
      if (m == host->end()) continue;
      const std::string at = path + ": host_overheads: " + part;
      if (!m->is_object()) throw UserError(at + ": expected an object of [10 numbers] by op");
      for (const auto& [key, r] : m->items()) {
        const std::string where = at + ": " + key;
        if (!r.is_array() || r.size() != 10)
          throw UserError(where +
                          ": expected [gap_before, to_first_launch, launch, between_launches, "
                          "after_last_launch, launches, launching, waiting, no_launch, samples]");
        HostKinds k;
        double* fields[] = {&k.gap_before, &k.to_first_launch, &k.launch,  &k.between_launches, &k.after_last_launch,
                            &k.launches,   &k.launching,       &k.waiting, &k.no_launch};
        const double most[] = {
            kLongestSeconds, kLongestSeconds, kLongestSeconds, kLongestSeconds, kLongestSeconds, 1e6, 1, 1,
            kLongestSeconds};  // launches a call; shares
        for (size_t e = 0; e < 9; ++e)
          *fields[e] = json_value_number(r[e], where + "[" + std::to_string(e) + "]", 0, most[e]);
        k.samples = static_cast<int64_t>(json_value_number(r[9], where + "[9]", 0, 1e15));
        (std::string(part) == "by_op" ? c.host.by_op : c.host.by_shape)[key] = k;
      }
    }
  }
  const auto samples = j.find("samples");
  if (samples == j.end() || !samples->is_array()) throw UserError(path + ": samples: expected a list");
  for (size_t row = 0; row < samples->size(); ++row) {
    const json& r = (*samples)[row];
    const std::string where = path + ": samples[" + std::to_string(row) + "]";
    if (!r.is_array() || r.size() < 7 || r.size() > 8 || !r[0].is_string() || !r[1].is_string() || !r[2].is_string() ||
        !r[3].is_array() || r[3].size() != 4)
      throw UserError(where + ": expected [op, family, dtype, [4 key numbers], flops, bytes, seconds, host seconds?]");
    OpSample s;
    s.op = r[0].get<std::string>();
    s.family = family_from_name(r[1].get<std::string>(), where);
    s.dtype = r[2].get<std::string>();
    // A misspelt dtype would match no op of any trace: the sample would be read and never used.
    if (!s.dtype.empty() && dtype_itemsize(s.dtype) == 0)
      throw UserError(where + ": unknown dtype '" + s.dtype + "' (the trace's spellings: Float, BFloat16, Half, ...)");
    for (size_t e = 0; e < 4; ++e)
      s.key[e] = json_value_number(r[3][e], where + ": key[" + std::to_string(e) + "]", -kBig, kBig);
    s.flops = json_value_number(r[4], where + ": flops", 0, kBig);
    s.bytes = json_value_number(r[5], where + ": bytes", 0, kBig);
    s.seconds = json_value_number(r[6], where + ": seconds", 0, kLongestSeconds);
    if (r.size() == 8) s.host_seconds = json_value_number(r[7], where + ": host seconds", 0, s.seconds);
    c.samples.push_back(std::move(s));
  }
  return c;
}

std::vector<OpTimes> read_op_times(const std::string& path) {
  const json j = detail::read_json(path);
  std::vector<OpTimes> out;
  auto one = [&](const json& d, const std::string& where) {
    OpTimes o;
    o.trace = detail::json_string(d, "trace", where, detail::json_string(j, "trace", path, ""));
    o.rank = detail::json_integer(d, "rank", where, 0, int64_t{1} << 30, 0);
    o.world_size = detail::json_integer(j, "world_size", path, 1, int64_t{1} << 30, 1);
    const json& ot = d["op_times"];
    const std::string at = where + ": op_times";
    if (!ot.is_object() || !ot.contains("node_ids") || !ot.contains("seconds") || !ot["node_ids"].is_array() ||
        !ot["seconds"].is_array())
      throw UserError(at + ": expected {node_ids: [...], seconds: [...]}");
    const json &ids = ot["node_ids"], &secs = ot["seconds"];
    if (ids.size() != secs.size()) throw UserError(at + ": node_ids and seconds differ in length");
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::string e = "[" + std::to_string(i) + "]";
      if (!ids[i].is_number_integer() || ids[i].get<int64_t>() < 0)
        throw UserError(at + ": node_ids" + e + ": expected a node id (an integer of at least 0), got " +
                        ids[i].dump());
      const int64_t id = ids[i].get<int64_t>();
      const double sec = detail::json_value_number(secs[i], at + ": seconds" + e, 0, kLongestSeconds);
      o.seconds[id] = sec;
      o.in_order.emplace_back(id, sec);
    }
    if (const auto h = ot.find("host_seconds"); h != ot.end()) {  // a GPU replay's host parts
      if (!h->is_array() || h->size() != ids.size())
        throw UserError(at + ": host_seconds: expected a list as long as node_ids");
      for (size_t i = 0; i < h->size(); ++i)
        o.host_in_order.push_back(
            detail::json_value_number((*h)[i], at + ": host_seconds[" + std::to_string(i) + "]", 0, kLongestSeconds));
    }
    out.push_back(std::move(o));
  };
  if (!j.is_object() || !j.contains("reprise_replay")) throw UserError(path + ": not a reprise replay results file");
  if (j.contains("ranks")) {
    if (!j["ranks"].is_array()) throw UserError(path + ": ranks: expected a list");
    for (size_t k = 0; k < j["ranks"].size(); ++k) {
      const json& r = j["ranks"][k];
      if (r.is_object() && r.contains("op_times")) one(r, path + ": ranks[" + std::to_string(k) + "]");
    }
  }
  if (out.empty() && j.contains("op_times")) one(j, path);
  if (out.empty()) throw UserError(path + ": no op_times (replay with --per-op to measure each op)");
  return out;
}

std::vector<CommPoint> read_comm_sweeps(const std::vector<std::string>& paths) {
  std::vector<CommPoint> out;
  for (const std::string& path : paths) {
    const json j = detail::read_json(path);
    try {
      const auto [op, group] = curve_of(j.at("op").get<std::string>(), j.at("world_size").get<int64_t>());
      const std::string level = j.value("level", "");
      for (const json& r : j.at("rows")) {
        CommPoint p{op, group, level, r.at("bytes").get<double>(), r.at("time_us").get<double>() * 1e-6};
        if (p.bytes > 0 && p.seconds > 0) out.push_back(p);
      }
    } catch (const json::exception& e) {
      std::string why = e.what();  // "[json.exception.out_of_range.403] key 'op' not found": the part after "] "
      if (const size_t at = why.find("] "); at != std::string::npos) why = why.substr(at + 2);
      throw UserError(path + ": not a reprise comms --json result (" + why + ")");
    }
  }
  return out;
}

}  // namespace reprise::predict
