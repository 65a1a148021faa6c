#include "reprise/predict/predict.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "program.h"
#include "reprise/common/clock.h"
#include "reprise/common/error.h"
#include "reprise/common/stats.h"
#include "reprise/generators/bundle.h"
#include "reprise/trace/host_gaps.h"
#include "reprise/trace/read.h"
#include "reprise/trace/summary.h"

namespace reprise::predict {
namespace {

// The standard normal quantile of (1 + confidence) / 2: the z of a two-sided interval, by bisection on erfc.
double two_sided_z(double confidence) {
  const double p = (1 + std::clamp(confidence, 0.0, 0.9999)) / 2;
  double lo = 0, hi = 10;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// Process groups of the whole run, keyed by their members (as replay keys them: group names of old traces differ
// between ranks).
class Groups {
 public:
  explicit Groups(int world) : world_(world) {}

  // The members of a collective's group (collective_group_ranks): the group node of the bundle's manifest (`extra`)
  // or of the trace, else what the collective says.
  int32_t of(const Trace& t, const Collective& c, const std::vector<ProcessGroup>& extra) {
    const ProcessGroup* pg = find_process_group(extra, c.pg_name);
    if (!pg) pg = find_process_group(t.process_groups, c.pg_name);
    const std::vector<int64_t> ranks = collective_group_ranks(c, pg, world_);
    auto [it, fresh] = index_.emplace(ranks, static_cast<int32_t>(groups_.size()));
    if (fresh) {
      SimGroup g;
      g.name = ranks.size() == static_cast<size_t>(world_) ? "world"
                                                           : (pg && !pg->desc.empty() ? pg->desc : "pg " + c.pg_name);
      g.ranks = ranks;
      groups_.push_back(std::move(g));
    }
    return it->second;
  }
  const std::vector<SimGroup>& all() const { return groups_; }

 private:
  int world_;
  std::map<std::vector<int64_t>, int32_t> index_;
  std::vector<SimGroup> groups_;
};

struct Built {
  std::unique_ptr<Trace> trace;
  detail::BuiltProgram b;
  SimProgram lo, hi;
  std::vector<int32_t> groups_used;
  int64_t rank = 0;       // the rank whose trace it was built from
  double contention = 1;  // how much slower its streaming ops run beside the node's other ranks (contend())
  double jitter = 0;      // seconds per iteration its collectives wait for the slowest member's noise (straggle())
};

// The recorded host time's scale for a trace: the given one, else replay's --host-time default (docs/replay.md):
// recorded on a GPU, where a launch-bound step's time is its host's; on a CPU only for a Python capture's profiled
// steps (the observer's cost is in the gaps of other traces' times).
double host_time_scale(const PredictOptions& o, const Trace& t) {
  if (o.host_time_scale >= 0) return o.host_time_scale;
  return o.cluster.device.kind != "cpu" || gaps_are_framework_time(t) ? 1 : 0;
}

bool has_p2p(const Built& b) {
  const std::vector<SimCollective>& cs = b.b.program.collectives;
  return std::any_of(cs.begin(), cs.end(), [](const SimCollective& c) { return c.peer >= 0; });
}

class Predictor {
 public:
  Predictor(const std::string& input, const PredictOptions& o)
      : input_(input), o_(o), model_(o.cluster, o.calibration) {}
  Prediction run();

 private:
  const std::string& input_;
  const PredictOptions& o_;
  CostModel model_;
  std::unique_ptr<Groups> groups_;
  std::vector<ProcessGroup> bundle_groups_;
  std::vector<OpTimes> op_times_;
  std::vector<std::unique_ptr<Built>> built_;
  std::vector<const Built*> rank_program_;  // per world rank
  std::map<int64_t, double> plain_step_;    // by rank: the step without the observers (capture manifest)
  std::map<int64_t, double> plain_loader_;  // by rank: its DataLoader calls' time without them (the same)
  Prediction p_;

  void note(const std::string& phase, int64_t done, int64_t total) const {
    if (o_.progress) o_.progress(phase, done, total);
  }
  const OpTimes* op_times_for(int64_t rank) const {
    for (const OpTimes& t : op_times_)
      if (t.rank == rank) return &t;
    return op_times_.size() == 1 && rank == 0 ? &op_times_[0] : nullptr;
  }
  void set_world(int world);
  Built* build(std::unique_ptr<Trace> t, int64_t rank);
  void contend();
  void straggle();
  void finish();
  bool serves(const Built& b, int64_t rank) const;
  void load_bundle();
  void load_traces();
};

void Predictor::set_world(int world) {
  p_.world_size = world;
  groups_ = std::make_unique<Groups>(world);
  rank_program_.assign(world, nullptr);
  const Cluster& c = o_.cluster;
  // The ranks that run at once on one node: as many as it has devices, fewer when the world is smaller; those that
  // live there: more, when a CPU's ranks outnumber its cores and take turns on them.
  const int64_t running = std::min<int64_t>(world, c.devices_per_node);
  const int64_t resident = world > c.devices() && c.device.kind == "cpu" ? (world + c.nodes - 1) / c.nodes : running;
  p_.ranks_running = running;
  p_.ranks_resident = resident;
  if (world <= c.devices()) return;
  if (c.device.kind == "cpu") {
    p_.oversubscribed = static_cast<double>(world) / static_cast<double>(c.devices());
    p_.warnings.push_back(std::to_string(world) + " ranks share the " + std::to_string(c.devices()) + " device(s) of " +
                          c.name + ": every op " + std::to_string(p_.oversubscribed).substr(0, 4) + "x slower");
  } else {
    const LinkLevel& outer = c.levels.back();
    const bool within_a_node = outer.span != 0 && outer.span <= c.devices_per_node;
    p_.warnings.push_back(
        std::to_string(world) + " ranks on " + c.name + ", which has " + std::to_string(c.devices()) +
        " device(s): ranks past them are placed as if the cluster had more nodes, joined by " + outer.name +
        (within_a_node ? ", its only link level (describe the link between nodes for a true figure)" : ""));
  }
}

Built* Predictor::build(std::unique_ptr<Trace> t, int64_t rank) {
  auto b = std::make_unique<Built>();
  b->trace = std::move(t);
  b->rank = rank;
  const Trace& tr = *b->trace;
  detail::BuildOptions bo;
  bo.steps = o_.steps;
  bo.all_steps = o_.all_steps;
  bo.op_times = op_times_for(rank);
  bo.rank = rank;
  bo.host_time_scale = host_time_scale(o_, tr);
  bo.hold_ops = o_.hold_ops;
  bo.data_loader_scale = o_.data_loader_scale;
  if (auto plain = plain_step_.find(rank); plain != plain_step_.end()) bo.plain_step_seconds = plain->second;
  if (auto plain = plain_loader_.find(rank); plain != plain_loader_.end()) bo.plain_data_loader_seconds = plain->second;
  bo.group_of = [&](const Collective& c) {
    const int32_t g = groups_->of(tr, c, bundle_groups_);
    if (std::find(b->groups_used.begin(), b->groups_used.end(), g) == b->groups_used.end()) b->groups_used.push_back(g);
    return g;
  };
  bo.members = [&](int32_t g) -> const std::vector<int64_t>& { return groups_->all()[g].ranks; };
  b->b = detail::build_program(tr, model_, bo);
  built_.push_back(std::move(b));
  return built_.back().get();
}

// Memory contention on a CPU node (docs/predict.md): a rank's memory and embedding ops (OpCost::streaming) slow by
// the calibration's factor for the ranks running at once on its node, at the smaller of its working set and its
// node's other ranks' (each rank of the measurement streamed over a working set of its own that size), weighted by
// the share of the step the others stream: each rank's streaming time over the slowest rank's busy time, which
// bounds a step its ranks run in lockstep (1 where they stream throughout, as the measurement's ranks did; near 0
// beside ranks that mostly wait). A program serving several ranks takes the factor of the rank it was built from.
void Predictor::contend() {
  const Calibration* cal = o_.calibration;
  if (!cal || cal->contention.empty() || o_.cluster.device.kind != "cpu" || p_.ranks_running < 2) return;
  const size_t world = rank_program_.size();
  auto busy = [](const Built& b) {
    double s = 0;
    for (const SimOp& op : b.b.program.ops) s += op.host;
    return s / std::max(1, b.b.program.steps);
  };
  double slowest = 0;
  for (const auto& b : built_) slowest = std::max(slowest, busy(*b));
  if (slowest <= 0) return;
  const size_t per_node = static_cast<size_t>(std::max<int64_t>(p_.ranks_resident, 1));
  for (const auto& b : built_) {
    const size_t r = static_cast<size_t>(b->rank), first = r / per_node * per_node;
    const int64_t on_node = static_cast<int64_t>(std::min(world, first + per_node) - first);  // a last node: fewer
    double share = 0, set = 0;
    int others = 0;
    for (size_t s = first; s < std::min(world, first + per_node); ++s) {
      if (s == r) continue;
      share += rank_program_[s]->b.streaming_seconds / slowest;
      set += rank_program_[s]->b.working_set_bytes;
      ++others;
    }
    if (others == 0 || b->b.streaming_seconds <= 0) continue;
    share = std::min(1.0, share / others);
    const double ws = std::min(b->b.working_set_bytes, set / others);
    double factor[kOpFamilyCount];
    for (int f = 0; f < kOpFamilyCount; ++f) factor[f] = 1;
    for (OpFamily f : {OpFamily::Memory, OpFamily::Embedding})
      factor[static_cast<int>(f)] =
          1 + (cal->contention_factor(family_name(f), std::min(p_.ranks_running, on_node), ws) - 1) * share;
    detail::BuiltProgram& p = b->b;
    double extra = 0;
    for (size_t k = 0; k < p.program.ops.size(); ++k) {
      if (p.op_streaming[k] <= 0) continue;
      const double add = (factor[static_cast<int>(p.op_family[k])] - 1) * p.op_streaming[k];
      SimOp& op = p.program.ops[k];
      op.host += add;
      if (op.launch_at >= 0) op.launch_at += add;
      p.per_op[p.program.op_names[op.node]].seconds += add / std::max(1, p.program.steps);
      extra += add;
    }
    b->contention = 1 + extra / std::max(1, p.program.steps) / p.streaming_seconds;
  }
}

// The machine's noise at each collective (docs/predict.md, "Stragglers"): a collective completes when its last member
// arrives, so each member's segment of work since its previous collective ends, in expectation, the calibration's
// jitter excess later than its own time (for the segment's length and the collective's group size). On a CPU with
// a calibration that measured it; a program serving several ranks takes its own segments.
void Predictor::straggle() {
  const Calibration* cal = o_.calibration;
  if (!cal || cal->jitter.empty() || o_.cluster.device.kind != "cpu") return;
  const std::vector<SimGroup>& groups = groups_->all();
  for (const auto& b : built_) {
    SimProgram& p = b->b.program;
    double segment = 0, added = 0;
    for (SimOp& op : p.ops) {
      if (op.kind == SimOp::Kind::Compute || op.kind == SimOp::Kind::HostSync) {
        segment += op.host;
      } else if (op.kind == SimOp::Kind::Issue) {
        const SimCollective& c = p.collectives[static_cast<size_t>(op.coll)];
        const int64_t n = c.peer >= 0 ? 2 : static_cast<int64_t>(groups[static_cast<size_t>(c.group)].ranks.size());
        const double extra = cal->jitter_excess(n, segment) * segment;
        op.host += extra;
        added += extra;
        segment = 0;
      }
    }
    b->jitter = added / std::max(1, p.steps);
  }
}

// What every program takes after the contention: more CPU ranks than the machine has devices (cores / threads)
// share the cores, every op slower by the ratio (MPI ranks poll while they wait, so none gives its core back;
// collective curves measured at that world size hold the sharing already); then the interval's programs.
void Predictor::finish() {
  const double z = two_sided_z(o_.confidence);
  for (auto& b : built_) {
    if (const double k = p_.oversubscribed; k > 1)
      for (SimOp& op : b->b.program.ops) op.host *= k, op.device *= k;
    b->lo = detail::scaled_program(b->b, -z);
    b->hi = detail::scaled_program(b->b, z);
  }
}

// Whether a program built from one rank's trace serves another rank of its role: a member of every group it uses,
// no measured op times of its own, and no sends or receives (their peers are the first rank's).
bool Predictor::serves(const Built& b, int64_t rank) const {
  if (op_times_for(rank) != op_times_for(b.rank) || has_p2p(b)) return false;
  for (int32_t g : b.groups_used) {
    const std::vector<int64_t>& m = groups_->all()[g].ranks;
    if (!std::binary_search(m.begin(), m.end(), rank)) return false;
  }
  return true;
}

void Predictor::load_bundle() {
  const gen::Bundle bundle = gen::read_bundle(input_);
  p_.name = bundle.name;
  bundle_groups_ = bundle.process_groups;
  for (const gen::RankExpectation& x : bundle.expected)
    if (!x.iteration_seconds.empty()) plain_step_[x.rank] = median(x.iteration_seconds);
  if (!bundle.capture_manifest.empty()) {  // op times kept through other sizes or dtypes: the source's plain step
    const gen::CaptureFacts facts =
        gen::read_capture_manifest(bundle.capture_manifest, input_ + "/benchmark.yaml: capture_manifest");
    for (int64_t r = 0; r < bundle.world_size; ++r) {
      if (const double s = gen::plain_step_seconds(bundle, facts, r); s > 0) plain_step_[r] = s;
      if (const double s = gen::plain_data_loader_seconds(bundle, facts, r); s > 0) plain_loader_[r] = s;
    }
  }
  set_world(bundle.world_size);
  ReadOptions ro;
  ro.warn = o_.warn;
  int64_t done = 0;
  for (const gen::BundleRole& role : bundle.roles) {
    note("build", done, bundle.world_size);
    const Built* first = nullptr;
    for (int64_t r : role.ranks) {
      if (r < 0 || r >= bundle.world_size)
        throw UserError(input_ + ": role " + role.file + " names rank " + std::to_string(r));
      if (!first || !serves(*first, r)) {
        const Built* b = build(std::make_unique<Trace>(gen::load_bundle_rank(bundle, r, ro)), r);
        if (!first) first = b;
        rank_program_[r] = b;
      } else {
        rank_program_[r] = first;
      }
      ++done;
    }
  }
}

void Predictor::load_traces() {
  ReadOptions ro;
  ro.warn = o_.warn;
  TraceSet set = reprise::load_traces({input_}, ro);
  if (set.ranks.empty()) throw UserError(input_ + ": no trace");
  // A capture folder's manifest: how long each rank's step ran without the observers.
  if (const auto facts = gen::read_capture_folder_manifest(input_)) {
    for (const auto& [rank, seconds] : facts->iteration_seconds)
      if (!seconds.empty()) plain_step_[rank] = median(seconds);
    for (const auto& [rank, seconds] : facts->data_loader_seconds)
      if (!seconds.empty()) plain_loader_[rank] = median(seconds);
  }
  for (const Trace& t : set.ranks)
    if (t.from_kineto_only)
      throw UserError(t.source + ": a Kineto trace alone has no ops to predict (an ET is needed)");
  std::filesystem::path stem(input_);
  p_.name = stem.filename().string();
  for (const char* ext : {".gz", ".json", ".et"})
    if (p_.name.size() > std::strlen(ext) &&
        p_.name.compare(p_.name.size() - std::strlen(ext), std::string::npos, ext) == 0)
      p_.name.resize(p_.name.size() - std::strlen(ext));
  int world = 1;
  for (const Trace& t : set.ranks) world = std::max(world, trace_world_size(t, static_cast<int>(set.ranks.size())));
  set_world(world);
  if (set.ranks.size() == 1) {  // one trace of a larger job: every rank replays it, as replay does
    const Built* b = build(std::make_unique<Trace>(std::move(set.ranks[0])), 0);
    if (world > 1 && has_p2p(*b))
      throw UserError(b->trace->source + ": one rank's trace of a " + std::to_string(world) +
                      "-rank job sends or receives point-to-point, so it cannot stand for every rank: give every "
                      "rank's trace");
    for (int64_t r = 0; r < world; ++r) rank_program_[r] = b;
    return;
  }
  for (size_t k = 0; k < set.ranks.size(); ++k) {
    note("build", static_cast<int64_t>(k), static_cast<int64_t>(set.ranks.size()));
    const int64_t r = set.ranks[k].rank >= 0 ? set.ranks[k].rank : static_cast<int64_t>(k);
    if (r >= world)
      throw UserError(set.ranks[k].source + ": rank " + std::to_string(r) + " outside a world of " +
                      std::to_string(world));
    rank_program_[r] = build(std::make_unique<Trace>(std::move(set.ranks[k])), r);
  }
  for (int64_t r = 0; r < world; ++r)
    if (!rank_program_[r])
      throw UserError(input_ + ": no trace for rank " + std::to_string(r) + " of " + std::to_string(world));
}

Prediction Predictor::run() {
  p_.source = input_;
  p_.cluster = o_.cluster.name;
  p_.confidence = o_.confidence;
  for (const std::string& f : o_.op_times_files)
    for (OpTimes& t : read_op_times(f)) op_times_.push_back(std::move(t));
  const double t0 = now_seconds();
  if (gen::is_bundle(input_))
    load_bundle();
  else
    load_traces();
  if (!o_.name.empty()) p_.name = o_.name;
  contend();
  straggle();
  finish();
  p_.programs = static_cast<int>(built_.size());
  p_.build_seconds = now_seconds() - t0;

  for (int64_t r : o_.timeline_ranks)
    if (r < 0 || static_cast<size_t>(r) >= rank_program_.size())
      throw UserError(input_ + ": timeline rank " + std::to_string(r) + " is not one of its " +
                      std::to_string(rank_program_.size()) + " rank(s)");
  p_.launch = o_.cluster.launch_commands(p_.world_size, input_, o_.reprise_binary);
  const Built& zero = *rank_program_[0];
  auto idle = [](const std::unique_ptr<Built>& x) {
    return std::all_of(x->b.program.ops.begin(), x->b.program.ops.end(),
                       [](const SimOp& op) { return op.kind == SimOp::Kind::StepEnd; });
  };
  if (std::all_of(built_.begin(), built_.end(), idle))
    throw UserError(input_ + ": its steps (" + (zero.b.steps.empty() ? std::string("none") : zero.b.steps.front()) +
                    (zero.b.steps.size() > 1 ? ", ..." : "") + ") issue no op to predict");
  p_.steps = zero.b.steps;
  auto input_of = [&](SimProgram Built::*which, bool timeline) {
    SimInput in;
    in.groups = groups_->all();
    for (const Built* b : rank_program_) in.programs.push_back(which ? &(b->*which) : &b->b.program);
    in.critical_path = timeline;
    if (timeline) {  // each rank once, however often it was asked for
      in.timeline_ranks = o_.timeline_ranks;
      std::sort(in.timeline_ranks.begin(), in.timeline_ranks.end());
      in.timeline_ranks.erase(std::unique(in.timeline_ranks.begin(), in.timeline_ranks.end()), in.timeline_ranks.end());
    }
    return in;
  };
  note("simulate", 0, 3);
  const double t1 = now_seconds();
  SimResult mid = simulate(input_of(nullptr, true));
  p_.simulate_seconds = now_seconds() - t1;
  note("simulate", 1, 3);
  SimResult lo = simulate(input_of(&Built::lo, false));
  note("simulate", 2, 3);
  SimResult hi = simulate(input_of(&Built::hi, false));
  note("simulate", 3, 3);
  p_.simulated_ops = mid.ops;

  auto mean_step = [](const SimRank& r) {
    double s = 0;
    for (double x : r.step_seconds) s += x;
    return r.step_seconds.empty() ? 0 : s / static_cast<double>(r.step_seconds.size());
  };
  for (size_t r = 0; r < mid.ranks.size(); ++r) {
    RankPrediction rp;
    rp.rank = static_cast<int64_t>(r);
    rp.seconds = mean_step(mid.ranks[r]);
    rp.lo = std::min(rp.seconds, mean_step(lo.ranks[r]));
    rp.hi = std::max(rp.seconds, mean_step(hi.ranks[r]));
    rp.sim = mid.ranks[r];
    rp.streaming_seconds = rank_program_[r]->b.streaming_seconds;
    rp.contention = rank_program_[r]->contention;
    rp.working_set_bytes = rank_program_[r]->b.working_set_bytes;
    rp.jitter_seconds = rank_program_[r]->jitter;
    // Busy and exposed times per step, as the iteration time is: the simulation sums them over its steps.
    const double steps = static_cast<double>(std::max<size_t>(rp.sim.step_seconds.size(), 1));
    for (double* x : {&rp.sim.host_busy, &rp.sim.compute_busy, &rp.sim.comm_busy, &rp.sim.exposed_comm}) *x /= steps;
    p_.seconds = std::max(p_.seconds, rp.seconds);
    p_.lo = std::max(p_.lo, rp.lo);
    p_.hi = std::max(p_.hi, rp.hi);
    p_.ranks.push_back(std::move(rp));
  }
  p_.critical_path = std::move(mid.critical_path);
  p_.timeline = std::move(mid.timeline);

  const detail::BuiltProgram& b = zero.b;
  p_.ops = b.ops;
  p_.modeled = b.modeled;
  p_.fallback = b.fallback;
  p_.measured = b.measured;
  p_.unmodeled = b.unmodeled;
  p_.host_time_scale = host_time_scale(o_, *zero.trace);
  p_.host_time_seconds = b.host_time_seconds;
  p_.op_floor_seconds = b.op_floor_seconds;
  p_.data_loader_seconds = b.data_loader_seconds;
  p_.host_time_known = b.op_times;
  for (const auto& [label, tot] : b.per_op) {
    FamilyTime& f = p_.families[family_name(tot.family)];
    f.count += tot.count;
    f.seconds += tot.seconds;
    p_.per_op.push_back({label, family_name(tot.family), tot.count, tot.seconds});
  }
  std::sort(p_.per_op.begin(), p_.per_op.end(), [](const auto& x, const auto& y) { return x.seconds > y.seconds; });
  // Results of another trace (or another rank) match none of these node ids: say so, not a quiet model time. (Some
  // ops go unmatched in good results too: collectives are always modelled, and a replay of one step times no other.)
  if (const OpTimes* times = op_times_for(zero.rank); times && b.ops > 0 && b.measured == 0 && !times->seconds.empty())
    p_.warnings.push_back("the op times of " + (times->trace.empty() ? std::string("--op-times") : times->trace) +
                          " (rank " + std::to_string(times->rank) + ") match none of the " + std::to_string(b.ops) +
                          " ops of rank 0 by node id: results of another trace? The models time every op");
  if (o_.calibration && o_.cluster.device.kind == "cpu" && !o_.calibration->samples.empty() &&
      o_.calibration->fresh_page_seconds_per_byte < 0)
    p_.warnings.push_back(
        "the calibration has no fresh-page cost (made before it was measured?): its samples of "
        "outputs of 32 MiB or more may hold page faults; calibrate again");
  if (o_.hold_ops && o_.cluster.device.kind == "cpu")
    p_.warnings.push_back(
        "--hold-ops holds nothing on a CPU cluster: an op's recorded span is its dispatch only on a GPU");
  else if (o_.hold_ops && p_.host_time_scale == 0)
    p_.warnings.push_back("--hold-ops holds nothing with host time none: it is held as the host time is scaled");
  if (b.fallback > 0)
    p_.warnings.push_back(std::to_string(b.fallback) +
                          " op(s) of rank 0 have no family model and were timed by the bytes they move");
  if (!p_.unmodeled.empty()) {
    int64_t n = 0;
    for (const auto& [op, c] : p_.unmodeled) n += c;
    p_.warnings.push_back(std::to_string(n) + " op(s) of rank 0 have no model: host time only (see coverage)");
  }
  return std::move(p_);
}

}  // namespace

Prediction predict(const std::string& input, const PredictOptions& options) { return Predictor(input, options).run(); }

}  // namespace reprise::predict
