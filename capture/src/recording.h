// The process-wide recording state the observer writes and the Session reads: one log per thread, the strings
// (names, schemas) they refer to, and the open window's options. RecordFunction callbacks are global, so this is
// too; at most one Session uses it at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "event_log.h"
#include "log_format.h"
#include "reprise/trace/strings.h"

namespace reprise::capture {
class Session;
}

namespace reprise::capture::detail {

// A RecordFunction's name, interned once per operator.
struct NameEntry {
  const char* key = nullptr;
  uint32_t name = 0, schema = 0;
  bool comms = false;  // record_param_comms keeps its arguments in lean capture
};

struct Open {
  uint64_t handle = 0;  // 0: the step marker
  int64_t id = 0;       // its node id
  bool op = false;      // a dispatcher op (has a schema)
  bool inner = false;   // recorded without arguments
};

// Never destroyed: callbacks may run during static destruction.
inline BlockPool& block_pool() {
  static BlockPool* p = new BlockPool;
  return *p;
}

// One thread's records. Owned by the global state, so a thread may end before the session does.
struct ThreadLog {
  ThreadLog() : w(block_pool()) {}
  uint64_t tid = 0;
  int64_t thread_node = 0;
  LogWriter w;
  std::vector<Open> stack;  // open RecordFunctions (and the step marker) of this thread
  TensorCache tensors;
  // The innermost open node's id (the thread node's when none), for backward ops on other threads: their
  // fw_parent is what their forward thread has open when they start.
  std::atomic<int64_t> top{0};
  std::atomic<size_t> nodes{0};

  void set_top() { top.store(stack.empty() ? thread_node : stack.back().id, std::memory_order_relaxed); }
  // Only this thread writes the count; others read it.
  void count_node() { nodes.store(nodes.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
  // Names and schemas of dispatcher ops, keyed by their (stable) name pointer: a direct-mapped cache in front of
  // a map.
  static constexpr size_t kCache = 512;
  NameEntry cache[kCache];
  std::unordered_map<const char*, NameEntry> names;
};

struct RecordingState {
  std::mutex mu;  // strings, logs
  StringTable strings;
  std::vector<std::unique_ptr<ThreadLog>> logs;
  std::atomic<int64_t> next_id{1};
  std::atomic<uint64_t> generation{0};  // one per window: a thread's log from an earlier window is stale
  std::atomic<void*> active{nullptr};   // the recording Session::Impl
  Session* session = nullptr;
  bool tensor_ranges = true;
  bool nested_values = true;
  bool host_times = true;  // time each op (for the host timeline)
  int64_t origin_ns = 0;   // steady clock when the window opened
  // This window's logs, readable without the lock (fw_parent lookups from other threads).
  static constexpr size_t kMaxThreads = 1024;
  std::atomic<ThreadLog*> threads[kMaxThreads] = {};
  std::atomic<size_t> num_threads{0};

  // Drops every log (their blocks go back to the pool). Holds mu.
  void forget_logs();
};

// Never destroyed: callbacks may run during static destruction.
inline RecordingState& state() {
  static RecordingState* s = new RecordingState;
  return *s;
}

uint32_t intern(std::string_view s);
// Nodes recorded so far in this window, the thread nodes included.
size_t recorded_so_far();

}  // namespace reprise::capture::detail
