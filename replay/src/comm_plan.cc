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
  } else if (c.name == "coalesced") {
    s.marker = true;  // ends a batch of p2p (batch_p2p links it); issues nothing
    s.label = c.name;
    s.seq = c.seq;
    s.comm_group = comm_group_of(c);
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
  if (!comms::parse_dtype(c.dtype, s.args.dtype)) {
    why = "collective " + c.name + ": dtype '" + c.dtype + "' not supported";
    return false;
  }
  s.label = c.name;
  s.seq = c.seq;
  s.comm_group = comm_group_of(c);
  if (s.args.kind == comms::Kind::Send || s.args.kind == comms::Kind::Recv) return plan_p2p(c, s, why);
  const comms::TraceSizes recorded{c.in_elems, c.out_elems, c.in_splits, c.out_splits};
  const int group_size = static_cast<int>(p_.comm_groups[s.comm_group].ranks.size());
  if (!comms::size_from_trace(s.args.kind, recorded, group_size, s.args, s.in_elems, s.out_elems)) {
    why = "collective " + c.name + ": not replayed yet";
    return false;
  }
  s.bytes = static_cast<int64_t>(std::max(s.in_elems, s.out_elems) * comms::dtype_size(s.args.dtype));
  return true;
}

// A send or recv: its peer from the rank the trace recorded, mapped through the group (docs/distributed.md,
// "Point-to-point"). PyTorch 2.x records the peer's group rank; older versions recorded the caller's own, which
// leaves the peer known only in a group of two.
bool Compiler::plan_p2p(const Collective& c, CommSpec& s, std::string& why) {
  const std::vector<int>& ranks = p_.comm_groups[s.comm_group].ranks;
  const int n = static_cast<int>(ranks.size());
  const auto me = std::find(ranks.begin(), ranks.end(), p_.trace_rank);
  const int my = me == ranks.end() ? -1 : static_cast<int>(me - ranks.begin());
  int peer = static_cast<int>(c.rank);
  if (c.rank < 0 || c.rank >= n) {
    why = c.name + ": the recorded peer " + std::to_string(c.rank) + " is not a rank of its group of " +
          std::to_string(n);
    return false;
  }
  if (peer == my) {  // the caller's own rank: an older PyTorch
    if (n != 2) {
      why = c.name + ": the trace records the caller's own rank, not the peer (PyTorch before 2.0), in a group of " +
            std::to_string(n) + " ranks: the peer is unknown";
      return false;
    }
    peer = 1 - my;
  }
  s.p2p = true;
  s.args.peer = peer;
  s.peer = ranks[static_cast<size_t>(peer)];
  s.args.count = static_cast<size_t>(std::max<int64_t>({c.in_elems, c.out_elems, 0}));
  s.in_elems = s.args.kind == comms::Kind::Send ? s.args.count : 0;
  s.out_elems = s.args.kind == comms::Kind::Recv ? s.args.count : 0;
  s.bytes = static_cast<int64_t>(s.args.count * comms::dtype_size(s.args.dtype));
  return true;
}

// Batches of p2p the original issued together, so that replay issues them together too (one NCCL group; on MPI
// non-blocking with one wait) and a pipeline's paired send and recv cannot deadlock: consecutive sends and receives
// on one group, nothing else between them, that share a sequence number (PyTorch 2.x numbers a coalesced batch
// once) or that are all completed by later waits (batch_isend_irecv without coalescing). A "coalesced" record right
// after a batch of its sequence number ends it, and a wait naming it completes the batch.
void Compiler::batch_p2p() {
  std::vector<CommSpec>& cs = p_.comms;
  auto joins = [&](const CommSpec& a, const CommSpec& b) {
    return b.p2p && a.comm_group == b.comm_group && ((a.seq >= 0 && a.seq == b.seq) || (a.async && b.async));
  };
  int32_t first = -1;
  uint16_t first_step = 0;
  for (size_t k = 0; k < p_.instrs.size(); ++k) {
    const Instr& in = p_.instrs[k];
    CommSpec* s = in.comm >= 0 ? &cs[static_cast<size_t>(in.comm)] : nullptr;
    if (first >= 0 && in.step != first_step) first = -1;
    if (s && s->p2p && first >= 0 && joins(cs[static_cast<size_t>(first)], *s)) {
      s->batch = first;
      ++cs[static_cast<size_t>(first)].batch_size;
      continue;
    }
    if (s && s->marker && first >= 0 && cs[static_cast<size_t>(first)].comm_group == s->comm_group &&
        cs[static_cast<size_t>(first)].seq == s->seq) {
      s->batch = first;
      first = -1;
      continue;
    }
    first = -1;
    if (s && s->p2p) {
      first = in.comm;
      first_step = in.step;
      s->batch = first;
      s->batch_size = 1;
    }
  }
  // A batch is asynchronous when a wait names any of its members or its marker.
  for (CommSpec& s : cs)
    if (s.batch >= 0 && s.async) cs[static_cast<size_t>(s.batch)].async = true;
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
