// Replay results for scripts (JSON), for Perfetto (Chrome trace) and for people (a short summary).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "reprise/common/stats.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/summary.h"
#include "reprise/trace/write.h"

namespace reprise::replay {
namespace {

using json = nlohmann::ordered_json;

json skips_json(const std::vector<SkipCount>& v) {
  json a = json::array();
  for (const SkipCount& s : v) a.push_back({{"op", s.op}, {"count", s.count}, {"reason", s.reason}});
  return a;
}

json host_time_json(const HostTimeReport& h) {
  return {{"mode", h.mode},
          {"scale", h.scale},
          {"source", h.source},
          {"seconds_per_iteration", h.seconds},
          {"recorded_seconds_per_iteration", h.recorded_seconds},
          {"instrumentation_seconds_per_iteration", h.instrumentation_seconds},
          {"op_floor_seconds_per_iteration", h.op_floor_seconds},
          {"data_loader_seconds_per_iteration", h.data_loader_seconds},
          {"data_loader_recorded_seconds_per_iteration", h.data_loader_recorded_seconds},
          {"timed_ops", h.timed_ops},
          {"untimed_ops", h.untimed_ops},
          {"reason", h.reason}};
}

}  // namespace

std::string result_json(const ReplayResult& r) {
  json j;
  j["reprise_replay"] = 1;
  j["trace"] = r.trace;
  j["rank"] = r.rank;
  if (r.trace_rank >= 0) j["trace_rank"] = r.trace_rank;
  if (r.replicated) j["replicated"] = true;
  j["device"] = r.device;
  j["torch_version"] = r.torch_version;
  j["threads"] = r.threads;
  j["steps"] = r.steps;
  j["ops_selected"] = r.ops_selected;
  j["ops_replayed"] = r.ops_replayed;
  j["coverage"] = r.coverage;
  j["compute"] = {{"selected", r.compute_selected}, {"replayed", r.compute_replayed}};
  j["collectives"] = {{"selected", r.collectives_selected}, {"replayed", r.collectives_replayed}};
  j["p2p"] = {{"selected", r.p2p_selected}, {"replayed", r.p2p_replayed}};
  j["skipped"] = skips_json(r.skipped);
  j["decomposed"] = skips_json(r.decomposed);
  j["failed_ops"] = json::array();
  for (const FailedOp& f : r.failed) j["failed_ops"].push_back({{"node", f.node}, {"op", f.op}, {"reason", f.reason}});
  j["excluded_dataloader_ops"] = r.excluded_dataloader;
  j["device_noops"] = r.device_noops;
  if (r.cuda_graph) j["cuda_graph"] = true;
  if (r.pinned_copies >= 0)
    j["pin_memory"] = {{"pinned_copies_per_iteration", r.pinned_copies},
                       {"pageable_copies_per_iteration", r.pageable_copies}};
  j["truncated"] = r.truncated;
  j["iteration_seconds"] = r.iteration_seconds;
  j["median_iteration_seconds"] = median(r.iteration_seconds);
  if (!r.original_iteration_seconds.empty()) {
    j["original_iteration_seconds"] = r.original_iteration_seconds;
    double orig = median(r.original_iteration_seconds);
    if (orig > 0) j["replay_over_original"] = median(r.iteration_seconds) / orig;
  }
  j["setup_seconds"] = r.setup_seconds;
  j["peak_memory_bytes"] = r.peak_memory_bytes;
  j["input_bytes"] = r.input_bytes;
  if (r.original_peak_memory_bytes >= 0) j["original_peak_memory_bytes"] = r.original_peak_memory_bytes;
  if (!r.per_op.empty()) {
    json a = json::array();
    for (const OpTiming& t : r.per_op) {
      json e = {{"op", t.op}, {"count", t.count}, {"seconds", t.seconds}};
      if (t.original_seconds >= 0) e["original_seconds"] = t.original_seconds;
      a.push_back(e);
    }
    j["per_op"] = a;
  }
  if (!r.op_times.empty()) {
    json ids = json::array(), secs = json::array();
    for (const auto& [id, sec] : r.op_times) ids.push_back(id), secs.push_back(sec);
    j["op_times"] = {{"node_ids", ids}, {"seconds", secs}};
    if (r.op_host_times.size() == r.op_times.size()) j["op_times"]["host_seconds"] = r.op_host_times;
  }
  j["world_size"] = r.world_size;
  j["launcher"] = r.launcher;
  if (!r.comm_backend.empty()) j["comm_backend"] = r.comm_backend;
  if (r.compute_streams > 1)
    j["compute_streams"] = {{"streams", r.compute_streams}, {"cross_stream_waits", r.cross_stream_waits}};
  if (!r.collective_timing.empty()) {
    json a = json::array();
    for (const CollectiveTiming& t : r.collective_timing) {
      a.push_back({{"name", t.name},
                   {"group", t.group},
                   {"group_label", t.group_label},
                   {"group_size", t.group_size},
                   {"dtype", t.dtype},
                   {"bytes", t.bytes},
                   {"calls", t.calls},
                   {"seconds", t.seconds},
                   {"algbw_gbps", t.algbw},
                   {"busbw_gbps", t.busbw}});
      if (t.peer >= 0) a.back()["peer"] = t.peer;
    }
    j["collective_timing"] = a;
  }
  j["time_limit"] = {{"seconds", r.time_limit.seconds}, {"from", r.time_limit.from}};
  j["host_time"] = host_time_json(r.host_time);
  j["warnings"] = r.warnings;
  return j.dump(2) + "\n";
}

std::string merged_result_json(const std::vector<std::string>& rank_jsons) {
  if (rank_jsons.empty()) return "{}\n";
  std::vector<json> docs;
  for (const std::string& s : rank_jsons) docs.push_back(json::parse(s));
  json j = docs[0];
  j["world_size"] = docs.size();
  json ranks = json::array();
  std::vector<double> worst;
  for (const json& d : docs) {
    json e = {{"rank", d["rank"]},
              {"trace", d["trace"]},
              {"ops_selected", d["ops_selected"]},
              {"ops_replayed", d["ops_replayed"]},
              {"coverage", d["coverage"]},
              {"collectives_selected", d["collectives"]["selected"]},
              {"collectives_replayed", d["collectives"]["replayed"]},
              {"p2p_selected", d["p2p"]["selected"]},
              {"p2p_replayed", d["p2p"]["replayed"]},
              {"iteration_seconds", d["iteration_seconds"]},
              {"median_iteration_seconds", d["median_iteration_seconds"]},
              {"peak_memory_bytes", d["peak_memory_bytes"]}};
    if (d.contains("trace_rank")) e["trace_rank"] = d["trace_rank"];
    if (d.contains("original_iteration_seconds")) e["original_iteration_seconds"] = d["original_iteration_seconds"];
    if (d.contains("collective_timing")) e["collective_timing"] = d["collective_timing"];
    if (d.contains("op_times")) e["op_times"] = d["op_times"];
    if (d.contains("host_time")) e["host_time"] = d["host_time"];
    if (!d["skipped"].empty()) e["skipped"] = d["skipped"];
    ranks.push_back(e);
    std::vector<double> it = d["iteration_seconds"].get<std::vector<double>>();
    if (worst.size() < it.size()) worst.resize(it.size(), 0);
    for (size_t k = 0; k < it.size(); ++k) worst[k] = std::max(worst[k], it[k]);
  }
  j["ranks"] = ranks;
  j["iteration_seconds_max_over_ranks"] = worst;
  j["median_iteration_seconds_max_over_ranks"] = median(worst);
  return j.dump(2) + "\n";
}

void write_merged_timeline(const std::vector<std::string>& rank_timelines, const std::string& path) {
  json events = json::array();
  for (const std::string& s : rank_timelines) {
    json d = json::parse(s);
    for (auto& e : d["traceEvents"]) events.push_back(std::move(e));
  }
  json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  write_text_file(path, doc.dump() + "\n");
}

void write_result_json(const ReplayResult& r, const std::string& path) { write_text_file(path, result_json(r)); }

std::string timeline_json(const ReplayResult& r, const Trace& trace) {
  json events = json::array();
  int64_t pid = r.rank >= 0 ? r.rank : 0;
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", pid},
                    {"args", {{"name", "rank " + std::to_string(pid) + " replay (" + r.device + ")"}}}});
  for (const OpSpan& s : r.timeline) {
    const Node& n = trace.nodes[s.node];
    json args = {{"node_id", n.id}};
    if (n.dur_us >= 0) args["original_us"] = n.dur_us;
    std::string name(trace.name(n));
    if (n.collective >= 0)
      name = trace.collectives[n.collective].is_wait ? "wait" : trace.collectives[n.collective].name;
    events.push_back({{"name", name},
                      {"cat", n.kind == NodeKind::Operator ? "op" : "comm"},
                      {"ph", "X"},
                      {"ts", s.start_us},
                      {"dur", s.dur_us},
                      {"pid", pid},
                      {"tid", 0},
                      {"args", args}});
  }
  json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", {{"source", r.trace}}}};
  return doc.dump() + "\n";
}

void write_timeline(const ReplayResult& r, const Trace& trace, const std::string& path) {
  write_text_file(path, timeline_json(r, trace));
}

namespace {

void print_coverage(std::FILE* out, const ReplayResult& r) {
  std::string steps;
  for (const std::string& s : r.steps) steps += (steps.empty() ? "" : ", ") + s;
  std::fprintf(out, "  steps        %s%s\n", steps.c_str(), r.truncated ? " (cut short by the op limit)" : "");
  std::fprintf(out,
               "  ops          %lld selected, %lld replayed (coverage %s); compute %lld/%lld, collectives %lld/%lld\n",
               static_cast<long long>(r.ops_selected), static_cast<long long>(r.ops_replayed),
               human_percent(r.ops_replayed, r.ops_selected).c_str(), static_cast<long long>(r.compute_replayed),
               static_cast<long long>(r.compute_selected), static_cast<long long>(r.collectives_replayed),
               static_cast<long long>(r.collectives_selected));
  size_t shown = 0;
  for (const SkipCount& s : r.skipped) {
    if (shown++ == 12) {
      std::fprintf(out, "               ... %zu more kinds (see the JSON results)\n", r.skipped.size() - 12);
      break;
    }
    std::fprintf(out, "  %s %6lld  %s: %s\n", shown == 1 ? "skipped" : "       ", static_cast<long long>(s.count),
                 s.op.c_str(), s.reason.c_str());
  }
  for (const SkipCount& s : r.decomposed)
    std::fprintf(out, "  via children %3lld  %s (%s)\n", static_cast<long long>(s.count), s.op.c_str(),
                 s.reason.c_str());
  if (r.excluded_dataloader > 0)
    std::fprintf(out, "  excluded     %lld DataLoader op(s)\n", static_cast<long long>(r.excluded_dataloader));
  if (r.device_noops > 0)
    std::fprintf(out, "  not needed   %lld aten::record_stream (no streams on %s)\n",
                 static_cast<long long>(r.device_noops), r.device.c_str());
}

void print_times(std::FILE* out, const ReplayResult& r) {
  if (!r.iteration_seconds.empty()) {
    auto mm = std::minmax_element(r.iteration_seconds.begin(), r.iteration_seconds.end());
    std::fprintf(out, "  iteration    %s median (min %s, max %s) over %zu\n",
                 human_seconds(median(r.iteration_seconds)).c_str(), human_seconds(*mm.first).c_str(),
                 human_seconds(*mm.second).c_str(), r.iteration_seconds.size());
  }
  if (!r.original_iteration_seconds.empty()) {
    double orig = median(r.original_iteration_seconds);
    std::fprintf(out, "  original     %s median; replay/original %.3f\n", human_seconds(orig).c_str(),
                 orig > 0 ? median(r.iteration_seconds) / orig : 0.0);
  }
  std::fprintf(out, "  memory       peak %s (inputs %s)", human_bytes(static_cast<double>(r.peak_memory_bytes)).c_str(),
               human_bytes(static_cast<double>(r.input_bytes)).c_str());
  if (r.original_peak_memory_bytes > 0)
    std::fprintf(out, "; original peak %s (replay/original %.3f)",
                 human_bytes(static_cast<double>(r.original_peak_memory_bytes)).c_str(),
                 static_cast<double>(r.peak_memory_bytes) / static_cast<double>(r.original_peak_memory_bytes));
  std::fprintf(out, "; setup %s\n", human_seconds(r.setup_seconds).c_str());
}

// The DataLoader calls' time (--data-loader): re-spent, or what the trace shows of it, left out.
void print_data_loader(std::FILE* out, const HostTimeReport& h) {
  if (h.data_loader_recorded_seconds <= 0) return;
  if (h.data_loader_seconds > 0)
    std::fprintf(out, "  data loader  %s per iteration re-spent (--data-loader)\n",
                 human_seconds(h.data_loader_seconds).c_str());
  else
    std::fprintf(out,
                 "  data loader  left out: the trace's DataLoader calls took %s per iteration (--data-loader recorded "
                 "re-spends them)\n",
                 human_seconds(h.data_loader_recorded_seconds).c_str());
}

void print_host_time(std::FILE* out, const HostTimeReport& h) {
  const std::string why = h.reason == "given"            ? "--host-time"
                          : h.reason.rfind("--", 0) == 0 ? h.reason  // another option's ("--cuda-graph: ...")
                                                         : "default: " + h.reason;
  if (h.source == "none") {
    std::fprintf(out, "  host time    %s (%s); none re-spent: the trace has no op times\n", h.mode.c_str(),
                 why.c_str());
    return;
  }
  const std::string ops = std::to_string(h.timed_ops) + " of " + std::to_string(h.timed_ops + h.untimed_ops);
  if (h.scale == 0) {
    std::fprintf(out, "  host time    none (%s); the trace shows %s per iteration (%s, %s ops timed)\n", why.c_str(),
                 human_seconds(h.recorded_seconds).c_str(), h.source.c_str(), ops.c_str());
    return;
  }
  char scale[32] = "";
  if (h.mode == "scale") std::snprintf(scale, sizeof scale, " x%g", h.scale);
  std::string less;
  if (h.instrumentation_seconds > 0)
    less = ", less " + human_seconds(h.instrumentation_seconds) + " of the observers' cost";
  std::fprintf(out, "  host time    %s%s (%s): %s per iteration re-spent (%s, %s ops timed%s)\n", h.mode.c_str(), scale,
               why.c_str(), human_seconds(h.seconds).c_str(), h.source.c_str(), ops.c_str(), less.c_str());
  if (h.op_floor_seconds > 0)
    std::fprintf(out, "               each op held to its original's own host time (%s per iteration in all)\n",
                 human_seconds(h.op_floor_seconds).c_str());
}

void print_collectives(std::FILE* out, const ReplayResult& r) {
  if (r.collective_timing.empty()) return;
  std::fprintf(out, "  collectives  over %s, %d rank(s); per iteration:\n", r.comm_backend.c_str(), r.world_size);
  int w = 5;  // wide enough for every group's label, so the columns stay aligned
  for (const CollectiveTiming& t : r.collective_timing) w = std::max(w, static_cast<int>(t.group_label.size()));
  std::fprintf(out, "    %-16s %-*s %5s %10s %6s %10s %9s %9s\n", "name", w, "group", "size", "bytes", "calls", "time",
               "algbw", "busbw");
  for (const CollectiveTiming& t : r.collective_timing)
    std::fprintf(
        out, "    %-16s %-*s %5d %10lld %6lld %10s %7.2f GB/s %5.2f GB/s\n",
        (t.peer < 0 ? t.name : t.name + (t.name == "send" ? " to " : " from ") + std::to_string(t.peer)).c_str(), w,
        t.group_label.c_str(), t.group_size, static_cast<long long>(t.bytes), static_cast<long long>(t.calls),
        human_seconds(t.seconds).c_str(), t.algbw, t.busbw);
}

void print_slowest_ops(std::FILE* out, const ReplayResult& r) {
  if (r.per_op.empty()) return;
  std::fprintf(out, "  slowest ops  (per iteration)\n");
  for (size_t k = 0; k < r.per_op.size() && k < 8; ++k) {
    const OpTiming& t = r.per_op[k];
    std::fprintf(out, "    %10s  x%-5lld %s", human_seconds(t.seconds).c_str(), static_cast<long long>(t.count),
                 t.op.c_str());
    if (t.original_seconds >= 0) std::fprintf(out, "  (original %s)", human_seconds(t.original_seconds).c_str());
    std::fprintf(out, "\n");
  }
}

}  // namespace

void print_summary(std::FILE* out, const ReplayResult& r) {
  std::fprintf(out, "replay of %s (rank %lld) on %s, LibTorch %s, %d thread(s)\n", r.trace.c_str(),
               static_cast<long long>(r.rank), r.device.c_str(), r.torch_version.c_str(), r.threads);
  print_coverage(out, r);
  print_times(out, r);
  print_host_time(out, r.host_time);
  print_data_loader(out, r.host_time);
  if (r.pinned_copies >= 0)
    std::fprintf(out,
                 "  pin memory   %lld host-to-device copies per iteration from pinned memory, non-blocking; %lld "
                 "left pageable (their source is made in the step)\n",
                 static_cast<long long>(r.pinned_copies), static_cast<long long>(r.pageable_copies));
  if (r.cuda_graph)
    std::fprintf(out,
                 "  cuda graph   each step measured as one graph launch (--cuda-graph): no dispatch, launches or host "
                 "time between its ops\n");
  print_collectives(out, r);
  print_slowest_ops(out, r);
  for (const std::string& w : r.warnings) std::fprintf(out, "  warning: %s\n", w.c_str());
}

void print_summary(std::FILE* out, const LaunchReport& report) {
  print_summary(out, report.result);
  if (report.world_size < 2) return;
  std::fprintf(out, "  ranks        %d; iteration median per rank:", report.world_size);
  for (double s : report.rank_median_seconds) std::fprintf(out, " %s", human_seconds(s).c_str());
  std::fprintf(out, "\n  slowest rank %s median per iteration\n", human_seconds(report.slowest_rank_seconds).c_str());
}

}  // namespace reprise::replay
