#include "comm_runtime.h"

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

}  // namespace

CommRuntime::CommRuntime(Plan& plan, comms::Communicator& world, at::Device device)
    : plan_(plan), world_(world), device_(device) {
  const int W = world.size(), me = world.rank();
  if (world.backend() == "tcp" && !device.is_cuda())
    throw UserError(
        "a torchrun-style launch replays collectives on GPUs only (NCCL); on CPUs launch with mpirun or srun");
  for (const CommGroup& g : plan.comm_groups) {
    for (int r : g.ranks)
      if (r < 0 || r >= W)
        throw UserError("process group " + g.name + " names rank " + std::to_string(r) + ", but the launch has " +
                        std::to_string(W) + " rank(s)");
    if (std::find(g.ranks.begin(), g.ranks.end(), me) == g.ranks.end())
      throw UserError("rank " + std::to_string(me) + " replays collectives of process group " + g.name + " [" +
                      ranks_text(g.ranks) + "], which it is not in: is this its trace?");
  }
  // Every rank says which groups it uses and how many collectives it issues on each; the union, in one order,
  // is split on every rank (a split is collective), and members must agree on the counts or they would hang.
  std::vector<int64_t> per_group(plan.comm_groups.size(), 0);
  for (const CommSpec& s : plan.comms)
    if (!s.is_wait) ++per_group[s.comm_group];
  std::string mine;
  for (size_t g = 0; g < plan.comm_groups.size(); ++g)
    mine += ranks_text(plan.comm_groups[g].ranks) + ":" + std::to_string(per_group[g]) + ";";
  std::vector<std::string> all = world.exchange(mine);
  std::map<std::vector<int>, std::map<int, int64_t>> counts;  // group -> rank -> collectives
  for (int r = 0; r < W; ++r) {
    std::istringstream in(all[static_cast<size_t>(r)]);
    std::string entry;
    while (std::getline(in, entry, ';')) {
      size_t colon = entry.find(':');
      if (colon == std::string::npos) continue;
      counts[parse_ranks(entry.substr(0, colon))][r] = std::stoll(entry.substr(colon + 1));
    }
  }
  for (auto& [ranks, by_rank] : counts) {
    auto first = by_rank.begin();
    for (auto& [r, n] : by_rank)
      if (n != first->second)
        throw UserError("rank " + std::to_string(first->first) + " issues " + std::to_string(first->second) +
                        " collectives on group [" + ranks_text(ranks) + "] but rank " + std::to_string(r) + " issues " +
                        std::to_string(n) + ": the traces do not belong to one run");
  }

  comms::Communicator* base = &world_;
  if (device_.is_cuda()) {
    device_world_ = comms::make_nccl(world_, device_.index());
    base = device_world_.get();
#ifdef REPRISE_TORCH_CUDA
    comm_stream_ = new c10::cuda::CUDAStream(c10::cuda::getStreamFromPool(false, device_.index()));
#endif
  }
  group_comms_.assign(plan.comm_groups.size(), nullptr);
  for (auto& [ranks, by_rank] : counts) {
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

void CommRuntime::run(uint32_t spec) {
  const CommSpec& s = plan_.comms[spec];
  if (s.is_wait) {
    if (s.waits_for >= 0 && flights_[static_cast<size_t>(s.waits_for)].req)
      complete(static_cast<uint32_t>(s.waits_for));
    return;
  }
  comms::Communicator* c = group_comms_[s.comm_group];
  size_t es = comms::dtype_size(s.args.dtype);
  Flight& f = flights_[spec];
  bool in_place = s.args.kind == comms::Kind::AllReduce || s.args.kind == comms::Kind::Broadcast;
  f.in = take(static_cast<int64_t>(s.in_elems * es));
  f.out = in_place ? at::Tensor() : take(static_cast<int64_t>(s.out_elems * es));
  comms::Args a = s.args;
  a.in = f.in.data_ptr();
  a.out = in_place ? f.in.data_ptr() : f.out.data_ptr();
#ifdef REPRISE_TORCH_CUDA
  if (comm_stream_) {
    // The collective starts after everything the compute stream has queued so far (its producers included).
    auto& cs = *static_cast<c10::cuda::CUDAStream*>(stream_for(s.stream));
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(device_.index()));
    ready.block(cs);
    a.stream = cs.stream();
  }
#endif
  f.req = c->start(a);
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
    give(std::move(f.in));
    give(std::move(f.out));
    return;
  }
#endif
  f.req->wait();
  collect(spec, *f.req);
  f.req.reset();
  give(std::move(f.in));
  give(std::move(f.out));
}

void CommRuntime::collect(uint32_t spec, comms::Request& r) {
  double t = r.seconds();
  if (t >= 0) seconds_[spec] += t;
  ++calls_[spec];
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
  std::map<std::tuple<std::string, std::string, std::string, int64_t>, CollectiveTiming> by;
  for (size_t k = 0; k < plan_.comms.size(); ++k) {
    const CommSpec& s = plan_.comms[k];
    if (s.is_wait || calls_[k] == 0) continue;
    const CommGroup& g = plan_.comm_groups[s.comm_group];
    CollectiveTiming& t = by[{s.label, g.name, comms::dtype_name(s.args.dtype), s.bytes}];
    t.name = s.label;
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
