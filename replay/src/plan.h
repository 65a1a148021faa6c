// The replay plan: a trace compiled once into a flat list of instructions. The replay loop only fills tensor
// slots, pushes pre-built argument values, calls the dispatcher and busy-waits the host time an instruction
// carries (--host-time); every string, schema and map lookup happens here, before it.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "reprise/comms/communicator.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/trace.h"

namespace reprise::replay::detail {

constexpr uint32_t kNoSlot = UINT32_MAX;
constexpr uint32_t kFallbackPending = UINT32_MAX;  // Instr::fallback of an op failed by another call of it

// Where a tensor argument comes from: a slot filled by an earlier instruction, or an input tensor created
// before the loop (index in Plan::inputs). `move` marks the last use of a slot, so its tensor is released by
// the call.
// Alias: a tensor the trace saw on the storage of a tensor an earlier replayed op produced (autograd's saved
// outputs are new tensors on the same storage): a fresh tensor on that slot's storage, index in Plan::aliases.
struct TensorRef {
  enum Kind : uint8_t { None, Slot, Input, Alias } kind = None;
  bool move = false;
  uint32_t index = 0;
};

struct AliasSpec {
  uint32_t slot = 0;
  at::ScalarType dtype = at::kFloat;
  int64_t offset = 0;  // in elements of dtype
  std::vector<int64_t> sizes, strides;
};

struct ArgSpec {
  enum Kind : uint8_t { Const, Tensor, TensorList, OptTensorList } kind = Const;
  uint32_t index = 0;  // Const: in Plan::constants; Tensor: in Plan::refs; lists: first of `count` in Plan::refs
  uint32_t count = 0;
};

// Returned values bound to slots: a tensor, or a tensor list whose elements go to consecutive out_slots.
struct OutSpec {
  enum Kind : uint8_t { Tensor, TensorList } kind = Tensor;
  uint16_t position = 0;          // index in the returned stack
  uint32_t first = 0, count = 1;  // in Plan::out_slots (kNoSlot: not used later, not bound)
};

// A collective or wait of the trace, resolved to what the communicator runs.
struct CommSpec {
  uint32_t node = 0;
  int32_t collective = -1;  // index in Trace::collectives
  // What to issue (kind, dtype, op, count, all_to_allv counts and displacements, root); the runtime adds the
  // buffers and the stream.
  comms::Args args;
  size_t in_elems = 0, out_elems = 0;  // buffer sizes (elements)
  uint32_t comm_group = 0;             // index in Plan::comm_groups
  bool is_wait = false;
  int32_t waits_for = -1;  // wait: the CommSpec it completes (-1: a collective issued before the trace began)
  bool async = false;      // a later wait completes it
  std::string label;       // "all_reduce"
  int64_t bytes = 0;       // the larger buffer, in bytes (nccl-tests' size)
  int64_t stream = -1;     // the GPU stream its kernel ran on in the original (linked Kineto), -1 = unknown
  // Point-to-point (send/recv): args.peer is the peer's rank in the group, `peer` its global rank.
  bool p2p = false;
  int peer = -1;
  int64_t seq = -1;     // the trace's sequence number (p2p: a batch shares one)
  bool marker = false;  // a "coalesced" record: issues nothing, ends the batch before it
  // Operations issued together (Communicator::start_group): every member, and a marker ending them, names the
  // first member; the first holds how many members follow it in Plan::comms (itself included). -1: not batched.
  int32_t batch = -1;
  uint32_t batch_size = 0;
};

// A process group the plan's collectives run on.
struct CommGroup {
  std::string name;        // the trace's pg name ("0"), for results
  std::vector<int> ranks;  // global ranks, ascending
};

struct Instr {
  uint32_t node = 0;  // index in Trace::nodes
  uint32_t op = 0;    // index in Plan::ops
  uint32_t args = 0, num_args = 0;
  uint32_t outs = 0, num_outs = 0;
  uint32_t fallback = 0;  // failed ops: first of num out_slots' fallback tensors in Plan::fallbacks, or
                          // kFallbackPending: failed with another call of its op, made when reached
  uint16_t step = 0;
  int32_t comm = -1;  // >= 0: a collective (index in Plan::comms), run by the communication layer
  // Several GPU streams (Plan::streams non-empty): the stream it runs on (index in Plan::streams; -1 = stay on the
  // current one), the events to wait for first (num_waits in Plan::stream_waits from `waits`), and the event to
  // record after it (-1: none). Filled by assign_compute_streams.
  int16_t stream = -1;
  uint16_t num_waits = 0;
  uint32_t waits = 0;
  int32_t event = -1;
  bool failed = false;
  uint32_t reason = 0;  // failed: index in Plan::reasons
  int64_t host_ns = 0;  // host time re-spent before it (--host-time), in nanoseconds
  // The least host time the call itself takes (--hold-ops on a GPU: the original op's own dispatch work, which a
  // replayed call does less of), in nanoseconds; 0: none.
  int64_t floor_ns = 0;
};

// A node a step ran as one piece: an op replayed whole (or skipped, or past --max-ops), a collective, a DataLoader
// scope left out. In node order; the host time between them is what --host-time re-spends.
struct StepUnit {
  uint32_t node = 0;  // index in Trace::nodes
  uint16_t step = 0;
};

// An input tensor (one the steps read but do not produce), created before the loop: a view into its storage
// group, so tensors that shared a storage in the trace share one here, with the recorded offset and strides.
struct InputTensorSpec {
  uint32_t tensor = 0;         // index in Trace::tensors
  uint32_t storage_group = 0;  // index in Plan::storage_groups
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
  // Integer data range [lo, hi] (inclusive); sorted = non-decreasing offsets for embedding bags.
  bool has_range = false, sorted = false;
  int64_t lo = 0, hi = 0;
  int64_t sorted_total = 0;  // sorted: values run from 0 to this (the indices count)
  std::string range_source;  // "tensor_range", "aten::embedding weight rows", ...
};

// The input tensors on one storage: one base tensor, created before the loop.
struct StorageGroup {
  int64_t storage_id = 0;
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::kCPU;
  int64_t numel = 0;    // elements of dtype the group's views need
  bool pinned = false;  // page-locked host memory on a GPU replay (--pin-memory: a host-to-device copy reads it)
};

struct Skip {
  uint32_t node = 0;
  std::string reason;
};

struct Plan {
  std::vector<c10::OperatorHandle> ops;
  std::vector<std::string> op_names;  // parallel to ops, as registered ("aten::add.Tensor")
  std::vector<c10::IValue> constants;
  std::vector<TensorRef> refs;
  std::vector<ArgSpec> args;
  std::vector<OutSpec> outs;
  std::vector<uint32_t> out_slots;
  std::vector<Instr> instrs;
  std::vector<uint32_t> step_begin;  // first instruction of each step, plus instrs.size()
  std::vector<std::string> step_names;
  std::vector<uint32_t> step_nodes;   // node index of each step's marker, kNone32 for a whole trace
  std::vector<int64_t> step_tail_ns;  // per step: host time re-spent after its last instruction (--host-time)
  // --pin-memory: the host-to-device copies made non-blocking from pinned memory, and those left as recorded (their
  // source is made during the step, not before it), in every step compiled.
  int64_t pinned_copies = 0, pageable_copies = 0;
  std::vector<StepUnit> units;
  uint32_t num_slots = 0;
  size_t max_stack = 0;

  std::vector<InputTensorSpec> inputs;
  std::vector<AliasSpec> aliases;
  std::vector<StorageGroup> storage_groups;
  std::vector<at::Tensor> fallbacks;  // outputs of failed instructions, created from the recorded metadata
  std::vector<std::string> reasons;

  std::vector<Skip> skips;       // selected nodes not replayed, with why
  std::vector<Skip> decomposed;  // wrappers replayed through their children
  std::vector<Skip> comm_skips;  // selected collectives and waits not replayed, with why
  std::vector<CommSpec> comms;   // with a communicator: the collectives, run as instructions
  std::vector<CommGroup> comm_groups;
  int trace_world = 1;  // ranks the trace's process groups span
  int trace_rank = 0;   // the global rank the trace was recorded on (the launch's rank when it does not say)
  int64_t excluded_dataloader = 0;
  int64_t device_noops = 0;  // ops with no effect on the replay device (record_stream off the GPU)
  bool truncated = false;    // max_ops cut the steps short
  int64_t compute_selected = 0;

  // The GPU streams compute ran on in the original (Kineto stream ids; [0] the busiest, which replay's current stream
  // plays), when a linked Kineto trace shows more than one; empty otherwise. Events order work across them.
  std::vector<int64_t> streams;
  std::vector<uint32_t> stream_waits;   // event indices, per Instr::waits
  std::vector<uint64_t> event_streams;  // per event: a bit per stream that waits for it (recordStream on each)
  size_t cross_stream_waits = 0;

  at::Device device = at::kCPU;  // target device for the trace's accelerator tensors
  std::string trace_device;      // the trace's main device ("cuda:0", "cpu")
  std::vector<std::string> warnings;
};

// Places each instruction on the GPU stream its kernels ran on in the linked Kineto trace (an op that launched none
// itself: where its callees launched, else its thread's current stream; collectives on the busiest stream, where
// their own streams take over), with an event wait before a consumer whose inputs come from another stream. Does
// nothing unless the trace shows compute on more than one stream. At most kMaxStreams streams.
constexpr size_t kMaxStreams = 32;
void assign_compute_streams(const Trace& trace, Plan& plan);

// Compiles the selected iterations of `trace` into a plan (no tensors created yet). Throws UserError for a tensor
// whose recorded geometry cannot exist (tensor_extent), and when the plan cannot fit in its devices' memory
// (check_memory against available_memory).
Plan compile_plan(const Trace& trace, const ReplayOptions& options);

// What a plan needs on one device before it runs: its input tensors (created up front, alive throughout) and its
// largest other allocation (a tensor an op reads or returns not on an input's storage, or a collective's buffer).
struct MemoryNeed {
  at::Device device = at::kCPU;
  int64_t inputs = 0, largest = 0;  // bytes
  uint32_t largest_node = kNone32;  // the node of the largest allocation
};
// Per device the plan allocates on; none on meta.
std::vector<MemoryNeed> memory_needs(const Trace& trace, const Plan& plan);
// Bytes the device can still give this process (CPU: MemAvailable within the cgroup's limit; CUDA: the driver's
// free memory plus what the caching allocator holds unused); -1 when unknown.
int64_t available_memory(at::Device device);
// Throws UserError, with the figures, when a device's need exceeds `available` of it (-1: unknown, not checked).
void check_memory(const Trace& trace, const Plan& plan, const std::function<int64_t(at::Device)>& available);

// Creates the input tensors of the plan (parallel to Plan::inputs) on its device, with their data ranges.
std::vector<at::Tensor> create_input_tensors(const Plan& plan, uint64_t seed);

// Creates a tensor with the recorded metadata of `t` on `device` (fresh storage), for a failed op's outputs.
at::Tensor make_tensor_like(const Trace& trace, const reprise::Tensor& t, at::Device device);

// Maps an ET dtype string ("float", "c10::Half", "long int") to a ScalarType; false when unknown.
bool scalar_type_of(std::string_view dtype, at::ScalarType& out);

// The device the trace recorded for a tensor value ("cpu", "cuda:0"); "" when the value is not a tensor or the trace
// records no devices.
std::string_view recorded_device(const Trace& t, const Value& v);

// --pin-memory: each host-to-device copy the plan replays (`aten::to`, `_to_copy` or `copy_` reading a tensor the
// trace saw on the CPU into one it saw on a GPU) reads a source in pinned memory and runs with non_blocking=True, as
// DataLoader(pin_memory=True) and `.to(device, non_blocking=True)` make it. Marks the sources' storage groups (those
// created before the loop; one an earlier op makes stays pageable) and counts both kinds in the plan.
void pin_host_copies(const Trace& trace, Plan& plan);

}  // namespace reprise::replay::detail
