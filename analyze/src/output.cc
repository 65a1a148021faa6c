// What analyze writes: JSON (reprise-analysis/1), the table, the HTML report and the Perfetto overlay.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "detector.h"
#include "reprise/analyze/analyze.h"
#include "reprise/trace/write.h"
#include "timeline.h"

namespace reprise::analyze {
namespace {

using detail::time_text;

nlohmann::json finding_json(const Finding& f) {
  nlohmann::json j{{"detector", f.detector},   {"ranks", f.ranks},
                   {"window", f.window},       {"begin_us", f.begin_us},
                   {"end_us", f.end_us},       {"window_us", f.window_us},
                   {"saving_us", f.saving_us}, {"score", f.score},
                   {"evidence", f.evidence},   {"ops", f.ops},
                   {"kernels", f.kernels},     {"instances", nlohmann::json::array()}};
  for (const Instance& i : f.instances)
    j["instances"].push_back({{"begin_us", i.begin_us}, {"end_us", i.end_us}, {"what", i.what}});
  if (!f.sizes.empty()) j["sizes"] = f.sizes;
  if (f.observers_us > 0) j["observers_us"] = f.observers_us;
  return j;
}

const DetectorInfo& info_of(const std::string& id) {
  static const DetectorInfo none;
  const detail::Detector* d = detail::find_detector(id);
  return d ? d->info : none;
}

std::string pct(double part, double whole) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", whole > 0 ? 100 * part / whole : 0);
  return b;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// A window's findings, ranked by their summed saving.
struct WindowGroup {
  int rank = 0;
  std::string window;
  double begin = 0, end = 0, saving = 0;
  std::vector<const Finding*> findings;
  const Window* window_of = nullptr;  // its step or segment, with the classifier's view when one ran
};

std::vector<WindowGroup> worst_windows(const Analysis& a) {
  std::map<std::pair<int, std::string>, WindowGroup> by;
  for (const Finding& f : a.findings) {
    WindowGroup& g = by[{f.ranks.empty() ? 0 : f.ranks.front(), f.window}];
    g.rank = f.ranks.empty() ? 0 : f.ranks.front();
    g.window = f.window;
    g.saving = std::max(g.saving, f.saving_us);  // findings may overlap: the largest, not their sum
    g.findings.push_back(&f);
  }
  for (const Window& w : a.windows) {
    auto it = by.find({w.rank, w.name});
    if (it != by.end() && (w.kind == WindowKind::Step || w.kind == WindowKind::Segment)) {
      it->second.begin = w.begin_us;
      it->second.end = w.end_us;
      it->second.window_of = &w;
    }
  }
  std::vector<WindowGroup> out;
  for (auto& [k, g] : by) out.push_back(std::move(g));
  std::stable_sort(out.begin(), out.end(),
                   [](const WindowGroup& x, const WindowGroup& y) { return x.saving > y.saving; });
  return out;
}

// Where the window classifier and the rules agree, and the windows it flags that no rule reported.
void print_classifier(std::FILE* out, const Analysis& a) {
  if (a.learned_classes.empty()) return;
  std::set<std::tuple<int, std::string, std::string>> found;
  for (const Finding& f : a.findings) found.insert({f.ranks.empty() ? 0 : f.ranks.front(), f.window, f.detector});
  size_t agree = 0, of = 0;
  std::vector<std::string> only;
  for (const Window& w : a.windows)
    for (size_t c = 0; c < w.learned.size() && c < a.learned_classes.size(); ++c) {
      const bool rule = found.count({w.rank, w.name, a.learned_classes[c]}) > 0, learned = w.learned[c] >= 0.5;
      of += rule;
      agree += rule && learned;
      if (learned && !rule) {
        char p[16];
        std::snprintf(p, sizeof p, "%.2f", w.learned[c]);
        only.push_back(a.learned_classes[c] + " (rank " + std::to_string(w.rank) + ", " + w.name + ", p " + p + ")");
      }
    }
  if (std::none_of(a.windows.begin(), a.windows.end(), [](const Window& w) { return !w.learned.empty(); })) {
    std::fprintf(out, "\nwindow classifier: no GPU ProfilerStep to judge (it learned from GPU steps)\n");
    return;
  }
  std::fprintf(out, "\nwindow classifier: agrees with %zu of the %zu findings of its classes", agree, of);
  if (only.empty()) {
    std::fprintf(out, "; flags nothing the rules did not\n");
    return;
  }
  std::fprintf(out, "; also flags %zu window(s) no rule reported:\n", only.size());
  for (size_t i = 0; i < only.size() && i < 10; ++i) std::fprintf(out, "  %s\n", only[i].c_str());
  if (only.size() > 10) std::fprintf(out, "  ... %zu more in the JSON (windows' \"learned\")\n", only.size() - 10);
}

// Whether a measured saving stands out of the replays' noise (MeasuredFix::resolved), for the table and the report.
const char* verdict_of(const MeasuredFix& m) {
  return m.resolved() ? "resolved" : m.too_few_pairs() ? "too few pairs" : "within the noise";
}

// --measure in the HTML report: each class's estimate beside what replay measured, the median's interval over the
// pairs and whether it resolves a saving.
std::string measured_html(const Analysis& a) {
  if (a.measured.empty()) return "";
  std::string h =
      "<h2>Measured savings per step</h2><p class=small>Each fix, built by the generators or by the replay, replayed "
      "against the original in interleaved pairs; each side the median of its steps. The interval is the sign "
      "test's for the median over the pairs.</p><table><tr><th>class</th><th>rank</th><th class=num>estimated</th>"
      "<th class=num>measured</th><th class=num>interval</th><th class=num>pairs</th><th class=num>original</th>"
      "<th class=num>fixed</th><th>verdict</th><th>note</th></tr>\n";
  for (const MeasuredFix& m : a.measured) {
    const std::string rank = m.rank < 0 ? "all" : std::to_string(m.rank);
    h += "<tr><td>" + html_escape(m.detector) + "</td><td>" + rank + "</td><td class=num>" + time_text(m.estimated_us) +
         "</td>";
    if (m.pairs == 0) {
      h += "<td class=num>-</td><td></td><td class=num>0</td><td></td><td></td><td>not measured</td><td>" +
           html_escape(m.note) + "</td></tr>\n";
      continue;
    }
    h += "<td class=num><b>" + time_text(m.saving_us) + "</b></td><td class=num>" + time_text(m.interval_lo_us) +
         " to " + time_text(m.interval_hi_us) + " <span class=small>(" + num(100 * m.interval_coverage) +
         "%)</span></td><td class=num>" + std::to_string(m.pairs) + "</td><td class=num>" + time_text(m.original_us) +
         "</td><td class=num>" + time_text(m.fixed_us) + "</td><td>" + verdict_of(m) + "</td><td class=small>" +
         html_escape(m.note) + "</td></tr>\n";
  }
  return h + "</table>\n";
}

// --measure: each class's estimated saving per step beside the one replay measured.
void print_measured(std::FILE* out, const Analysis& a) {
  if (a.measured.empty()) return;
  std::fprintf(out,
               "\nmeasured savings per step (each fix, built by the generators or by the replay, replayed against the "
               "original)\n");
  std::fprintf(out, "%-24s %4s %11s %11s  %-23s %11s %11s\n", "class", "rank", "estimated", "measured", "(range)",
               "original", "fixed");
  for (const MeasuredFix& m : a.measured) {
    const std::string rank = m.rank < 0 ? "all" : std::to_string(m.rank);
    if (m.pairs == 0) {
      std::fprintf(out, "%-24s %4s %11s %11s  %s\n", m.detector.c_str(), rank.c_str(),
                   time_text(m.estimated_us).c_str(), "-", m.note.c_str());
      continue;
    }
    const std::string range = "(" + time_text(m.saving_lo_us) + " to " + time_text(m.saving_hi_us) + ")";
    std::fprintf(out, "%-24s %4s %11s %11s  %-23s %11s %11s\n", m.detector.c_str(), rank.c_str(),
                 time_text(m.estimated_us).c_str(), time_text(m.saving_us).c_str(), range.c_str(),
                 time_text(m.original_us).c_str(), time_text(m.fixed_us).c_str());
  }
  const MeasuredFix* any = nullptr;
  for (const MeasuredFix& m : a.measured)
    if (m.pairs > 0) any = &m;
  if (any)
    std::fprintf(out, "(median of %d interleaved pairs on %s, host time %s; each side the median of its steps)\n",
                 any->pairs, any->device.c_str(), any->host_time.c_str());
  for (const MeasuredFix& m : a.measured)
    if (m.pairs > 0 && !m.note.empty()) std::fprintf(out, "%s: %s\n", m.detector.c_str(), m.note.c_str());
  // A saving is only as good as the pairs agree: say which are within the replays' noise.
  for (const MeasuredFix& m : a.measured) {
    if (m.pairs == 0 || m.resolved()) continue;
    if (m.too_few_pairs())
      std::fprintf(out, "%s: %d pair(s) give no %.0f%% interval of the median: not resolved; give --pairs 5 or more\n",
                   m.detector.c_str(), m.pairs, 100 * kMeasureConfidence);
    else
      std::fprintf(out,
                   "%s: within the replays' noise: the median's %.0f%% interval, %s to %s, holds 0; more --pairs "
                   "narrow it\n",
                   m.detector.c_str(), 100 * m.interval_coverage, time_text(m.interval_lo_us).c_str(),
                   time_text(m.interval_hi_us).c_str());
  }
}

}  // namespace

std::string analysis_json(const Analysis& a, bool with_windows) {
  nlohmann::json j;
  j["format"] = "reprise-analysis/1";
  j["ranks"] = nlohmann::json::array();
  for (const RankInfo& r : a.ranks)
    j["ranks"].push_back({{"rank", r.rank},
                          {"source", r.source},
                          {"device", r.device},
                          {"events", r.events},
                          {"steps", r.steps},
                          {"span_us", r.span_us}});
  j["detectors"] = nlohmann::json::array();
  for (const DetectorInfo& d : detectors())
    j["detectors"].push_back({{"id", d.id},
                              {"title", d.title},
                              {"looks_for", d.looks_for},
                              {"fix", d.fix},
                              {"fixed_variant", d.fixed_variant},
                              {"transform", d.transform}});
  j["findings"] = nlohmann::json::array();
  for (const Finding& f : a.findings) j["findings"].push_back(finding_json(f));
  if (!a.measured.empty()) {
    j["measured"] = nlohmann::json::array();
    for (const MeasuredFix& m : a.measured) {
      nlohmann::json x{{"detector", m.detector},         {"rank", m.rank},
                       {"findings", m.findings},         {"transform", m.transform},
                       {"estimated_us", m.estimated_us}, {"pairs", m.pairs}};
      if (m.pairs > 0) {
        x["device"] = m.device;
        x["host_time"] = m.host_time;
        x["original_us"] = m.original_us;
        x["fixed_us"] = m.fixed_us;
        x["saving_us"] = m.saving_us;
        x["saving_range_us"] = {m.saving_lo_us, m.saving_hi_us};
        x["saving_interval_us"] = {m.interval_lo_us, m.interval_hi_us};
        x["interval_coverage"] = m.interval_coverage;
        x["resolved"] = m.resolved();
      }
      if (!m.note.empty()) x["note"] = m.note;
      j["measured"].push_back(std::move(x));
    }
  }
  if (with_windows) {
    j["feature_names"] = feature_names();
    j["windows"] = nlohmann::json::array();
    for (const Window& w : a.windows) {
      nlohmann::json x{{"rank", w.rank},     {"kind", window_kind_name(w.kind)},
                       {"name", w.name},     {"begin_us", w.begin_us},
                       {"end_us", w.end_us}, {"features", w.features}};
      for (size_t c = 0; c < w.learned.size() && c < a.learned_classes.size(); ++c)
        x["learned"][a.learned_classes[c]] = w.learned[c];
      j["windows"].push_back(std::move(x));
    }
  }
  return j.dump(1) + "\n";
}

void print_analysis(std::FILE* out, const Analysis& a, size_t top) {
  size_t steps = 0;
  for (const RankInfo& r : a.ranks) steps += r.steps;
  std::fprintf(out, "%zu rank(s), %zu step(s), %zu finding(s)\n", a.ranks.size(), steps, a.findings.size());
  if (a.findings.empty()) {
    print_classifier(out, a);
    return;
  }
  std::map<std::string, std::pair<size_t, double>> by_class;
  for (const Finding& f : a.findings) {
    by_class[f.detector].first++;
    by_class[f.detector].second += f.saving_us;
  }
  std::fprintf(out, "\n%-24s %8s %12s  %s\n", "class", "windows", "saving", "fix");
  std::vector<std::pair<double, std::string>> order;
  for (auto& [id, v] : by_class) order.push_back({v.second, id});
  std::sort(order.rbegin(), order.rend());
  for (auto& [saving, id] : order)
    std::fprintf(out, "%-24s %8zu %12s  %s\n", id.c_str(), by_class[id].first, time_text(saving).c_str(),
                 info_of(id).fix.c_str());
  std::fprintf(out, "\n%-10s %7s  %-24s %4s  %-18s %s\n", "saving", "of win", "class", "rank", "window", "evidence");
  for (size_t i = 0; i < a.findings.size() && i < top; ++i) {
    const Finding& f = a.findings[i];
    std::fprintf(out, "%-10s %7s  %-24s %4d  %-18s %s\n", time_text(f.saving_us).c_str(),
                 pct(f.saving_us, f.window_us).c_str(), f.detector.c_str(), f.ranks.empty() ? 0 : f.ranks.front(),
                 f.window.c_str(), f.evidence.c_str());
  }
  if (a.findings.size() > top) std::fprintf(out, "... %zu more (--top, or --json for all)\n", a.findings.size() - top);
  print_measured(out, a);
  print_classifier(out, a);
}

void print_detectors(std::FILE* out) {
  for (const DetectorInfo& d : detectors()) {
    std::fprintf(out, "%-24s %s\n%-24s   looks for: %s\n%-24s   fix: %s\n%-24s   fixed variant: %s\n", d.id.c_str(),
                 d.title.c_str(), "", d.looks_for.c_str(), "", d.fix.c_str(), "", d.fixed_variant.c_str());
    if (!d.transform.empty()) std::fprintf(out, "%-24s   --measure builds it: %s\n", "", d.transform.c_str());
  }
}

std::string overlay_trace(const Analysis& a, const TraceSet& set) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  // Each rank's events under pids of their own (rank R's process P becomes R * 1e6 + the order P was met in).
  int64_t next_pid = 0;
  for (size_t r = 0; r < set.ranks.size(); ++r) {
    const Trace& t = set.ranks[r];
    if (!t.kineto) continue;
    const int rank = t.rank >= 0 ? static_cast<int>(t.rank) : static_cast<int>(r);
    std::map<int64_t, int64_t> pids;
    for (const KinetoEvent& e : t.kineto->events) {
      auto [it, fresh] = pids.emplace(e.pid, next_pid);
      if (fresh) {
        ++next_pid;
        sep();
        append_timeline_name(out, "process_name", it->second, 0,
                             "rank " + std::to_string(rank) + ": " +
                                 (e.pid <= kNamedId ? std::string(t.str(static_cast<StrId>(kNamedId - e.pid)))
                                                    : (is_gpu_work(e.cat) ? "GPU " : "host ") + std::to_string(e.pid)));
      }
      sep();
      append_timeline_event(out, kineto_cat_name(e.cat), t.str(e.name), it->second,
                            e.tid <= kNamedId ? 0 : (is_gpu_work(e.cat) && e.stream >= 0 ? e.stream : e.tid), e.ts,
                            e.dur);
      out += "}";
    }
  }
  // The findings: one process per rank, one track per class; the instances on a track beside it.
  std::map<int, int64_t> finding_pid;
  std::map<std::string, int64_t> track;
  for (const DetectorInfo& d : detectors()) track.emplace(d.id, static_cast<int64_t>(track.size()) * 2 + 1);
  for (const Finding& f : a.findings) {
    const int rank = f.ranks.empty() ? 0 : f.ranks.front();
    auto [it, fresh] = finding_pid.emplace(rank, next_pid);
    if (fresh) {
      ++next_pid;
      sep();
      append_timeline_name(out, "process_name", it->second, 0, "Reprise findings, rank " + std::to_string(rank));
      for (auto& [id, tid] : track)
        for (int k = 0; k < 2; ++k) {
          sep();
          append_timeline_name(out, "thread_name", it->second, tid + k, k ? id + " (instances)" : id);
        }
    }
    sep();
    append_timeline_event(out, "reprise_finding", f.detector, it->second, track[f.detector], f.begin_us,
                          std::max(0.0, f.end_us - f.begin_us));
    out += ", \"args\": {\"window\": ";
    append_json_string(out, f.window);
    out += ", \"saving_us\": ";
    append_json_double(out, f.saving_us);
    out += ", \"evidence\": ";
    append_json_string(out, f.evidence);
    out += ", \"fix\": ";
    append_json_string(out, info_of(f.detector).fix);
    out += "}}";
    for (const Instance& i : f.instances) {
      sep();
      append_timeline_event(out, "reprise_finding", i.what, it->second, track[f.detector] + 1, i.begin_us,
                            std::max(0.0, i.end_us - i.begin_us));
      out += "}";
    }
  }
  out += "\n]}\n";
  return out;
}

std::string analysis_html(const Analysis& a, const TraceSet& set) {
  std::string h =
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>Reprise analysis</title><style>"
      "body{font:14px system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}"
      "table{border-collapse:collapse;margin:.5em 0}td,th{padding:3px 8px;border-bottom:1px solid #ddd;"
      "text-align:left;vertical-align:top}th{background:#f4f4f4}.num{text-align:right;white-space:nowrap}"
      ".win{border:1px solid #ccc;border-radius:6px;padding:.6em 1em;margin:1em 0}.fix{color:#075}"
      ".small{color:#666;font-size:12px}svg{display:block;margin:.4em 0}</style></head><body>\n"
      "<h1>Reprise analysis</h1>\n<p>";
  size_t steps = 0;
  for (const RankInfo& r : a.ranks) steps += r.steps;
  h += std::to_string(a.ranks.size()) + " rank(s), " + std::to_string(steps) + " step(s), " +
       std::to_string(a.findings.size()) +
       " finding(s). Savings are estimates (docs/analyze.md says how each is "
       "made); findings of different classes may overlap.</p>\n<table><tr><th>rank</th><th>trace</th><th>device</th>"
       "<th class=num>events</th><th class=num>steps</th><th class=num>span</th></tr>\n";
  for (const RankInfo& r : a.ranks)
    h += "<tr><td>" + std::to_string(r.rank) + "</td><td>" + html_escape(r.source) + "</td><td>" +
         html_escape(r.device) + "</td><td class=num>" + std::to_string(r.events) + "</td><td class=num>" +
         std::to_string(r.steps) + "</td><td class=num>" + time_text(r.span_us) + "</td></tr>\n";
  h += "</table>\n";

  // By class.
  std::map<std::string, std::pair<size_t, double>> by_class;
  for (const Finding& f : a.findings) {
    by_class[f.detector].first++;
    by_class[f.detector].second += f.saving_us;
  }
  h += "<h2>By class</h2><table><tr><th>class</th><th class=num>windows</th><th class=num>saving</th>"
       "<th>fix</th></tr>\n";
  for (auto& [id, v] : by_class)
    h += "<tr><td title=\"" + html_escape(info_of(id).looks_for) + "\">" + html_escape(info_of(id).title) +
         " <span class=small>(" + id + ")</span></td><td class=num>" + std::to_string(v.first) + "</td><td class=num>" +
         time_text(v.second) + "</td><td class=fix>" + html_escape(info_of(id).fix) + "</td></tr>\n";
  h += "</table>\n";
  h += measured_html(a);
  h += "<h2>Worst windows first</h2>\n";

  // Each window: a strip of its GPU (or host) busy time with the findings' instances under it.
  std::map<int, detail::Timeline> tls;
  for (size_t r = 0; r < set.ranks.size(); ++r) {
    const Trace& t = set.ranks[r];
    if (!t.kineto || t.kineto->events.empty()) continue;
    const int rank = t.rank >= 0 ? static_cast<int>(t.rank) : static_cast<int>(r);
    tls.emplace(rank, detail::build_timeline(t, rank));
  }
  const std::vector<WindowGroup> groups = worst_windows(a);
  const double W = 1100;
  for (size_t gi = 0; gi < groups.size() && gi < 30; ++gi) {
    const WindowGroup& g = groups[gi];
    h += "<div class=win><b>rank " + std::to_string(g.rank) + ", " + html_escape(g.window) + "</b> <span class=small>" +
         time_text(g.end - g.begin) + "; up to " + time_text(g.saving) + " to save</span>\n";
    const double span = std::max(g.end - g.begin, 1e-9);
    auto xf = [&](double ts) { return std::clamp((ts - g.begin) / span, 0.0, 1.0) * W; };
    auto x = [&](double ts) { return num(xf(ts)); };
    const size_t rows = g.findings.size();
    h += "<svg width=\"" + num(W) + "\" height=\"" + std::to_string(22 + 14 * rows) + "\">";
    auto tl = tls.find(g.rank);
    if (tl != tls.end()) {
      h += "<rect x=\"0\" y=\"2\" width=\"" + num(W) + "\" height=\"14\" fill=\"#eee\"/>";
      for (const auto& b : tl->second.busy) {
        if (b.end <= g.begin) continue;
        if (b.begin >= g.end) break;
        h += "<rect x=\"" + x(b.begin) + "\" y=\"2\" width=\"" + num(std::max(0.5, xf(b.end) - xf(b.begin))) +
             "\" height=\"14\" fill=\"#4a7\"><title>busy</title></rect>";
      }
    }
    for (size_t k = 0; k < rows; ++k) {
      const Finding& f = *g.findings[k];
      const std::string y = std::to_string(20 + 14 * k);
      for (const Instance& i : f.instances)
        h += "<rect x=\"" + x(i.begin_us) + "\" y=\"" + y + "\" width=\"" +
             num(std::max(1.0, xf(i.end_us) - xf(i.begin_us))) + "\" height=\"10\" fill=\"#d54\"><title>" +
             html_escape(f.detector + ": " + i.what) + "</title></rect>";
      h += "<text x=\"" + num(W - 4) + "\" y=\"" + std::to_string(29 + 14 * k) +
           "\" text-anchor=\"end\" font-size=\"10\">" + html_escape(f.detector) + "</text>";
    }
    h += "</svg>\n<table><tr><th class=num>saving</th><th>class</th><th>evidence</th><th>ops / kernels</th>"
         "<th>fix</th></tr>\n";
    for (const Finding* f : g.findings) {
      std::string names;
      for (const std::string& n : f->ops) names += html_escape(n) + "<br>";
      for (const std::string& n : f->kernels)
        names += "<span class=small>" + html_escape(n.substr(0, 90)) + "</span><br>";
      h += "<tr><td class=num>" + time_text(f->saving_us) + "<br><span class=small>" + pct(f->saving_us, f->window_us) +
           "</span></td><td>" + html_escape(f->detector) + "</td><td>" + html_escape(f->evidence) + "</td><td>" +
           names + "</td><td class=fix>" + html_escape(info_of(f->detector).fix) + "</td></tr>\n";
    }
    h += "</table>";
    if (g.window_of && !g.window_of->learned.empty()) {
      std::string learned;
      for (size_t c = 0; c < g.window_of->learned.size() && c < a.learned_classes.size(); ++c)
        if (g.window_of->learned[c] >= 0.5)
          learned +=
              (learned.empty() ? "" : ", ") + a.learned_classes[c] + " " + num(100 * g.window_of->learned[c]) + "%";
      h += "<p class=small>window classifier: " + (learned.empty() ? std::string("no class at 50% or more") : learned) +
           "</p>";
    }
    h += "</div>\n";
  }
  if (groups.size() > 30) h += "<p>" + std::to_string(groups.size() - 30) + " more windows in the JSON.</p>\n";
  h += "</body></html>\n";
  return h;
}

}  // namespace reprise::analyze
