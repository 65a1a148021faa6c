// A validation for scripts (JSON), for people (a plain table, an HTML page) and for papers (a log-log scatter).
// The text table and the HTML page are built from the same rows.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "reprise/predict/validate.h"
#include "reprise/trace/summary.h"
#include "reprise/trace/write.h"

namespace reprise::predict {
namespace {

using json = nlohmann::ordered_json;
using Rows = std::vector<std::vector<std::string>>;

std::string percent(double fraction, bool signed_) {
  if (!std::isfinite(fraction)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, signed_ ? "%+.1f%%" : "%.1f%%", 100 * fraction);
  return buf;
}

std::string seconds_or_dash(double s) { return s > 0 ? human_seconds(s) : "-"; }

const char* interval_word(int in_interval) { return in_interval < 0 ? "-" : in_interval ? "yes" : "no"; }

Rows workload_rows(const Validation& v) {
  Rows rows = {{"workload", "simulator", "predicted", "measured", "error", "in interval"}};
  for (const WorkloadCheck& c : v.workloads)
    rows.push_back({c.label, c.predicted.simulator.empty() ? "-" : c.predicted.simulator,
                    seconds_or_dash(c.total.predicted), seconds_or_dash(c.total.measured), percent(c.total.error, true),
                    interval_word(c.total.in_interval)});
  return rows;
}

// Per-family rows of every workload that has any; just the header when none has.
Rows family_rows(const Validation& v) {
  Rows rows = {{"workload", "family", "predicted", "measured", "error"}};
  for (const WorkloadCheck& c : v.workloads)
    for (const auto& [family, e] : c.families)
      rows.push_back(
          {c.label, family, seconds_or_dash(e.predicted), seconds_or_dash(e.measured), percent(e.error, true)});
  return rows;
}

// Per-rank rows (the HTML page's; a terminal table of every rank would bury the summary).
Rows rank_rows(const Validation& v) {
  Rows rows = {{"workload", "rank", "predicted", "measured", "error", "in interval"}};
  for (const WorkloadCheck& c : v.workloads)
    for (const auto& [rank, e] : c.ranks)
      rows.push_back({c.label, std::to_string(rank), seconds_or_dash(e.predicted), seconds_or_dash(e.measured),
                      percent(e.error, true), interval_word(e.in_interval)});
  return rows;
}

std::string yes_no(const std::optional<bool>& b) { return !b ? "-" : *b ? "yes" : "no"; }

std::vector<std::pair<std::string, std::string>> summary_rows(const Validation& v) {
  const Summary& s = v.summary;
  char ratio[32], tau[32];
  std::snprintf(ratio, sizeof ratio, "%.3f", s.geomean_ratio);
  std::snprintf(tau, sizeof tau, "%.3f", s.kendall_tau);
  std::string fastest = "-";
  if (s.fastest_match)  // settled by two workloads or more
    fastest = "predicted " + s.fastest_predicted + ", measured " + s.fastest_measured +
              " (same: " + yes_no(s.fastest_match) + "; within 5%: " + yes_no(s.fastest_within_5pct) + ")";
  return {
      {"workloads", std::to_string(v.workloads.size())},
      {"gmape", percent(s.gmape, false)},
      {"mape", percent(s.mape, false)},
      {"max error", percent(s.max_abs_error, false) +
                        (s.max_abs_error_workload.empty() ? "" : " (" + s.max_abs_error_workload + ")")},
      {"geomean predicted/measured", std::isfinite(s.geomean_ratio) ? ratio : "-"},
      {"kendall tau-b", std::isfinite(s.kendall_tau) ? tau : "-"},
      {"fastest", fastest},
      {"in interval", s.with_interval ? std::to_string(s.in_interval) + " of " + std::to_string(s.with_interval) : "-"},
      {"measured spread (mean)", percent(s.mean_spread, false)},
  };
}

// The first `names` columns left-aligned, the numbers after them right-aligned.
void print_rows(std::FILE* out, const Rows& rows, size_t names) {
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t k = 0; k < r.size(); ++k) width[k] = std::max(width[k], r[k].size());
  for (const auto& r : rows) {
    std::string line;
    for (size_t k = 0; k < r.size(); ++k) {
      const std::string pad(width[k] - r[k].size(), ' ');
      line += (k ? "  " : "") + (k < names ? r[k] + pad : pad + r[k]);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    std::fprintf(out, "%s\n", line.c_str());
  }
}

json error_json(const Error& e) {
  json j = {{"predicted_seconds", e.predicted}, {"measured_seconds", e.measured}, {"error", e.error}};
  j["in_interval"] = e.in_interval < 0 ? json(nullptr) : json(e.in_interval == 1);
  return j;
}

json timing_json(const Timing& t) {
  json j = {{"source", t.source}, {"format", t.format}, {"name", t.name}};
  if (!t.simulator.empty()) j["simulator"] = t.simulator;
  j["iteration_seconds"] = t.total.seconds;
  if (t.total.lo >= 0) j["interval"] = {{"lo", t.total.lo}, {"hi", t.total.hi}};
  if (t.total.exposed_comm_seconds >= 0) j["exposed_comm_seconds"] = t.total.exposed_comm_seconds;
  if (t.spread >= 0) j["spread"] = t.spread;
  if (t.coverage >= 0) j["coverage"] = t.coverage;
  return j;
}

std::string tick_label(double s) {
  const char* unit = "s";
  if (s < 1e-6)
    s *= 1e9, unit = "ns";
  else if (s < 1e-3)
    s *= 1e6, unit = "us";
  else if (s < 1)
    s *= 1e3, unit = "ms";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g %s", s, unit);
  return buf;
}

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}

constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"};
constexpr double kHeight = 520, kLeft = 90, kRight = 610, kTop = 40, kBottom = 460;  // the plot area inside

bool plottable(const WorkloadCheck& c) { return c.total.predicted > 0 && c.total.measured > 0; }

// Both axes log-scale over the same whole decades, wide enough for every time plotted.
struct Plot {
  double lo_decade = -3, hi_decade = 0;
  bool empty = true;
  double lo() const { return std::pow(10.0, lo_decade); }
  double hi() const { return std::pow(10.0, hi_decade); }
  double at(double s, double from, double to) const {
    return from + (std::log10(s) - lo_decade) / (hi_decade - lo_decade) * (to - from);
  }
  std::string x(double s) const { return num(at(s, kLeft, kRight)); }
  std::string y(double s) const { return num(at(s, kBottom, kTop)); }
};

Plot plot_of(const Validation& v) {
  double lo = INFINITY, hi = 0;
  for (const WorkloadCheck& c : v.workloads)
    if (plottable(c))
      for (double s : {c.total.predicted, c.total.measured}) lo = std::min(lo, s), hi = std::max(hi, s);
  Plot p;
  if (hi <= 0) return p;
  p.empty = false;
  p.lo_decade = std::floor(std::log10(lo));
  p.hi_decade = std::max(std::ceil(std::log10(hi)), p.lo_decade + 1);
  return p;
}

// The frame, and grid lines with labels at each decade, and at 2x and 5x when few decades leave room for them.
std::string svg_grid(const Plot& p) {
  const std::string frame = "x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(kRight - kLeft) +
                            "\" height=\"" + num(kBottom - kTop) + "\"";
  std::string svg = "<defs><clipPath id=\"plot\"><rect " + frame + "/></clipPath></defs>\n<rect " + frame +
                    " fill=\"white\" stroke=\"black\"/>\n";
  const bool minor = p.hi_decade - p.lo_decade <= 2;
  for (double d = p.lo_decade; d <= p.hi_decade; ++d)
    for (double m : {1.0, 2.0, 5.0}) {
      const double t = m * std::pow(10.0, d);
      if (t > p.hi() * 1.0001 || (m != 1 && !minor)) continue;
      const std::string x = p.x(t), y = p.y(t), label = html_escape(tick_label(t));
      svg += "<line x1=\"" + x + "\" y1=\"" + num(kTop) + "\" x2=\"" + x + "\" y2=\"" + num(kBottom) +
             "\" stroke=\"#ddd\"/><line x1=\"" + num(kLeft) + "\" y1=\"" + y + "\" x2=\"" + num(kRight) + "\" y2=\"" +
             y + "\" stroke=\"#ddd\"/>\n";
      svg += "<text x=\"" + x + "\" y=\"" + num(kBottom + 16) + "\" text-anchor=\"middle\">" + label + "</text>";
      svg += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + y + "\" text-anchor=\"end\" dy=\"4\">" + label + "</text>\n";
    }
  return svg;
}

// y = x dashed, and the band between 0.9x and 1.1x (straight lines on log-log axes), clipped to the frame.
std::string svg_band(const Plot& p) {
  const double a = p.lo(), b = p.hi();
  return "<g clip-path=\"url(#plot)\">\n<polygon fill=\"#2ca02c\" fill-opacity=\"0.15\" points=\"" + p.x(a) + "," +
         p.y(1.1 * a) + " " + p.x(b) + "," + p.y(1.1 * b) + " " + p.x(b) + "," + p.y(0.9 * b) + " " + p.x(a) + "," +
         p.y(0.9 * a) + "\"><title>within 10%</title></polygon>\n<line x1=\"" + p.x(a) + "\" y1=\"" + p.y(a) +
         "\" x2=\"" + p.x(b) + "\" y2=\"" + p.y(b) + "\" stroke=\"#555\" stroke-dasharray=\"4 3\"/>\n</g>\n";
}

// One labelled point per workload (measured across, predicted up), a colour per simulator with a legend when
// there are several.
std::string svg_points(const Plot& p, const Validation& v) {
  std::vector<std::string> simulators;
  for (const WorkloadCheck& c : v.workloads)
    if (std::find(simulators.begin(), simulators.end(), c.predicted.simulator) == simulators.end())
      simulators.push_back(c.predicted.simulator);
  auto colour = [&](const std::string& simulator) {
    const auto k = std::find(simulators.begin(), simulators.end(), simulator) - simulators.begin();
    return kPalette[static_cast<size_t>(k) % std::size(kPalette)];
  };
  std::string svg;
  for (const WorkloadCheck& c : v.workloads) {
    if (!plottable(c)) continue;
    const std::string x = p.x(c.total.measured), y = p.y(c.total.predicted), label = html_escape(c.label);
    svg += "<circle cx=\"" + x + "\" cy=\"" + y + "\" r=\"4\" fill=\"" + colour(c.predicted.simulator) + "\"><title>" +
           label + ": predicted " + html_escape(human_seconds(c.total.predicted)) + ", measured " +
           html_escape(human_seconds(c.total.measured)) + "</title></circle>";
    svg += "<text x=\"" + x + "\" y=\"" + y + "\" dx=\"6\" dy=\"-6\">" + label + "</text>\n";
  }
  if (simulators.size() > 1)
    for (size_t k = 0; k < simulators.size(); ++k) {
      const std::string y = num(kTop + 14 + 16 * static_cast<double>(k));
      svg += "<circle cx=\"" + num(kLeft + 12) + "\" cy=\"" + y + "\" r=\"4\" fill=\"" + colour(simulators[k]) +
             "\"/><text x=\"" + num(kLeft + 22) + "\" y=\"" + y + "\" dy=\"4\">" +
             html_escape(simulators[k].empty() ? "(unnamed)" : simulators[k]) + "</text>\n";
    }
  return svg;
}

}  // namespace

std::string validation_json(const Validation& v) {
  json j = {{"format", "reprise-validation/1"}};
  json workloads = json::array();
  for (const WorkloadCheck& c : v.workloads) {
    json w = {{"label", c.label}, {"predicted", timing_json(c.predicted)}, {"measured", timing_json(c.measured)}};
    w["error"] = c.total.error;
    w["in_interval"] = error_json(c.total)["in_interval"];
    json ranks = json::array();
    for (const auto& [rank, e] : c.ranks) {
      json r = {{"rank", rank}};
      r.update(error_json(e));
      ranks.push_back(r);
    }
    w["ranks"] = ranks;
    json families = json::array();
    for (const auto& [family, e] : c.families) {
      json f = {{"family", family}};
      f.update(error_json(e));
      f.erase("in_interval");
      families.push_back(f);
    }
    w["families"] = families;
    w["notes"] = c.notes;
    workloads.push_back(w);
  }
  j["workloads"] = workloads;
  const Summary& s = v.summary;
  auto optional_bool = [](const std::optional<bool>& b) { return b ? json(*b) : json(nullptr); };
  j["summary"] = {{"workloads", v.workloads.size()},
                  {"gmape", s.gmape},
                  {"geomean_ratio", s.geomean_ratio},
                  {"mape", s.mape},
                  {"max_abs_error", s.max_abs_error},
                  {"max_abs_error_workload", s.max_abs_error_workload},
                  {"mean_spread", s.mean_spread},
                  {"kendall_tau_b", s.kendall_tau},
                  {"fastest_predicted", s.fastest_predicted},
                  {"fastest_measured", s.fastest_measured},
                  {"fastest_match", optional_bool(s.fastest_match)},
                  {"fastest_within_5pct", optional_bool(s.fastest_within_5pct)},
                  {"in_interval", s.in_interval},
                  {"with_interval", s.with_interval}};
  // Names come from outside files: bytes that are not UTF-8 are replaced rather than thrown on.
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

void print_validation(std::FILE* out, const Validation& v) {
  print_rows(out, workload_rows(v), 2);
  for (const WorkloadCheck& c : v.workloads)
    for (const std::string& note : c.notes) std::fprintf(out, "  note: %s: %s\n", c.label.c_str(), note.c_str());
  const Rows families = family_rows(v);
  if (families.size() > 1) {
    std::fprintf(out, "\nper op family, rank 0, seconds per iteration:\n");
    print_rows(out, families, 2);
  }
  std::fprintf(out, "\n");
  Rows summary;
  for (const auto& [name, value] : summary_rows(v)) summary.push_back({name, value});
  print_rows(out, summary, 2);
}

std::string scatter_svg(const Validation& v) {
  const Plot plot = plot_of(v);
  std::string svg =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"520\" viewBox=\"0 0 640 520\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<title>Predicted vs measured iteration time</title>\n";
  svg += svg_grid(plot) + svg_band(plot) + svg_points(plot, v);
  if (plot.empty)
    svg += "<text x=\"" + num((kLeft + kRight) / 2) + "\" y=\"" + num((kTop + kBottom) / 2) +
           "\" text-anchor=\"middle\">no workload with both times to plot</text>\n";
  svg += "<text x=\"" + num((kLeft + kRight) / 2) + "\" y=\"" + num(kHeight - 20) +
         "\" text-anchor=\"middle\">measured iteration time</text>\n";
  svg += "<text transform=\"translate(20," + num((kTop + kBottom) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">predicted iteration time</text>\n";
  svg += "<text x=\"" + num(kRight) + "\" y=\"" + num(kTop - 12) +
         "\" text-anchor=\"end\">dashed: predicted = measured; band: within 10%</text>\n</svg>\n";
  return svg;
}

std::string validation_html(const Validation& v) {
  auto table = [](const Rows& rows) {
    std::string t = "<table>\n<tr>";
    for (const std::string& h : rows[0]) t += "<th>" + html_escape(h) + "</th>";
    t += "</tr>\n";
    for (size_t r = 1; r < rows.size(); ++r) {
      t += "<tr>";
      for (size_t k = 0; k < rows[r].size(); ++k)
        t += (k ? "<td class=\"n\">" : "<td>") + html_escape(rows[r][k]) + "</td>";
      t += "</tr>\n";
    }
    return t + "</table>\n";
  };
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Reprise validation</title>\n"
      "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}"
      "th,td{border:1px solid #ccc;padding:3px 8px}th{background:#f3f3f3}td.n{text-align:right}</style>\n"
      "</head>\n<body>\n<h1>Reprise validation: predicted vs measured iteration time</h1>\n<h2>Summary</h2>\n";
  Rows summary = {{"figure", "value"}};
  for (const auto& [name, value] : summary_rows(v)) summary.push_back({name, value});
  h += table(summary);
  h += "<h2>Workloads</h2>\n" + table(workload_rows(v));
  const Rows families = family_rows(v);
  if (families.size() > 1) h += "<h2>Per op family (rank 0, seconds per iteration)</h2>\n" + table(families);
  const Rows ranks = rank_rows(v);
  if (ranks.size() > 1) h += "<h2>Per rank</h2>\n" + table(ranks);
  h += "<h2>Predicted against measured</h2>\n" + scatter_svg(v);
  h += "<p>Definitions of every figure: docs/validate.md.</p>\n</body>\n</html>\n";
  return h;
}

}  // namespace reprise::predict
