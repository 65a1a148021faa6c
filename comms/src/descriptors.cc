// One descriptor per collective: the names traces spell it with, its sizes from a trace and for a sweep, the
// nccl-tests bus-bandwidth factor and the data a sweep checks. Adding a collective adds a row here and a case to the
// backends' switch. The sizes from a trace are the replay's: what one rank put in and got out of the original call.
#include <algorithm>
#include <cctype>
#include <string>
#include <unordered_map>

#include "reprise/comms/collective.h"

namespace reprise::comms {
namespace {

size_t same(size_t c, int) { return c; }
size_t times_n(size_t c, int n) { return c * static_cast<size_t>(n); }
size_t per_rank(size_t c, int n) { return c / static_cast<size_t>(n); }
size_t zero(size_t, int) { return 0; }
double ring2(int n) { return n > 1 ? 2.0 * (n - 1) / n : 0.0; }
double ring1(int n) { return n > 1 ? double(n - 1) / n : 0.0; }
double one(int) { return 1.0; }
double none(int) { return 0.0; }

// Sizing from a trace, over a group of g >= 1 ranks. A negative count was not recorded.
size_t recorded(int64_t elems) { return static_cast<size_t>(std::max<int64_t>(elems, 0)); }

// Every rank holds the whole buffer (all_reduce, broadcast, reduce).
void whole_from_trace(const TraceSizes& t, size_t, Args& a, size_t& in, size_t& out) {
  a.count = std::max(recorded(t.in_elems), recorded(t.out_elems));
  in = out = a.count;
}

// The output is the group's inputs one after another (all_gather, gather).
void concat_from_trace(const TraceSizes& t, size_t g, Args& a, size_t& in, size_t& out) {
  a.count = t.in_elems > 0 ? recorded(t.in_elems) : recorded(t.out_elems) / g;
  in = a.count;
  out = a.count * g;
}

// The input is one chunk per rank of the group (reduce_scatter, scatter).
void split_from_trace(const TraceSizes& t, size_t g, Args& a, size_t& in, size_t& out) {
  a.count = t.out_elems > 0 ? recorded(t.out_elems) : recorded(t.in_elems) / g;
  in = a.count * g;
  out = a.count;
}

void all_to_all_from_trace(const TraceSizes& t, size_t g, Args& a, size_t& in, size_t& out) {
  a.count = std::max(recorded(t.in_elems), recorded(t.out_elems)) / g;
  in = out = a.count * g;
}

// Splits are rows of dim 0; a row is (elements / rows) elements. Without one split per peer, even chunks.
void per_peer(const std::vector<int64_t>& splits, size_t elems, size_t g, std::vector<size_t>& counts,
              std::vector<size_t>& displs) {
  int64_t rows = 0;
  for (int64_t x : splits) rows += x;
  size_t per_row = rows > 0 ? elems / static_cast<size_t>(rows) : 0;
  counts.clear();
  displs.clear();
  size_t acc = 0;
  for (size_t p = 0; p < g; ++p) {
    size_t k = splits.size() == g ? static_cast<size_t>(splits[p]) * per_row : elems / g;
    counts.push_back(k);
    displs.push_back(acc);
    acc += k;
  }
}

void all_to_allv_from_trace(const TraceSizes& t, size_t g, Args& a, size_t& in, size_t& out) {
  in = recorded(t.in_elems);
  out = recorded(t.out_elems);
  per_peer(t.in_splits, in, g, a.in_counts, a.in_displs);
  per_peer(t.out_splits, out, g, a.out_counts, a.out_displs);
}

void nothing_from_trace(const TraceSizes&, size_t, Args&, size_t& in, size_t& out) { in = out = 0; }

// A sweep's data check: the output every rank must hold, given that rank r's input element j is sweep_input(r, j).
double reduced(const SweepCheck& s, size_t j) {
  double acc = sweep_input(0, j);
  for (int r = 1; r < s.nranks; ++r) {
    double x = sweep_input(r, j);
    switch (s.op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        acc += x;
        break;
      case ReduceOp::Prod:
        acc *= x;
        break;
      case ReduceOp::Max:
        acc = std::max(acc, x);
        break;
      case ReduceOp::Min:
        acc = std::min(acc, x);
        break;
    }
  }
  if (s.op == ReduceOp::Avg) acc /= s.nranks;
  if (s.dtype == DType::Bool) acc = acc != 0;
  return acc;
}
// Chunk i / count of the output came from that rank: the input element at `offset` + i % count there.
double from_chunk_owner(const SweepCheck& s, size_t i, size_t offset) {
  return sweep_input(static_cast<int>(i / s.count), offset + i % s.count);
}
size_t my_chunk(const SweepCheck& s) { return static_cast<size_t>(s.rank) * s.count; }

bool expect_all_reduce(const SweepCheck& s, size_t i, double& want) {
  want = reduced(s, i);
  return true;
}
bool expect_all_gather(const SweepCheck& s, size_t i, double& want) {
  want = from_chunk_owner(s, i, 0);
  return true;
}
bool expect_reduce_scatter(const SweepCheck& s, size_t i, double& want) {
  want = reduced(s, my_chunk(s) + i);
  return true;
}
bool expect_all_to_all(const SweepCheck& s, size_t i, double& want) {
  want = from_chunk_owner(s, i, my_chunk(s));
  return true;
}
bool expect_broadcast(const SweepCheck& s, size_t i, double& want) {
  want = sweep_input(s.root, i);
  return true;
}
bool expect_reduce(const SweepCheck& s, size_t i, double& want) {
  want = reduced(s, i);
  return s.rank == s.root;
}
bool expect_gather(const SweepCheck& s, size_t i, double& want) {
  want = from_chunk_owner(s, i, 0);
  return s.rank == s.root;
}
bool expect_scatter(const SweepCheck& s, size_t i, double& want) {
  want = sweep_input(s.root, my_chunk(s) + i);
  return true;
}
bool expect_from_previous(const SweepCheck& s, size_t i, double& want) {  // the ring of send and recv
  want = sweep_input((s.rank + s.nranks - 1) % s.nranks, i);
  return true;
}
bool expect_nothing(const SweepCheck&, size_t, double&) { return false; }

// Two lines a row: kind, name, spellings; then the columns below (sweep_n: sweep_count). Rows in the order of Kind.
// clang-format off
const Descriptor kTable[] = {
//  in_elems out_elems busbw  reduces rooted p2p    per_peer from_trace              sweep_n   expect
    {Kind::AllReduce, "all_reduce", {"allreduce", "allreduce_coalesced", "all_reduce_coalesced"},
    same,    same,     ring2, true,   false, false, false,   whole_from_trace,       same,     expect_all_reduce},
    {Kind::AllGather, "all_gather", {"allgather", "allgather_base", "all_gather_base", "all_gather_into_tensor",
                                     "allgather_coalesced", "allgather_into_tensor_coalesced",
                                     "all_gather_into_tensor_coalesced"},
    same,    times_n,  ring1, false,  false, false, false,   concat_from_trace,      per_rank, expect_all_gather},
    {Kind::ReduceScatter, "reduce_scatter", {"reducescatter", "reduce_scatter_base", "reduce_scatter_tensor",
                                             "reduce_scatter_coalesced", "reduce_scatter_tensor_coalesced"},
    times_n, same,     ring1, true,   false, false, false,   split_from_trace,       per_rank, expect_reduce_scatter},
    {Kind::AllToAll, "all_to_all", {"alltoall"},
    times_n, times_n,  ring1, false,  false, false, false,   all_to_all_from_trace,  per_rank, expect_all_to_all},
    // A sweep's all_to_allv sends `count` to every peer; a trace's counts come from its splits.
    {Kind::AllToAllV, "all_to_allv", {"alltoallv", "alltoall_base"},
    times_n, times_n,  ring1, false,  false, false, true,    all_to_allv_from_trace, per_rank, expect_all_to_all},
    {Kind::Broadcast, "broadcast", {"bcast"},
    same,    same,     one,   false,  true,  false, false,   whole_from_trace,       same,     expect_broadcast},
    {Kind::Reduce, "reduce", {},
    same,    same,     one,   true,   true,  false, false,   whole_from_trace,       same,     expect_reduce},
    {Kind::Gather, "gather", {},
    same,    times_n,  ring1, false,  true,  false, false,   concat_from_trace,      per_rank, expect_gather},
    {Kind::Scatter, "scatter", {},
    times_n, same,     ring1, false,  true,  false, false,   split_from_trace,       per_rank, expect_scatter},
    {Kind::Send, "send", {},
    same,    zero,     one,   false,  false, true,  false,   nullptr,                same,     expect_from_previous},
    {Kind::Recv, "recv", {"recvAnysource"},
    zero,    same,     one,   false,  false, true,  false,   nullptr,                same,     expect_from_previous},
    {Kind::Barrier, "barrier", {},
    zero,    zero,     none,  false,  false, false, false,   nothing_from_trace,     same,     expect_nothing},
};
// clang-format on

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool spelled(const Descriptor& d, std::string_view name) {
  if (name == d.name) return true;
  return std::find(d.spellings.begin(), d.spellings.end(), name) != d.spellings.end();
}

}  // namespace

double sweep_input(int rank, size_t i) { return double((static_cast<size_t>(rank) * 3 + i) % 5 + 1); }

const Descriptor& describe(Kind k) { return kTable[static_cast<int>(k)]; }

const std::vector<Kind>& all_kinds() {
  static const std::vector<Kind> v = [] {
    std::vector<Kind> k;
    for (const Descriptor& d : kTable) k.push_back(d.kind);
    return k;
  }();
  return v;
}

const Descriptor* find_trace_name(std::string_view raw) {
  for (const Descriptor& d : kTable)
    if (spelled(d, raw)) return &d;
  return nullptr;
}

bool parse_kind(std::string_view name, Kind& out) {
  // Every name and spelling, lower-cased once.
  static const std::unordered_map<std::string, Kind> names = [] {
    std::unordered_map<std::string, Kind> m;
    for (const Descriptor& d : kTable) {
      m.emplace(lower(d.name), d.kind);
      for (std::string_view s : d.spellings) m.emplace(lower(s), d.kind);
    }
    return m;
  }();
  auto it = names.find(lower(name));
  if (it == names.end()) return false;
  out = it->second;
  return true;
}

bool size_from_trace(Kind kind, const TraceSizes& t, int group_size, Args& a, size_t& in_elems, size_t& out_elems) {
  const Descriptor& d = describe(kind);
  if (!d.from_trace || group_size < 1) return false;
  d.from_trace(t, static_cast<size_t>(group_size), a, in_elems, out_elems);
  return true;
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Prod:
      return "prod";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Avg:
      return "avg";
  }
  return "?";
}

bool parse_reduce_op(std::string_view name, ReduceOp& out) {
  std::string n = lower(name);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg})
    if (n == reduce_op_name(op)) {
      out = op;
      return true;
    }
  return false;
}

}  // namespace reprise::comms
