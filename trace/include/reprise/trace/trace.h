// The trace model: one Trace per rank, whatever format it was read from (PyTorch ET of any schema, Kineto).
//
// Everything is stored in flat pools indexed by 32-bit offsets, and strings are interned, so a trace costs
// a fraction of its JSON text. Nodes are kept sorted by id, which is PyTorch's execution (start) order.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reprise/common/error.h"
#include "reprise/trace/strings.h"

namespace reprise {

template <typename T>
struct Span {
  const T* ptr = nullptr;
  size_t len = 0;
  const T* begin() const { return ptr; }
  const T* end() const { return ptr + len; }
  size_t size() const { return len; }
  bool empty() const { return len == 0; }
  const T& operator[](size_t i) const { return ptr[i]; }
};

enum class NodeKind : uint8_t {
  Root,          // [pytorch|profiler|execution_trace|process]
  Thread,        // [pytorch|profiler|execution_trace|thread]
  Operator,      // a dispatcher op (aten::, c10d-free namespaces, custom ops)
  Collective,    // record_param_comms carrying a collective
  Wait,          // record_param_comms "wait", or a wait op
  CommOp,        // c10d:: dispatcher op wrapping a collective
  Annotation,    // user scope: "## name ##", ProfilerStep#N, nccl:*, Optimizer.step#...
  Autograd,      // autograd engine wrappers and backward functions
  TritonKernel,  // a compiled kernel recorded by torch.compile
  Other,
};
constexpr int kNodeKindCount = 10;
const char* node_kind_name(NodeKind k);

// Ops that only make or reshape a tensor's metadata (views, transposes, allocations without a fill, lift_fresh):
// they move no data. Names without their namespace ("view" stands for aten::view).
const std::vector<std::string_view>& metadata_only_ops();
bool is_metadata_only_op(std::string_view name);  // "aten::view" or "view"
// An op's name without its namespace: "aten::add_" -> "add_".
std::string_view op_base_name(std::string_view name);
// The names of a schema's arguments in order ("aten::to.dtype(Tensor(a) self, ScalarType dtype, ...) -> ..." gives
// self, dtype, ...), the keyword-only marker left out, as ET records one input per argument; empty without "(".
std::vector<std::string> schema_argument_names(std::string_view schema);

enum class ValueKind : uint8_t { None, Int, Double, Bool, String, Device, Tensor, List, Tuple };
const char* value_kind_name(ValueKind k);

// One argument value. Lists and tuples own `count` consecutive values starting at `ref` in Trace::values.
struct Value {
  ValueKind kind = ValueKind::None;
  uint32_t count = 0;
  union {
    int64_t i;
    double d;
    uint32_t ref;  // String/Device: StrId; Tensor: index in Trace::tensors; List/Tuple: first child
  };
  Value() : i(0) {}
};

// A tensor as the trace saw it. Ids are reused after frees, so two tensors are the same only if the whole
// tuple, dtype, shape and strides agree; the tensor table holds each distinct one once.
struct Tensor {
  int64_t id = 0;
  int64_t storage_id = 0;
  int64_t offset = 0;  // in elements
  int64_t numel = 0;
  int32_t itemsize = 0;
  bool has_device = false;   // 5-tuples (old traces) have none
  bool has_strides = false;  // schemas before 1.1.1 record no strides
  uint16_t rank = 0;
  StrId device = 0;
  StrId dtype = 0;       // as written in the type string: "float", "c10::Half", "long int", ...
  uint32_t dims = 0;     // first of `rank` sizes in Trace::ints
  uint32_t strides = 0;  // first of `rank` strides in Trace::ints (valid if has_strides)
  int64_t bytes() const { return numel * itemsize; }
};

// An attribute of a node not held in a Node field (communication attrs, unknown keys), kept for round trips.
struct Attr {
  StrId name = 0;
  StrId type = 0;      // "uint64", "string", ...; empty for flat 1.0.1 keys
  uint32_t value = 0;  // index in Trace::values
};

enum NodeField : uint16_t {
  kHasRfId = 1 << 0,
  kHasFwParent = 1 << 1,
  kHasSeqId = 1 << 2,
  kHasScope = 1 << 3,
  kHasTid = 1 << 4,
  kHasFwTid = 1 << 5,
  kHasOpSchema = 1 << 6,
  kHasKernelBackend = 1 << 7,
  kHasKernelFile = 1 << 8,
  kHasTensorRange = 1 << 9,
};

constexpr uint32_t kNone32 = UINT32_MAX;

struct Node {
  int64_t id = 0;
  int64_t parent_id = 0;      // ctrl_deps (1.0.2+) or parent (1.0.1)
  uint32_t parent = kNone32;  // index of the parent node, kNone32 for roots
  NodeKind kind = NodeKind::Other;
  uint16_t fields = 0;  // NodeField bits: which attributes the trace carried
  StrId name = 0;
  StrId op_schema = 0;
  StrId kernel_backend = 0;
  StrId kernel_file = 0;
  StrId tensor_range = 0;
  int32_t scope = 0;
  int64_t rf_id = 0;
  int64_t fw_parent = 0;
  int64_t seq_id = -1;
  int64_t tid = 0;
  int64_t fw_tid = 0;
  uint32_t inputs = 0, num_inputs = 0;      // top-level args in Trace::values; types in Trace::arg_types
  uint32_t outputs = 0, num_outputs = 0;    // likewise
  uint32_t attrs = 0, num_attrs = 0;        // in Trace::attrs
  uint32_t children = 0, num_children = 0;  // node indices in Trace::child_index, in id order
  int32_t collective = -1;                  // index in Trace::collectives
  // Filled by link_kineto: the CPU op's time and the GPU work it launched itself (not its children's).
  double ts_us = -1, dur_us = -1;
  bool timed() const { return ts_us >= 0 && dur_us >= 0; }
  double gpu_us = 0;
  uint32_t num_gpu_events = 0;
};

struct ProcessGroup {
  std::string name;            // pg_name ("0", "1", ...)
  std::string desc;            // pg_desc ("default_pg", ...)
  std::string backend;         // backend_config ("cuda:nccl", "cpu:gloo,cuda:nccl")
  int64_t backend_id = -1;     // older traces name groups by this id
  std::vector<int64_t> ranks;  // global ranks; empty = all ranks
  int64_t size = 0;
};

struct Collective {
  uint32_t node = 0;     // index in Trace::nodes
  std::string name;      // normalized: all_reduce, all_gather, reduce_scatter, all_to_all, all_to_allv, broadcast, ...
  std::string raw_name;  // as recorded (allreduce, _allgather_base, ...)
  std::string pg_name;   // pg name, or the backend id as text in old traces; empty when unknown
  std::string pg_desc;
  int64_t seq = -1;
  int64_t rank = -1;  // rank in the process group
  std::string dtype;  // "Float", "Half", "Long", ...
  int32_t itemsize = 0;
  int64_t in_elems = 0, out_elems = 0;
  std::vector<int64_t> in_splits, out_splits;
  int64_t global_rank_start = -1, global_rank_stride = -1, pg_size = -1;
  // send/recv and what PyTorch 2.x marks isP2P (coalesced records and waits of p2p). For send/recv, `rank` holds the
  // peer's rank in the group (PyTorch 2.x records dstRank/srcRank there; older versions the caller's own rank).
  bool p2p = false;
  bool p2p_recorded = false;  // the trace said (a [seq, isP2P] tuple or an isP2P attribute), not inferred
  bool is_async = false;      // a later wait names it
  bool is_wait = false;
  int32_t waits_for = -1;  // for waits: the collective it waits on
  // send/recv: `rank` is the peer's (PyTorch 2.x), not the caller's, and stays as recorded when ranks share a role.
  bool is_send_recv() const { return name == "send" || name == "recv"; }
  int64_t in_bytes() const { return in_elems * itemsize; }
  int64_t out_bytes() const { return out_elems * itemsize; }
};

struct Iteration {
  std::string name;  // "ProfilerStep#6" or "## forward ##"
  uint32_t node = 0;
  int64_t step = -1;  // N of ProfilerStep#N
  bool profiler_step = false;
};

// Kineto (Chrome trace) content, as far as Reprise uses it.
enum class KinetoCat : uint8_t {
  CpuOp,
  UserAnnotation,
  GpuUserAnnotation,
  Runtime,
  Driver,
  Kernel,
  Memcpy,
  Memset,
  Sync,
  Other
};
const char* kineto_cat_name(KinetoCat c);
inline bool is_gpu_work(KinetoCat c) {
  return c == KinetoCat::Kernel || c == KinetoCat::Memcpy || c == KinetoCat::Memset;
}

// Kineto writes some pids/tids as names ("Spans"); those are stored as kNamedId - StrId.
constexpr int64_t kNamedId = -(int64_t{1} << 40);

struct KinetoEvent {
  KinetoCat cat = KinetoCat::Other;
  StrId name = 0;
  int64_t pid = 0, tid = 0;
  double ts = 0, dur = 0;  // microseconds
  int64_t external_id = -1, correlation = -1, rf_id = -1, seq = -1;
  int64_t stream = -1, bytes = -1;
  int32_t device = -1;
  int32_t parent = -1;      // CPU events: the enclosing CPU op/annotation on the same thread
  int32_t launcher = -1;    // GPU events: the runtime call that launched it (by correlation)
  int32_t cpu_op = -1;      // runtime and GPU events: the innermost CPU op around the launch
  uint32_t node = kNone32;  // the trace node it belongs to (CPU ops: itself; GPU work: its launching op)
  // CPU ops profiled with record_shapes: their "Input Dims" and "Input type", KinetoInfo::inputs[inputs, +num_inputs).
  uint32_t inputs = 0, num_inputs = 0;
};

// One input of a CPU op as Kineto recorded it: its type ("float", "c10::BFloat16", "Scalar", "" for none) and, for a
// tensor, its sizes (KinetoInfo::input_dims[dims, +rank)); has_dims is false for lists of tensors and missing dims.
struct KinetoInput {
  StrId type = 0;
  uint32_t dims = 0;
  uint16_t rank = 0;
  bool has_dims = false;
};

struct KinetoFlow {
  int64_t id = 0;
  StrId cat = 0;
  bool start = false;
  int64_t pid = 0, tid = 0;
  double ts = 0;
};

struct GpuDevice {
  int64_t id = 0;
  std::string name;
  int64_t total_memory = 0;
  int64_t num_sms = 0;
  int compute_major = 0, compute_minor = 0;
};

struct KinetoInfo {
  std::string source;
  // What wrote it, from its top-level "reprise_timeline" key: "capture timeline" (a Reprise capture's host times),
  // "python profiler" (reprise_capture.py on a torch without Kineto), "kineto" (a bundle's copy of Kineto's times);
  // empty for Kineto itself. Where replay's host time comes from (docs/replay.md, "Host time").
  std::string producer;
  std::vector<KinetoEvent> events;
  std::vector<KinetoInput> inputs;  // KinetoEvent::inputs index this
  std::vector<int64_t> input_dims;  // KinetoInput::dims index this
  std::vector<KinetoFlow> flows;
  std::vector<GpuDevice> devices;
  std::string dist_backend;
  int64_t dist_rank = -1, dist_world_size = -1;
  std::string link_method;  // how it was linked to the ET: rf_id, external_id, order, or none
  size_t linked_ops = 0, cpu_ops = 0;
};

class Trace;
// A wait of the host on the device, which is not framework time: Kineto's cuda_sync events and the runtime's
// synchronize calls (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, their HIP twins).
bool is_host_sync(const Trace& t, const KinetoEvent& e);
// A copy the host waits for (cudaMemcpy, hipMemcpy: not their Async forms).
bool is_blocking_copy(const Trace& t, const KinetoEvent& e);

class Trace {
 public:
  std::string source;             // file the trace came from
  std::string schema;             // as read ("1.0.1", "1.1.0-chakra.0.0.4", "" for untagged execution graphs)
  bool from_kineto_only = false;  // nodes were built from Kineto CPU ops (no ET)
  int64_t rank = -1;
  // Top-level keys other than schema/nodes, as raw JSON text (pid, time, start_ts, finish_ts, ...).
  std::vector<std::pair<std::string, std::string>> metadata;

  StringTable strings;
  std::vector<Node> nodes;  // sorted by id
  std::vector<Value> values;
  std::vector<StrId> arg_types;  // parallel to the top-level args: node.inputs indexes both
  std::vector<Tensor> tensors;
  std::vector<int64_t> ints;  // tensor dims and strides
  std::vector<Attr> attrs;
  std::vector<uint32_t> child_index;
  std::vector<Collective> collectives;
  std::vector<ProcessGroup> process_groups;
  std::vector<Iteration> iterations;  // in node order
  std::optional<KinetoInfo> kineto;

  std::string_view str(StrId id) const { return strings.str(id); }
  std::string_view name(const Node& n) const { return strings.str(n.name); }
  Span<Value> inputs(const Node& n) const { return {values.data() + n.inputs, n.num_inputs}; }
  Span<Value> outputs(const Node& n) const { return {values.data() + n.outputs, n.num_outputs}; }
  Span<StrId> input_types(const Node& n) const { return {arg_types.data() + n.inputs, n.num_inputs}; }
  Span<StrId> output_types(const Node& n) const { return {arg_types.data() + n.outputs, n.num_outputs}; }
  Span<Value> items(const Value& list) const { return {values.data() + list.ref, list.count}; }
  Span<Attr> node_attrs(const Node& n) const { return {attrs.data() + n.attrs, n.num_attrs}; }
  Span<uint32_t> children(const Node& n) const { return {child_index.data() + n.children, n.num_children}; }
  Span<int64_t> dims(const Tensor& t) const { return {ints.data() + t.dims, t.rank}; }
  // Recorded strides, or the contiguous strides of the shape when the schema recorded none.
  std::vector<int64_t> strides(const Tensor& t) const;
  // Index of the node with this id, or kNone32.
  uint32_t find(int64_t id) const;
  // The value of the extra attribute `name` of node n, or nullptr.
  const Value* attr(const Node& n, std::string_view name) const;
  bool in_subtree(uint32_t node, uint32_t ancestor) const;

  size_t memory_bytes() const;  // approximate resident size of the model
};

// The storage a tensor's recorded geometry reaches: `elements` from the storage's start (its offset plus the reach
// of its sizes and strides, nothing for an empty tensor) and `bytes` (elements x itemsize). `problem` says why the
// geometry cannot exist, empty when it can: a negative size, stride, offset, element count or item size, or an element
// count, reach or byte count past int64. What the readers check every tensor against, and replay before it makes one.
struct TensorExtent {
  int64_t elements = 0, bytes = 0;
  std::string problem;
};
TensorExtent tensor_extent(const Trace& t, const Tensor& x);

// Derives again what the reader derives from the nodes (parents, children, kinds, process groups, collectives,
// waits, iterations), after nodes were added, removed, reparented or their values edited. Throws UserError for a
// dangling parent, a repeated id or a cycle, naming the trace's source.
void reindex(Trace& t);
// A deep copy (a Trace owns its string table, which does not copy implicitly); string ids stay the same.
Trace clone(const Trace& t);
// Gives tensor record `x` of `t` the sizes `dims` (appended to Trace::ints) and their product as its numel; its
// strides stay as they were. Every node reading the record sees the new shape.
void set_dims(Trace& t, Tensor& x, const std::vector<int64_t>& dims);

// Calls f(tensor index) for each tensor of a value, lists and tuples included (recursively).
template <typename F>
void each_tensor(const Trace& t, const Value& v, F&& f) {
  if (v.kind == ValueKind::Tensor) f(v.ref);
  if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple)
    for (uint32_t k = 0; k < v.count; ++k) each_tensor(t, t.values[v.ref + k], f);
}
// The same over a node's inputs, or its outputs.
template <typename F>
void each_arg_tensor(const Trace& t, const Node& n, bool outputs, F&& f) {
  const uint32_t first = outputs ? n.outputs : n.inputs, count = outputs ? n.num_outputs : n.num_inputs;
  for (uint32_t a = first; a < first + count; ++a) each_tensor(t, t.values[a], f);
}

// A ProfilerStep and the node ids it spans: from its marker up to the next step's (so the backward on the autograd
// thread belongs to its step), the last one to the end of the trace. end_id is exclusive.
struct StepSpan {
  const Iteration* step = nullptr;
  int64_t first_id = 0, end_id = INT64_MAX;
};
// The ProfilerSteps in execution order (Trace::iterations is in node order, and nodes are in id order).
std::vector<StepSpan> profiler_steps(const Trace& t);
// The step a replay or a prediction takes by default: the first whose marker holds operators (an observer started
// mid-step records that step's ops without their marker). 0 when none does; `steps` must not be empty.
size_t first_complete_step(const Trace& t, const std::vector<StepSpan>& steps);

// The collective a communication node carries: its own, or, for a c10d:: wrapper, its record_param_comms child's;
// -1 when none describes it.
int32_t collective_of(const Trace& t, uint32_t node);
// How tables name a communication node: "all_reduce (c10d::allreduce_)", "wait (record_param_comms)".
std::string collective_label(const Trace& t, uint32_t node);

// The ranks a job spans by one of its traces: its process groups (their sizes and the ranks they list), its
// collectives' group sizes, and `rank_files`, the rank traces it came with. What replay launches and predict simulates.
int trace_world_size(const Trace& t, int rank_files);
// The most ranks a job may have (a trace's groups and collectives beyond it are refused, not allocated for).
constexpr int64_t kMaxWorldSize = int64_t(1) << 24;
// Throws UserError, naming `where`, for a group of more than kMaxWorldSize ranks.
void check_world(int64_t ranks, const std::string& where);
// The first of `groups` named `name`, or nullptr.
const ProcessGroup* find_process_group(const std::vector<ProcessGroup>& groups, std::string_view name);
// The global ranks of a collective's group, ascending: `pg`'s list (its process-group node), else
// global_rank_start/stride and pg_size when smaller than `world`, else ranks 0 .. n-1 with n `pg`'s size, the
// collective's pg_size or `world` (docs/distributed.md). How replay and predict key groups: by their members.
std::vector<int64_t> collective_group_ranks(const Collective& c, const ProcessGroup* pg, int world);

// A set of traces, one per rank, as loaded from files, folders or archives.
struct TraceSet {
  std::vector<Trace> ranks;  // sorted by rank
};

// Parses the dtype of a type string such as "Tensor(float)"; empty when not a tensor type.
std::string_view tensor_dtype_of(std::string_view type);
// Bytes per element for a dtype name as written in ET type strings or comm attrs (any spelling find_dtype in
// reprise/common/dtype.h knows); 0 when unknown.
int dtype_itemsize(std::string_view dtype);

}  // namespace reprise
