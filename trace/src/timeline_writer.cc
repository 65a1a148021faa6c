// A trace's op times as a Kineto-style Chrome trace that links back to the same ET by rf_id.
#include <algorithm>
#include <vector>

#include "reprise/trace/write.h"

namespace reprise {
namespace {

void append_event(std::string& out, const char* cat, std::string_view name, int64_t tid, double ts, double dur) {
  out += "{\"ph\": \"X\", \"cat\": \"";
  out += cat;
  out += "\", \"name\": ";
  append_json_string(out, name);
  out += ", \"pid\": 0, \"tid\": ";
  append_json_int(out, tid);
  out += ", \"ts\": ";
  append_json_double(out, ts);
  out += ", \"dur\": ";
  append_json_double(out, dur);
}

}  // namespace

std::string host_timeline_json(const Trace& t) {
  std::vector<uint32_t> timed;
  std::vector<int64_t> rf_ids;
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (n.ts_us < 0 || n.dur_us < 0) continue;
    if (!(n.fields & kHasRfId)) return "";
    timed.push_back(i);
    rf_ids.push_back(n.rf_id);
  }
  if (timed.empty()) return "";
  std::sort(rf_ids.begin(), rf_ids.end());
  if (std::adjacent_find(rf_ids.begin(), rf_ids.end()) != rf_ids.end()) return "";

  std::string out = "{\"schemaVersion\": 1, \"reprise_timeline\": ";
  const std::string producer = t.kineto && !t.kineto->producer.empty() ? t.kineto->producer : "kineto";
  append_json_string(out, producer);
  if (t.rank >= 0) {
    out += ", \"distributedInfo\": {\"rank\": ";
    append_json_int(out, t.rank);
    out += "}";
  }
  out += ", \"traceEvents\": [";
  bool first = true;
  for (uint32_t i : timed) {
    const Node& n = t.nodes[i];
    out += first ? "\n" : ",\n";
    first = false;
    append_event(out, n.kind == NodeKind::Annotation ? "user_annotation" : "cpu_op", t.name(n), n.tid, n.ts_us,
                 n.dur_us);
    out += ", \"args\": {\"Record function id\": ";
    append_json_int(out, n.rf_id);
    out += "}}";
  }
  if (t.kineto)
    for (const KinetoEvent& e : t.kineto->events) {
      if (!is_host_sync(t, e)) continue;
      out += ",\n";
      append_event(out, "cuda_sync", t.str(e.name), e.tid, e.ts, e.dur);
      out += "}";
    }
  out += "\n]}\n";
  return out;
}

}  // namespace reprise
