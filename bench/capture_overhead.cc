// Capture overhead: the same loop of small ops timed without the observer and recorded by a capture Session.
//   bench_capture_overhead [--ops N] [--size ELEMS] [--device cpu|cuda] [--json FILE]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "reprise/capture/session.h"
#include "bench_util.h"
#include "reprise/replay/device.h"

namespace {

using reprise::bench::median;
using reprise::bench::now;


void loop(int64_t n, at::Tensor x, const at::Tensor& w, const at::Tensor& b) {
  for (int64_t k = 0; k < n; k += 6) {
    at::Tensor y = at::add(x, w, 1);
    y = at::mul(y, 0.5);
    y.add_(b, 1);
    y = at::relu(y);
    y = at::sub(y, w, 1);
    x = at::neg(y);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t ops = 60000, size = 16;
  std::string device = "cpu", json;
  bool write = true;  // --write 0: record without writing the trace (for profiling the hot path alone)
  bool lean = false;  // --lean 1: inner ops without arguments (SessionOptions::nested_values = false)
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--ops") ops = std::stoll(argv[i + 1]);
    else if (a == "--size") size = std::stoll(argv[i + 1]);
    else if (a == "--device") device = argv[i + 1];
    else if (a == "--json") json = argv[i + 1];
    else if (a == "--write") write = std::string(argv[i + 1]) != "0";
    else if (a == "--lean") lean = std::string(argv[i + 1]) != "0";
    else {
      std::fprintf(stderr, "usage: bench_capture_overhead [--ops N] [--size ELEMS] [--device cpu|cuda] [--json FILE] [--write 0|1] [--lean 0|1]\n");
      return 2;
    }
  }
  at::set_num_threads(1);
  reprise::replay::install_memory_tracking();  // the steady malloc thresholds `reprise capture` runs with
  at::Device d(device);
  auto o = at::TensorOptions().device(d);
  at::Tensor x = at::rand({size}, o), w = at::rand({size}, o), b = at::rand({size}, o);
  auto timed = [&]() {
    reprise::replay::synchronize(d);
    double t0 = now();
    loop(ops, x, w, b);
    reprise::replay::synchronize(d);
    return now() - t0;
  };
  timed();
  std::vector<double> plain;
  for (int k = 0; k < 5; ++k) plain.push_back(timed());
  std::string path = "/tmp/reprise_capture_overhead.json.gz";
  reprise::capture::SessionOptions so;
  so.path = write ? path : "";
  so.host_timeline = false;
  so.nested_values = !lean;
  double recorded, write_s;
  size_t nodes = 0;
  {
    reprise::capture::Session s(so);
    s.step();
    recorded = timed();
    nodes = s.num_nodes();
    double t0 = now();
    s.stop();
    write_s = now() - t0;
  }
  double base = median(plain);
  std::printf("%lld ops of %lld elements on %s, 1 thread (%zu nodes recorded%s)\n  without capture  %.4f s (%.2f us/op)\n"
              "  recorded         %.4f s (%.2f us/op)\n  overhead         %.2fx (writing the trace afterwards: %.3f s)\n",
              static_cast<long long>(ops), static_cast<long long>(size), d.str().c_str(), nodes, lean ? ", lean" : "", base, 1e6 * base / ops,
              recorded, 1e6 * recorded / ops, recorded / base, write_s);
  if (!json.empty())
    std::ofstream(json) << "{\"ops\": " << ops << ", \"device\": \"" << d.str() << "\", \"plain_seconds\": " << base
                        << ", \"recorded_seconds\": " << recorded << ", \"overhead\": " << recorded / base
                        << ", \"write_seconds\": " << write_s << "}\n";
  std::remove(path.c_str());
  return 0;
}
