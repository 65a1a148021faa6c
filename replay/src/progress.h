// Reports one phase at a time to ReplayOptions::progress: begin, advance, end. Costs nothing without a sink.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "reprise/replay/replay.h"

namespace reprise::replay::detail {

class PhaseProgress {
 public:
  explicit PhaseProgress(std::function<void(const Progress&)> sink) : sink_(std::move(sink)) {}

  void begin(std::string phase, int64_t total, std::string unit, double expected_seconds = 0) {
    p_ = Progress{std::move(phase), 0, total, std::move(unit), expected_seconds, false, {}};
    send();
  }
  void advance(int64_t done) {
    p_.done = done;
    send();
  }
  // The phase's last report; `done` defaults to its total.
  void end(std::string note = {}, int64_t done = -1) {
    p_.done = done >= 0 ? done : p_.total;
    p_.finished = true;
    p_.note = std::move(note);
    send();
  }

 private:
  void send() const {
    if (sink_) sink_(p_);
  }

  std::function<void(const Progress&)> sink_;
  Progress p_;
};

}  // namespace reprise::replay::detail
