#include "reprise/predict/simulator.h"

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <tuple>

#include "reprise/common/error.h"

namespace reprise::predict {
namespace {

constexpr uint16_t kHost = 0;
constexpr uint16_t kCommBit = 0x8000;

struct EvRef {
  int32_t rank = -1;
  uint32_t idx = 0;
};

// One busy span of a resource, kept for the critical path, the timeline and exposed communication.
struct Ev {
  double start = 0, end = 0;
  uint32_t op = 0;       // index in the rank's program
  uint16_t res = kHost;  // kHost, 1 + compute stream, kCommBit | channel (a group, or a p2p direction past them)
  EvRef pred;            // what it waited for last
};

struct Instance {  // one collective call of one group, across its members (a send and its receive, for p2p)
  int arrived = 0;
  int need = 0;  // arrivals that complete it: the group's size, or 2
  double ready = 0;
  EvRef ready_ev;
  double end = 0;
  bool done = false;
  double seconds = 0;
  int32_t group = 0;
  int64_t src = -1, dst = -1;  // p2p: the sending and the receiving rank
  struct Arrival {
    int64_t rank;
    uint32_t op;  // the op it arrived with
    double at;
    uint32_t chan;  // the arriving rank's channel
  };
  std::vector<Arrival> arrivals;
  std::vector<int64_t> waiting;
};

struct Rank {
  const SimProgram* p = nullptr;
  size_t pc = 0;
  bool arrived_here = false;  // the current op already registered its arrival
  int64_t blocked_on = -1;
  double host = 0, step_start = 0;
  EvRef host_last;
  std::vector<double> stream_tail;
  std::vector<EvRef> stream_last;
  std::vector<double> comm_tail;  // by channel: the groups, then this rank's p2p directions
  std::vector<EvRef> comm_last;
  std::vector<uint16_t> chan_res;  // by channel: its resource (kCommBit | global channel)
  std::vector<double> op_end;      // per program op: when its work ended (cross-stream dependencies)
  std::vector<EvRef> op_ev;
  std::vector<int64_t> instance;  // per program collective: its Instance
  std::vector<uint32_t> chan;     // per program collective: its channel
  std::vector<Ev> events;
  SimRank out;
};

class Simulation {
 public:
  explicit Simulation(const SimInput& in) : in_(in) {}
  SimResult run();

 private:
  const SimInput& in_;
  std::vector<Rank> ranks_;
  std::vector<std::vector<int64_t>> inst_of_;  // group -> seq -> instance
  // p2p directions: (group, src, dst) -> its global channel (past the groups') and its instances by seq
  std::map<std::tuple<int32_t, int64_t, int64_t>, std::pair<uint16_t, std::vector<int64_t>>> p2p_;
  std::vector<std::tuple<int32_t, int64_t, int64_t>> p2p_names_;  // by global channel - groups
  std::vector<Instance> inst_;
  std::deque<int64_t> runnable_;

  void setup();
  bool step(int64_t r);  // runs rank r until it blocks or ends; false when blocked
  EvRef log(int64_t r, double start, double end, uint32_t op, uint16_t res, EvRef pred) {
    Rank& k = ranks_[r];
    k.events.push_back({start, end, op, res, pred});
    return {static_cast<int32_t>(r), static_cast<uint32_t>(k.events.size() - 1)};
  }
  double ev_end(EvRef e) const { return e.rank < 0 ? 0 : ranks_[e.rank].events[e.idx].end; }
  static void later(double& t, EvRef& pred, double cand, EvRef cand_ev) {
    if (cand > t) t = cand, pred = cand_ev;
  }
  // The host thread spends `seconds` on op `pc` (its call), from where it is.
  void host_call(int64_t r, uint32_t pc, double seconds) {
    Rank& k = ranks_[r];
    k.host_last = log(r, k.host, k.host + seconds, pc, kHost, k.host_last);
    k.host += seconds;
    k.out.host_busy += seconds;
  }
  // False (and rank r queued on it) while collective instance `inst` has not completed.
  bool done_or_wait(int64_t r, int64_t inst) {
    if (inst_[inst].done) return true;
    inst_[inst].waiting.push_back(r);
    return false;
  }
  // After a completed collective on channel `ch`, the host (CPU: MPI progresses on it) or the compute stream (GPU)
  // goes on.
  void continue_after(Rank& k, bool cpu, uint16_t stream, uint32_t ch) {
    if (cpu)
      later(k.host, k.host_last, k.comm_tail[ch], k.comm_last[ch]);
    else
      later(k.stream_tail[stream], k.stream_last[stream], k.comm_tail[ch], k.comm_last[ch]);
  }
  int64_t instance_of(int64_t r, const SimCollective& sc, const std::vector<std::vector<bool>>& member, uint32_t& ch);
  void arrive(int64_t r, int32_t coll, double at, EvRef ev);
  void resolve(int64_t inst);
  [[noreturn]] void deadlock() const;
  std::string resource_name(uint16_t res) const;
  void finish(SimResult& out);
};

void Simulation::setup() {
  const size_t n = in_.programs.size();
  ranks_.resize(n);
  std::vector<std::vector<bool>> member(in_.groups.size(), std::vector<bool>(n, false));
  for (size_t g = 0; g < in_.groups.size(); ++g)
    for (int64_t m : in_.groups[g].ranks) {
      if (m < 0 || static_cast<size_t>(m) >= n)
        throw UserError("simulation: group " + in_.groups[g].name + " names rank " + std::to_string(m) +
                        ", outside a world of " + std::to_string(n));
      member[g][m] = true;
    }
  inst_of_.assign(in_.groups.size(), {});
  for (size_t r = 0; r < n; ++r) {
    Rank& k = ranks_[r];
    k.p = in_.programs[r];
    uint16_t streams = 1;
    for (const SimOp& op : k.p->ops) streams = std::max<uint16_t>(streams, op.stream + 1);
    k.stream_tail.assign(streams, 0);
    k.stream_last.assign(streams, {});
    for (size_t g = 0; g < in_.groups.size(); ++g) k.chan_res.push_back(static_cast<uint16_t>(kCommBit | g));
    k.op_end.assign(k.p->ops.size(), 0);
    k.op_ev.assign(k.p->ops.size(), {});
    k.instance.assign(k.p->collectives.size(), -1);
    k.chan.assign(k.p->collectives.size(), 0);
    k.events.reserve(k.p->ops.size() * 2);
    for (size_t c = 0; c < k.p->collectives.size(); ++c)
      k.instance[c] = instance_of(static_cast<int64_t>(r), k.p->collectives[c], member, k.chan[c]);
    k.comm_tail.assign(k.chan_res.size(), 0);
    k.comm_last.assign(k.chan_res.size(), {});
    runnable_.push_back(static_cast<int64_t>(r));
  }
}

// The instance rank r's collective `sc` joins (made by its first member), and the rank's channel for it.
int64_t Simulation::instance_of(int64_t r, const SimCollective& sc, const std::vector<std::vector<bool>>& member,
                                uint32_t& ch) {
  Rank& k = ranks_[r];
  if (sc.group < 0 || static_cast<size_t>(sc.group) >= in_.groups.size())
    throw UserError(k.p->name + ": a collective names group index " + std::to_string(sc.group) + ", not defined");
  const std::string& gname = in_.groups[sc.group].name;
  if (!member[sc.group][r])
    throw UserError(k.p->name + ": rank " + std::to_string(r) + " issues a collective on group " + gname +
                    ", which it is not a member of");
  if (sc.seq < 0) throw UserError(k.p->name + ": a collective on group " + gname + " has no sequence number");
  std::vector<int64_t>* seqs = &inst_of_[sc.group];
  ch = static_cast<uint32_t>(sc.group);
  if (sc.peer >= 0 || sc.send) {
    if (sc.peer < 0 || static_cast<size_t>(sc.peer) >= ranks_.size() || sc.peer == r || !member[sc.group][sc.peer])
      throw UserError(k.p->name + ": rank " + std::to_string(r) + (sc.send ? " sends to" : " receives from") +
                      " rank " + std::to_string(sc.peer) + " on group " + gname + ", which is not another member");
    const auto key = sc.send ? std::make_tuple(sc.group, r, sc.peer) : std::make_tuple(sc.group, sc.peer, r);
    auto it = p2p_.find(key);
    if (it == p2p_.end()) {
      const size_t global = in_.groups.size() + p2p_names_.size();
      if (global >= kCommBit)
        throw UserError("simulation: more than " + std::to_string(kCommBit - in_.groups.size()) +
                        " point-to-point directions between ranks");
      it = p2p_.emplace(key, std::make_pair(static_cast<uint16_t>(kCommBit | global), std::vector<int64_t>())).first;
      p2p_names_.push_back(key);
    }
    seqs = &it->second.second;
    const auto local = std::find(k.chan_res.begin(), k.chan_res.end(), it->second.first);
    ch = static_cast<uint32_t>(local - k.chan_res.begin());
    if (local == k.chan_res.end()) k.chan_res.push_back(it->second.first);
  }
  if (seqs->size() <= static_cast<size_t>(sc.seq)) seqs->resize(sc.seq + 1, -1);
  int64_t& at = (*seqs)[sc.seq];
  if (at < 0) {
    at = static_cast<int64_t>(inst_.size());
    Instance i;
    i.group = sc.group;
    i.need = sc.peer >= 0 ? 2 : static_cast<int>(in_.groups[sc.group].ranks.size());
    if (sc.peer >= 0) i.src = sc.send ? r : sc.peer, i.dst = sc.send ? sc.peer : r;
    i.seconds = sc.seconds;
    inst_.push_back(i);
  }
  Instance& i = inst_[at];
  i.seconds = std::max(i.seconds, sc.seconds);  // members may size it differently (uneven splits): the largest
  return at;
}

void Simulation::arrive(int64_t r, int32_t coll, double at, EvRef ev) {
  Rank& k = ranks_[r];
  Instance& i = inst_[k.instance[coll]];
  ++i.arrived;
  i.arrivals.push_back({r, static_cast<uint32_t>(k.pc), at, k.chan[coll]});
  if (at >= i.ready) i.ready = at, i.ready_ev = ev;
  if (i.arrived == i.need) resolve(k.instance[coll]);
}

void Simulation::resolve(int64_t inst) {
  Instance& i = inst_[inst];
  i.done = true;
  // The transfer starts once the last member is ready (its stream free of its previous call of this group too).
  double begin = i.ready;
  EvRef pred = i.ready_ev;
  for (const Instance::Arrival& a : i.arrivals)
    later(begin, pred, ranks_[a.rank].comm_tail[a.chan], ranks_[a.rank].comm_last[a.chan]);
  i.end = begin + i.seconds;
  for (const Instance::Arrival& a : i.arrivals) {
    Rank& k = ranks_[a.rank];
    // Each member is in the call from its own arrival (a kernel spinning for its peers, an MPI wait) to the end.
    const double start = std::max(a.at, k.comm_tail[a.chan]);
    k.comm_last[a.chan] = log(a.rank, start, i.end, a.op, k.chan_res[a.chan], pred);
    k.comm_tail[a.chan] = i.end;
    k.out.comm_busy += i.end - start;
  }
  for (int64_t w : i.waiting) runnable_.push_back(w);
  i.waiting.clear();
}

bool Simulation::step(int64_t r) {
  Rank& k = ranks_[r];
  const SimProgram& p = *k.p;
  const bool cpu = p.host_runs_ops;
  while (k.pc < p.ops.size()) {
    const SimOp& op = p.ops[k.pc];
    const uint32_t pc = static_cast<uint32_t>(k.pc);
    switch (op.kind) {
      case SimOp::Kind::Compute:
      case SimOp::Kind::HostSync: {
        double start = k.host;
        EvRef pred = k.host_last;
        for (uint32_t d = op.deps; d < op.deps + op.num_deps; ++d)
          later(start, pred, k.op_end[p.deps[d]], k.op_ev[p.deps[d]]);
        if (cpu) {
          k.host_last = log(r, start, start + op.host, pc, kHost, pred);
          k.host = start + op.host;
          k.out.host_busy += op.host;
          k.op_end[pc] = k.host, k.op_ev[pc] = k.host_last;
          break;
        }
        // The kernel starts after its launch: the host part's end, or (measured host overheads) its first launch
        // call's, the host part then logged in two pieces so the critical path runs through the first.
        const bool early = op.launch_at >= 0 && op.launch_at < op.host;
        host_call(r, pc, early ? op.launch_at : op.host);
        double ks = k.host;
        EvRef kp = k.host_last;
        if (early) host_call(r, pc, op.host - op.launch_at);
        later(ks, kp, start, pred);
        later(ks, kp, k.stream_tail[op.stream], k.stream_last[op.stream]);
        const EvRef kev = log(r, ks, ks + op.device, pc, static_cast<uint16_t>(1 + op.stream), kp);
        k.stream_tail[op.stream] = ks + op.device, k.stream_last[op.stream] = kev;
        k.out.compute_busy += op.device;
        k.op_end[pc] = ks + op.device, k.op_ev[pc] = kev;
        if (op.kind == SimOp::Kind::HostSync) later(k.host, k.host_last, ks + op.device, kev);
        break;
      }
      case SimOp::Kind::Issue: {
        const SimCollective& c = p.collectives[op.coll];
        const int64_t inst = k.instance[op.coll];
        if (!k.arrived_here) {
          host_call(r, pc, op.host);
          k.arrived_here = true;
          // An MPI collective's request progresses in its wait; a send or receive is matched once both are posted.
          if (cpu && c.waited && c.peer < 0) break;
          double at = k.host;
          EvRef ev = k.host_last;
          if (!cpu) later(at, ev, k.stream_tail[op.stream], k.stream_last[op.stream]);  // the stream's event
          arrive(r, op.coll, at, ev);
        }
        if (c.waited) break;
        if (!done_or_wait(r, inst)) return false;
        continue_after(k, cpu, op.stream, k.chan[op.coll]);  // a synchronous collective
        break;
      }
      case SimOp::Kind::Wait: {
        const SimCollective& c = p.collectives[op.coll];
        const int64_t inst = k.instance[op.coll];
        if (!k.arrived_here) {
          host_call(r, pc, op.host);
          k.arrived_here = true;
          if (cpu && c.peer < 0) arrive(r, op.coll, k.host, k.host_last);
        }
        if (!done_or_wait(r, inst)) return false;
        continue_after(k, cpu, op.stream, k.chan[op.coll]);
        break;
      }
      case SimOp::Kind::StepEnd: {
        if (op.host > 0) host_call(r, pc, op.host);  // the recorded host time after the step's last op
        for (size_t s = 0; s < k.stream_tail.size(); ++s)
          later(k.host, k.host_last, k.stream_tail[s], k.stream_last[s]);
        for (size_t g = 0; g < k.comm_tail.size(); ++g) later(k.host, k.host_last, k.comm_tail[g], k.comm_last[g]);
        k.out.step_seconds.push_back(k.host - k.step_start);
        k.step_start = k.host;
        break;
      }
    }
    k.arrived_here = false;
    ++k.pc;
  }
  k.out.end = k.host;
  return true;
}

void Simulation::deadlock() const {
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const Rank& k = ranks_[r];
    if (k.pc >= k.p->ops.size()) continue;
    const SimOp& op = k.p->ops[k.pc];
    if (op.coll < 0) continue;
    const SimCollective& c = k.p->collectives[op.coll];
    const Instance& i = inst_[k.instance[op.coll]];
    if (c.peer >= 0)
      throw UserError(k.p->name + ": rank " + std::to_string(r) + " waits at node " + std::to_string(op.node) +
                      " for its " + (c.send ? "send #" : "receive #") + std::to_string(c.seq) +
                      (c.send ? " to rank " : " from rank ") + std::to_string(c.peer) + " on group " +
                      in_.groups[c.group].name + ", which rank " + std::to_string(c.peer) + " never " +
                      (c.send ? "receives" : "sends") + " (the pipeline's sends and receives do not match)");
    std::string missing;
    for (int64_t m : in_.groups[c.group].ranks)
      if (std::none_of(i.arrivals.begin(), i.arrivals.end(), [&](const Instance::Arrival& a) { return a.rank == m; }))
        missing += (missing.empty() ? "" : ",") + std::to_string(m);
    throw UserError(k.p->name + ": rank " + std::to_string(r) + " waits at node " + std::to_string(op.node) +
                    " for collective #" + std::to_string(c.seq) + " of group " + in_.groups[c.group].name +
                    ", which rank(s) " + missing + " never issue (the ranks' collectives do not match)");
  }
  throw UserError("simulation: ranks blocked with no collective to wait for");
}

std::string Simulation::resource_name(uint16_t res) const {
  if (res == kHost) return "host";
  if (res & kCommBit) {
    const size_t ch = res & ~kCommBit;
    if (ch < in_.groups.size()) return "comm " + in_.groups[ch].name;
    const auto& [g, src, dst] = p2p_names_[ch - in_.groups.size()];
    return "p2p " + std::to_string(src) + "->" + std::to_string(dst) + " " + in_.groups[g].name;
  }
  return "stream " + std::to_string(res - 1);
}

// Measure of the union of `a` minus the union of `b` (both lists of [start, end)).
double exposed(std::vector<std::pair<double, double>> a, std::vector<std::pair<double, double>> b) {
  auto merge = [](std::vector<std::pair<double, double>>& v) {
    std::sort(v.begin(), v.end());
    std::vector<std::pair<double, double>> out;
    for (auto& x : v)
      if (!out.empty() && x.first <= out.back().second)
        out.back().second = std::max(out.back().second, x.second);
      else
        out.push_back(x);
    v.swap(out);
  };
  merge(a);
  merge(b);
  double total = 0;
  size_t j = 0;
  for (auto [s, e] : a) {
    double covered = 0;
    while (j < b.size() && b[j].second <= s) ++j;
    for (size_t q = j; q < b.size() && b[q].first < e; ++q)
      covered += std::max(0.0, std::min(e, b[q].second) - std::max(s, b[q].first));
    total += (e - s) - covered;
  }
  return total;
}

void Simulation::finish(SimResult& out) {
  out.ranks.resize(ranks_.size());
  int64_t slowest = 0;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    Rank& k = ranks_[r];
    std::vector<std::pair<double, double>> comm, busy;
    for (const Ev& e : k.events) {
      if (e.end <= e.start) continue;
      if (e.res & kCommBit)
        comm.emplace_back(e.start, e.end);
      else if (e.res != kHost || k.p->host_runs_ops)
        busy.emplace_back(e.start, e.end);
    }
    k.out.exposed_comm = exposed(comm, busy);
    out.ranks[r] = k.out;
    out.ops += static_cast<int64_t>(k.p->ops.size());
    if (k.out.end > out.ranks[slowest].end) slowest = static_cast<int64_t>(r);
  }
  out.makespan = ranks_.empty() ? 0 : out.ranks[slowest].end;
  auto event = [&](int64_t r, const Ev& e) {
    const SimProgram& p = *ranks_[r].p;
    const SimOp& op = p.ops[std::min<size_t>(e.op, p.ops.size() - 1)];
    const uint32_t node = op.node;
    SimEvent s;
    s.rank = r;
    s.resource = resource_name(e.res);
    s.node = node;
    s.name = op.kind == SimOp::Kind::StepEnd ? std::string("host time after the step's last op")
             : node < p.op_names.size()      ? p.op_names[node]
                                             : "node " + std::to_string(node);
    s.start = e.start, s.end = e.end;
    return s;
  };
  if (in_.critical_path && !ranks_.empty() && !ranks_[slowest].events.empty()) {
    // From the slowest rank's last-ending event back along what each event waited for.
    const auto& evs = ranks_[slowest].events;
    uint32_t last = 0;
    for (uint32_t i = 0; i < evs.size(); ++i)
      if (evs[i].end >= evs[last].end) last = i;
    for (EvRef at{static_cast<int32_t>(slowest), last}; at.rank >= 0;) {
      const Ev& e = ranks_[at.rank].events[at.idx];
      out.critical_path.push_back(event(at.rank, e));
      at = e.pred;
    }
    std::reverse(out.critical_path.begin(), out.critical_path.end());
  }
  for (int64_t r : in_.timeline_ranks)
    if (r >= 0 && static_cast<size_t>(r) < ranks_.size())
      for (const Ev& e : ranks_[r].events) out.timeline.push_back(event(r, e));
}

SimResult Simulation::run() {
  setup();
  while (!runnable_.empty()) {
    const int64_t r = runnable_.front();
    runnable_.pop_front();
    step(r);
  }
  for (const Rank& k : ranks_)
    if (k.pc < k.p->ops.size()) deadlock();
  SimResult out;
  finish(out);
  return out;
}

}  // namespace

SimResult simulate(const SimInput& in) { return Simulation(in).run(); }

}  // namespace reprise::predict
