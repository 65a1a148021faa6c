// The files validate reads: predictions (reprise-prediction/1, the external JSON and CSV formats, ASTRA-sim logs)
// and measurements (reprise replay's results JSON). Each reader fills the same Timing; nothing after them knows which
// format a time came from. docs/validate.md gives each format.
#include "validate_formats.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "input_file.h"
#include "reprise/common/error.h"
#include "reprise/common/stats.h"
#include "reprise/predict/validate.h"

namespace reprise::predict {
namespace {

using json = nlohmann::json;

constexpr const char* kPredictionFormat = "reprise-prediction/1";
constexpr const char* kExternalFormat = "reprise-external-prediction/1";

// A number under `key`, nullopt when absent or null; anything else there is an error naming the key.
std::optional<double> number(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw UserError(where + ": " + key + " is not a number");
  return it->get<double>();
}

double required_number(const json& obj, const char* key, const std::string& where) {
  std::optional<double> v = number(obj, key, where);
  if (!v) throw UserError(where + ": no " + key + " (a number of seconds)");
  return *v;
}

std::string string_or(const json& obj, const char* key, const std::string& fallback) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : fallback;
}

const json* array_at(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  if (!it->is_array()) throw UserError(where + ": " + key + " is not a list");
  return &*it;
}

// Times are finite and not negative, an interval's hi not below its lo: what a simulator could not mean otherwise.
void check_time(const RankTime& r, const std::string& where) {
  auto bad = [](double x, bool optional) { return !std::isfinite(x) || (x < 0 && !(optional && x == -1)); };
  if (bad(r.seconds, false) || bad(r.lo, true) || bad(r.hi, true) || bad(r.exposed_comm_seconds, true))
    throw UserError(where + ": a time that is negative or not finite");
  if ((r.lo >= 0) != (r.hi >= 0)) throw UserError(where + ": an interval needs both lo and hi");
  if (r.hi < r.lo) throw UserError(where + ": hi is below lo");
}

// A cell or number as an error message quotes it: short enough for one line.
std::string shown(const std::string& text) { return text.size() <= 32 ? text : text.substr(0, 32) + "..."; }

// A rank is a whole number from 0 (converting anything else to an integer would be undefined).
int64_t rank_of(double x, const std::string& text, const std::string& where) {
  if (!(x >= 0 && x <= 1e9) || x != std::floor(x))
    throw UserError(where + ": rank '" + shown(text) + "' is not a rank");
  return static_cast<int64_t>(x);
}

// An optional time: -1 when absent; given, it is finite and not negative (-1 is not a way to write "unknown").
double optional_time(const json& obj, const char* key, const std::string& where) {
  const std::optional<double> x = number(obj, key, where);
  if (x && !(std::isfinite(*x) && *x >= 0))
    throw UserError(where + ": " + key + ": a time that is negative or not finite");
  return x.value_or(-1);
}

// A time that must be there.
double required_time(const json& obj, const char* key, const std::string& where) {
  const double x = optional_time(obj, key, where);
  if (x < 0) throw UserError(where + ": no " + key + " (a number of seconds)");
  return x;
}

// A time with its optional interval and exposed communication, from an object with `seconds_key`.
RankTime rank_time(const json& obj, const char* seconds_key, const std::string& where) {
  if (!obj.is_object()) throw UserError(where + ": expected an object");
  RankTime r;
  r.seconds = required_number(obj, seconds_key, where);
  r.lo = optional_time(obj, "lo", where);
  r.hi = optional_time(obj, "hi", where);
  r.exposed_comm_seconds = optional_time(obj, "exposed_comm_seconds", where);
  check_time(r, where);
  return r;
}

std::vector<RankTime> rank_list(const json& obj, const char* seconds_key, const std::string& where) {
  std::vector<RankTime> out;
  const json* ranks = array_at(obj, "ranks", where);
  if (!ranks) return out;
  for (size_t k = 0; k < ranks->size(); ++k) {
    const std::string at = where + ": ranks[" + std::to_string(k) + "]";
    RankTime r = rank_time((*ranks)[k], seconds_key, at);
    const double rank = required_number((*ranks)[k], "rank", at);
    r.rank = rank_of(rank, (*ranks)[k].at("rank").dump(), at);
    for (const RankTime& before : out)
      if (before.rank == r.rank) throw UserError(at + ": a second entry for rank " + std::to_string(r.rank));
    out.push_back(r);
  }
  return out;
}

// A workload given only per rank: it takes as long as its slowest rank. The interval's bounds are the max of the
// ranks' bounds, which bound the max of the ranks' times when every rank has one.
RankTime total_of_ranks(const std::vector<RankTime>& ranks) {
  RankTime t;
  if (ranks.empty()) return t;
  const RankTime& slowest = *std::max_element(
      ranks.begin(), ranks.end(), [](const RankTime& a, const RankTime& b) { return a.seconds < b.seconds; });
  t.seconds = slowest.seconds;
  t.exposed_comm_seconds = slowest.exposed_comm_seconds;
  bool all_intervals = std::all_of(ranks.begin(), ranks.end(), [](const RankTime& r) { return r.lo >= 0; });
  if (all_intervals) {
    t.lo = t.hi = 0;
    for (const RankTime& r : ranks) t.lo = std::max(t.lo, r.lo), t.hi = std::max(t.hi, r.hi);
  }
  return t;
}

Timing reprise_prediction(const json& j, const std::string& path) {
  Timing t;
  t.source = path;
  t.format = kPredictionFormat;
  t.name = string_or(j, "name", "");
  t.simulator = string_or(j, "simulator", "reprise");
  t.total.seconds = required_number(j, "iteration_seconds", path);
  t.ranks = rank_list(j, "iteration_seconds", path);
  if (auto it = j.find("interval"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) throw UserError(path + ": interval is not an object");
    t.total.lo = required_number(*it, "lo", path + ": interval");
    t.total.hi = required_number(*it, "hi", path + ": interval");
  }
  t.total.exposed_comm_seconds = j.contains("exposed_comm_seconds") || t.ranks.empty()
                                     ? optional_time(j, "exposed_comm_seconds", path)
                                     : total_of_ranks(t.ranks).exposed_comm_seconds;
  check_time(t.total, path);
  if (auto it = j.find("families"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) throw UserError(path + ": families is not an object of family name to seconds");
    for (auto f = it->begin(); f != it->end(); ++f) {
      if (!f->is_number() || !std::isfinite(f->get<double>()) || f->get<double>() < 0)
        throw UserError(path + ": families." + f.key() + " is not a time (a number of seconds, at least 0)");
      t.families[f.key()] = f->get<double>();
    }
  }
  if (auto it = j.find("coverage"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) throw UserError(path + ": coverage: expected {ops, modeled, ..., fraction}");
    t.coverage = number(*it, "fraction", path + ": coverage").value_or(-1);
    if (t.coverage != -1 && !(t.coverage >= 0 && t.coverage <= 1))
      throw UserError(path + ": coverage: fraction: expected a share from 0 to 1");
  }
  return t;
}

std::vector<Timing> external_prediction(const json& j, const std::string& path) {
  const std::string simulator = string_or(j, "simulator", "");
  const json* workloads = array_at(j, "workloads", path);
  if (!workloads || workloads->empty()) throw UserError(path + ": no workloads");
  std::vector<Timing> out;
  for (size_t k = 0; k < workloads->size(); ++k) {
    const json& w = (*workloads)[k];
    const std::string at = path + ": workloads[" + std::to_string(k) + "]";
    if (!w.is_object()) throw UserError(at + ": expected an object");
    Timing t;
    t.source = path;
    t.format = kExternalFormat;
    t.simulator = simulator;
    t.name = string_or(w, "name", "");
    t.ranks = rank_list(w, "iteration_seconds", at);
    if (w.contains("iteration_seconds") || t.ranks.empty())
      t.total = rank_time(w, "iteration_seconds", at);
    else
      t.total = total_of_ranks(t.ranks);
    out.push_back(std::move(t));
  }
  return out;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) cells.push_back(trim(cell));
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

double csv_number(const std::string& cell, const std::string& column, const std::string& where) {
  char* end = nullptr;
  double v = std::strtod(cell.c_str(), &end);
  // Decimal only: strtod also reads hexadecimal ("0x10" as 16).
  if (cell.empty() || *end != '\0' || cell.find_first_of("xX") != std::string::npos)
    throw UserError(where + ": " + column + " '" + shown(cell) + "' is not a number");
  return v;
}

// workload,rank,iteration_seconds[,lo,hi,exposed_comm_seconds][,simulator], columns by header name.
std::vector<Timing> csv_prediction(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  std::string line;
  std::map<std::string, size_t> col;
  int line_no = 0;
  std::vector<Timing> out;
  std::map<std::string, size_t> index;  // workload -> position in out
  std::vector<bool> has_total;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    const std::string where = path + ":" + std::to_string(line_no);
    std::vector<std::string> cells = split_csv(line);
    if (!col.empty() && cells.size() > col.size())
      throw UserError(where + ": " + std::to_string(cells.size()) + " cells where the header has " +
                      std::to_string(col.size()) + " columns");
    if (col.empty()) {
      for (size_t k = 0; k < cells.size(); ++k)
        if (!col.emplace(cells[k], k).second)
          throw UserError(where + ": the header names the column " + shown(cells[k]) + " twice");
      if (!col.count("workload") || !col.count("iteration_seconds"))
        throw UserError(where + ": the header needs the columns workload and iteration_seconds");
      continue;
    }
    auto cell = [&](const char* name) -> std::string {
      auto it = col.find(name);
      return it == col.end() || it->second >= cells.size() ? std::string() : cells[it->second];
    };
    auto optional_number = [&](const char* name) {
      std::string c = cell(name);
      return c.empty() ? -1.0 : csv_number(c, name, where);
    };
    const std::string name = cell("workload");
    if (name.empty()) throw UserError(where + ": no workload name");
    RankTime r;
    const std::string rank = cell("rank");
    r.rank = rank.empty() || rank == "-1" ? -1 : rank_of(csv_number(rank, "rank", where), rank, where);
    r.seconds = csv_number(cell("iteration_seconds"), "iteration_seconds", where);
    r.lo = optional_number("lo");
    r.hi = optional_number("hi");
    r.exposed_comm_seconds = optional_number("exposed_comm_seconds");
    check_time(r, where);
    auto [it, fresh] = index.emplace(name, out.size());
    if (fresh) {
      Timing t;
      t.source = path;
      t.format = "csv";
      t.name = name;
      out.push_back(std::move(t));
      has_total.push_back(false);
    }
    Timing& t = out[it->second];
    if (t.simulator.empty()) t.simulator = cell("simulator");
    if (r.rank >= 0) {
      for (const RankTime& seen : t.ranks)
        if (seen.rank == r.rank)
          throw UserError(where + ": a second row for rank " + shown(rank) + " of " + shown(name));
      t.ranks.push_back(r);
    } else {
      if (has_total[it->second]) throw UserError(where + ": a second total for workload " + shown(name));
      has_total[it->second] = true;
      t.total = r;
    }
  }
  if (col.empty()) throw UserError(path + ": empty CSV (a header line is required)");
  if (out.empty()) throw UserError(path + ": no workloads");
  for (size_t k = 0; k < out.size(); ++k)
    if (!has_total[k]) out[k].total = total_of_ranks(out[k].ranks);
  return out;
}

// Consumes `word` at `at`.
bool eat(std::string_view line, size_t& at, std::string_view word) {
  if (line.substr(at, word.size()) != word) return false;
  at += word.size();
  return true;
}

// Consumes the digits at `at`; empty when there are none.
std::string digits(std::string_view line, size_t& at) {
  size_t end = at;
  while (end < line.size() && std::isdigit(static_cast<unsigned char>(line[end]))) ++end;
  std::string d(line.substr(at, end - at));
  at = end;
  return d;
}

struct FinishedLine {
  std::string rank, cycles, exposed;  // digits; exposed empty when the line has none
  std::string bad;                    // why a finished rank's line is not one ASTRA-sim writes; empty when fine
};

// "sys[N] finished, C cycles" with ", exposed communication M cycles" optionally after it, anywhere in the line.
// Parsed by hand: std::regex recurses per character and a long line of digits would overflow the stack.
std::optional<FinishedLine> finished_line(std::string_view line) {
  auto quoted = [&](size_t at) { return std::string(line.substr(at, std::min<size_t>(32, line.size() - at))); };
  for (size_t from = line.find("sys["); from != std::string_view::npos; from = line.find("sys[", from + 1)) {
    size_t at = from + 4;
    FinishedLine f;
    f.rank = digits(line, at);
    if (f.rank.empty()) {  // "sys[-1] finished, ...": a finished rank, but no rank ASTRA-sim numbers
      const size_t close = line.find(']', at);
      if (close == std::string_view::npos || close - at > 32 || line.substr(close, 12) != "] finished, ") continue;
      const std::string rank(line.substr(at, close - at));
      f.bad = "sys[" + rank + "] finished: '" + rank + "' is not a rank (a whole number from 0)";
      return f;
    }
    if (!eat(line, at, "] finished, ")) continue;
    const size_t count = at;
    f.cycles = digits(line, at);
    if (f.cycles.empty() || !eat(line, at, " cycles")) {  // a finished rank without a count ASTRA-sim would write
      f.bad = "sys[" + f.rank + "] finished, but '" + quoted(count) + "' is not a whole number of cycles ('C cycles')";
      return f;
    }
    if (eat(line, at, ", exposed communication ")) {
      const size_t exposed = at;
      f.exposed = digits(line, at);
      if (f.exposed.empty() || !eat(line, at, " cycles"))
        f.bad = "sys[" + f.rank + "] finished, but its exposed communication '" + quoted(exposed) +
                "' is not a whole number of cycles ('M cycles')";
    }
    return f;
  }
  return std::nullopt;
}

// ASTRA-sim's workload layer reports each rank once it is done: "sys[N] finished, C cycles" (ASTRA-sim 2.0 adds
// ", exposed communication M cycles."), behind its logger's prefix. Its analytical backends count 1 cycle = 1 ns.
std::vector<Timing> astra_sim_log(const std::string& text, const std::string& path) {
  Timing t;
  t.source = path;
  t.format = "astra-sim";
  t.simulator = "astra-sim";
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::optional<FinishedLine> f = finished_line(line);
    if (!f) continue;
    RankTime r;
    const std::string where = path + ":" + std::to_string(line_no);
    if (!f->bad.empty()) throw UserError(where + ": " + f->bad);
    r.rank = rank_of(std::strtod(f->rank.c_str(), nullptr), f->rank, where);
    r.seconds = std::strtod(f->cycles.c_str(), nullptr) * 1e-9;
    if (!f->exposed.empty()) r.exposed_comm_seconds = std::strtod(f->exposed.c_str(), nullptr) * 1e-9;
    check_time(r, where);
    for (const RankTime& seen : t.ranks)
      if (seen.rank == r.rank) throw UserError(where + ": sys[" + f->rank + "] finishes a second time");
    t.ranks.push_back(r);
  }
  if (t.ranks.empty())
    throw UserError(path + ": neither a prediction JSON, a CSV nor an ASTRA-sim log (no 'sys[N] finished' line)");
  std::sort(t.ranks.begin(), t.ranks.end(), [](const RankTime& a, const RankTime& b) { return a.rank < b.rank; });
  t.total = total_of_ranks(t.ranks);
  return {t};
}

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool looks_like_csv(const std::string& path, const std::string& text) {
  if (ends_with(path, ".csv")) return true;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!trim(line).empty()) return trim(line).rfind("workload", 0) == 0;
  return false;
}

}  // namespace

namespace detail {

std::vector<Timing> predictions_from_text(const std::string& text, const std::string& path) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    const json j = detail::parse_json(text, path);
    if (j.contains("reprise_replay")) throw UserError(path + ": a replay's measurement, not a prediction");
    const std::string format = string_or(j, "format", "");
    if (format == kPredictionFormat) return {reprise_prediction(j, path)};
    if (format == kExternalFormat) return external_prediction(j, path);
    throw UserError(path + ": unknown prediction format '" + format + "' (expected " + kPredictionFormat + " or " +
                    kExternalFormat + ")");
  }
  if (looks_like_csv(path, text)) return csv_prediction(text, path);
  return astra_sim_log(text, path);
}

Timing measurement_from_text(const std::string& text, const std::string& path) {
  const json j = detail::parse_json(text, path);
  if (!j.is_object() || !j.contains("reprise_replay"))
    throw UserError(path + ": not a reprise replay result (no reprise_replay key)");
  Timing t;
  t.source = path;
  t.format = "reprise-replay";
  const bool distributed = j.contains("median_iteration_seconds_max_over_ranks");
  t.total.seconds =
      required_number(j, distributed ? "median_iteration_seconds_max_over_ranks" : "median_iteration_seconds", path);
  check_time(t.total, path);
  t.ranks = rank_list(j, "median_iteration_seconds", path);
  const char* samples_key =
      j.contains("iteration_seconds_max_over_ranks") ? "iteration_seconds_max_over_ranks" : "iteration_seconds";
  if (const json* samples = array_at(j, samples_key, path); samples && !samples->empty()) {
    std::vector<double> v;
    for (const json& x : *samples) {
      if (!x.is_number()) throw UserError(path + ": " + samples_key + " holds a non-number");
      v.push_back(x.get<double>());
    }
    const double mid = median(v);
    if (mid > 0) t.spread = (*std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end())) / mid;
  }
  if (const json* per_op = array_at(j, "per_op", path)) {
    for (size_t k = 0; k < per_op->size(); ++k) {
      const json& e = (*per_op)[k];
      const std::string at = path + ": per_op[" + std::to_string(k) + "]";
      if (!e.is_object() || !e.contains("op") || !e["op"].is_string()) throw UserError(at + ": no op name");
      t.families[family_name(family_of_replay_op(e["op"].get<std::string>()))] += required_time(e, "seconds", at);
    }
  }
  return t;
}

}  // namespace detail

std::vector<Timing> read_predictions(const std::string& path) {
  return detail::predictions_from_text(detail::read_input(path), path);
}

Timing read_measurement(const std::string& path) {
  return detail::measurement_from_text(detail::read_input(path), path);
}

}  // namespace reprise::predict
