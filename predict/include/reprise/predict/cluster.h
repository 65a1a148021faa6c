// A described machine or cluster: one device's peak rates and overheads, and the links between devices.
//
//   Cluster c = load_cluster("clusters/h100-sxm-8.yaml");
//   double peak = c.device.peak_flops("BFloat16", /*matrix=*/true);   // 989e12
//   const LinkLevel& l = c.level_for({0, 1, 8, 9});                    // spans two nodes: the InfiniBand level
//
// The YAML format is documented in docs/clusters.md; every error names the file, line and column.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace reprise::predict {

struct DeviceSpec {
  std::string kind = "gpu";  // "gpu" (host thread launches onto streams) or "cpu" (ops run on the host thread)
  std::string name;
  // Peak FLOP/s by c10 dtype name ("BFloat16", "Half", "Float"): matrix units (tensor cores), and the rest.
  std::map<std::string, double> matrix_flops, vector_flops;
  bool tf32 = false;            // float32 matrix products run on the tensor cores at matrix_flops["TF32"]
  double memory_bandwidth = 0;  // bytes/s
  double memory_bytes = 0;
  std::map<std::string, double> caches;  // name -> bytes ("l2", "llc")
  double launch_overhead = 0;            // seconds the host spends in one kernel launch call
  double op_overhead = 0;                // seconds of host time per op besides its launches (dispatcher, autograd)
  double kernel_floor = 0;               // seconds a kernel holds its stream at the least, however little it does
  // Fractions of peak reached when no calibration says better.
  double compute_efficiency = 0.7, memory_efficiency = 0.8, random_access_efficiency = 0.25;

  // FLOP/s for a dtype: matrix units for matrix work when the device has them for that dtype, else vector units;
  // float types fall back to Float's rate. 0 when the description has none.
  double peak_flops(const std::string& dtype, bool matrix) const;
  // Bytes of the largest cache, 0 when none is described.
  double largest_cache() const;
};

struct LinkLevel {
  std::string name;         // "nvlink", "pcie", "infiniband", "shm"
  int64_t span = 0;         // devices this level connects (a node's devices, a rack's, 0 = the whole cluster)
  double bandwidth = 0;     // bytes/s per device per direction
  double latency = 0;       // seconds per message hop
  double efficiency = 0.8;  // fraction of bandwidth collectives reach when uncalibrated
};

struct Cluster {
  std::string name, description, source;
  DeviceSpec device;
  int64_t devices_per_node = 1, nodes = 1;
  std::vector<LinkLevel> levels;              // innermost first
  std::map<std::string, std::string> launch;  // launcher name -> command template ({ranks}, {bundle}, ...)

  int64_t devices() const { return devices_per_node * nodes; }
  // Each launch template filled in for a replay of `ranks` ranks of `bundle` by the `reprise` binary at `reprise`:
  // {ranks}, {ranks_per_node} (devices_per_node, or fewer for a smaller world), {nodes} (ceil(ranks /
  // ranks_per_node)), {bundle}, {reprise}.
  std::map<std::string, std::string> launch_commands(int64_t ranks, const std::string& bundle,
                                                     const std::string& reprise) const;
  // The innermost level that holds all of `ranks` (ranks fill nodes in order: rank r on node r / devices_per_node).
  const LinkLevel& level_for(const std::vector<int64_t>& ranks) const;
};

// Reads a cluster description; throws UserError("FILE:LINE:COL: what") for a malformed or incomplete one.
Cluster load_cluster(const std::string& path);
Cluster parse_cluster(const std::string& yaml, const std::string& source);
// The description as YAML (what `reprise calibrate` writes for the machine it measured).
std::string cluster_yaml(const Cluster& c);

}  // namespace reprise::predict
