#include "program.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "reprise/common/error.h"
#include "reprise/trace/host_gaps.h"
#include "step_ops.h"

namespace reprise::predict::detail {
namespace {

uint16_t stream_of(const Trace& t, const Node& n, std::unordered_map<int64_t, uint16_t>& streams) {
  const Value* v = t.attr(n, "stream");
  const int64_t id = v && v->kind == ValueKind::Int ? v->i : 0;
  return streams.emplace(id, static_cast<uint16_t>(streams.size())).first->second;
}

class Builder {
 public:
  Builder(const Trace& t, const CostModel& m, const BuildOptions& o) : t_(t), m_(m), o_(o) {}
  BuiltProgram run();

 private:
  const Trace& t_;
  const CostModel& m_;
  const BuildOptions& o_;
  BuiltProgram b_;
  std::unordered_map<int64_t, uint16_t> streams_{{0, 0}};
  std::unordered_map<int32_t, int32_t> coll_of_trace_;             // trace collective -> program collective
  std::unordered_map<int32_t, int64_t> seq_;                       // group -> collectives issued on it
  std::map<std::tuple<int32_t, int64_t, bool>, int64_t> p2p_seq_;  // (group, peer, send) -> issued
  std::vector<std::pair<int32_t, int64_t>> p2p_run_;  // the p2p just issued, nothing between: (program coll, seq)
  std::unordered_map<int32_t, std::vector<int32_t>> coalesced_;         // trace "coalesced" record -> its batch
  std::unordered_map<uint32_t, std::pair<uint32_t, uint16_t>> writer_;  // tensor -> (program op, stream)
  std::unordered_map<int64_t, int64_t> storages_;  // storage id -> the largest extent an op of the steps reached

  // Every program op with its per-op entries (BuiltProgram's vectors stay the ops' length).
  void push(const SimOp& op, double sigma, OpFamily family, double streaming) {
    b_.program.ops.push_back(op);
    b_.op_sigma.push_back(sigma);
    b_.op_family.push_back(family);
    b_.op_streaming.push_back(streaming);
    b_.streaming_seconds += streaming;
  }
  void add(SimOp op, double sigma, const std::string& label, OpFamily family, double seconds, double streaming = 0) {
    push(op, sigma, family, streaming);
    OpTotals& tot = b_.per_op[label];
    tot.family = family;
    ++tot.count;
    tot.seconds += seconds;
  }
  void compute(uint32_t node, double gap, double floor);
  bool comm(uint32_t node, double gap);
  // The DataLoader calls' time (--data-loader) due before the next op issued, measured host overheads or not.
  double loader_due_ = 0;
  bool peer_of(const Collective& c, int32_t group, int64_t& peer) const;
};

// A send's or receive's peer, a global rank: the recorded rank is the peer's rank in the group (PyTorch 2.x), or the
// caller's own (older versions), which names the peer only in a group of two (as replay reads it).
bool Builder::peer_of(const Collective& c, int32_t group, int64_t& peer) const {
  const std::vector<int64_t>& ranks = o_.members(group);
  const int64_t n = static_cast<int64_t>(ranks.size());
  const int64_t me = std::find(ranks.begin(), ranks.end(), o_.rank) - ranks.begin();
  if (c.rank < 0 || c.rank >= n || me == n) return false;
  if (c.rank != me) {
    peer = ranks[static_cast<size_t>(c.rank)];
    return true;
  }
  if (n != 2) return false;
  peer = ranks[static_cast<size_t>(1 - me)];
  return true;
}

// `gap`: the recorded host time before the op (seconds), spent on the host before its own part, unless measured host
// overheads time it (their gap before the op is that time, measured on other traces). `floor`: with --hold-ops on a
// GPU, the original op's own host time (seconds; own_host_us), the least its host part takes, as replay holds the call.
void Builder::compute(uint32_t node, double gap, double floor) {
  const Node& n = t_.nodes[node];
  p2p_run_.clear();
  OpCost c = m_.op(t_, node);
  if (c.host_kinds) gap = 0;
  b_.host_time_seconds += gap;
  gap += loader_due_;  // before the op too, but not host time (reported apart)
  loader_due_ = 0;
  c.host += gap;
  c.host_gap += gap;
  if (c.launch_at >= 0) c.launch_at += gap;
  ++b_.ops;
  if (c.modeled)
    ++b_.modeled;
  else if (c.work.family == OpFamily::Memory)
    ++b_.fallback;
  else
    ++b_.unmodeled[std::string(t_.name(n))];
  if (o_.op_times) {
    auto it = o_.op_times->seconds.find(n.id);
    if (it != o_.op_times->seconds.end()) {
      ++b_.measured;
      if (b_.program.host_runs_ops) {
        c.host = it->second + gap;
      } else {  // a replay's op time: its host part up to the launch (no gap before it), then the device's
        const double before = (c.launch_at >= 0 ? c.launch_at : c.host) - c.host_gap;
        c.device = std::max(it->second - before, 0.0);
      }
      c.sigma = 0;
      c.streaming = 0;  // measured as it ran
    }
  }
  if (!c.host_kinds && c.host - gap < floor) {  // launched where the model says, then held, as replay's call is
    if (c.launch_at < 0) c.launch_at = c.host;
    b_.op_floor_seconds += floor - (c.host - gap);
    c.host = gap + floor;
  }
  SimOp op;
  op.kind = syncs_host(t_.name(n)) || c.waits_device ? SimOp::Kind::HostSync : SimOp::Kind::Compute;
  op.node = node;
  op.stream = stream_of(t_, n, streams_);
  op.host = c.host;
  op.device = c.device;
  op.launch_at = c.launch_at;
  const uint32_t me = static_cast<uint32_t>(b_.program.ops.size());
  op.deps = static_cast<uint32_t>(b_.program.deps.size());
  auto reach = [&](uint32_t k) {  // the step's working set
    int64_t& most = storages_[t_.tensors[k].storage_id];
    most = std::max(most, tensor_extent(t_, t_.tensors[k]).bytes);
  };
  each_arg_tensor(t_, n, false, [&](uint32_t k) {
    reach(k);
    auto it = writer_.find(k);
    if (it != writer_.end() && it->second.second != op.stream) b_.program.deps.push_back(it->second.first);
  });
  op.num_deps = static_cast<uint32_t>(b_.program.deps.size()) - op.deps;
  each_arg_tensor(t_, n, true, [&](uint32_t k) {
    reach(k);
    writer_[k] = {me, op.stream};
  });
  add(op, c.sigma, std::string(t_.name(n)), c.work.family, c.host + c.device, c.streaming);
}

// As compute(); false when the unit issues nothing (its gap goes to the next unit).
bool Builder::comm(uint32_t node, double gap) {
  const int32_t ci = collective_of(t_, node);
  const std::string label = collective_label(t_, node);
  ++b_.ops;
  if (ci < 0) {
    ++b_.unmodeled[label];
    return false;
  }
  const Collective& c = t_.collectives[ci];
  const OpCost cost = m_.op(t_, node);
  if (cost.host_kinds) gap = 0;                       // measured host overheads hold the gap before it
  const double host = cost.host + gap + loader_due_;  // the loader's time is cleared when the unit issues
  const auto issued = [&] {
    b_.host_time_seconds += gap;
    loader_due_ = 0;
    return true;
  };
  SimOp op;
  op.node = node;
  op.stream = stream_of(t_, t_.nodes[node], streams_);
  op.host = host;
  if (c.is_wait) {
    p2p_run_.clear();
    ++b_.modeled;
    std::vector<int32_t> colls;  // what it completes: a collective, or a coalesced batch of p2p
    if (auto batch = coalesced_.find(c.waits_for); batch != coalesced_.end()) colls = batch->second;
    if (auto it = coll_of_trace_.find(c.waits_for); it != coll_of_trace_.end()) colls = {it->second};
    if (colls.empty()) return false;  // issued before the step: complete already, as the replay has it
    op.kind = SimOp::Kind::Wait;
    for (size_t k = 0; k < colls.size(); ++k) {
      b_.program.collectives[static_cast<size_t>(colls[k])].waited = true;
      op.coll = colls[k];
      if (k == 0) {
        add(op, 0, label, OpFamily::Sync, host);
        op.host = 0;  // one call waits for the whole batch
      } else {
        push(op, 0, OpFamily::Sync, 0);
      }
    }
    return issued();
  }
  if (c.name == "coalesced") {
    // PyTorch 2.x's record closing a batch of sends and receives (the ones just issued with its sequence number):
    // no work of its own, as replay counts it; a wait on it waits for the batch.
    --b_.ops;
    std::vector<int32_t>& batch = coalesced_[ci];
    for (const auto& [k, seq] : p2p_run_)
      if (c.seq < 0 || seq == c.seq) batch.push_back(k);
    p2p_run_.clear();
    return false;
  }
  SimCollective sc;
  sc.group = o_.group_of(c);
  double sigma = 0;
  if (c.is_send_recv()) {
    if (!peer_of(c, sc.group, sc.peer)) {  // counted as unmodeled, as replay skips it
      ++b_.unmodeled[label];
      return false;
    }
    sc.send = c.name == "send";
    sc.seq = p2p_seq_[{sc.group, sc.peer, sc.send}]++;
    sc.seconds = m_.collective(c, {std::min(o_.rank, sc.peer), std::max(o_.rank, sc.peer)}, &sigma);
    p2p_run_.emplace_back(static_cast<int32_t>(b_.program.collectives.size()), c.seq);
  } else {
    p2p_run_.clear();
    sc.seq = seq_[sc.group]++;
    sc.seconds = m_.collective(c, o_.members(sc.group), &sigma);
  }
  ++b_.modeled;
  coll_of_trace_[ci] = static_cast<int32_t>(b_.program.collectives.size());
  b_.program.collectives.push_back(sc);
  b_.coll_sigma.push_back(sigma);
  op.kind = SimOp::Kind::Issue;
  op.coll = static_cast<int32_t>(b_.program.collectives.size() - 1);
  add(op, 0, label, OpFamily::Collective, host + sc.seconds);
  return issued();
}

BuiltProgram Builder::run() {
  b_.program.name = t_.source;
  b_.program.host_runs_ops = m_.cluster().device.kind == "cpu";
  const std::vector<StepSpan> steps = chosen_steps(t_, o_.steps, o_.all_steps, b_.steps);
  const bool timed = o_.host_time_scale > 0 || o_.data_loader_scale > 0;
  const std::vector<std::pair<double, double>> waits =
      timed ? host_device_waits(t_) : std::vector<std::pair<double, double>>{};
  // --hold-ops on a GPU cluster: each op's host part at least its original's own host time, as replay holds the call.
  const bool holds = o_.hold_ops && o_.host_time_scale > 0 && !b_.program.host_runs_ops;
  const std::vector<std::pair<double, double>> blocking =
      holds ? host_blocking_calls(t_) : std::vector<std::pair<double, double>>{};
  const std::vector<uint32_t> below = o_.data_loader_scale > 0 ? ops_below(t_) : std::vector<uint32_t>{};
  for (const StepSpan& s : steps) {
    // The ops, and the DataLoader calls among them: units of the timeline whose time is not host time, as in replay
    // (--data-loader adds their recorded spans where they were).
    std::vector<uint32_t> loaders, units;
    const std::vector<uint32_t> ops = step_units(t_, s, &loaders);
    std::merge(ops.begin(), ops.end(), loaders.begin(), loaders.end(), std::back_inserter(units));
    const uint32_t marker = s.step ? s.step->node : kNone32;
    const double plain_us = o_.plain_step_seconds * 1e6;
    RecordedGaps gaps;
    gaps.before_us.assign(units.size(), 0);
    if (timed) gaps = recorded_gaps(t_, units, marker, plain_us, waits);
    const std::vector<double> own = holds ? own_host_us(t_, units, blocking) : std::vector<double>{};
    b_.op_times = b_.op_times || gaps.timed;
    const double scale = o_.host_time_scale * gaps.keep * 1e-6;  // microseconds recorded -> seconds spent
    const DataLoaderRule rule =                                  // replay's
        below.empty()
            ? DataLoaderRule{}
            : data_loader_rule(t_, units, marker, plain_us, o_.plain_data_loader_seconds * 1e6, gaps.keep, below);
    double pending = 0;  // a unit that issues nothing leaves its gap to the next, as replay's skipped units do
    for (size_t k = 0; k < units.size(); ++k) {
      const uint32_t node = units[k];
      const NodeKind kind = t_.nodes[node].kind;
      pending += gaps.before_us[k] * scale;
      if (std::binary_search(loaders.begin(), loaders.end(), node)) {
        const double loader = below.empty() ? 0 : data_loader_us(t_, node, rule, below) * o_.data_loader_scale * 1e-6;
        loader_due_ += loader;
        b_.data_loader_seconds += loader;
        continue;
      }
      if (kind == NodeKind::Collective || kind == NodeKind::Wait || kind == NodeKind::CommOp) {
        if (comm(node, pending)) pending = 0;
      } else {
        compute(node, pending, own.empty() ? 0 : own[k] * scale);
        pending = 0;
      }
    }
    SimOp end;
    end.kind = SimOp::Kind::StepEnd;
    end.host = pending + gaps.tail_us * scale;  // after the last op, before the step ends
    b_.host_time_seconds += end.host;
    end.host += loader_due_;  // a call after the last op
    loader_due_ = 0;
    push(end, 0, OpFamily::Unmodeled, 0);
  }
  const size_t n_ops = b_.program.ops.size();
  if (b_.op_sigma.size() != n_ops || b_.op_streaming.size() != n_ops || b_.op_family.size() != n_ops)
    throw std::logic_error("predict: a program op without its per-op entries (Builder::push)");
  b_.program.steps = static_cast<int>(steps.size());
  b_.program.op_names.resize(t_.nodes.size());
  for (const SimOp& op : b_.program.ops)
    if (op.kind != SimOp::Kind::StepEnd) b_.program.op_names[op.node] = std::string(t_.name(t_.nodes[op.node]));
  // Totals per iteration, as the counts of coverage are too (rounded up: a step that holds an op counts it).
  const int64_t n = static_cast<int64_t>(steps.size());
  auto per_step = [n](int64_t& count) { count = (count + n - 1) / n; };
  for (auto& [label, tot] : b_.per_op) {
    tot.seconds /= static_cast<double>(n);
    per_step(tot.count);
  }
  for (int64_t* count : {&b_.ops, &b_.modeled, &b_.fallback, &b_.measured}) per_step(*count);
  b_.host_time_seconds /= static_cast<double>(n);
  b_.streaming_seconds /= static_cast<double>(n);
  for (const auto& [storage, bytes] : storages_) b_.working_set_bytes += static_cast<double>(bytes);
  b_.op_floor_seconds /= static_cast<double>(n);
  b_.data_loader_seconds /= static_cast<double>(n);
  for (auto& [op, count] : b_.unmodeled) per_step(count);
  return std::move(b_);
}

}  // namespace

BuiltProgram build_program(const Trace& t, const CostModel& model, const BuildOptions& o) {
  return Builder(t, model, o).run();
}

double program_sigma(const BuiltProgram& b) {
  double var = 0, total = 0;
  for (size_t i = 0; i < b.program.ops.size(); ++i) {
    const double t = b.program.ops[i].host + b.program.ops[i].device;
    var += (t * b.op_sigma[i]) * (t * b.op_sigma[i]);
    total += t;
  }
  for (size_t c = 0; c < b.program.collectives.size(); ++c) {
    const double t = b.program.collectives[c].seconds;
    var += (t * b.coll_sigma[c]) * (t * b.coll_sigma[c]);
    total += t;
  }
  return total > 0 ? std::sqrt(var) / total : 0;
}

SimProgram scaled_program(const BuiltProgram& b, double z) {
  SimProgram p = b.program;
  const double f = std::exp(z * program_sigma(b));
  for (SimOp& op : p.ops) {
    op.host *= f;
    op.device *= f;
    if (op.launch_at >= 0) op.launch_at *= f;
  }
  for (SimCollective& c : p.collectives) c.seconds *= f;
  return p;
}

}  // namespace reprise::predict::detail
