// Collective planning: each recorded collective or wait becomes a CommSpec (what the communicator issues, on
// which process group, with which buffer sizes) run as an instruction of its step.
#include <algorithm>

#include "compiler.h"

namespace reprise::replay::detail {

void Compiler::compile_comm(uint32_t node, uint16_t step) {
  const int32_t ci = collective_of(t_, node);  // c10d:: wrappers hold the record_param_comms that describes them
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
  const comms::TraceSizes recorded{c.in_elems, c.out_elems, c.in_splits, c.out_splits};
  const int group_size = static_cast<int>(p_.comm_groups[s.comm_group].ranks.size());
  if (!comms::size_from_trace(s.args.kind, recorded, group_size, s.args, s.in_elems, s.out_elems)) {
    why = "collective " + c.name + ": not replayed yet";
    return false;
  }
  s.bytes = static_cast<int64_t>(std::max(s.in_elems, s.out_elems) * comms::dtype_size(s.args.dtype));
  return true;
}

// The index in p_.comm_groups of the collective's process group, added on first use; groups are keyed by their
// global ranks (collective_group_ranks).
uint32_t Compiler::comm_group_of(const Collective& c) {
  CommGroup g;
  g.name = c.pg_name.empty() ? "0" : c.pg_name;
  for (int64_t r : collective_group_ranks(c, find_process_group(t_.process_groups, c.pg_name), p_.trace_world))
    g.ranks.push_back(static_cast<int>(r));
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
