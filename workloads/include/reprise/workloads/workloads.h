// Built-in training workloads written with LibTorch, captured by `reprise capture --workload NAME`: each rank
// runs warm-up steps, timed uninstrumented steps (the "original" iteration time replay is compared with), then
// recorded steps under a capture Session.
#pragma once

#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace reprise::comms {
class Communicator;
}

namespace reprise::workloads {

// A process group as the trace's `## process_group:init ##` node lists it.
struct GroupInfo {
  std::string name;        // pg_name: "0" for the world, then "1", "2", ... in creation order
  std::string desc;        // pg_desc: "default_pg", "tp", "pp", "dp", ...
  std::vector<int> ranks;  // global ranks, ascending
};

// Collectives a data- or model-parallel workload issues over one process group (the world, or a group made with
// new_group); implemented by the communication layer. Workloads run without one (world size 1) and then skip their
// collectives. Each operation is recorded in the active capture Session as PyTorch 2.x's ProcessGroupNCCL records it
// (docs/capture.md): ranks in the group, a per-group collective seq, and for send/recv a separate p2p seq.
class Collectives {
 public:
  virtual ~Collectives() = default;
  // This rank's rank in the group, and the group's size.
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In place, sum over ranks.
  virtual void all_reduce(at::Tensor& tensor) = 0;
  // Equal chunks: chunk r of `in` goes to rank r, chunk r of `out` comes from rank r (contiguous tensors).
  virtual void all_to_all(at::Tensor& out, const at::Tensor& in) = 0;
  // Uneven chunks (PyTorch's all_to_all_single with split sizes): in_splits[r] rows of dim 0 of `in` go to rank r,
  // out_splits[r] rows of `out` come from rank r, in rank order (contiguous tensors; a split may be 0).
  virtual void all_to_all_v(at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& out_splits,
                            const std::vector<int64_t>& in_splits) = 0;
  // `out` (in.numel() / size elements) = the sum over ranks of chunk `rank` of `in` (contiguous tensors).
  virtual void reduce_scatter(at::Tensor& out, const at::Tensor& in) = 0;
  // Chunk r of `out` (size * in.numel() elements) = rank r's `in` (contiguous tensors).
  virtual void all_gather(at::Tensor& out, const at::Tensor& in) = 0;
  // Blocking point-to-point with `peer`, a rank of this group.
  virtual void send(const at::Tensor& tensor, int peer) = 0;
  virtual void recv(at::Tensor& tensor, int peer) = 0;
  // Sends and receives started as one and waited for together (PyTorch's batch_isend_irecv), so that ranks that
  // send to each other cannot deadlock whatever order they list them in.
  struct P2P {
    bool send = true;
    at::Tensor tensor;
    int peer = -1;
  };
  virtual void batch_p2p(const std::vector<P2P>& ops) = 0;
  // A group over `ranks` (global ranks, ascending) described as `desc` ("tp", "pp", "dp"): called on the world's
  // Collectives by every world rank with the same lists in the same order (it is collective, as PyTorch's
  // new_group). nullptr where this rank is not a member; else owned by the world's Collectives.
  virtual Collectives* new_group(const std::vector<int>& ranks, const std::string& desc) = 0;
  // The groups this rank belongs to, the world first, then new_group's in creation order; and how many groups were
  // named in all, members or not (PyTorch's group_count).
  virtual std::vector<GroupInfo> groups() const = 0;
  virtual int groups_named() const = 0;
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
  // dlrm's tables one by one (each list empty, or one entry per table): rows, lookups per sample (pooling factor),
  // and the sharding plan, the rank that holds each table. Without a plan rank r holds the r-th block of
  // tables / world; with one a rank may hold any number (0 too), and the embeddings are exchanged by all_to_allv
  // where the ranks hold different numbers.
  std::vector<int64_t> table_rows, table_lookups, shards;
  int64_t seq = 0, heads = 0, vocab = 0;  // gpt
  // gpt's parallelism (Megatron-style): tensor, pipeline and data parallel sizes (dp 0: the world / (tp * pp)),
  // micro-batches per step (0: 1 without a pipeline, else 2 * pp) and ZeRO (sharded optimizer over dp).
  int64_t tp = 1, pp = 1, dp = 0, micro_batches = 0;
  bool zero = false;
  // mlp: an anti-pattern built in, for measuring what fixing it saves (`reprise analyze --measure`): "" none,
  // "sync" (loss.item() between forward and backward: the host waits for the device), "casts" (each hidden
  // activation round-tripped through bf16: dtype churn), "unfused" (a tanh GELU as eight elementwise ops),
  // "loop" (SGD one parameter at a time), "unaligned" (a hidden size off a multiple of 8, against it padded).
  std::string anti_pattern;
  int warmup = 2;  // untimed steps first
  int steps = 5;   // timed uninstrumented steps
  int record = 1;  // recorded steps
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
  // With an anti-pattern built in: the same steps with it switched off, timed interleaved with iteration_seconds
  // (with, without; then without, with; ...): the real saving, measured in one process.
  std::vector<double> without_anti_pattern_seconds;
  // The host time each of iteration_seconds' steps spent in its DataLoader calls (the scopes replay leaves out), where
  // the workload has any: what replay's --data-loader re-spends, measured without the observers (whose cost on the
  // calls' many small ops their recorded spans hold).
  std::vector<double> data_loader_seconds;
  int64_t peak_memory_bytes = 0;  // during the uninstrumented steps
  double loss = std::nan("");     // the first timed step's (gpt: on its last pipeline stage)
  int threads = 1;
  std::string device;
};

// Runs the workload and records its trace. Throws std::invalid_argument for unknown names or bad sizes.
CaptureReport capture_workload(const WorkloadOptions& options);

// The checks capture_workload makes of the options before it builds anything, for a launch of `world_size` ranks:
// the same answer on every rank, so a launch can refuse bad options on rank 0 alone. Throws std::invalid_argument.
void check_options(const WorkloadOptions& options, int world_size);

// Names and one-line descriptions of the built-in workloads.
std::vector<std::pair<std::string, std::string>> workload_list();

// The capture manifest (manifest.json): options, LibTorch version, and every rank's report.
std::string manifest_json(const WorkloadOptions& options, const std::vector<CaptureReport>& ranks, int world_size);

}  // namespace reprise::workloads
