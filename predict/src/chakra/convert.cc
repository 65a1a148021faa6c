// Trace sets and bundles into a folder of per-rank Chakra files, named as ASTRA-sim looks them up: a workload
// prefix P gives P.0.et, P.1.et, ..., and its communicator groups P.json.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "reprise/common/error.h"
#include "reprise/generators/bundle.h"
#include "reprise/predict/chakra.h"
#include "reprise/trace/write.h"

namespace reprise::predict {
namespace {

void make_folder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directory(dir, ec);  // in a folder that exists: OUT's parents are not made
  if (ec || !std::filesystem::is_directory(dir))
    throw UserError(dir + ": cannot create the output folder" + (ec ? ": " + ec.message() : std::string()));
}

std::string rank_path(const std::string& dir, const std::string& prefix, int64_t rank) {
  return (std::filesystem::path(dir) / (prefix + "." + std::to_string(rank) + ".et")).string();
}

// ASTRA-sim's --comm-group-configuration: {"pg_name": [world ranks], ...}. A group that lists no ranks spans them
// all.
void write_comm_groups(const std::vector<ProcessGroup>& groups, const std::string& dir, const std::string& prefix) {
  nlohmann::json j = nlohmann::json::object();
  for (const ProcessGroup& g : groups) {
    if (g.name.empty()) continue;
    std::vector<int64_t> ranks = g.ranks;
    if (ranks.empty())
      for (int64_t r = 0; r < g.size; ++r) ranks.push_back(r);
    if (!ranks.empty()) j[g.name] = ranks;
  }
  if (j.empty()) return;
  const std::string path = (std::filesystem::path(dir) / (prefix + ".json")).string();
  write_text_file(path, j.dump(2) + "\n");
}

}  // namespace

std::vector<ChakraFile> convert_to_chakra(const TraceSet& set, const std::string& out_dir, const std::string& prefix,
                                          const ChakraOptions& o) {
  make_folder(out_dir);
  std::vector<ChakraFile> files;
  for (size_t i = 0; i < set.ranks.size(); ++i) {
    const Trace& t = set.ranks[i];
    if (t.from_kineto_only) throw UserError(t.source + ": a Kineto trace alone has no ops to export to Chakra");
    const int64_t rank = t.rank >= 0 ? t.rank : static_cast<int64_t>(i);
    files.push_back(write_chakra(t, rank, rank_path(out_dir, prefix, rank), o));
  }
  if (!set.ranks.empty()) write_comm_groups(set.ranks.front().process_groups, out_dir, prefix);
  return files;
}

std::vector<ChakraFile> convert_to_chakra(const std::string& in, const std::string& out_dir, const std::string& prefix,
                                          const ChakraOptions& o, const ReadOptions& ro) {
  if (!gen::is_bundle(in)) return convert_to_chakra(load_traces({in}, ro), out_dir, prefix, o);
  // Ranks of one role differ only in their rank ids: each loads its role's trace with its own ids.
  const gen::Bundle b = gen::read_bundle(in);
  make_folder(out_dir);
  std::vector<ChakraFile> files;
  for (int64_t rank = 0; rank < b.world_size; ++rank)
    files.push_back(write_chakra(gen::load_bundle_rank(b, rank, ro), rank, rank_path(out_dir, prefix, rank), o));
  write_comm_groups(b.process_groups, out_dir, prefix);
  return files;
}

}  // namespace reprise::predict
