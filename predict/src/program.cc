#include "program.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "reprise/common/error.h"
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
  std::unordered_map<int32_t, int32_t> coll_of_trace_;                  // trace collective -> program collective
  std::unordered_map<int32_t, int64_t> seq_;                            // group -> collectives issued on it
  std::unordered_map<uint32_t, std::pair<uint32_t, uint16_t>> writer_;  // tensor -> (program op, stream)

  void add(SimOp op, double sigma, const std::string& label, OpFamily family, double seconds) {
    b_.program.ops.push_back(op);
    b_.op_sigma.push_back(sigma);
    OpTotals& tot = b_.per_op[label];
    tot.family = family;
    ++tot.count;
    tot.seconds += seconds;
  }
  void compute(uint32_t node);
  void comm(uint32_t node);
};

void Builder::compute(uint32_t node) {
  const Node& n = t_.nodes[node];
  OpCost c = m_.op(t_, node);
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
      if (b_.program.host_runs_ops)
        c.host = it->second;
      else
        c.device = std::max(it->second - c.host, 0.0);
      c.sigma = 0;
    }
  }
  SimOp op;
  op.kind = syncs_host(t_.name(n)) ? SimOp::Kind::HostSync : SimOp::Kind::Compute;
  op.node = node;
  op.stream = stream_of(t_, n, streams_);
  op.host = c.host;
  op.device = c.device;
  const uint32_t me = static_cast<uint32_t>(b_.program.ops.size());
  op.deps = static_cast<uint32_t>(b_.program.deps.size());
  each_arg_tensor(t_, n, false, [&](uint32_t k) {
    auto it = writer_.find(k);
    if (it != writer_.end() && it->second.second != op.stream) b_.program.deps.push_back(it->second.first);
  });
  op.num_deps = static_cast<uint32_t>(b_.program.deps.size()) - op.deps;
  each_arg_tensor(t_, n, true, [&](uint32_t k) { writer_[k] = {me, op.stream}; });
  add(op, c.sigma, std::string(t_.name(n)), c.work.family, c.host + c.device);
}

void Builder::comm(uint32_t node) {
  const int32_t ci = collective_of(t_, node);
  const std::string label = collective_label(t_, node);
  ++b_.ops;
  if (ci < 0) {
    ++b_.unmodeled[label];
    return;
  }
  const Collective& c = t_.collectives[ci];
  const double host = m_.op(t_, node).host;
  SimOp op;
  op.node = node;
  op.stream = stream_of(t_, t_.nodes[node], streams_);
  op.host = host;
  if (c.is_wait) {
    auto it = c.waits_for >= 0 ? coll_of_trace_.find(c.waits_for) : coll_of_trace_.end();
    ++b_.modeled;
    if (it == coll_of_trace_.end()) return;  // issued before the step: complete already, as the replay has it
    b_.program.collectives[it->second].waited = true;
    op.kind = SimOp::Kind::Wait;
    op.coll = it->second;
    add(op, 0, label, OpFamily::Sync, host);
    return;
  }
  SimCollective sc;
  sc.group = o_.group_of(c);
  sc.seq = seq_[sc.group]++;
  double sigma = 0;
  sc.seconds = m_.collective(c, o_.members(sc.group), &sigma);
  ++b_.modeled;
  coll_of_trace_[ci] = static_cast<int32_t>(b_.program.collectives.size());
  b_.program.collectives.push_back(sc);
  b_.coll_sigma.push_back(sigma);
  op.kind = SimOp::Kind::Issue;
  op.coll = static_cast<int32_t>(b_.program.collectives.size() - 1);
  add(op, 0, label, OpFamily::Collective, host + sc.seconds);
}

BuiltProgram Builder::run() {
  b_.program.name = t_.source;
  b_.program.host_runs_ops = m_.cluster().device.kind == "cpu";
  const std::vector<StepSpan> steps = chosen_steps(t_, o_.steps, o_.all_steps, b_.steps);
  for (const StepSpan& s : steps) {
    for (uint32_t node : step_units(t_, s)) {
      const NodeKind k = t_.nodes[node].kind;
      if (k == NodeKind::Collective || k == NodeKind::Wait || k == NodeKind::CommOp)
        comm(node);
      else
        compute(node);
    }
    SimOp end;
    end.kind = SimOp::Kind::StepEnd;
    b_.program.ops.push_back(end);
    b_.op_sigma.push_back(0);
  }
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
  }
  for (SimCollective& c : p.collectives) c.seconds *= f;
  return p;
}

}  // namespace reprise::predict::detail
