// Built-in training workloads written with LibTorch, captured by `reprise capture --workload NAME`: each rank
// runs warm-up steps, timed uninstrumented steps (the "original" iteration time replay is compared with), then
// recorded steps under a capture Session.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace reprise::comms {
class Communicator;
}

namespace reprise::workloads {

// Collectives a data- or model-parallel workload issues; implemented by the communication layer. Workloads run
// without one (world size 1) and then skip their collectives.
class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In place, sum over ranks.
  virtual void all_reduce(at::Tensor& tensor) = 0;
  // Equal chunks: chunk r of `in` goes to rank r, chunk r of `out` comes from rank r (contiguous tensors).
  virtual void all_to_all(at::Tensor& out, const at::Tensor& in) = 0;
};

// Collectives over Reprise's communicator (NCCL on a CUDA device, else the communicator itself), recorded in the
// active capture Session.
std::unique_ptr<Collectives> make_collectives(comms::Communicator& world, at::Device device);

struct WorkloadOptions {
  std::string name = "mlp";  // mlp, dlrm, gpt
  std::string device = "cpu";
  // Sizes; 0 = the workload's default.
  int64_t batch = 0, hidden = 0, layers = 0;
  int64_t tables = 0, rows = 0, dim = 0, lookups = 0;  // dlrm
  int64_t seq = 0, heads = 0, vocab = 0;               // gpt
  int warmup = 2;                                      // untimed steps first
  int steps = 5;                                       // timed uninstrumented steps
  int record = 1;                                      // recorded steps
  uint64_t seed = 0;
  std::string out_dir;  // rank-N.json.gz goes here
  bool lean = false;    // record inner ops without arguments (capture::SessionOptions::nested_values = false)
  Collectives* comm = nullptr;
  std::function<void(const std::string&)> progress;
};

struct CaptureReport {
  int64_t rank = 0;
  std::string trace;                               // file name inside out_dir
  std::string description;                         // "mlp: batch 64, hidden 1024, layers 4"
  std::vector<double> iteration_seconds;           // uninstrumented steps
  std::vector<double> recorded_iteration_seconds;  // under the observer
  int64_t peak_memory_bytes = 0;                   // during the uninstrumented steps
  int threads = 1;
  std::string device;
};

// Runs the workload and records its trace. Throws std::invalid_argument for unknown names or bad sizes.
CaptureReport capture_workload(const WorkloadOptions& options);

// Names and one-line descriptions of the built-in workloads.
std::vector<std::pair<std::string, std::string>> workload_list();

// The capture manifest (manifest.json): options, LibTorch version, and every rank's report.
std::string manifest_json(const WorkloadOptions& options, const std::vector<CaptureReport>& ranks, int world_size);

}  // namespace reprise::workloads
