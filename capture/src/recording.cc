#include "recording.h"

#include <algorithm>

namespace reprise::capture::detail {

void RecordingState::forget_logs() {
  for (size_t k = 0; k < std::min(num_threads.load(), kMaxThreads); ++k) threads[k].store(nullptr);
  num_threads = 0;
  logs.clear();
}

uint32_t intern(std::string_view s) {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().strings.intern(s);
}

size_t recorded_so_far() {
  std::lock_guard<std::mutex> lock(state().mu);
  size_t n = 0;
  for (const auto& l : state().logs) n += l->nodes.load(std::memory_order_relaxed) + 1;
  return n;
}

}  // namespace reprise::capture::detail
