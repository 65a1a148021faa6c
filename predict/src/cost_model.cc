#include "reprise/predict/cost_model.h"

#include <algorithm>
#include <cmath>

#include "embedding_fit.h"
#include "rate_index.h"
#include "reprise/comms/collective.h"

namespace reprise::predict {
namespace {

// The spread assumed for a model with no measurements behind it: public peak rates times a typical efficiency.
constexpr double kUncalibratedSigma = 0.3;

double efficiency(const OpWork& w, const DeviceSpec& d) {
  switch (w.family) {
    case OpFamily::Gemm:
    case OpFamily::Conv:
    case OpFamily::Attention:
      return d.compute_efficiency;
    case OpFamily::Embedding:
      return w.key[2] > d.largest_cache() ? d.random_access_efficiency : d.memory_efficiency;
    default:
      return d.memory_efficiency;
  }
}

// Messages a collective sends one after another, each paying the link latency: rings for the gathers and scatters;
// all_reduce as NCCL runs it at scale, a (double binary) tree up and down: 2 log2(n) hops.
double latency_steps(comms::Kind k, double n) {
  switch (k) {
    case comms::Kind::AllReduce:
      return std::min(2 * (n - 1), 2 * std::ceil(std::log2(n)));
    case comms::Kind::Send:
    case comms::Kind::Recv:
      return 1;
    case comms::Kind::Barrier:
      return 2 * std::ceil(std::log2(n));
    default:
      return n - 1;
  }
}

}  // namespace

double roofline_seconds(const OpWork& w, const DeviceSpec& d) {
  const double bw = d.memory_bandwidth > 0 ? d.memory_bandwidth : 0;
  const double mem = bw > 0 ? w.bytes / bw : 0;
  switch (w.family) {
    case OpFamily::Gemm:
    case OpFamily::Conv:
    case OpFamily::Attention: {
      const double peak = d.peak_flops(w.dtype, true);
      return peak > 0 ? std::max(w.flops / peak, mem) : 0;
    }
    case OpFamily::Memory: {
      const double peak = d.peak_flops(w.dtype, false);
      return std::max(peak > 0 ? w.flops / peak : 0, mem);
    }
    case OpFamily::Embedding:
      return mem;
    default:
      return 0;
  }
}

struct CostModel::Impl {
  Cluster cluster;
  const Calibration* cal = nullptr;
  detail::RateIndex index;
  detail::EmbeddingFit embeddings;
  double default_dispatch = -1;  // a GPU calibration's median host part, for ops it did not sweep (-1: none measured)

  double overhead(const std::string& op) const {
    if (!cal || cal->samples.empty()) return cluster.device.op_overhead;  // nothing swept: host kinds only
    auto it = cal->overheads.find(op);
    return it != cal->overheads.end() ? it->second : cal->default_overhead;
  }
};

CostModel::CostModel(const Cluster& cluster, const Calibration* calibration) : impl_(std::make_unique<Impl>()) {
  impl_->cluster = cluster;
  impl_->cal = calibration;
  if (calibration) {
    std::vector<double> overhead;
    for (const OpSample& s : calibration->samples) overhead.push_back(impl_->overhead(s.op));
    impl_->index.build(calibration->samples, overhead);
    // A CPU's lookups by their fits per swept table (embedding_fit.h); a GPU's keep the rates, which its recorded
    // figures were measured with.
    if (calibration->device.rfind("cuda", 0) != 0) impl_->embeddings.build(calibration->samples, overhead);
    impl_->default_dispatch = calibration->median_dispatch();
  }
}
CostModel::~CostModel() = default;
CostModel::CostModel(CostModel&&) noexcept = default;

const Cluster& CostModel::cluster() const { return impl_->cluster; }

OpCost CostModel::op(const Trace& t, uint32_t node) const {
  const DeviceSpec& d = impl_->cluster.device;
  OpCost c;
  c.work = op_work(t, node);
  const OpWork& w = c.work;
  const std::string op(t.name(t.nodes[node]));
  const double work = detail::work_measure(w);
  double busy = 0;
  c.modeled = w.family == OpFamily::View || w.family == OpFamily::Sync || w.family == OpFamily::Collective;
  if (work > 0) {
    double log_rate = 0;
    if (impl_->cal && w.family == OpFamily::Embedding && impl_->embeddings.estimate(op, w.dtype, w.key, busy)) {
      auto s = impl_->cal->sigma.find(family_name(w.family));
      c.sigma = s != impl_->cal->sigma.end() ? s->second : kUncalibratedSigma;
      c.modeled = w.by_name;
    } else if (impl_->cal && impl_->index.estimate(op, w.family, w.dtype, w.key, log_rate)) {
      busy = work / std::exp(log_rate);
      auto s = impl_->cal->sigma.find(family_name(w.family));
      c.sigma = s != impl_->cal->sigma.end() ? s->second : kUncalibratedSigma;
      c.modeled = w.by_name;
    } else if (const double roof = roofline_seconds(w, d); roof > 0) {
      busy = roof / efficiency(w, d);
      c.sigma = kUncalibratedSigma;
      c.modeled = w.by_name;
    }
  }
  // Streaming work shares the node's memory bandwidth and last-level cache with the other ranks' (predict slows it).
  if (d.kind == "cpu" && (w.family == OpFamily::Memory || w.family == OpFamily::Embedding)) c.streaming = busy;
  if (d.kind == "cpu" && impl_->cal && impl_->cal->fresh_page_seconds_per_byte > 0)
    busy += w.fresh_bytes * impl_->cal->fresh_page_seconds_per_byte;
  const double overhead = impl_->overhead(op);
  if (d.kind == "cpu") {
    c.host = overhead + busy;
  } else {
    c.host = overhead + (busy > 0 ? d.launch_overhead : 0);
    if (impl_->default_dispatch >= 0) {  // the host part measured on this GPU (the launches included)
      const auto it = impl_->cal->dispatch.find(op);
      if (it != impl_->cal->dispatch.end())
        c.host = it->second;
      else if (busy > 0)  // an op it did not sweep that launches: the median op's; a view keeps its overhead
        c.host = impl_->default_dispatch;
      c.waits_device = impl_->cal->waits_device.count(op) > 0;
    }
    c.device = busy > 0 ? std::max(busy, d.kernel_floor) : 0;  // a kernel, however short, holds its stream that long
    if (const HostKinds* k = impl_->cal ? impl_->cal->host.find(t, node) : nullptr) {
      c.host = k->host_seconds();  // the seed's five kinds, measured for this op (and shape)
      c.host_kinds = true;
      c.host_gap = k->gap_before;
      c.waits_device = k->waiting >= 0.5;  // most calls waited: the host waits for the device there
      if (c.device > 0 && k->launch_at() >= 0) c.launch_at = std::min(k->launch_at(), c.host);
    }
  }
  return c;
}

double CostModel::collective(const Collective& c, const std::vector<int64_t>& group, double* sigma) const {
  const double n = static_cast<double>(group.size());
  if (sigma) *sigma = kUncalibratedSigma;
  comms::Kind kind;
  if (n < 2 || !comms::parse_kind(c.name, kind)) return 0;
  const double bytes = static_cast<double>(std::max(c.in_bytes(), c.out_bytes()));
  const double factor = c.p2p ? 1.0 : comms::describe(kind).busbw_factor(static_cast<int>(n));
  const LinkLevel& level = impl_->cluster.level_for(group);
  if (impl_->cal) {
    // The collective's own curve (curve_of: a send and its receive take the pair's), else (all_to_allv) the curve
    // of the collective it varies. A curve of no level was measured on one machine: a pair across a wider level is
    // not timed by it.
    const auto [own, curve_group] = curve_of(c.name, static_cast<int64_t>(n));
    const bool inner = &level == &impl_->cluster.levels.front();
    const CollectiveCurve* best = nullptr;
    for (const std::string& op : {own, own == "all_to_allv" ? std::string("all_to_all") : own})
      for (const CollectiveCurve& k : impl_->cal->collectives)
        if (!best && k.op == op && k.group == curve_group &&
            (k.level == level.name || (k.level.empty() && (inner || !comms::describe(kind).p2p))))
          best = &k;
    if (best) {
      if (sigma) *sigma = best->sigma;
      return best->seconds(bytes, factor);
    }
  }
  return level.latency * latency_steps(kind, n) + bytes * factor / (level.bandwidth * level.efficiency);
}

}  // namespace reprise::predict
