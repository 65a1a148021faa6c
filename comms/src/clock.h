// The steady clock in seconds, for the communication layer's timings.
#pragma once

#include <chrono>

namespace reprise::comms::detail {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace reprise::comms::detail
