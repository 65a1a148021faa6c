// Collective planning: each recorded collective or wait becomes a CommSpec (what the communicator issues, on
// which process group, with which buffer sizes) run as an instruction of its step.
#include <algorithm>

#include "compiler.h"

namespace reprise::replay::detail {
namespace {

// Sizes the collective from the trace's element counts (and all_to_allv splits) over a group of `group_size`
// ranks; false for a kind the replay does not issue.
bool size_from_trace(const Collective& c, size_t group_size, CommSpec& s) {
  const size_t g = group_size;
  const size_t in = static_cast<size_t>(std::max<int64_t>(c.in_elems, 0));
  const size_t out = static_cast<size_t>(std::max<int64_t>(c.out_elems, 0));
  switch (s.args.kind) {
    case comms::Kind::AllReduce:
    case comms::Kind::Broadcast:
    case comms::Kind::Reduce:
      s.args.count = std::max(in, out);
      s.in_elems = s.out_elems = s.args.count;
      break;
    case comms::Kind::AllGather:
    case comms::Kind::Gather:
      s.args.count = in ? in : out / g;
      s.in_elems = s.args.count;
      s.out_elems = s.args.count * g;
      break;
    case comms::Kind::ReduceScatter:
    case comms::Kind::Scatter:
      s.args.count = out ? out : in / g;
      s.in_elems = s.args.count * g;
      s.out_elems = s.args.count;
      break;
    case comms::Kind::AllToAll:
      s.args.count = std::max(in, out) / g;
      s.in_elems = s.out_elems = s.args.count * g;
      break;
    case comms::Kind::AllToAllV: {
      // Splits are rows of dim 0; a row is (elements / rows) elements.
      auto counts = [&](const std::vector<int64_t>& splits, size_t elems, std::vector<size_t>& c_out,
                        std::vector<size_t>& d_out) {
        int64_t rows = 0;
        for (int64_t x : splits) rows += x;
        size_t per_row = rows > 0 ? elems / static_cast<size_t>(rows) : 0;
        size_t acc = 0;
        for (size_t p = 0; p < g; ++p) {
          size_t k = splits.size() == g ? static_cast<size_t>(splits[p]) * per_row : elems / g;
          c_out.push_back(k);
          d_out.push_back(acc);
          acc += k;
        }
      };
      counts(c.in_splits, in, s.args.in_counts, s.args.in_displs);
      counts(c.out_splits, out, s.args.out_counts, s.args.out_displs);
      s.in_elems = in;
      s.out_elems = out;
      break;
    }
    case comms::Kind::Barrier:
      break;
    default:
      return false;
  }
  return true;
}

}  // namespace

void Compiler::compile_comm(uint32_t node, uint16_t step) {
  const Node& n = t_.nodes[node];
  int32_t ci = n.collective;
  for (uint32_t ch : t_.children(n))  // c10d:: wrappers hold the record_param_comms that describes them
    if (ci < 0) ci = t_.nodes[ch].collective;
  if (ci < 0) {
    p_.comm_skips.push_back({node, "collective: no record_param_comms describes it"});
    return;
  }
  const Collective& c = t_.collectives[static_cast<size_t>(ci)];
  CommSpec s;
  s.node = node;
  s.collective = ci;
  if (c.is_wait) {
    plan_wait(c, s);
  } else {
    std::string why;
    if (!plan_collective(c, s, why)) {
      p_.comm_skips.push_back({node, why});
      return;
    }
  }
  s.stream = gpu_stream_of(node);
  Instr in;
  in.node = node;
  in.step = step;
  in.comm = static_cast<int32_t>(p_.comms.size());
  if (!s.is_wait) comm_of_collective_[ci] = in.comm;
  p_.comms.push_back(std::move(s));
  p_.instrs.push_back(in);
}

// A wait completes the CommSpec of the collective it names, which becomes asynchronous; a wait for one issued
// before the trace began completes nothing.
void Compiler::plan_wait(const Collective& c, CommSpec& s) {
  s.is_wait = true;
  s.label = "wait";
  auto it = c.waits_for >= 0 ? comm_of_collective_.find(c.waits_for) : comm_of_collective_.end();
  if (it != comm_of_collective_.end()) {
    s.waits_for = it->second;
    p_.comms[static_cast<size_t>(it->second)].async = true;
    s.comm_group = p_.comms[static_cast<size_t>(it->second)].comm_group;
  }
}

bool Compiler::plan_collective(const Collective& c, CommSpec& s, std::string& why) {
  if (!comms::parse_kind(c.name, s.args.kind)) {
    why = "collective " + c.name + ": not replayed yet";
    return false;
  }
  if (s.args.kind == comms::Kind::Send || s.args.kind == comms::Kind::Recv) {
    why = "collective " + c.name + ": the trace does not record the peer";
    return false;
  }
  if (!comms::parse_dtype(c.dtype, s.args.dtype)) {
    why = "collective " + c.name + ": dtype '" + c.dtype + "' not supported";
    return false;
  }
  s.label = c.name;
  s.comm_group = comm_group_of(c);
  if (!size_from_trace(c, p_.comm_groups[s.comm_group].ranks.size(), s)) {
    why = "collective " + c.name + ": not replayed yet";
    return false;
  }
  s.bytes = static_cast<int64_t>(std::max(s.in_elems, s.out_elems) * comms::dtype_size(s.args.dtype));
  return true;
}

// The index in p_.comm_groups of the collective's process group, added on first use. Its global ranks: the
// process-group node's list, else global_rank_start/stride and pg_size, else every rank of the trace's world.
uint32_t Compiler::comm_group_of(const Collective& c) {
  CommGroup g;
  g.name = c.pg_name.empty() ? "0" : c.pg_name;
  const ProcessGroup* pg = nullptr;
  for (const ProcessGroup& x : t_.process_groups)
    if (x.name == c.pg_name) pg = &x;
  if (pg && !pg->ranks.empty()) {
    for (int64_t r : pg->ranks) g.ranks.push_back(static_cast<int>(r));
  } else if (c.global_rank_start >= 0 && c.pg_size > 0 && c.pg_size < p_.trace_world) {
    for (int64_t k = 0; k < c.pg_size; ++k)
      g.ranks.push_back(static_cast<int>(c.global_rank_start + k * std::max<int64_t>(c.global_rank_stride, 1)));
  } else {
    int64_t n = pg && pg->size > 0 ? pg->size : (c.pg_size > 0 ? c.pg_size : p_.trace_world);
    for (int64_t r = 0; r < n; ++r) g.ranks.push_back(static_cast<int>(r));
  }
  std::sort(g.ranks.begin(), g.ranks.end());
  for (size_t k = 0; k < p_.comm_groups.size(); ++k)
    if (p_.comm_groups[k].ranks == g.ranks) return static_cast<uint32_t>(k);
  p_.comm_groups.push_back(g);
  return static_cast<uint32_t>(p_.comm_groups.size() - 1);
}

// The stream the original's kernel ran on (the wrapper's or its record_param_comms'), when a linked Kineto
// trace says; -1 otherwise.
int64_t Compiler::gpu_stream_of(uint32_t node) const {
  auto st = gpu_stream_of_node_.find(node);
  for (uint32_t ch : t_.children(t_.nodes[node]))
    if (st == gpu_stream_of_node_.end()) st = gpu_stream_of_node_.find(ch);
  return st != gpu_stream_of_node_.end() ? st->second : -1;
}

}  // namespace reprise::replay::detail
