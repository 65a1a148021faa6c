// What a collective is, apart from any transport: its kind, dtype and reduce op, the arguments of one call, and one
// descriptor per kind that holds everything Reprise knows about it (the names traces spell it with, how a trace's
// element counts size it, nccl-tests' buffer sizes and bandwidth factor, the data a sweep expects). No MPI, NCCL or
// LibTorch: the trace model names collectives with it, the replay sizes them, the backends run them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace reprise::comms {

enum class DType : uint8_t { F32, F64, F16, BF16, I8, U8, I32, I64, Bool };
size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "float", "half", ... (nccl-tests names)
// Accepts trace spellings ("Float", "c10::Half", "long int") and nccl-tests ones ("float", "half", "int64"), in any
// case: those of reprise/common/dtype.h whose type the communicator has.
bool parse_dtype(std::string_view name, DType& out);
// The DType of a c10::ScalarType value (static_cast<int>(at::kHalf)); false when the communicator has none.
bool dtype_of_scalar_type(int scalar_type, DType& out);

enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, Avg };
const char* reduce_op_name(ReduceOp op);
bool parse_reduce_op(std::string_view name, ReduceOp& out);

enum class Kind : uint8_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  AllToAllV,
  Broadcast,
  Reduce,
  Gather,
  Scatter,
  Send,
  Recv,
  Barrier,
};

// What to run. Counts are elements of `dtype`.
struct Args {
  Kind kind = Kind::AllReduce;
  DType dtype = DType::F32;
  ReduceOp op = ReduceOp::Sum;
  const void* in = nullptr;
  void* out = nullptr;  // may equal `in` where the collective allows in-place (all_reduce, broadcast)
  size_t count = 0;     // all_reduce/broadcast/reduce/send/recv: buffer elements; all_gather: per-rank
                        // input; reduce_scatter: per-rank output; all_to_all/gather/scatter: per-peer chunk
  std::vector<size_t> in_counts, in_displs, out_counts, out_displs;  // all_to_allv, per peer (elements)
  int root = 0;                                                      // broadcast/reduce/gather/scatter
  int peer = -1;                                                     // send/recv
  void* stream = nullptr;  // NCCL: the cudaStream_t to run on (nullptr: the communicator's own); MPI: unused
};

// What a trace records of one collective on one rank: the elements it put in and got out (negative: not recorded)
// and, for all_to_allv, the split sizes per peer in rows of dim 0.
struct TraceSizes {
  int64_t in_elems = 0, out_elems = 0;
  std::vector<int64_t> in_splits, out_splits;
};

// One rank's part of a sweep's data check: every rank fills element i of its input with sweep_input(rank, i).
struct SweepCheck {
  int rank = 0, nranks = 1, root = 0;
  size_t count = 0;  // Args::count
  ReduceOp op = ReduceOp::Sum;
  DType dtype = DType::F32;
};
// Small integers: exact in every dtype (half and bfloat16 included) once summed over a few hundred ranks.
double sweep_input(int rank, size_t i);

// One description per collective (as nccl-tests has one file per collective). Adding a collective adds a row to
// the table in descriptors.cc and a case to each backend's switch.
struct Descriptor {
  Kind kind;
  const char* name;  // normalized trace name: all_reduce, all_gather, ...
  // Other names for it: what record_param_comms writes (leading '_' removed) and short forms (allreduce, bcast).
  std::vector<std::string_view> spellings;
  // Elements of the send and receive buffers of one rank, for `count` elements as nccl-tests counts them
  // (all_gather/reduce_scatter/all_to_all/gather/scatter: count = elements of the whole large buffer).
  size_t (*in_elems)(size_t count, int nranks);
  size_t (*out_elems)(size_t count, int nranks);
  // busbw = algbw * factor; nccl-tests' formulas (all_reduce: 2(n-1)/n, all_gather: (n-1)/n, ...).
  double (*busbw_factor)(int nranks);
  bool reduces;         // takes a reduce op
  bool rooted;          // takes a root
  bool p2p;             // takes a peer: a sweep runs it as a ring (receive from rank-1, send to rank+1)
  bool per_peer_count;  // Args carries counts and displacements per peer (a sweep splits evenly)
  // Args' counts and one rank's buffer elements from what a trace recorded, over a group of `group` ranks;
  // nullptr where a trace cannot size it (send/recv: the peer is not recorded).
  void (*from_trace)(const TraceSizes& t, size_t group, Args& a, size_t& in, size_t& out);
  // A sweep's Args::count for a message of `elems` elements (the larger buffer, as nccl-tests sizes it).
  size_t (*sweep_count)(size_t elems, int nranks);
  // The value element i of a rank's output holds after a sweep's call; false where the output is undefined
  // (reduce and gather off the root, barrier).
  bool (*expect)(const SweepCheck& s, size_t i, double& want);
};
const Descriptor& describe(Kind k);
const std::vector<Kind>& all_kinds();
// A collective's name or one of its spellings, any case ("all_reduce", "allreduce", "allgather_base", "bcast").
bool parse_kind(std::string_view name, Kind& out);
// The descriptor whose name or spelling is exactly `raw` (a record_param_comms name without its leading '_');
// nullptr for what is not a collective of the table ("wait", "coalesced", unknown names).
const Descriptor* find_trace_name(std::string_view raw);

// Sizes a collective from a trace, for a group of `group_size` ranks: sets a.count (and, for all_to_allv,
// a.in_counts/in_displs/out_counts/out_displs) and the elements of this rank's send and receive buffers.
// Missing counts come from the other side (all_gather: count = in, or out / group). False where the trace
// cannot size `kind` (send, recv) or group_size < 1; nothing is changed then.
bool size_from_trace(Kind kind, const TraceSizes& t, int group_size, Args& a, size_t& in_elems, size_t& out_elems);

}  // namespace reprise::comms
