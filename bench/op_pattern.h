// The six-op loop both overhead benchmarks time (replay: against its trace replayed; capture: against itself
// recorded): small elementwise ops, one in place, each op's output the next one's input.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace reprise::bench {

inline constexpr int kPatternOps = 6;

// Runs n ops (rounded up to whole patterns) starting from x.
inline void run_op_pattern(int64_t n, at::Tensor x, const at::Tensor& w, const at::Tensor& b) {
  for (int64_t k = 0; k < n; k += kPatternOps) {
    at::Tensor y = at::add(x, w, 1);
    y = at::mul(y, 0.5);
    y.add_(b, 1);
    y = at::relu(y);
    y = at::sub(y, w, 1);
    x = at::neg(y);
  }
}

}  // namespace reprise::bench
