#include "reprise/predict/cluster.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "reprise/common/dtype.h"
#include "reprise/common/error.h"
#include "yaml_check.h"

namespace reprise::predict {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The c10 names a rate's key stands for: a spelling of the dtype table ("bf16", "Half", "float32", "int8") or a
// datasheet's "fpN" and "tf32". "fp8" is both FP8 formats: the tensor cores run E4M3 and E5M2 at one rate.
std::vector<std::string> dtype_keys(const gen::YamlFile& f, const YAML::Node& key) {
  const std::string k = key.Scalar();
  std::string lower = k;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "tf32") return {"TF32"};
  if (lower == "fp16") return {"Half"};
  if (lower == "fp32") return {"Float"};
  if (lower == "fp64") return {"Double"};
  if (lower == "fp8" || lower == "float8") return {"Float8_e4m3fn", "Float8_e5m2"};
  if (const Dtype* d = find_dtype_ignoring_case(k)) return {std::string(d->name)};
  f.fail(key, "unknown dtype '" + k + "'");
}

std::map<std::string, double> rates(const gen::YamlFile& f, const YAML::Node& n, const std::string& what) {
  std::map<std::string, double> out;
  if (!n) return out;
  if (!n.IsMap()) f.fail(n, what + ": expected a map of dtype to FLOP/s");
  for (auto it = n.begin(); it != n.end(); ++it) {
    const double rate = f.number(it->second, what + "." + it->first.Scalar(), 1, kInf);
    for (const std::string& dtype : dtype_keys(f, it->first)) out[dtype] = rate;
  }
  return out;
}

double optional_number(const gen::YamlFile& f, const YAML::Node& n, const std::string& key, double fallback, double min,
                       double max) {
  return n[key] ? f.number(n[key], key, min, max) : fallback;
}

DeviceSpec read_device(const gen::YamlFile& f, const YAML::Node& n) {
  f.expect_map(n, "device",
               {"kind", "name", "peak_flops", "tf32", "memory_bandwidth", "memory_bytes", "caches", "launch_overhead",
                "op_overhead", "kernel_floor", "efficiency"});
  DeviceSpec d;
  if (n["kind"]) d.kind = f.choice(n["kind"], "kind", {"gpu", "cpu"});
  if (n["name"]) d.name = f.string(n["name"], "name");
  const YAML::Node peak = n["peak_flops"];
  if (!peak) f.fail(n, "device: peak_flops is required");
  f.expect_map(peak, "peak_flops", {"matrix", "vector"});
  d.matrix_flops = rates(f, peak["matrix"], "matrix");
  d.vector_flops = rates(f, peak["vector"], "vector");
  if (d.matrix_flops.empty() && d.vector_flops.empty()) f.fail(peak, "peak_flops: give matrix or vector rates");
  if (n["tf32"]) d.tf32 = f.boolean(n["tf32"], "tf32");
  if (!n["memory_bandwidth"]) f.fail(n, "device: memory_bandwidth is required");
  d.memory_bandwidth = f.number(n["memory_bandwidth"], "memory_bandwidth", 1, kInf);
  d.memory_bytes = optional_number(f, n, "memory_bytes", 0, 0, kInf);
  if (const YAML::Node c = n["caches"]) {
    if (!c.IsMap()) f.fail(c, "caches: expected a map of cache name to bytes");
    for (auto it = c.begin(); it != c.end(); ++it)
      d.caches[it->first.Scalar()] = f.number(it->second, it->first.Scalar(), 0, kInf);
  }
  d.launch_overhead = optional_number(f, n, "launch_overhead", d.kind == "gpu" ? 4e-6 : 0, 0, 1);
  d.op_overhead = optional_number(f, n, "op_overhead", 5e-6, 0, 1);
  d.kernel_floor = optional_number(f, n, "kernel_floor", d.kind == "gpu" ? 2e-6 : 0, 0, 1);
  if (const YAML::Node e = n["efficiency"]) {
    f.expect_map(e, "efficiency", {"compute", "memory", "random_access"});
    d.compute_efficiency = optional_number(f, e, "compute", d.compute_efficiency, 1e-3, 1);
    d.memory_efficiency = optional_number(f, e, "memory", d.memory_efficiency, 1e-3, 1);
    d.random_access_efficiency = optional_number(f, e, "random_access", d.random_access_efficiency, 1e-3, 1);
  }
  return d;
}

// What a launch template may name (docs/clusters.md), filled in by Cluster::launch_commands.
const char* const kPlaceholders[] = {"{ranks}", "{ranks_per_node}", "{nodes}", "{bundle}", "{reprise}"};

// Calls f(open, close) for each `{...}` of a launch template (close npos when it is not closed), the shell's own
// `${VAR}` left out.
template <typename F>
void each_placeholder(const std::string& text, F f) {
  for (size_t open = text.find('{'); open != std::string::npos; open = text.find('{', open + 1)) {
    if (open > 0 && text[open - 1] == '$') continue;
    const size_t close = text.find('}', open);
    f(open, close);
    if (close == std::string::npos) return;
    open = close;
  }
}

void read_topology(const gen::YamlFile& f, const YAML::Node& n, Cluster& c) {
  f.expect_map(n, "topology", {"devices_per_node", "nodes", "levels"});
  if (!n["devices_per_node"]) f.fail(n, "topology: devices_per_node is required");
  c.devices_per_node = f.integer(n["devices_per_node"], "devices_per_node", 1, 1 << 20);
  c.nodes = n["nodes"] ? f.integer(n["nodes"], "nodes", 1, 1 << 24) : 1;
  const YAML::Node levels = n["levels"];
  if (!levels || !levels.IsSequence() || levels.size() == 0)
    f.fail(levels ? levels : n, "topology: levels must list at least one link level");
  for (size_t k = 0; k < levels.size(); ++k) {
    const YAML::Node l = levels[k];
    f.expect_map(l, "level", {"name", "span", "bandwidth", "latency", "efficiency"});
    LinkLevel lv;
    if (!l["name"]) f.fail(l, "level: name is required");
    lv.name = f.string(l["name"], "name");
    // Default spans: the first level joins a node's devices, the last one the whole cluster.
    const bool last = k + 1 == levels.size();
    lv.span = l["span"] ? f.integer(l["span"], "span", 1, int64_t{1} << 40) : (last ? 0 : c.devices_per_node);
    if (!l["bandwidth"]) f.fail(l, "level " + lv.name + ": bandwidth is required");
    lv.bandwidth = f.number(l["bandwidth"], "bandwidth", 1, kInf);
    lv.latency = optional_number(f, l, "latency", 0, 0, 1);
    lv.efficiency = optional_number(f, l, "efficiency", lv.efficiency, 1e-3, 1);
    // Only the last level can be 0 (written spans are at least 1), so an earlier one always has a span to beat.
    if (!c.levels.empty() && lv.span != 0 && lv.span <= c.levels.back().span)
      f.fail(l, "level " + lv.name + ": span must grow outwards (levels are listed innermost first)");
    // A level joins devices of this cluster: one spanning more than it has would join what is not there, and hide
    // the levels past it (a typo of 8 as 256 put every rank of a 16-node cluster on NVLink).
    const int64_t devices = c.devices_per_node * c.nodes;
    if (lv.span > devices)
      f.fail(l["span"], "level " + lv.name + ": span " + std::to_string(lv.span) + " is more than the cluster's " +
                            std::to_string(devices) + " devices (nodes x devices_per_node)");
    c.levels.push_back(lv);
  }
}

// The fewest significant digits that read back as the same double: 9.89e+14 and 0.7, not 989000000000000 and
// 0.69999999999999996.
void emit_number(YAML::Emitter& e, double v) {
  int digits = 1;
  for (char buf[32]; digits < 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  e << YAML::DoublePrecision(digits) << v;
}

Cluster read_cluster(const gen::YamlFile& f) {
  const std::string& source = f.path();
  const YAML::Node& root = f.root();
  // An empty file parses to a null node without a mark: name its start.
  if (root.IsNull()) throw UserError(source + ":1:1: cluster: the file is empty (docs/clusters.md gives the format)");
  f.expect_map(root, "cluster", {"name", "description", "device", "topology", "launch"});
  Cluster c;
  c.source = source;
  c.name = root["name"] ? f.string(root["name"], "name") : source;
  if (root["description"]) c.description = f.string(root["description"], "description");
  if (!root["device"]) f.fail(root, "cluster: device is required");
  c.device = read_device(f, root["device"]);
  if (!root["topology"]) f.fail(root, "cluster: topology is required");
  read_topology(f, root["topology"], c);
  if (const YAML::Node l = root["launch"]) {
    if (!l.IsMap()) f.fail(l, "launch: expected a map of launcher name to command template");
    for (auto it = l.begin(); it != l.end(); ++it) {
      const std::string text = f.string(it->second, it->first.Scalar());
      // Only the placeholders docs/clusters.md lists: a misspelt one ({bundel}) would reach the shell as it is.
      each_placeholder(text, [&](size_t open, size_t close) {
        const std::string name = text.substr(open, close == std::string::npos ? close : close - open + 1);
        if (std::find(std::begin(kPlaceholders), std::end(kPlaceholders), name) == std::end(kPlaceholders))
          f.fail(it->second, "launch: " + it->first.Scalar() + ": unknown placeholder " + name +
                                 " ({ranks}, {ranks_per_node}, {nodes}, {bundle}, {reprise})");
      });
      c.launch[it->first.Scalar()] = text;
    }
  }
  return c;
}

}  // namespace

double DeviceSpec::peak_flops(const std::string& dtype, bool matrix) const {
  const bool is_float32 = dtype == "Float" || dtype.empty();
  if (matrix) {
    if (is_float32 && tf32) {
      if (auto it = matrix_flops.find("TF32"); it != matrix_flops.end()) return it->second;
    }
    if (auto it = matrix_flops.find(is_float32 ? "Float" : dtype); it != matrix_flops.end()) return it->second;
  }
  if (auto it = vector_flops.find(is_float32 ? "Float" : dtype); it != vector_flops.end()) return it->second;
  if (matrix)
    if (auto it = matrix_flops.find("Float"); it != matrix_flops.end()) return it->second;
  if (auto it = vector_flops.find("Float"); it != vector_flops.end()) return it->second;
  return 0;
}

double DeviceSpec::largest_cache() const {
  double m = 0;
  for (const auto& cache : caches) m = std::max(m, cache.second);
  return m;
}

const LinkLevel& Cluster::level_for(const std::vector<int64_t>& ranks) const {
  for (const LinkLevel& l : levels) {
    if (l.span == 0) return l;
    bool together = true;
    for (int64_t r : ranks) together = together && r / l.span == ranks.front() / l.span;
    if (together) return l;
  }
  return levels.back();
}

std::map<std::string, std::string> Cluster::launch_commands(int64_t ranks, const std::string& bundle,
                                                            const std::string& reprise) const {
  const int64_t per_node = std::max<int64_t>(1, std::min(ranks, devices_per_node));
  const std::string value[] = {std::to_string(ranks), std::to_string(per_node),
                               std::to_string((ranks + per_node - 1) / per_node), bundle, reprise};  // kPlaceholders'
  std::map<std::string, std::string> out;
  for (const auto& entry : launch) {  // not structured bindings: the lambda below captures the text
    const std::string& text = entry.second;
    std::string filled;
    size_t at = 0;
    each_placeholder(text, [&](size_t open, size_t close) {
      if (close == std::string::npos) return;
      const std::string placeholder = text.substr(open, close - open + 1);
      const auto known = std::find(std::begin(kPlaceholders), std::end(kPlaceholders), placeholder);
      if (known == std::end(kPlaceholders)) return;  // not one (a template built in code skips the reader)
      filled += text.substr(at, open - at) + value[known - std::begin(kPlaceholders)];
      at = close + 1;
    });
    out[entry.first] = filled + text.substr(at);
  }
  return out;
}

Cluster parse_cluster(const std::string& yaml, const std::string& source) {
  return read_cluster(gen::YamlFile(source, yaml));
}

Cluster load_cluster(const std::string& path) { return read_cluster(gen::YamlFile(path)); }

namespace {

// Free text (names, descriptions, launch templates): quoted where a plain scalar would lose its outer whitespace on
// reading back.
YAML::Emitter& emit_text(YAML::Emitter& e, const std::string& s) {
  const bool padded = !s.empty() && (std::isspace(static_cast<unsigned char>(s.front())) ||
                                     std::isspace(static_cast<unsigned char>(s.back())));
  if (padded) e << YAML::DoubleQuoted;
  return e << s;
}

}  // namespace

std::string cluster_yaml(const Cluster& c) {
  YAML::Emitter e;
  emit_text(e << YAML::BeginMap << YAML::Key << "name" << YAML::Value, c.name);
  if (!c.description.empty()) emit_text(e << YAML::Key << "description" << YAML::Value, c.description);
  const DeviceSpec& d = c.device;
  e << YAML::Key << "device" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "kind" << YAML::Value << d.kind;
  if (!d.name.empty()) emit_text(e << YAML::Key << "name" << YAML::Value, d.name);
  e << YAML::Key << "peak_flops" << YAML::Value << YAML::BeginMap;
  for (const auto* m : {&d.matrix_flops, &d.vector_flops}) {
    if (m->empty()) continue;
    e << YAML::Key << (m == &d.matrix_flops ? "matrix" : "vector") << YAML::Value << YAML::BeginMap;
    for (const auto& [dtype, v] : *m) emit_number(e << YAML::Key << dtype << YAML::Value, v);
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  e << YAML::Key << "tf32" << YAML::Value << d.tf32;
  emit_number(e << YAML::Key << "memory_bandwidth" << YAML::Value, d.memory_bandwidth);
  if (d.memory_bytes > 0) emit_number(e << YAML::Key << "memory_bytes" << YAML::Value, d.memory_bytes);
  if (!d.caches.empty()) {
    e << YAML::Key << "caches" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, v] : d.caches) emit_number(e << YAML::Key << name << YAML::Value, v);
    e << YAML::EndMap;
  }
  emit_number(e << YAML::Key << "launch_overhead" << YAML::Value, d.launch_overhead);
  emit_number(e << YAML::Key << "op_overhead" << YAML::Value, d.op_overhead);
  emit_number(e << YAML::Key << "kernel_floor" << YAML::Value, d.kernel_floor);
  e << YAML::Key << "efficiency" << YAML::Value << YAML::BeginMap;
  emit_number(e << YAML::Key << "compute" << YAML::Value, d.compute_efficiency);
  emit_number(e << YAML::Key << "memory" << YAML::Value, d.memory_efficiency);
  emit_number(e << YAML::Key << "random_access" << YAML::Value, d.random_access_efficiency);
  e << YAML::EndMap << YAML::EndMap;
  e << YAML::Key << "topology" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "devices_per_node" << YAML::Value << c.devices_per_node;
  e << YAML::Key << "nodes" << YAML::Value << c.nodes;
  e << YAML::Key << "levels" << YAML::Value << YAML::BeginSeq;
  for (const LinkLevel& l : c.levels) {
    emit_text(e << YAML::BeginMap << YAML::Key << "name" << YAML::Value, l.name);
    // Span 0 (the whole cluster) is written as no span, which reads back as 0 on the last level only.
    if (l.span) e << YAML::Key << "span" << YAML::Value << l.span;
    emit_number(e << YAML::Key << "bandwidth" << YAML::Value, l.bandwidth);
    emit_number(e << YAML::Key << "latency" << YAML::Value, l.latency);
    emit_number(e << YAML::Key << "efficiency" << YAML::Value, l.efficiency);
    e << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap;
  if (!c.launch.empty()) {
    e << YAML::Key << "launch" << YAML::Value << YAML::BeginMap;
    for (const auto& [k, v] : c.launch) emit_text(e << YAML::Key << k << YAML::Value, v);
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace reprise::predict
