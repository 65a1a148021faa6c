// A trace's op times as a Kineto-style Chrome trace that links back to the same ET by rf_id.
#include <algorithm>
#include <vector>

#include "reprise/trace/write.h"

namespace reprise {

void append_timeline_header(std::string& out, std::string_view producer, int64_t rank) {
  out += "{\"schemaVersion\": 1, \"reprise_timeline\": ";
  append_json_string(out, producer);
  if (rank >= 0) {
    out += ", \"distributedInfo\": {\"rank\": ";
    append_json_int(out, rank);
    out += "}";
  }
}

void append_timeline_event(std::string& out, std::string_view cat, std::string_view name, int64_t pid, int64_t tid,
                           double ts_us, double dur_us) {
  out += "{\"ph\": \"X\", \"cat\": ";
  append_json_string(out, cat);
  out += ", \"name\": ";
  append_json_string(out, name);
  out += ", \"pid\": ";
  append_json_int(out, pid);
  out += ", \"tid\": ";
  append_json_int(out, tid);
  out += ", \"ts\": ";
  append_json_double(out, ts_us);
  out += ", \"dur\": ";
  append_json_double(out, dur_us);
}

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

  std::string out;
  append_timeline_header(out, t.kineto && !t.kineto->producer.empty() ? t.kineto->producer : "kineto", t.rank);
  out += ", \"traceEvents\": [";
  bool first = true;
  for (uint32_t i : timed) {
    const Node& n = t.nodes[i];
    out += first ? "\n" : ",\n";
    first = false;
    append_timeline_event(out, n.kind == NodeKind::Annotation ? "user_annotation" : "cpu_op", t.name(n), 0, n.tid,
                          n.ts_us, n.dur_us);
    out += ", \"args\": {\"Record function id\": ";
    append_json_int(out, n.rf_id);
    out += "}}";
  }
  if (t.kineto)
    for (const KinetoEvent& e : t.kineto->events) {
      if (!is_host_sync(t, e)) continue;
      out += ",\n";
      append_timeline_event(out, "cuda_sync", t.str(e.name), 0, e.tid, e.ts, e.dur);
      out += "}";
    }
  out += "\n]}\n";
  return out;
}

void append_timeline_name(std::string& out, std::string_view what, int64_t pid, int64_t tid, std::string_view name) {
  out += "{\"ph\": \"M\", \"name\": ";
  append_json_string(out, what);
  out += ", \"pid\": ";
  append_json_int(out, pid);
  if (what == "thread_name") {
    out += ", \"tid\": ";
    append_json_int(out, tid);
  }
  out += ", \"args\": {\"name\": ";
  append_json_string(out, name);
  out += "}}";
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace reprise
