// A rank's trace as a Chakra graph: the ops a replay issues, with every dependency kind the trace implies.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "reprise/predict/chakra.h"
#include "reprise/predict/op_work.h"
#include "reprise/version.h"
#include "step_ops.h"

namespace reprise::predict {
namespace {

// Our normalized collective names (comms/src/descriptors.cc) -> Chakra's CollectiveCommType. ALL_TO_ALL covers the
// uneven all_to_allv too: Chakra has one all-to-all.
bool chakra_comm_type(const std::string& name, ChakraCommType& out) {
  static const std::unordered_map<std::string, ChakraCommType> table{
      {"all_reduce", ChakraCommType::AllReduce},
      {"reduce", ChakraCommType::Reduce},
      {"all_gather", ChakraCommType::AllGather},
      {"gather", ChakraCommType::Gather},
      {"scatter", ChakraCommType::Scatter},
      {"broadcast", ChakraCommType::Broadcast},
      {"all_to_all", ChakraCommType::AllToAll},
      {"all_to_allv", ChakraCommType::AllToAll},
      {"reduce_scatter", ChakraCommType::ReduceScatter},
      {"barrier", ChakraCommType::Barrier},
  };
  auto it = table.find(name);
  if (it == table.end()) return false;
  out = it->second;
  return true;
}

bool is_comm(NodeKind k) { return k == NodeKind::Collective || k == NodeKind::Wait || k == NodeKind::CommOp; }

// The host thread of a node: its tid, or, in traces without tids, its thread node.
int64_t thread_of(const Trace& t, uint32_t i) {
  if (t.nodes[i].fields & kHasTid) return t.nodes[i].tid;
  for (uint32_t p = i; p != kNone32; p = t.nodes[p].parent)
    if (t.nodes[p].kind == NodeKind::Thread) return INT64_MIN + t.nodes[p].id;
  return 0;
}

// The world rank of group rank `r` of collective c; -1 when the trace cannot say.
int64_t world_rank(const Trace& t, const Collective& c, int64_t r) {
  if (r < 0) return -1;
  if (c.global_rank_start >= 0 && c.global_rank_stride > 0) return c.global_rank_start + r * c.global_rank_stride;
  for (const ProcessGroup& g : t.process_groups)
    if (g.name == c.pg_name && !g.ranks.empty()) return r < static_cast<int64_t>(g.ranks.size()) ? g.ranks[r] : -1;
  return r;  // the default group: group ranks are world ranks
}

// comm_size as ASTRA-sim's collective algorithms read it: the bytes this rank puts in (its ring all-gather ends with
// comm_size x group size, its reduce-scatter with comm_size / group size). Traces that record no input size give
// the output's, an all-gather's divided by the group size.
int64_t rank_input_bytes(const Collective& c) {
  if (c.in_bytes() > 0) return c.in_bytes();
  if ((c.name == "all_gather" || c.name == "gather") && c.pg_size > 0) return c.out_bytes() / c.pg_size;
  return c.out_bytes();
}

class GraphBuilder {
 public:
  GraphBuilder(const Trace& t, int64_t rank, const ChakraOptions& o) : t_(t), rank_(rank), o_(o) {}
  ChakraTrace run();

 private:
  const Trace& t_;
  int64_t rank_;
  const ChakraOptions& o_;
  ChakraTrace g_;
  std::unordered_map<uint32_t, uint64_t> writer_;               // tensor -> the node that last wrote it
  std::unordered_map<int64_t, uint64_t> last_on_thread_;        // host order
  std::unordered_map<int64_t, uint64_t> last_on_stream_;        // stream order (ops that record a stream)
  std::unordered_map<int64_t, std::vector<uint64_t>> pending_;  // thread -> sync deps for its next op
  std::unordered_map<int32_t, uint64_t> coll_node_;             // trace collective -> its node
  int world_ = -1;                                              // the trace's world size, once needed
  std::map<std::pair<int64_t, int64_t>, int32_t> p2p_count_;    // (src, dst) -> messages so far: the tag

  void add(uint32_t node, ChakraNode n);
  bool comm(uint32_t node, ChakraNode& n);
  void compute(uint32_t node, ChakraNode& n);
};

void GraphBuilder::compute(uint32_t node, ChakraNode& n) {
  const OpWork w = op_work(t_, node);
  n.type = ChakraNodeType::Comp;
  // View ops do no device work: ASTRA-sim runs them as host (CPU) ops.
  n.attrs["is_cpu_op"] = w.family == OpFamily::View;
  n.attrs["num_ops"] = static_cast<int64_t>(std::llround(w.flops));
  n.attrs["tensor_size"] = static_cast<uint64_t>(std::llround(w.bytes));
  n.attrs["op_family"] = std::string(family_name(w.family));
  if (!w.dtype.empty()) n.attrs["dtype"] = w.dtype;
}

// False for a wait (it becomes a dependency) and for what Chakra has no type for.
bool GraphBuilder::comm(uint32_t node, ChakraNode& n) {
  const int32_t ci = collective_of(t_, node);
  if (ci < 0 && t_.nodes[node].kind == NodeKind::Wait) {
    // A wait no record_param_comms describes (wait_tensor): it waits for what wrote its tensors.
    each_arg_tensor(t_, t_.nodes[node], false, [&](uint32_t k) {
      auto it = writer_.find(k);
      if (it != writer_.end()) pending_[thread_of(t_, node)].push_back(it->second);
    });
    return false;
  }
  if (ci < 0) return false;
  const Collective& c = t_.collectives[ci];
  if (c.is_wait) {
    auto it = c.waits_for >= 0 ? coll_node_.find(c.waits_for) : coll_node_.end();
    if (it != coll_node_.end()) pending_[thread_of(t_, node)].push_back(it->second);
    return false;
  }
  n.attrs["is_cpu_op"] = false;
  n.attrs["comm_size"] = rank_input_bytes(c);
  if (!c.pg_name.empty()) n.attrs["pg_name"] = c.pg_name;
  if (c.name == "send" || c.name == "recv") {
    const bool send = c.name == "send";
    n.type = send ? ChakraNodeType::CommSend : ChakraNodeType::CommRecv;
    // PyTorch 2.x records a p2p op's peer (its group rank) where collectives record the caller's own rank; older
    // versions recorded the caller's own there too, which names the peer only in a group of two (as replay reads it).
    int64_t peer = world_rank(t_, c, c.rank);
    if (peer == rank_) {
      if (world_ < 0) world_ = trace_world_size(t_, 1);
      const std::vector<int64_t> members =
          collective_group_ranks(c, find_process_group(t_.process_groups, c.pg_name), world_);
      peer = members.size() != 2 ? -1 : members[0] == rank_ ? members[1] : members[0];
    }
    if (peer >= 0) {
      const int64_t src = send ? rank_ : peer, dst = send ? peer : rank_;
      n.attrs["comm_src"] = static_cast<int32_t>(src);
      n.attrs["comm_dst"] = static_cast<int32_t>(dst);
      // NCCL delivers the messages between two ranks in order: the k-th send matches the k-th recv.
      n.attrs["comm_tag"] = p2p_count_[{src, dst}]++;
    }
  } else {
    ChakraCommType type;
    if (!chakra_comm_type(c.name, type)) return false;
    n.type = ChakraNodeType::CommColl;
    n.attrs["comm_type"] = static_cast<int64_t>(type);
  }
  coll_node_[ci] = n.id;
  return true;
}

void GraphBuilder::add(uint32_t node, ChakraNode n) {
  const Node& tn = t_.nodes[node];
  const int64_t thread = thread_of(t_, node);
  std::set<uint64_t> data, ctrl;
  auto reads = [&](const Node& x) {
    each_arg_tensor(t_, x, false, [&](uint32_t k) {
      auto it = writer_.find(k);
      if (it != writer_.end()) data.insert(it->second);
    });
  };
  reads(tn);
  const int32_t ci = is_comm(tn.kind) ? collective_of(t_, node) : -1;
  const bool inner = ci >= 0 && t_.collectives[ci].node != node;  // a c10d:: wrapper: its record_param_comms too
  if (inner) reads(t_.nodes[t_.collectives[ci].node]);
  auto pend = pending_.find(thread);
  if (pend != pending_.end()) {
    data.insert(pend->second.begin(), pend->second.end());
    pending_.erase(pend);
  }
  auto prev = last_on_thread_.find(thread);
  if (prev != last_on_thread_.end()) ctrl.insert(prev->second);
  const Value* stream = t_.attr(tn, "stream");
  if (stream && stream->kind == ValueKind::Int) {
    auto s = last_on_stream_.find(stream->i);
    if (s != last_on_stream_.end()) ctrl.insert(s->second);
    last_on_stream_[stream->i] = n.id;
  }
  if (o_.ctrl_as_data) {
    data.insert(ctrl.begin(), ctrl.end());
    ctrl.clear();
  }
  for (uint64_t d : data) ctrl.erase(d);
  n.data_deps.assign(data.begin(), data.end());
  n.ctrl_deps.assign(ctrl.begin(), ctrl.end());
  last_on_thread_[thread] = n.id;
  // record_param_comms lists a send's buffer as its output too, but a send only reads it.
  auto writes = [&](const Node& x) { each_arg_tensor(t_, x, true, [&](uint32_t k) { writer_[k] = n.id; }); };
  if (n.type != ChakraNodeType::CommSend) writes(tn);
  if (inner && n.type != ChakraNodeType::CommSend) writes(t_.nodes[t_.collectives[ci].node]);
  // A host sync (item, nonzero, ...) holds its thread until the device is done: what follows depends on it.
  if (n.type == ChakraNodeType::Comp && syncs_host(t_.name(tn))) pending_[thread].push_back(n.id);
  g_.nodes.push_back(std::move(n));
}

ChakraTrace GraphBuilder::run() {
  std::vector<std::string> names;
  const std::vector<StepSpan> steps = detail::chosen_steps(t_, o_.steps, o_.all_steps, names);
  g_.version = "0.0.4";
  g_.metadata["generator"] = std::string("reprise ") + REPRISE_VERSION;
  g_.metadata["source"] = t_.source;
  g_.metadata["rank"] = rank_;
  std::string joined;
  for (const std::string& s : names) joined += (joined.empty() ? "" : ",") + s;
  g_.metadata["steps"] = joined;
  int64_t skipped = 0;
  for (const StepSpan& s : steps)
    for (uint32_t node : detail::step_units(t_, s)) {
      const Node& tn = t_.nodes[node];
      ChakraNode n;
      n.id = static_cast<uint64_t>(tn.id);
      n.name = std::string(t_.name(tn));
      if (tn.dur_us >= 0)
        n.duration_micros = static_cast<uint64_t>(std::llround(tn.gpu_us > 0 ? tn.gpu_us : tn.dur_us));
      if (is_comm(tn.kind)) {
        const int32_t ci = collective_of(t_, node);
        const bool wait = tn.kind == NodeKind::Wait || (ci >= 0 && t_.collectives[ci].is_wait);
        if (!comm(node, n)) {
          if (!wait) ++skipped;
          continue;
        }
      } else {
        compute(node, n);
      }
      add(node, std::move(n));
    }
  g_.metadata["skipped_comm_ops"] = skipped;
  return std::move(g_);
}

}  // namespace

const char* chakra_node_type_name(ChakraNodeType t) {
  static const char* names[] = {"INVALID_NODE", "METADATA_NODE",  "MEM_LOAD_NODE",  "MEM_STORE_NODE",
                                "COMP_NODE",    "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE"};
  const int i = static_cast<int>(t);
  return i >= 0 && i < static_cast<int>(std::size(names)) ? names[i] : "OTHER_NODE";
}

const ChakraValue* ChakraNode::attr(const std::string& key) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? nullptr : &it->second;
}

int64_t ChakraNode::int_attr(const std::string& key, int64_t fallback) const {
  const ChakraValue* v = attr(key);
  if (!v) return fallback;
  return std::visit(
      [&](const auto& x) -> int64_t {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_integral_v<T>)
          return static_cast<int64_t>(x);
        else
          return fallback;
      },
      *v);
}

ChakraTrace build_chakra(const Trace& t, int64_t rank, const ChakraOptions& o) {
  return GraphBuilder(t, rank, o).run();
}

ChakraFile count_chakra(const ChakraTrace& g) {
  ChakraFile f;
  f.nodes = g.nodes.size();
  for (const ChakraNode& n : g.nodes) {
    if (n.type == ChakraNodeType::Comp) ++f.comp;
    if (n.type == ChakraNodeType::CommColl || n.type == ChakraNodeType::CommSend || n.type == ChakraNodeType::CommRecv)
      ++f.comm;
    f.data_deps += n.data_deps.size();
    f.ctrl_deps += n.ctrl_deps.size();
  }
  auto it = g.metadata.find("skipped_comm_ops");
  if (it != g.metadata.end() && std::holds_alternative<int64_t>(it->second))
    f.skipped = static_cast<size_t>(std::get<int64_t>(it->second));
  return f;
}

}  // namespace reprise::predict
