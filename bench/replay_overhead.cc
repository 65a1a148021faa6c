// Replay host overhead: a trace of N small ops replayed by Reprise against a plain C++ loop calling the same ATen
// functions with the same data flow, in one process. The ops are tiny (16 elements), so the time is almost all
// host work: dispatch, allocation, and for the replay its argument handling.
//
//   bench_replay_overhead [--ops N] [--device cpu|cuda] [--iterations K] [--json FILE]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "op_pattern.h"
#include "reprise/common/clock.h"
#include "reprise/common/stats.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/builder.h"

namespace {

using reprise::median;
using reprise::now_seconds;

using reprise::Value;

// The op pattern, repeated: y = add(x, w); y = mul(y, s); y.add_(b); y = relu(y); y = sub(y, w); x = neg(y).
const int kPattern = reprise::bench::kPatternOps;

reprise::Trace build_trace(int64_t n_ops, const std::string& device) {
  reprise::TraceBuilder b("overhead");
  int64_t storage = 1;
  auto tensor = [&]() {
    reprise::TensorSpec s;
    s.id = b.next_id();
    s.storage_id = storage++;
    s.device = device;
    s.shape = {16};
    return b.tensor(s);
  };
  b.set_parent(b.annotation("ProfilerStep#1", b.roots()));
  Value x = tensor(), w = tensor(), bias = tensor();
  Value one = b.integer(1), two = b.real(0.5);
  for (int64_t k = 0; k < n_ops; k += kPattern) {
    Value y1 = tensor();
    b.op("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", {x, w, one}, {y1});
    Value y2 = tensor();
    b.op("aten::mul.Scalar(Tensor self, Scalar other) -> Tensor", {y1, two}, {y2});
    b.op("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", {y2, bias, one}, {y2});
    Value y4 = tensor();
    b.op("aten::relu(Tensor self) -> Tensor", {y2}, {y4});
    Value y5 = tensor();
    b.op("aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", {y4, w, one}, {y5});
    Value y6 = tensor();
    b.op("aten::neg(Tensor self) -> Tensor", {y5}, {y6});
    x = y6;
  }
  return b.finish();
}

void sync(const at::Device& d) {
  if (d.is_cuda()) at::empty({1}, at::TensorOptions().device(d)).cpu();  // waits for the stream
}

double direct_loop(int64_t n_ops, const at::Device& d, at::Tensor x, const at::Tensor& w, const at::Tensor& bias) {
  sync(d);
  double t0 = now_seconds();
  reprise::bench::run_op_pattern(n_ops, x, w, bias);
  sync(d);
  return now_seconds() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n_ops = 100000;
  int iterations = 7;
  std::string device = "cpu", json_out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_replay_overhead: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--ops")
      n_ops = std::stoll(next());
    else if (a == "--device")
      device = next();
    else if (a == "--iterations")
      iterations = std::stoi(next());
    else if (a == "--json")
      json_out = next();
    else {
      std::fprintf(stderr,
                   "usage: bench_replay_overhead [--ops N] [--device cpu|cuda] [--iterations K] [--json FILE]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  n_ops = std::max<int64_t>(kPattern, n_ops / kPattern * kPattern);
  at::set_num_threads(1);
  at::Device d(device);
  if (d.is_cuda() && !d.has_index()) d = at::Device(at::kCUDA, 0);
  std::string trace_device = d.is_cuda() ? "cuda:0" : "cpu";
  reprise::Trace trace = build_trace(n_ops, trace_device);

  reprise::replay::ReplayOptions o;
  o.device = d.str();
  o.warmup = 1;
  o.iterations = iterations;
  o.threads = 1;
  reprise::replay::ReplayResult r = reprise::replay::replay_trace(trace, o);
  if (r.compute_replayed != n_ops) {
    std::fprintf(stderr, "bench_replay_overhead: only %lld of %lld ops replayed\n",
                 static_cast<long long>(r.compute_replayed), static_cast<long long>(n_ops));
    return 1;
  }
  double replay_s = median(r.iteration_seconds);

  auto opts = at::TensorOptions().device(d);
  at::Tensor x = at::rand({16}, opts), w = at::rand({16}, opts), bias = at::rand({16}, opts);
  auto direct_median = [&]() {
    direct_loop(n_ops, d, x, w, bias);  // warm-up
    std::vector<double> v;
    for (int k = 0; k < iterations; ++k) v.push_back(direct_loop(n_ops, d, x, w, bias));
    return median(v);
  };
  // Alternate the two, so neither gets a warmer machine; the best median of each counts.
  double direct_s = direct_median();
  double replay2_s = median(reprise::replay::replay_trace(trace, o).iteration_seconds);
  double direct2_s = direct_median();
  double best_replay = std::min(replay_s, replay2_s), best_direct = std::min(direct_s, direct2_s);

  std::printf("ops %lld on %s, 1 thread, median of %d\n", static_cast<long long>(n_ops), d.str().c_str(), iterations);
  std::printf("  replay        %.4f s  (%.3f us/op; runs %.4f, %.4f)\n", best_replay, 1e6 * best_replay / n_ops,
              replay_s, replay2_s);
  std::printf("  direct ATen   %.4f s  (%.3f us/op; runs %.4f, %.4f)\n", best_direct, 1e6 * best_direct / n_ops,
              direct_s, direct2_s);
  std::printf("  replay/direct %.3f\n", best_replay / best_direct);
  if (!json_out.empty()) {
    std::ofstream f(json_out);
    f << "{\"ops\": " << n_ops << ", \"device\": \"" << d.str() << "\", \"replay_seconds\": " << best_replay
      << ", \"direct_seconds\": " << best_direct << ", \"replay_over_direct\": " << best_replay / best_direct << "}\n";
  }
  return 0;
}
