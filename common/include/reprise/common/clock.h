// The one clock Reprise times host work with: the steady clock, in seconds or nanoseconds since an arbitrary epoch.
#pragma once

#include <chrono>
#include <cstdint>

namespace reprise {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline double now_seconds() { return static_cast<double>(now_ns()) * 1e-9; }

// Keeps the calling thread busy for `ns` nanoseconds. A busy wait, not a sleep: it stands for host work (Python, a
// framework's bookkeeping) that holds its core, and a sleep's wake-up is coarser than the gaps it would stand for.
inline void busy_wait_ns(int64_t ns) {
  const int64_t end = now_ns() + ns;
  while (now_ns() < end) {
  }
}

}  // namespace reprise
