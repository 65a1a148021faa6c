// Capture overhead: the same loop of small ops timed without the observer and recorded by a capture Session.
//   bench_capture_overhead [--ops N] [--size ELEMS] [--device cpu|cuda] [--json FILE] [--lean 1] [--repeat N]
// Each recorded run is a fresh Session (its log memory faulted in when the window opens, as in a real capture);
// the report gives the median, the first and the worst run, and the floor: an observer that does nothing.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "op_pattern.h"
#include "reprise/capture/session.h"
#include "reprise/common/clock.h"
#include "reprise/common/stats.h"
#include "reprise/device/device.h"

using reprise::median;
using reprise::now_seconds;

int main(int argc, char** argv) {
  int64_t ops = 60000, size = 16;
  std::string device = "cpu", json;
  bool write = true;   // --write 0: record without writing the trace (for profiling the hot path alone)
  bool lean = false;   // --lean 1: inner ops without arguments (SessionOptions::nested_values = false)
  int plain_runs = 5;  // --plain 0: only the recorded loop (for profiling it alone)
  int recorded_repeats = 3;
  bool timeline = false;  // --timeline 1: time every op for the host timeline, as `reprise capture` does
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--ops")
      ops = std::stoll(argv[i + 1]);
    else if (a == "--size")
      size = std::stoll(argv[i + 1]);
    else if (a == "--device")
      device = argv[i + 1];
    else if (a == "--json")
      json = argv[i + 1];
    else if (a == "--write")
      write = std::string(argv[i + 1]) != "0";
    else if (a == "--lean")
      lean = std::string(argv[i + 1]) != "0";
    else if (a == "--plain")
      plain_runs = std::max(0, std::stoi(argv[i + 1]));
    else if (a == "--repeat")
      recorded_repeats = std::max(1, std::stoi(argv[i + 1]));
    else if (a == "--timeline")
      timeline = std::string(argv[i + 1]) != "0";
    else {
      std::fprintf(stderr,
                   "usage: bench_capture_overhead [--ops N] [--size ELEMS] [--device cpu|cuda] [--json FILE] [--write "
                   "0|1] [--lean 0|1] [--plain RUNS] [--repeat RUNS] [--timeline 0|1]\n");
      return 2;
    }
  }
  at::set_num_threads(1);
  reprise::device::install_memory_tracking();  // the steady malloc thresholds `reprise capture` runs with
  at::Device d(device);
  auto o = at::TensorOptions().device(d);
  at::Tensor x = at::rand({size}, o), w = at::rand({size}, o), b = at::rand({size}, o);
  auto timed = [&]() {
    reprise::device::synchronize(d);
    double t0 = now_seconds();
    reprise::bench::run_op_pattern(ops, x, w, b);
    reprise::device::synchronize(d);
    return now_seconds() - t0;
  };
  if (plain_runs > 0) timed();
  std::vector<double> plain;
  for (int k = 0; k < plain_runs; ++k) plain.push_back(timed());
  // The floor: an observer that asks LibTorch for every op's inputs and outputs, as the Session does, and does
  // nothing with them.
  std::vector<double> empty_observer;
  {
    at::RecordFunctionCallback cb(
        [](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> { return nullptr; },
        [](const at::RecordFunction&, at::ObserverContext*) {});
    cb.needsInputs(true).needsOutputs(true).needsIds(true);
    at::CallbackHandle h = at::addGlobalCallback(cb);
    for (int k = 0; k < plain_runs; ++k) empty_observer.push_back(timed());
    at::removeCallback(h);
  }
  std::string path = "/tmp/reprise_capture_overhead.json.gz";
  reprise::capture::SessionOptions so;
  so.path = write ? path : "";
  so.host_timeline = timeline;
  so.nested_values = !lean;
  std::vector<double> recorded_runs, writes;
  size_t nodes = 0;
  for (int r = 0; r < recorded_repeats; ++r) {
    reprise::capture::Session s(so);
    s.step();
    recorded_runs.push_back(timed());
    nodes = s.num_nodes();
    double t0 = now_seconds();
    s.stop();
    writes.push_back(now_seconds() - t0);
  }
  double recorded = median(recorded_runs), write_s = median(writes);
  if (plain_runs == 0) {  // profiling the recorded loop: no ratios
    std::printf("%lld ops recorded in %.4f s (%.2f us/op), median of %d sessions; writing %.3f s\n",
                static_cast<long long>(ops), recorded, 1e6 * recorded / ops, recorded_repeats, write_s);
    return 0;
  }
  double base = median(plain), floor = median(empty_observer);
  double first = recorded_runs.front(), worst = *std::max_element(recorded_runs.begin(), recorded_runs.end());
  std::printf(
      "%lld ops of %lld elements on %s, 1 thread (%zu nodes recorded%s%s)\n"
      "  without capture  %.4f s (%.2f us/op)\n"
      "  empty observer   %.4f s (%.2fx: LibTorch boxing every op's inputs and outputs for an observer)\n"
      "  recorded         %.4f s (%.2f us/op), median of %d sessions; first %.2fx, worst %.2fx\n"
      "  overhead         %.2fx (writing the trace afterwards: %.3f s)\n",
      static_cast<long long>(ops), static_cast<long long>(size), d.str().c_str(), nodes, lean ? ", lean" : "",
      timeline ? ", timed for the host timeline" : "", base, 1e6 * base / ops, floor, floor / base, recorded,
      1e6 * recorded / ops, recorded_repeats, first / base, worst / base, recorded / base, write_s);
  if (!json.empty())
    std::ofstream(json) << "{\"ops\": " << ops << ", \"size\": " << size << ", \"device\": \"" << d.str()
                        << "\", \"lean\": " << (lean ? "true" : "false") << ", \"plain_seconds\": " << base
                        << ", \"empty_observer_seconds\": " << floor << ", \"recorded_seconds\": " << recorded
                        << ", \"first_recorded_seconds\": " << first << ", \"worst_recorded_seconds\": " << worst
                        << ", \"overhead\": " << recorded / base << ", \"write_seconds\": " << write_s << "}\n";
  std::remove(path.c_str());
  return 0;
}
