// Achieved rates by shape: each measured op gives log(work / (seconds - overhead)) at log2 of its family's key; an
// estimate is the inverse-distance-weighted mean of the nearest points of the most specific group that has any
// (op and dtype, op, family and dtype, family). Shared by the cost model and the calibration's residual fit.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "reprise/predict/calibration.h"

namespace reprise::predict::detail {

// The work an op's rate is measured in: FLOPs for matrix families, bytes for memory-bound ones; 0 for none.
double work_measure(const OpWork& w);
inline double work_measure(const OpSample& s) {
  OpWork w;
  w.family = s.family;
  w.flops = s.flops;
  w.bytes = s.bytes;
  return work_measure(w);
}

class RateIndex {
 public:
  struct Point {
    std::array<double, 4> at{};  // log2 of the key
    double log_rate = 0;
    size_t sample = 0;  // index of the sample it came from
  };
  // The nearest kNeighbours points, and every point as near as the last of them (a grid's corners around a key are
  // all as near: taking the first three in sample order would weigh one side of the cell), up to kCandidates.
  static constexpr size_t kNeighbours = 3, kCandidates = 16;

  // Adds every sample with work, its overhead taken from `overhead_of` (less a tenth of its time: none).
  void build(const std::vector<OpSample>& samples, const std::vector<double>& overhead_of);
  // log(rate) for an op, or false when no group has a point. `leave_out` ignores points at exactly this key (the
  // point under test and its repeats: leave-one-out residuals).
  bool estimate(const std::string& op, OpFamily family, const std::string& dtype, const std::array<double, 4>& key,
                double& log_rate, bool leave_out = false) const;

 private:
  std::unordered_map<std::string, std::vector<Point>> groups_;
};

std::array<double, 4> log_key(const std::array<double, 4>& key);

}  // namespace reprise::predict::detail
