// Cluster descriptions: every shipped clusters/*.yaml loads with its datasheet figures, malformed files are refused
// at their place (FILE:LINE:COL), and cluster_yaml() reads back as the same description.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "reprise/common/error.h"
#include "reprise/predict/cluster.h"
#include "reprise/predict/cost_model.h"
#include "test_util.h"

namespace reprise::predict {
namespace {

std::string clusters_dir() { return std::string(REPRISE_SOURCE_DIR) + "/clusters"; }

Cluster shipped(const std::string& name) { return load_cluster(clusters_dir() + "/" + name + ".yaml"); }

std::vector<int64_t> iota(int64_t from, int64_t to) {
  std::vector<int64_t> r(static_cast<size_t>(to - from));
  std::iota(r.begin(), r.end(), from);
  return r;
}

// The fields a description holds, compared one by one so that a failure names the one that differs.
// figures_only: the rates and links, not the names, texts and launch templates (the docs' shortened example).
void expect_same(const Cluster& a, const Cluster& b, bool figures_only = false) {
  if (!figures_only) {
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.description, b.description);
    EXPECT_EQ(a.device.name, b.device.name);
    EXPECT_EQ(a.launch, b.launch);
  }
  EXPECT_EQ(a.device.kind, b.device.kind);
  for (const auto& [dtype, rate] : a.device.matrix_flops) EXPECT_EQ(rate, b.device.matrix_flops.at(dtype)) << dtype;
  for (const auto& [dtype, rate] : a.device.vector_flops) EXPECT_EQ(rate, b.device.vector_flops.at(dtype)) << dtype;
  if (!figures_only) {
    EXPECT_EQ(a.device.matrix_flops, b.device.matrix_flops);
    EXPECT_EQ(a.device.vector_flops, b.device.vector_flops);
  }
  EXPECT_EQ(a.device.tf32, b.device.tf32);
  EXPECT_EQ(a.device.memory_bandwidth, b.device.memory_bandwidth);
  EXPECT_EQ(a.device.memory_bytes, b.device.memory_bytes);
  EXPECT_EQ(a.device.caches, b.device.caches);
  EXPECT_EQ(a.device.launch_overhead, b.device.launch_overhead);
  EXPECT_EQ(a.device.op_overhead, b.device.op_overhead);
  EXPECT_EQ(a.device.compute_efficiency, b.device.compute_efficiency);
  EXPECT_EQ(a.device.memory_efficiency, b.device.memory_efficiency);
  EXPECT_EQ(a.device.random_access_efficiency, b.device.random_access_efficiency);
  EXPECT_EQ(a.devices_per_node, b.devices_per_node);
  EXPECT_EQ(a.nodes, b.nodes);
  ASSERT_EQ(a.levels.size(), b.levels.size());
  for (size_t k = 0; k < a.levels.size(); ++k) {
    SCOPED_TRACE("level " + a.levels[k].name);
    EXPECT_EQ(a.levels[k].name, b.levels[k].name);
    EXPECT_EQ(a.levels[k].span, b.levels[k].span);
    EXPECT_EQ(a.levels[k].bandwidth, b.levels[k].bandwidth);
    EXPECT_EQ(a.levels[k].latency, b.levels[k].latency);
    EXPECT_EQ(a.levels[k].efficiency, b.levels[k].efficiency);
  }
}

TEST(ClusterShipped, EveryFileLoadsWithSaneFigures) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(clusters_dir()))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  ASSERT_GE(files.size(), 5u) << "clusters/ should hold the H100, A100 and CPU example descriptions";
  const std::set<std::string> placeholders = {"ranks", "ranks_per_node", "nodes", "bundle", "reprise"};
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    Cluster c;
    ASSERT_NO_THROW(c = load_cluster(path));
    EXPECT_EQ(c.name, std::filesystem::path(path).stem().string()) << "a description is named after its file";
    EXPECT_FALSE(c.description.empty());
    EXPECT_GT(c.device.peak_flops("Float", false), 0);
    EXPECT_GT(c.device.memory_bandwidth, 0);
    EXPECT_GT(c.device.memory_bytes, 0);
    EXPECT_GT(c.device.largest_cache(), 0);
    ASSERT_FALSE(c.levels.empty());
    EXPECT_EQ(c.level_for(iota(0, c.devices_per_node)).name, c.levels.front().name);
    for (const LinkLevel& l : c.levels) EXPECT_GT(l.bandwidth, 0) << l.name;
    ASSERT_EQ(c.launch.count("mpirun"), 1u);
    ASSERT_EQ(c.launch.count("srun"), 1u);
    for (const auto& [launcher, command] : c.launch) {
      EXPECT_NE(command.find("{bundle}"), std::string::npos) << launcher;
      EXPECT_NE(command.find("{reprise}"), std::string::npos) << launcher;
      const std::regex placeholder(R"(\{([a-z_]+)\})");
      for (auto it = std::sregex_iterator(command.begin(), command.end(), placeholder); it != std::sregex_iterator();
           ++it)
        EXPECT_EQ(placeholders.count((*it)[1].str()), 1u) << launcher << ": unknown placeholder " << it->str();
    }
    // A GPU's matrix units are faster than its vector units; a CPU description has no launches.
    if (c.device.kind == "gpu") {
      EXPECT_GT(c.device.peak_flops("BFloat16", true), c.device.peak_flops("Float", false));
      EXPECT_GT(c.device.launch_overhead, 0);
    } else {
      EXPECT_EQ(c.device.launch_overhead, 0);
    }
  }
}

TEST(ClusterShipped, H100NodeHasTheDatasheetFigures) {
  Cluster c = shipped("h100-sxm-8");
  EXPECT_EQ(c.device.kind, "gpu");
  EXPECT_EQ(c.device.matrix_flops.at("BFloat16"), 989e12);
  EXPECT_EQ(c.device.peak_flops("BFloat16", true), 989e12);
  EXPECT_EQ(c.device.peak_flops("Half", true), 989e12);
  EXPECT_EQ(c.device.peak_flops("Float8_e4m3fn", true), 1979e12);
  EXPECT_EQ(c.device.peak_flops("Float8_e5m2", true), 1979e12) << "fp8 names both formats";
  EXPECT_EQ(c.device.peak_flops("Char", true), 1979e12) << "int8";
  EXPECT_EQ(c.device.peak_flops("Double", true), 67e12);
  EXPECT_EQ(c.device.peak_flops("Double", false), 34e12);
  EXPECT_EQ(c.device.peak_flops("BFloat16", false), 133.8e12);
  // float32 products: CUDA cores unless TF32 is allowed, then the tensor cores' TF32 rate.
  EXPECT_EQ(c.device.peak_flops("Float", true), 67e12);
  c.device.tf32 = true;
  EXPECT_EQ(c.device.peak_flops("Float", true), 494.5e12);
  EXPECT_EQ(c.device.peak_flops("Float", false), 67e12);
  EXPECT_EQ(c.device.memory_bandwidth, 3.35e12);
  EXPECT_EQ(c.device.largest_cache(), 50.0 * 1024 * 1024);
  EXPECT_EQ(c.device.launch_overhead, 4e-6);
  EXPECT_EQ(c.device.op_overhead, 8e-6);
  EXPECT_EQ(c.devices(), 8);
  ASSERT_EQ(c.levels.size(), 1u);
  EXPECT_EQ(c.level_for(iota(0, 8)).name, "nvlink");
  EXPECT_EQ(c.level_for(iota(0, 8)).bandwidth, 450e9);
}

TEST(ClusterShipped, H100MultiNodeCrossesInfiniBandBetweenNodes) {
  const Cluster c = shipped("h100-sxm-8x16");
  EXPECT_EQ(c.devices(), 128);
  EXPECT_EQ(c.device.matrix_flops, shipped("h100-sxm-8").device.matrix_flops);
  EXPECT_EQ(c.level_for(iota(0, 8)).name, "nvlink");
  EXPECT_EQ(c.level_for(iota(8, 16)).name, "nvlink");
  EXPECT_EQ(c.level_for({0, 8}).name, "infiniband");
  EXPECT_EQ(c.level_for({7, 8}).name, "infiniband");
  EXPECT_EQ(c.level_for(iota(0, 128)).name, "infiniband");
  EXPECT_EQ(c.level_for({0, 8}).bandwidth, 50e9);
  EXPECT_EQ(c.levels.back().span, 0) << "the last level's span defaults to the whole cluster";
}

TEST(ClusterShipped, A100FilesHaveTheDatasheetFigures) {
  Cluster c = shipped("a100-sxm-8");
  EXPECT_EQ(c.device.peak_flops("BFloat16", true), 312e12);
  EXPECT_EQ(c.device.peak_flops("Float", true), 19.5e12);
  c.device.tf32 = true;
  EXPECT_EQ(c.device.peak_flops("Float", true), 156e12);
  EXPECT_EQ(c.device.peak_flops("Double", false), 9.7e12);
  EXPECT_EQ(c.device.memory_bandwidth, 2.039e12);
  EXPECT_EQ(c.level_for(iota(0, 8)).bandwidth, 300e9);
  const Cluster multi = shipped("a100-sxm-8x4");
  EXPECT_EQ(multi.devices(), 32);
  EXPECT_EQ(multi.level_for({0, 31}).name, "infiniband");
  EXPECT_EQ(multi.level_for({0, 31}).bandwidth, 25e9);
  EXPECT_EQ(multi.level_for({24, 31}).name, "nvlink");
}

TEST(ClusterShipped, CpuExampleUsesVectorRatesForMatrixWork) {
  const Cluster c = shipped("cpu-2core-example");
  EXPECT_EQ(c.device.kind, "cpu");
  EXPECT_TRUE(c.device.matrix_flops.empty());
  EXPECT_EQ(c.device.peak_flops("Float", true), 192e9);
  EXPECT_EQ(c.device.peak_flops("BFloat16", true), 192e9) << "no bf16 rate: float types fall back to Float";
  EXPECT_EQ(c.device.peak_flops("Double", true), 96e9);
  EXPECT_EQ(c.level_for({0, 1}).name, "shm");
}

TEST(ClusterShipped, TheDocsExampleParses) {
  std::ifstream in(std::string(REPRISE_SOURCE_DIR) + "/docs/clusters.md");
  std::stringstream doc;
  doc << in.rdbuf();
  const std::string text = doc.str();
  const size_t start = text.find("```yaml\n");
  ASSERT_NE(start, std::string::npos);
  const size_t end = text.find("```", start + 8);
  const Cluster c = parse_cluster(text.substr(start + 8, end - start - 8), "docs/clusters.md");
  EXPECT_EQ(c.devices(), 128);
  EXPECT_EQ(c.level_for({0, 8}).name, "infiniband");
  expect_same(c, shipped("h100-sxm-8x16"), /*figures_only=*/true);
}

// The formulas docs/clusters.md gives for an uncalibrated description, on the shipped H100 figures.
TEST(ClusterCostModel, RooflineUsesThePeaksTheDocsName) {
  Cluster c = shipped("h100-sxm-8");
  OpWork gemm;
  gemm.family = OpFamily::Gemm;
  gemm.flops = 2.0 * 8192 * 8192 * 8192;
  gemm.bytes = 3.0 * 8192 * 8192 * 2;
  gemm.dtype = "BFloat16";
  EXPECT_DOUBLE_EQ(roofline_seconds(gemm, c.device), gemm.flops / 989e12);
  gemm.dtype = "Float";
  EXPECT_DOUBLE_EQ(roofline_seconds(gemm, c.device), gemm.flops / 67e12);
  c.device.tf32 = true;
  EXPECT_DOUBLE_EQ(roofline_seconds(gemm, c.device), gemm.flops / 494.5e12);
  OpWork add;  // memory-bound: bytes over the bandwidth
  add.family = OpFamily::Memory;
  add.flops = 1e6;
  add.bytes = 12e6;
  add.dtype = "BFloat16";
  EXPECT_DOUBLE_EQ(roofline_seconds(add, c.device), 12e6 / 3.35e12);
}

TEST(ClusterCostModel, CollectivesTakeTheLevelThatHoldsTheGroup) {
  const CostModel m(shipped("h100-sxm-8x16"));
  Collective ar;
  ar.name = "all_reduce";
  ar.dtype = "BFloat16";
  ar.itemsize = 2;
  ar.in_elems = ar.out_elems = int64_t{1} << 28;
  const double bytes = 2.0 * (int64_t{1} << 28);
  // Inside a node: NVLink, min(2(n-1), 2 log2 n) = 6 latency steps, bus-bandwidth factor 2(n-1)/n.
  EXPECT_DOUBLE_EQ(m.collective(ar, iota(0, 8)), 1e-6 * 6 + bytes * (2.0 * 7 / 8) / (450e9 * 0.8));
  // One rank on each of two nodes: InfiniBand.
  EXPECT_DOUBLE_EQ(m.collective(ar, {0, 8}), 5e-6 * 2 + bytes * 1.0 / (50e9 * 0.8));
  EXPECT_GT(m.collective(ar, {0, 8}), 5 * m.collective(ar, {0, 1}));
}

TEST(ClusterYaml, RoundTripsEveryShippedFile) {
  for (const char* name : {"h100-sxm-8", "h100-sxm-8x16", "a100-sxm-8", "a100-sxm-8x4", "cpu-2core-example"}) {
    SCOPED_TRACE(name);
    const Cluster c = shipped(name);
    const std::string text = cluster_yaml(c);
    Cluster back;
    ASSERT_NO_THROW(back = parse_cluster(text, "written.yaml")) << text;
    expect_same(c, back);
    EXPECT_EQ(cluster_yaml(back), text);
  }
}

TEST(ClusterYaml, KeepsFiguresTheFileDoesNotSpell) {
  Cluster c = shipped("h100-sxm-8x16");
  c.device.tf32 = true;
  c.device.compute_efficiency = 0.61;
  c.device.memory_efficiency = 0.93;
  c.device.random_access_efficiency = 0.1;
  c.levels[0].efficiency = 0.87;
  c.levels[1].efficiency = 0.55;
  c.levels[1].latency = 7.25e-6;
  c.device.op_overhead = 1.0 / 3 * 1e-5;  // needs all 17 digits
  const std::string text = cluster_yaml(c);
  const Cluster back = parse_cluster(text, "written.yaml");
  expect_same(c, back);
  EXPECT_NE(text.find("9.89e+14"), std::string::npos) << "numbers are written short:\n" << text;
  EXPECT_NE(text.find("compute: 0.61\n"), std::string::npos) << text;
}

// A small valid description; each error test breaks one thing in it.
const char* const kValid = R"(name: t
device:
  kind: gpu
  peak_flops:
    matrix: {bf16: 1e12}
    vector: {fp32: 1e11}
  memory_bandwidth: 1e12
topology:
  devices_per_node: 2
  nodes: 2
  levels:
    - name: nvlink
      span: 2
      bandwidth: 1e11
    - name: infiniband
      bandwidth: 1e10
)";

std::string edited(const std::string& from, const std::string& to) {
  std::string text = kValid;
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// "bad.yaml:LINE:COL" of the first occurrence of `needle` in `text`.
std::string place_of(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  const size_t line_start = text.rfind('\n', at);
  const size_t line =
      1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  const size_t col = at - (line_start == std::string::npos ? 0 : line_start + 1) + 1;
  return "bad.yaml:" + std::to_string(line) + ":" + std::to_string(col);
}

// The error for `text`, which must start with the place of `at` (a piece of `text`) and then mention `what`.
void expect_error(const std::string& text, const std::string& at, const std::string& what) {
  SCOPED_TRACE(text);
  const std::string place = at.empty() ? "bad.yaml:1:1" : place_of(text, at);
  try {
    parse_cluster(text, "bad.yaml");
    ADD_FAILURE() << "accepted; expected an error at " << place << " about " << what;
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(place + ": ", 0), 0u) << msg << "\nexpected it to start with " << place;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(ClusterDefaults, TheValidBaseParses) {
  const Cluster c = parse_cluster(kValid, "ok.yaml");
  EXPECT_EQ(c.devices(), 4);
  EXPECT_EQ(c.level_for({0, 1}).name, "nvlink");
  EXPECT_EQ(c.level_for({1, 2}).name, "infiniband");
  EXPECT_EQ(c.device.launch_overhead, 4e-6) << "a GPU's launch overhead defaults to a typical figure";
}

TEST(ClusterDefaults, KindIsGpu) {
  const Cluster c = parse_cluster(edited("  kind: gpu\n", ""), "ok.yaml");
  EXPECT_EQ(c.device.kind, "gpu");
}

TEST(ClusterErrors, NotAMap) {
  expect_error("- a\n- b\n", "", "cluster: expected a map");
  expect_error("just words\n", "", "cluster: expected a map");
  expect_error("", "", "empty");
  expect_error("# only a comment\n", "", "empty");
}

TEST(ClusterErrors, YamlSyntaxIsPlaced) {
  const std::string text = edited("matrix: {bf16: 1e12}", "matrix: {bf16: 1e12");
  EXPECT_THROW(parse_cluster(text, "bad.yaml"), UserError);
  try {
    parse_cluster(text, "bad.yaml");
  } catch (const UserError& e) {
    EXPECT_TRUE(std::regex_search(e.what(), std::regex("^bad\\.yaml:[0-9]+:[0-9]+: "))) << e.what();
  }
}

// A key given twice is refused at the second (yaml-cpp would keep the first and drop the other without a word); a
// folder or a missing file given as the cluster is one line (it was the C++ library's stream error, exit 1).
TEST(ClusterErrors, RepeatedKeysAndFoldersAreRefused) {
  expect_error(edited("  nodes: 2\n", "  nodes: 2\n  nodes: 3\n"), "nodes: 3", "nodes: given twice in one map");
  expect_error(edited("name: t\n", "name: t\nname: u\n"), "name: u", "name: given twice in one map (first at line 1)");
  const std::string dir = test::temp_dir();
  try {
    load_cluster(dir);
    ADD_FAILURE() << "a folder was read as a cluster";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), dir + ": is a folder, not a file");
  }
  try {
    load_cluster(dir + "/none.yaml");
    ADD_FAILURE() << "a missing file was read as a cluster";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), dir + "/none.yaml: cannot read (No such file or directory)");
  }
}

TEST(ClusterErrors, UnknownKeys) {
  const std::string typo = edited("memory_bandwidth", "memory_bandwith");
  expect_error(typo, "memory_bandwith", "unknown key 'memory_bandwith'");
  expect_error(edited("name: t\n", "nmae: t\n"), "nmae", "unknown key 'nmae'");
  expect_error(edited("      span: 2\n", "      spam: 2\n"), "spam", "unknown key 'spam'");
  expect_error(edited("vector: {fp32", "scalar: {fp32"), "scalar", "unknown key 'scalar'");
  expect_error(edited("  nodes: 2\n", "  nodse: 2\n"), "nodse", "unknown key 'nodse'");
}

TEST(ClusterErrors, MissingSections) {
  std::string no_device = kValid;
  no_device.erase(no_device.find("device:"), no_device.find("topology:") - no_device.find("device:"));
  expect_error(no_device, "name", "device is required");
  expect_error(edited("  peak_flops:\n    matrix: {bf16: 1e12}\n    vector: {fp32: 1e11}\n", ""), "kind",
               "peak_flops is required");
  expect_error(edited("  memory_bandwidth: 1e12\n", ""), "kind", "memory_bandwidth is required");
  expect_error(std::string(kValid).substr(0, std::string(kValid).find("topology:")), "name", "topology is required");
  expect_error(edited("  devices_per_node: 2\n", ""), "nodes", "devices_per_node is required");
  const std::string no_levels = std::string(kValid).substr(0, std::string(kValid).find("  levels:"));
  expect_error(no_levels, "devices_per_node", "levels must list at least one");
  expect_error(no_levels + "  levels: []\n", "[]", "levels must list at least one");
  expect_error(edited("      bandwidth: 1e11\n", ""), "name: nvlink", "bandwidth is required");
  expect_error(edited("    - name: nvlink\n      span: 2\n", "    - span: 2\n"), "span: 2", "name is required");
  expect_error(edited("    matrix: {bf16: 1e12}\n    vector: {fp32: 1e11}\n", "    {}\n"), "{}",
               "give matrix or vector rates");
}

TEST(ClusterErrors, BadValues) {
  expect_error(edited("bandwidth: 1e11", "bandwidth: -1e11"), "-1e11", "bandwidth: expected a number");
  expect_error(edited("memory_bandwidth: 1e12", "memory_bandwidth: 0"), "0\n", "memory_bandwidth");
  expect_error(edited("memory_bandwidth: 1e12", "memory_bandwidth: fast"), "fast", "expected a number");
  expect_error(edited("memory_bandwidth: 1e12", "memory_bandwidth: [1e12]"), "[1e12]", "expected a number");
  expect_error(edited("{bf16: 1e12}", "{bf16: 1e12TF}"), "1e12TF", "expected a number");
  expect_error(edited("{bf16: 1e12}", "{bf17: 1e12}"), "bf17", "unknown dtype 'bf17'");
  expect_error(edited("kind: gpu", "kind: tpu"), "tpu", "kind: expected one of gpu, cpu");
  expect_error(edited("devices_per_node: 2", "devices_per_node: 2.5"), "2.5", "expected an integer");
  expect_error(edited("  nodes: 2\n", "  nodes: 0\n"), "0\n", "nodes");
  expect_error(edited("    - name: infiniband\n",
                      "    - name: rack\n      span: 2\n      bandwidth: 1e10\n    - name: infiniband\n"),
               "name: rack", "span must grow outwards");
  expect_error(edited("      span: 2\n", "      span: 0\n"), "0\n      bandwidth: 1e11",
               "span: expected an integer from 1");
  expect_error(edited("    - name: infiniband\n", "    - name: infiniband\n      span: 1\n"), "name: infiniband",
               "span must grow outwards");
  // 2 nodes of 2: an inner level of 8 would join devices the cluster lacks, and hide the level past it.
  expect_error(edited("      span: 2\n", "      span: 8\n"), "8\n      bandwidth: 1e11",
               "level nvlink: span 8 is more than the cluster's 4 devices");
  expect_error(edited("topology:\n", "launch: mpirun\ntopology:\n"), "mpirun\n", "launch: expected a map");
  expect_error(edited("topology:\n", "launch: {mpirun: 'mpirun -np {rank} x'}\ntopology:\n"), "'mpirun -np",
               "launch: mpirun: unknown placeholder {rank}");
  expect_error(edited("      bandwidth: 1e10\n", "      bandwidth: 1e10\n      efficiency: 1.5\n"), "1.5",
               "efficiency");
}

// Templates filled in for a replay: 5 ranks on nodes of 2 take 3 nodes; a world of 1 takes one rank a node.
TEST(Cluster, LaunchTemplatesAreFilledIn) {
  const Cluster launched =
      parse_cluster(edited("topology:\n",
                           "launch: {mpirun: 'mpirun -np {ranks} -N {nodes} --ppn {ranks_per_node} "
                           "{reprise} replay {bundle}'}\ntopology:\n"),
                    "l.yaml");
  EXPECT_EQ(launched.launch_commands(5, "/b", "/bin/reprise").at("mpirun"),
            "mpirun -np 5 -N 3 --ppn 2 /bin/reprise replay /b");
  EXPECT_EQ(launched.launch_commands(1, "b", "reprise").at("mpirun"), "mpirun -np 1 -N 1 --ppn 1 reprise replay b");
  // The shell's ${VAR} is the shell's: read, and left as it is.
  const Cluster shell =
      parse_cluster(edited("topology:\n",
                           "launch: {srun: 'srun -n {ranks} --export=HOST=${MASTER} {reprise} replay {bundle}'}\n"
                           "topology:\n"),
                    "s.yaml");
  EXPECT_EQ(shell.launch_commands(4, "b", "r").at("srun"), "srun -n 4 --export=HOST=${MASTER} r replay b");
}

// yaml-cpp keeps a byte that is not UTF-8 as it is, and reads the escapes \_ and \N as the single bytes 0xA0 and 0x85;
// its emitter writes such a byte as U+FFFD, so two launchers could become one on reading back (fuzz_cluster found
// both). Each is refused at its own place, in any YAML file (generators/src/yaml_check.cc).
TEST(ClusterErrors, BytesThatAreNotUtf8ArePlaced) {
  expect_error(edited("name: t\n", "name: t\xff\n"), "\xff", "the byte 0xFF is not UTF-8");
  expect_error(edited("      span: 2\n", "      span: 2  # 2 \xc3\n"), "\xc3", "the byte 0xC3 is not UTF-8");
  try {  // as in yaml-cpp's marks, columns start after a byte-order mark
    parse_cluster("\xef\xbb\xbfname: \xe2\x82\n", "bad.yaml");
    ADD_FAILURE() << "accepted";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "bad.yaml:1:7: the byte 0xE2 is not UTF-8 (YAML files are read as UTF-8)");
  }
  const std::string nbsp = edited("    - name: nvlink\n", "    - name: \"nv\\\"\\_link\"\n");
  expect_error(nbsp, "\\_", "the escape \\_ is read as the byte 0xA0, which is not UTF-8; write \\u00A0");
  expect_error(edited("topology:\n", "launch: {\"\\\\N\": a, \"b\\N\": b}\ntopology:\n"), "\\N\": b",
               "the escape \\N is read as the byte 0x85");
  // The same characters written as UTF-8, or with \u escapes, read back as written.
  for (const std::string& name : {std::string("\"nv\\u00A0link\\u0085\""), std::string("nv\xc2\xa0link")}) {
    SCOPED_TRACE(name);
    const Cluster c = parse_cluster(edited("    - name: nvlink\n", "    - name: " + name + "\n"), "ok.yaml");
    EXPECT_EQ(c.levels[0].name.substr(0, 4), "nv\xc2\xa0");
    const std::string text = cluster_yaml(c);
    EXPECT_EQ(cluster_yaml(parse_cluster(text, "written.yaml")), text);
  }
  // What fuzz_cluster found: two launchers whose names are not UTF-8 were written as one.
  const std::string two = edited("topology:\n", "launch: {\"\\_ \": a, \"\\N \": b}\ntopology:\n");
  expect_error(two, "\\_", "not UTF-8");
}

}  // namespace
}  // namespace reprise::predict
