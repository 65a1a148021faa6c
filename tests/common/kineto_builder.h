// Kineto traces written event by event for the analyze tests (tests/unit/analyze*_test.cc).
#pragma once

#include <string>

#include "reprise/trace/read.h"

namespace reprise::test {

// A Kineto trace written event by event: host ops and annotations on pid 100, GPU work on device 0's streams, each
// kernel launched by its own cudaLaunchKernel (linked by correlation).
struct Kineto {
  std::string events;
  int corr = 1;

  void add(const std::string& e) { events += (events.empty() ? "" : ",\n") + e; }
  static std::string num(double v) {
    std::string s = std::to_string(v);
    return s;
  }
  void op(const std::string& name, double ts, double dur, const std::string& args = "{}", int tid = 1) {
    add(R"({"ph": "X", "cat": "cpu_op", "name": ")" + name + R"(", "pid": 100, "tid": )" + std::to_string(tid) +
        R"(, "ts": )" + num(ts) + R"(, "dur": )" + num(dur) + R"(, "args": )" + args + "}");
  }
  void annotation(const std::string& name, double ts, double dur) {
    add(R"({"ph": "X", "cat": "user_annotation", "name": ")" + name + R"(", "pid": 100, "tid": 1, "ts": )" + num(ts) +
        R"(, "dur": )" + num(dur) + "}");
  }
  void runtime(const std::string& name, double ts, double dur, int c = -1) {
    add(R"({"ph": "X", "cat": "cuda_runtime", "name": ")" + name + R"(", "pid": 100, "tid": 1, "ts": )" + num(ts) +
        R"(, "dur": )" + num(dur) + R"(, "args": {"correlation": )" + std::to_string(c) + "}}");
  }
  // A kernel (or memcpy/memset with `cat`) launched at host time `at` by a call of `launch` microseconds.
  void gpu(const std::string& name, double at, double launch, double ts, double dur, int stream = 7,
           const std::string& cat = "kernel", int64_t bytes = -1) {
    const int c = corr++;
    runtime(cat == "kernel"       ? "cudaLaunchKernel"
            : cat == "gpu_memcpy" ? "cudaMemcpyAsync"
                                  : "cudaMemsetAsync",
            at, launch, c);
    add(R"({"ph": "X", "cat": ")" + cat + R"(", "name": ")" + name + R"(", "pid": 0, "tid": )" +
        std::to_string(stream) + R"(, "ts": )" + num(ts) + R"(, "dur": )" + num(dur) + R"(, "args": {"correlation": )" +
        std::to_string(c) + R"(, "stream": )" + std::to_string(stream) + R"(, "device": 0)" +
        (bytes >= 0 ? R"(, "bytes": )" + std::to_string(bytes) : std::string("")) + "}}");
  }
  std::string text() const { return "{\"traceEvents\": [\n" + events + "\n]}"; }
};

// Clean 10 ms steps: a GEMM launched every 100 us, each waiting 400 us in the GPU's queue: the GPU is busy from
// 400 us on, with no gap.
inline Kineto clean_steps(int steps) {
  Kineto k;
  for (int s = 0; s < steps; ++s) {
    const double at = 10000.0 * s;
    k.op("ProfilerStep#" + std::to_string(s + 1), at, 9900);
    for (int i = 0; i < 100; ++i) k.gpu("cutlass_80_tensorop_gemm", at + 100 * i, 5, at + 400 + 100 * i, 100);
  }
  return k;
}

inline Trace read_back(const std::string& text, const std::string& name) {
  Trace t;
  read_kineto_text(text, name, t);
  t.rank = 0;
  return t;
}

}  // namespace reprise::test
