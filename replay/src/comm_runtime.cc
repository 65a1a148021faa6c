#include "comm_runtime.h"

#include <cstring>
#include <set>
#include <sstream>

#ifdef REPRISE_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace reprise::replay::detail {
namespace {

std::string ranks_text(const std::vector<int>& r) {
  std::string s;
  for (size_t k = 0; k < r.size(); ++k) s += (k ? "," : "") + std::to_string(r[k]);
  return s;
}

std::vector<int> parse_ranks(const std::string& s) {
  std::vector<int> out;
  std::istringstream in(s);
  std::string x;
  while (std::getline(in, x, ',')) out.push_back(std::stoi(x));
  return out;
}

// What the members of a group must agree on for one collective, in words. all_to_allv's counts differ per rank by
// design: only its kind and dtype are compared.
// What the two ends of a send and its receive must agree on.
std::string describe_p2p(const CommSpec& s) {
  return std::to_string(s.args.count) + " " + comms::dtype_name(s.args.dtype) + " elements";
}

std::string describe(const CommSpec& s) {
  const comms::Descriptor& d = comms::describe(s.args.kind);
  std::string out = std::string(d.name) + " of " + comms::dtype_name(s.args.dtype);
  if (d.reduces) out += ", " + std::string(comms::reduce_op_name(s.args.op));
  if (d.rooted) out += ", root " + std::to_string(s.args.root);
  if (!d.per_peer_count)
    out += ", " + std::to_string(s.in_elems) + " elements in, " + std::to_string(s.out_elems) + " out";
  return out;
}

uint64_t fnv1a(const std::string& s, uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

constexpr char kLocalError = '!';

}  // namespace

// One rank's collectives on one group, in issue order: what it tells the others first is how many and a digest.
struct CommRuntime::GroupLog {
  std::vector<uint32_t> specs;  // in Plan::comms
  std::vector<uint64_t> hashes;
  uint64_t digest = fnv1a("");
};

// Collectives must match across each group's members in kind, dtype, sizes and order, or the ranks would hang or
// corrupt each other's buffers (MPI aborts on a size mismatch). A digest per group is exchanged first; only when a
// group's members disagree do they exchange per-collective hashes to find the first mismatch, then its description.
// Every rank reaches the same verdict from the same data, so every rank throws the same AgreedFailure. Returns the
// groups (by global ranks) any rank uses, in one order. Point-to-point operations are checked per pair instead
// (check_p2p_pairs): the two ends of a pair issue different operations.
std::vector<std::vector<int>> CommRuntime::check_collectives_agree(const Trace& trace) {
  const int W = world_.size(), me = world_.rank();
  std::string local_error;
  for (const CommGroup& g : plan_.comm_groups) {
    for (int r : g.ranks)
      if (r < 0 || r >= W)
        local_error = "process group " + g.name + " names rank " + std::to_string(r) + ", but the launch has " +
                      std::to_string(W) + " rank(s)";
    if (local_error.empty() && std::find(g.ranks.begin(), g.ranks.end(), me) == g.ranks.end())
      local_error = "rank " + std::to_string(me) + " replays collectives of process group " + g.name + " [" +
                    ranks_text(g.ranks) + "], which it is not in: is this its trace?";
  }
  std::vector<GroupLog> logs(plan_.comm_groups.size());
  for (uint32_t k = 0; k < plan_.comms.size(); ++k) {
    const CommSpec& s = plan_.comms[k];
    if (s.is_wait || s.marker || s.p2p) continue;  // p2p: checked per pair (check_p2p_pairs)
    GroupLog& l = logs[s.comm_group];
    l.specs.push_back(k);
    l.hashes.push_back(fnv1a(describe(s)));
    l.digest = fnv1a(describe(s) + "\n", l.digest);
  }
  std::string mine = local_error.empty() ? "" : kLocalError + trace.source + ": " + local_error;
  if (local_error.empty())
    for (size_t g = 0; g < plan_.comm_groups.size(); ++g)
      mine += ranks_text(plan_.comm_groups[g].ranks) + ":" + std::to_string(logs[g].specs.size()) + ":" +
              std::to_string(logs[g].digest) + ";";
  std::vector<std::string> all = world_.exchange(mine);
  for (const std::string& said : all)
    if (!said.empty() && said[0] == kLocalError) throw AgreedFailure(said.substr(1));

  // group -> rank -> "count:digest"; a member that does not list a group issues nothing on it
  std::map<std::vector<int>, std::map<int, std::string>> said;
  for (int r = 0; r < W; ++r) {
    std::istringstream in(all[static_cast<size_t>(r)]);
    std::string entry;
    while (std::getline(in, entry, ';')) {
      size_t colon = entry.find(':');
      if (colon != std::string::npos) said[parse_ranks(entry.substr(0, colon))][r] = entry.substr(colon + 1);
    }
  }
  const std::string nothing = "0:" + std::to_string(fnv1a(""));
  std::vector<std::vector<int>> groups;
  const std::vector<int>* bad = nullptr;
  for (auto& [ranks, by_rank] : said) {
    groups.push_back(ranks);
    auto of = [&, &by_rank = by_rank](int r) {
      auto it = by_rank.find(r);
      return it == by_rank.end() ? nothing : it->second;
    };
    for (int r : ranks)
      if (!bad && of(r) != of(ranks.front())) bad = &ranks;
  }
  if (bad) report_mismatch(trace, *bad, logs);
  return groups;
}

// The members of `ranks` disagree: find their first differing collective and end every rank naming it.
void CommRuntime::report_mismatch(const Trace& trace, const std::vector<int>& ranks,
                                  const std::vector<GroupLog>& logs) {
  const int me = world_.rank();
  const GroupLog* mine = nullptr;
  const std::string name = "[" + ranks_text(ranks) + "]";
  std::string my_name;  // the trace's name for the group, as this rank's trace spells it
  for (size_t g = 0; g < plan_.comm_groups.size(); ++g)
    if (plan_.comm_groups[g].ranks == ranks) mine = &logs[g], my_name = plan_.comm_groups[g].name;
  const bool member = std::find(ranks.begin(), ranks.end(), me) != ranks.end();
  std::string hashes;
  if (member && mine)
    hashes.assign(reinterpret_cast<const char*>(mine->hashes.data()), mine->hashes.size() * sizeof(uint64_t));
  std::vector<std::string> all = world_.exchange(hashes);
  auto hash_at = [&](int r, size_t k) {
    uint64_t h = 0;
    std::memcpy(&h, all[static_cast<size_t>(r)].data() + k * sizeof(uint64_t), sizeof h);
    return h;
  };
  auto count = [&](int r) { return all[static_cast<size_t>(r)].size() / sizeof(uint64_t); };
  const int a = ranks.front();
  int b = -1;
  size_t first = SIZE_MAX;
  for (int r : ranks) {
    size_t k = 0;
    const size_t n = std::min(count(a), count(r));
    while (k < n && hash_at(a, k) == hash_at(r, k)) ++k;
    if ((k < n || count(a) != count(r)) && k < first) first = k, b = r;
  }
  std::string what;  // the group's name, a newline, the collective
  if (b >= 0 && (me == a || me == b)) {
    if (mine && first < mine->specs.size()) {
      const CommSpec& s = plan_.comms[mine->specs[first]];
      what = my_name + "\n" + describe(s) + " (node " + std::to_string(trace.nodes[s.node].id) + " of " + trace.source +
             ")";
    } else {
      what = my_name + "\nnone (its " + std::to_string(mine ? mine->specs.size() : 0) +
             " collective(s) on the group end there, in " + trace.source + ")";
    }
  }
  all = world_.exchange(what);
  if (b < 0) throw AgreedFailure("process group " + name + ": the ranks' collectives on it differ");
  auto said = [&](int r) { return all[static_cast<size_t>(r)].substr(all[static_cast<size_t>(r)].find('\n') + 1); };
  const std::string pg = all[static_cast<size_t>(a)].substr(0, all[static_cast<size_t>(a)].find('\n'));
  throw AgreedFailure("process group " + (pg.empty() ? "" : pg + " ") + name + ", collective " + std::to_string(first) +
                      " on it: rank " + std::to_string(a) + " issues " + said(a) + ", but rank " + std::to_string(b) +
                      " issues " + said(b) + ": the traces do not belong to one run");
}

// What rank `from` sends to rank `to` on one group must be what `to` receives from `from`, in order, count and
// dtype, or the pipeline hangs (a receive nobody sends) or MPI aborts (a size mismatch). Each rank tells the others
// a count and a digest per (group, peer, direction); a pair that disagrees is then compared operation by operation
// and every rank ends with the same line naming the first difference.
void CommRuntime::check_p2p_pairs(const Trace& trace) {
  const int W = world_.size();
  struct Way {
    std::vector<uint32_t> specs;
    uint64_t digest = fnv1a("");
  };
  // ('s' or 'r', group, peer) -> this rank's sends to the peer or receives from it, in issue order
  std::map<std::tuple<char, std::string, int>, Way> ways;
  for (uint32_t k = 0; k < plan_.comms.size(); ++k) {
    const CommSpec& s = plan_.comms[k];
    if (!s.p2p) continue;
    const char dir = s.args.kind == comms::Kind::Send ? 's' : 'r';
    Way& w = ways[{dir, ranks_text(plan_.comm_groups[s.comm_group].ranks), s.peer}];
    w.specs.push_back(k);
    w.digest = fnv1a(describe_p2p(s) + "\n", w.digest);
  }
  std::string mine;
  for (const auto& [key, w] : ways)
    mine += std::get<0>(key) + std::get<1>(key) + "|" + std::to_string(std::get<2>(key)) + "|" +
            std::to_string(w.specs.size()) + ":" + std::to_string(w.digest) + ";";
  std::vector<std::string> all = world_.exchange(mine);
  // (group, from, to) -> what `from` says it sends, what `to` says it receives
  std::map<std::tuple<std::string, int, int>, std::pair<std::string, std::string>> pairs;
  for (int r = 0; r < W; ++r) {
    std::istringstream in(all[static_cast<size_t>(r)]);
    std::string e;
    while (std::getline(in, e, ';')) {
      const size_t bar1 = e.find('|'), bar2 = bar1 == std::string::npos ? bar1 : e.find('|', bar1 + 1);
      if (bar2 == std::string::npos) continue;
      const std::string group = e.substr(1, bar1 - 1);
      const int peer = std::stoi(e.substr(bar1 + 1, bar2 - bar1 - 1));
      if (e[0] == 's')
        pairs[{group, r, peer}].first = e.substr(bar2 + 1);
      else
        pairs[{group, peer, r}].second = e.substr(bar2 + 1);
    }
  }
  const std::string nothing = "0:" + std::to_string(fnv1a(""));
  for (const auto& [key, said] : pairs) {
    if ((said.first.empty() ? nothing : said.first) == (said.second.empty() ? nothing : said.second)) continue;
    const auto& [group, from, to] = key;
    const int me = world_.rank();
    std::vector<uint32_t> specs;  // this rank's side of the pair
    if (me == from || me == to) {
      auto it = ways.find({me == from ? 's' : 'r', group, me == from ? to : from});
      if (it != ways.end()) specs = it->second.specs;
    }
    report_p2p_mismatch(trace, group, from, to, specs);
  }
}

// Rank `from`'s sends to `to` on `group` and `to`'s receives from `from` differ: find the first operation where they
// do and end every rank naming it. `specs` is this rank's side (empty off the pair).
void CommRuntime::report_p2p_mismatch(const Trace& trace, const std::string& group, int from, int to,
                                      const std::vector<uint32_t>& specs) {
  std::string hashes;
  for (uint32_t k : specs) {
    const uint64_t h = fnv1a(describe_p2p(plan_.comms[k]));
    hashes.append(reinterpret_cast<const char*>(&h), sizeof h);
  }
  std::vector<std::string> all = world_.exchange(hashes);
  const std::string& a = all[static_cast<size_t>(from)];
  const std::string& b = all[static_cast<size_t>(to)];
  size_t k = 0;
  while (k * 8 < std::min(a.size(), b.size()) && a.compare(k * 8, 8, b, k * 8, 8) == 0) ++k;
  std::string what;  // this rank's operation k, or what it has instead
  const int me = world_.rank();
  if (me == from || me == to) {
    const std::string verb = me == from ? "sends " : "receives ";
    if (k < specs.size()) {
      const CommSpec& s = plan_.comms[specs[k]];
      what = "+" + verb + describe_p2p(s) + " (node " + std::to_string(trace.nodes[s.node].id) + " of " + trace.source +
             ")";
    } else {
      what = "-" + verb + "nothing to match it (its " + std::to_string(specs.size()) + " " +
             (me == from ? "send(s) to rank " + std::to_string(to) : "receive(s) from rank " + std::to_string(from)) +
             " on the group end there, in " + trace.source + ")";
    }
  }
  all = world_.exchange(what);
  // '-': that side has no operation k
  const bool no_send = all[static_cast<size_t>(from)].substr(0, 1) == "-";
  const bool missing = no_send || all[static_cast<size_t>(to)].substr(0, 1) == "-";
  const std::string sent = all[static_cast<size_t>(from)].substr(1), received = all[static_cast<size_t>(to)].substr(1);
  const bool receive_first = no_send;
  const std::string head = "point-to-point from rank " + std::to_string(from) + " to rank " + std::to_string(to) +
                           " on group [" + group + "], operation " + std::to_string(k) + ": ";
  const std::string body =
      receive_first ? "rank " + std::to_string(to) + " " + received + ", but rank " + std::to_string(from) + " " + sent
                    : "rank " + std::to_string(from) + " " + sent + ", but rank " + std::to_string(to) + " " + received;
  throw AgreedFailure(head + body + (missing ? ": the pipeline would hang" : ": the traces do not belong to one run"));
}

CommRuntime::CommRuntime(const Trace& trace, Plan& plan, comms::Communicator& world, at::Device device)
    : plan_(plan), world_(world), device_(device) {
  const int W = world.size();
  if (world.backend() == "tcp" && !device.is_cuda())
    throw UserError(
        "a torchrun-style launch replays collectives on GPUs only (NCCL); on CPUs launch with mpirun or srun");
  const std::vector<std::vector<int>> groups = check_collectives_agree(trace);
  check_p2p_pairs(trace);

  comms::Communicator* base = &world_;
  if (device_.is_cuda()) {
    device_world_ = comms::make_nccl(world_, device_.index());
    base = device_world_.get();
#ifdef REPRISE_TORCH_CUDA
    comm_stream_ = new c10::cuda::CUDAStream(c10::cuda::getStreamFromPool(false, device_.index()));
#endif
  }
  group_comms_.assign(plan.comm_groups.size(), nullptr);
  for (const std::vector<int>& ranks : groups) {
    comms::Communicator* c = nullptr;
    if (static_cast<int>(ranks.size()) == W) {
      c = base;  // the whole world: no split
    } else {
      std::unique_ptr<comms::Communicator> sub = base->split(ranks);
      c = sub.get();
      if (sub) owned_.push_back(std::move(sub));
    }
    for (size_t g = 0; g < plan.comm_groups.size(); ++g)
      if (plan.comm_groups[g].ranks == ranks) group_comms_[g] = c;
  }
  flights_.resize(plan.comms.size());
  seconds_.assign(plan.comms.size(), 0);
  calls_.assign(plan.comms.size(), 0);
}

CommRuntime::~CommRuntime() {
#ifdef REPRISE_TORCH_CUDA
  delete static_cast<c10::cuda::CUDAStream*>(comm_stream_);
  for (auto& [key, st] : trace_streams_) delete static_cast<c10::cuda::CUDAStream*>(st);
#endif
}

// Collectives that ran on different streams in the original (Kineto stream ids) run on different streams here,
// so they may overlap each other as they did; unknown ones share the default collective stream.
void* CommRuntime::stream_for(int64_t trace_stream) {
#ifdef REPRISE_TORCH_CUDA
  if (trace_stream < 0) return comm_stream_;
  auto it = trace_streams_.find(trace_stream);
  if (it == trace_streams_.end())
    it = trace_streams_
             .emplace(trace_stream, new c10::cuda::CUDAStream(c10::cuda::getStreamFromPool(false, device_.index())))
             .first;
  return it->second;
#else
  (void)trace_stream;
  return comm_stream_;
#endif
}

std::string CommRuntime::backend() const { return device_world_ ? device_world_->backend() : world_.backend(); }

size_t CommRuntime::trace_streams() const {
  std::set<int64_t> s;
  for (const CommSpec& c : plan_.comms)
    if (c.stream >= 0) s.insert(c.stream);
  return s.size();
}

at::Tensor CommRuntime::take(int64_t bytes) {
  auto it = pool_.find(bytes);
  if (it != pool_.end()) {
    at::Tensor t = std::move(it->second);
    pool_.erase(it);
    return t;
  }
  return at::empty({std::max<int64_t>(bytes, 1)}, at::TensorOptions().dtype(at::kByte).device(device_));
}

void CommRuntime::give(at::Tensor t) {
  if (t.defined()) pool_.emplace(t.numel(), std::move(t));
}

uint32_t CommRuntime::lead(uint32_t spec) const {
  const int32_t b = plan_.comms[spec].batch;
  return b >= 0 ? static_cast<uint32_t>(b) : spec;
}

// The call's arguments with buffers from the pool, kept in `f` until it completes.
comms::Args CommRuntime::with_buffers(const CommSpec& s, Flight& f) {
  const size_t es = comms::dtype_size(s.args.dtype);
  const bool in_place = s.args.kind == comms::Kind::AllReduce || s.args.kind == comms::Kind::Broadcast;
  comms::Args a = s.args;
  if (s.in_elems > 0 || !s.p2p) {
    f.bufs.push_back(take(static_cast<int64_t>(s.in_elems * es)));
    a.in = f.bufs.back().data_ptr();
  }
  if (in_place) {
    a.out = const_cast<void*>(a.in);
  } else if (s.out_elems > 0 || !s.p2p) {
    f.bufs.push_back(take(static_cast<int64_t>(s.out_elems * es)));
    a.out = f.bufs.back().data_ptr();
  }
  return a;
}

void CommRuntime::run(uint32_t spec) {
  const CommSpec& s = plan_.comms[spec];
  if (s.is_wait) {
    if (s.waits_for >= 0) complete(lead(static_cast<uint32_t>(s.waits_for)));
    return;
  }
  if (s.marker || lead(spec) != spec) return;  // a batch is issued at its first member
  comms::Communicator* c = group_comms_[s.comm_group];
  Flight& f = flights_[spec];
  const uint32_t n = s.batch >= 0 ? s.batch_size : 1;
  std::vector<comms::Args> ops;
  for (uint32_t k = spec; k < spec + n; ++k) ops.push_back(with_buffers(plan_.comms[k], f));
#ifdef REPRISE_TORCH_CUDA
  if (comm_stream_) {
    // The collective starts after everything the compute stream has queued so far (its producers included).
    auto& cs = *static_cast<c10::cuda::CUDAStream*>(stream_for(s.stream));
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(device_.index()));
    ready.block(cs);
    for (comms::Args& a : ops) a.stream = cs.stream();
  }
#endif
  f.req = n == 1 ? c->start(ops.front()) : c->start_group(ops);
  if (!s.async) complete(spec);
}

void CommRuntime::complete(uint32_t spec) {
  Flight& f = flights_[spec];
  if (!f.req) return;
#ifdef REPRISE_TORCH_CUDA
  if (comm_stream_) {
    // The consumer's stream waits for the collective; the host does not.
    f.req->wait_on(c10::cuda::getCurrentCUDAStream(device_.index()).stream());
    done_.emplace_back(spec, std::move(f.req));
    for (at::Tensor& b : f.bufs) give(std::move(b));
    f.bufs.clear();
    return;
  }
#endif
  f.req->wait();
  collect(spec, *f.req);
  f.req.reset();
  for (at::Tensor& b : f.bufs) give(std::move(b));
  f.bufs.clear();
}

// A batch's time is each member's: they ran together.
void CommRuntime::collect(uint32_t spec, comms::Request& r) {
  const CommSpec& s = plan_.comms[spec];
  const uint32_t n = s.batch >= 0 ? s.batch_size : 1;
  const double t = r.seconds();
  for (uint32_t k = spec; k < spec + n; ++k) {
    if (t >= 0) seconds_[k] += t;
    ++calls_[k];
  }
}

void CommRuntime::end_step() {
  for (uint32_t k = 0; k < flights_.size(); ++k)
    if (flights_[k].req) complete(k);
  for (auto& [spec, req] : done_) {
    req->wait();
    collect(spec, *req);
  }
  done_.clear();
}

void CommRuntime::reset_stats() {
  std::fill(seconds_.begin(), seconds_.end(), 0.0);
  std::fill(calls_.begin(), calls_.end(), 0);
}

std::vector<CollectiveTiming> CommRuntime::timings(int iterations) const {
  std::map<std::tuple<std::string, std::string, int, std::string, int64_t>, CollectiveTiming> by;
  for (size_t k = 0; k < plan_.comms.size(); ++k) {
    const CommSpec& s = plan_.comms[k];
    if (s.is_wait || s.marker || calls_[k] == 0) continue;
    const CommGroup& g = plan_.comm_groups[s.comm_group];
    CollectiveTiming& t = by[{s.label, g.name, s.peer, comms::dtype_name(s.args.dtype), s.bytes}];
    t.name = s.label;
    t.peer = s.peer;
    t.group = g.name;
    t.dtype = comms::dtype_name(s.args.dtype);
    t.bytes = s.bytes;
    t.group_size = static_cast<int>(g.ranks.size());
    t.calls += calls_[k];
    t.seconds += seconds_[k];
  }
  std::vector<CollectiveTiming> out;
  for (auto& [key, t] : by) {
    t.seconds /= static_cast<double>(t.calls);
    t.calls /= std::max(iterations, 1);
    t.algbw = t.seconds > 0 ? static_cast<double>(t.bytes) / t.seconds / 1e9 : 0;
    comms::Kind k;
    comms::parse_kind(t.name, k);
    t.busbw = t.algbw * comms::describe(k).busbw_factor(t.group_size);
    out.push_back(t);
  }
  std::sort(out.begin(), out.end(), [](const CollectiveTiming& a, const CollectiveTiming& b) {
    return a.seconds * a.calls > b.seconds * b.calls;
  });
  return out;
}

}  // namespace reprise::replay::detail
