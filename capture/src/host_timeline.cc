#include "host_timeline.h"

#include <unistd.h>

#include <cstring>

#include "recording.h"
#include "reprise/trace/write.h"

namespace reprise::capture::detail {
namespace {

// One complete ("X") event; the step marker is a user annotation without a Record function id.
void append_event(std::string& out, const DecodedNode& n, uint64_t tid, int64_t pid, int64_t external_id) {
  bool marker = n.rf_id == 0;
  append_timeline_event(out, marker ? "user_annotation" : "cpu_op", state().strings.str(n.name), pid,
                        static_cast<int64_t>(tid), static_cast<double>(n.ts) / 1000,  // microseconds, as Kineto
                        static_cast<double>(n.dur) / 1000);
  out += ", \"args\": {\"External id\": ";
  append_json_int(out, external_id);
  if (!marker) {
    out += ", \"Record function id\": ";
    append_json_int(out, n.rf_id);
  }
  if (n.seq >= 0) {
    out += ", \"Sequence number\": ";
    append_json_int(out, n.seq);
  }
  out += "}}";
}

}  // namespace

std::string timeline_path_for(const std::string& et_path) {
  std::string p = et_path;
  for (const char* ext : {".json.gz", ".json"})
    if (p.size() > std::strlen(ext) && p.compare(p.size() - std::strlen(ext), std::strlen(ext), ext) == 0) {
      p.resize(p.size() - std::strlen(ext));
      break;
    }
  return p + ".kineto.json.gz";
}

void write_host_timeline(const std::vector<Decoded>& logs, int64_t rank, const std::string& path) {
  std::lock_guard<std::mutex> lock(state().mu);
  // Formatted directly: a recorded step can have hundreds of thousands of ops.
  // "reprise_timeline" tells replay these are an observed run's times: the gaps between ops hold the observer's own
  // cost (docs/replay.md, "Host time").
  std::string out;
  append_timeline_header(out, "capture timeline", rank);
  out += ", \"traceName\": ";
  append_json_string(out, path);
  out += ", \"traceEvents\": [";
  const int64_t pid = ::getpid();
  int64_t external_id = 1;
  for (const Decoded& log : logs)
    for (const DecodedNode& n : log.nodes) {
      if (n.dur < 0) continue;
      out += external_id == 1 ? "\n" : ",\n";
      append_event(out, n, log.tid, pid, external_id++);
    }
  out += "\n]}\n";
  write_text_file(path, out);
}

}  // namespace reprise::capture::detail
