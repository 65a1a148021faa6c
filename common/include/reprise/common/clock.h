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

}  // namespace reprise
