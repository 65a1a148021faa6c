// What a calibration says about the machine it measured: a cluster description and a table for people.
#include <algorithm>
#include <cmath>
#include <map>

#include "rate_index.h"
#include "reprise/predict/calibration.h"
#include "reprise/trace/summary.h"

namespace reprise::predict {
namespace {

double overhead_of(const Calibration& c, const std::string& op) {
  auto it = c.overheads.find(op);
  return it != c.overheads.end() ? it->second : c.default_overhead;
}

// The rate a sample reached on the device: its work over its time less the op's host overhead; 0 for a call the
// overhead dominates (its rate says nothing of the device).
double achieved(const Calibration& c, const OpSample& s) {
  const double overhead = overhead_of(c, s.op);
  if (s.seconds < 4 * overhead || s.seconds <= 0) return 0;
  return detail::work_measure(s) / (s.seconds - overhead);
}

}  // namespace

Cluster measured_cluster(const Calibration& c, const std::string& name, int64_t devices) {
  Cluster k;
  k.name = name;
  k.source = c.source;
  DeviceSpec& d = k.device;
  d.kind = c.device.rfind("cuda", 0) == 0 ? "gpu" : "cpu";
  d.name = c.machine;
  double mem = 0;
  for (const OpSample& s : c.samples) {
    if (s.seconds <= 0) continue;
    if (s.family == OpFamily::Gemm) {
      // Only rates the device showed: a GEMM its host overhead dominates says nothing (a GPU's small sizes).
      if (const double a = achieved(c, s); a > 0) {
        double& peak = d.matrix_flops[s.dtype.empty() ? "Float" : s.dtype];
        peak = std::max(peak, a);
      }
    } else if (s.family == OpFamily::Memory && s.bytes >= (1 << 20)) {
      mem = std::max(mem, achieved(c, s));
    }
  }
  if (d.kind == "cpu") d.vector_flops = d.matrix_flops;  // one kind of unit: the vector units
  if (d.matrix_flops.empty()) d.vector_flops["Float"] = 1e9;
  d.memory_bandwidth = mem > 0 ? mem : 1e10;
  d.op_overhead = c.default_overhead;
  d.launch_overhead = 0;
  d.kernel_floor = d.kind == "gpu" ? 2e-6 : 0;  // not measured: the typical figure (docs/clusters.md)
  // Measured rates are what the ops reach: the efficiencies that turn peaks into times are 1.
  d.compute_efficiency = d.memory_efficiency = 1;
  k.devices_per_node = std::max<int64_t>(devices, 1);
  LinkLevel l;
  l.name = d.kind == "cpu" ? "shm" : "nvlink";
  l.efficiency = 1;
  for (const CollectiveCurve& cc : c.collectives) {
    l.bandwidth = std::max(l.bandwidth, cc.bandwidth);
    l.latency = l.latency > 0 ? std::min(l.latency, cc.latency) : cc.latency;
  }
  k.description = "measured by reprise calibrate (" + c.source + ") on " + c.machine + ", " +
                  std::to_string(c.threads) + " thread(s)";
  if (l.bandwidth <= 0) {
    l.bandwidth = d.memory_bandwidth / 4, l.latency = 5e-6;
    k.description += "; link figures estimated (no collective sweeps were given)";
  }
  k.levels.push_back(l);
  k.launch["mpirun"] = "mpirun -np {ranks} {reprise} replay {bundle}";
  k.launch["srun"] = "srun -n {ranks} --mpi=pmix {reprise} replay {bundle}";  // Slurm's PMIx: docs/distributed.md
  return k;
}

void print_calibration(std::FILE* out, const Calibration& c) {
  struct Row {
    int n = 0;
    std::vector<double> rates;
  };
  std::map<std::string, Row> rows;
  for (const OpSample& s : c.samples) {
    Row& r = rows[family_name(s.family)];
    ++r.n;
    if (const double a = achieved(c, s); a > 0) r.rates.push_back(a);
  }
  const bool swept = !c.samples.empty() || c.host.empty();  // else host overheads alone: no rates to show
  if (swept)
    std::fprintf(out, "  %-11s %7s  %-24s %s\n", "family", "samples", "achieved rate (max)", "fit error (sigma)");
  for (auto& [fam, r] : rows) {
    std::string rate = "-";
    if (!r.rates.empty()) {
      const double m = *std::max_element(r.rates.begin(), r.rates.end());
      const bool flops = fam == "gemm" || fam == "conv" || fam == "attention";
      char buf[64];
      std::snprintf(buf, sizeof buf, flops ? "%.1f GFLOP/s" : "%.2f GB/s", m / 1e9);
      rate = buf;
    }
    auto sg = c.sigma.find(fam);
    char sig[32] = "-";
    if (sg != c.sigma.end()) std::snprintf(sig, sizeof sig, "%.1f%%", 100 * (std::exp(sg->second) - 1));
    std::fprintf(out, "  %-11s %7d  %-24s %s\n", fam.c_str(), r.n, rate.c_str(), sig);
  }
  if (swept)
    std::fprintf(out, "  overhead    %s per op (median of %zu op kinds)\n", human_seconds(c.default_overhead).c_str(),
                 c.overheads.size());
  if (c.fresh_page_seconds_per_byte > 0)
    std::fprintf(out, "  fresh pages %s per MiB of outputs of 32 MiB or more (left out of the rates)\n",
                 human_seconds(c.fresh_page_seconds_per_byte * 1024 * 1024).c_str());
  if (!c.dispatch.empty()) {  // a GPU's: what a call costs the host, and the ops that wait for their kernels
    std::string waiting;
    for (const std::string& op : c.waits_device) waiting += (waiting.empty() ? "" : ", ") + op;
    std::fprintf(out, "  host part   %s a call (median of %zu op kinds); waiting for their kernels: %s\n",
                 human_seconds(c.median_dispatch()).c_str(), c.dispatch.size(),
                 waiting.empty() ? "none" : waiting.c_str());
  }
  if (!c.host.empty()) {
    // The host side measured from Kineto traces, the ops called most first.
    std::vector<std::pair<std::string, const HostKinds*>> ops;
    for (const auto& [op, k] : c.host.by_op) ops.emplace_back(op, &k);
    std::stable_sort(ops.begin(), ops.end(),
                     [](const auto& a, const auto& b) { return a.second->samples > b.second->samples; });
    std::fprintf(out, "  host side   %zu op(s), %zu op shape(s), from %s; the most called:\n", c.host.by_op.size(),
                 c.host.by_shape.size(), c.host.source.c_str());
    std::fprintf(out, "    %-36s %6s %8s %9s %9s %9s %9s %9s\n", "op", "calls", "launches", "gap", "to first", "launch",
                 "between", "after");
    for (size_t i = 0; i < ops.size() && i < 8; ++i) {
      const HostKinds& k = *ops[i].second;
      std::fprintf(out, "    %-36.36s %6lld %8.1f %9s %9s %9s %9s %9s\n", ops[i].first.c_str(),
                   static_cast<long long>(k.samples), k.launches, human_seconds(k.gap_before).c_str(),
                   human_seconds(k.to_first_launch).c_str(), human_seconds(k.launch).c_str(),
                   human_seconds(k.between_launches).c_str(),
                   human_seconds(k.launches > 0 ? k.after_last_launch : k.no_launch).c_str());
    }
  }
  for (const CollectiveCurve& k : c.collectives)
    std::fprintf(out, "  %-11s %lld ranks: latency %s, bus bandwidth %.2f GB/s, %d points, sigma %.1f%%\n",
                 k.op.c_str(), static_cast<long long>(k.group), human_seconds(k.latency).c_str(), k.bandwidth / 1e9,
                 k.points, 100 * (std::exp(k.sigma) - 1));
}

}  // namespace reprise::predict
