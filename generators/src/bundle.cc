// The bundle manifest (benchmark.yaml): writing, reading, and a rank's trace from its role.
#include "reprise/generators/bundle.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "reprise/common/error.h"
#include "reprise/common/files.h"
#include "reprise/common/stats.h"
#include "reprise/trace/summary.h"
#include "reprise/trace/write.h"
#include "sha256.h"
#include "yaml_check.h"

namespace fs = std::filesystem;

namespace reprise::gen {
namespace {

constexpr const char* kFormat = "reprise-bundle";

std::vector<int64_t> parse_ranges(const YamlFile& f, const YAML::Node& n, const std::string& key) {
  // Ranks are written "0-7,9": split on commas, then as int_ranges reads them.
  if (!n.IsScalar()) return f.int_ranges(n, key, 0, (1 << 20) - 1);
  YAML::Node list(YAML::NodeType::Sequence);
  std::string s = n.Scalar();
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string part = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    part.erase(0, part.find_first_not_of(' '));
    list.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  try {
    return f.int_ranges(list, key, 0, (1 << 20) - 1);
  } catch (const UserError&) {
    f.fail(n, key + ": expected ranks such as 0-7,9, not " + s);
  }
}

YAML::Node required(const YamlFile& f, const YAML::Node& map, const char* key) {
  if (!map[key]) f.fail(map, std::string("expected the key '") + key + "'");
  return map[key];
}

}  // namespace

std::string rank_ranges(const std::vector<int64_t>& ranks) {
  std::vector<int64_t> r = ranks;
  std::sort(r.begin(), r.end());
  std::string out;
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(r[i]);
    if (j > i) out += "-" + std::to_string(r[j]);
    i = j + 1;
  }
  return out;
}

const BundleRole& Bundle::role_of(int64_t rank) const {
  for (const BundleRole& r : roles)
    if (std::find(r.ranks.begin(), r.ranks.end(), rank) != r.ranks.end()) return r;
  throw UserError(dir + ": no rank " + std::to_string(rank) + " in the bundle (world size " +
                  std::to_string(world_size) + ")");
}

bool is_bundle(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / kManifestName, ec);
}

std::string manifest_yaml(const Bundle& b) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "format" << YAML::Value << kFormat;
  e << YAML::Key << "version" << YAML::Value << b.version;
  e << YAML::Key << "name" << YAML::Value << b.name;
  e << YAML::Key << "description" << YAML::Value << b.description;
  e << YAML::Key << "reprise_version" << YAML::Value << b.reprise_version;
  e << YAML::Key << "created" << YAML::Value << b.created;
  e << YAML::Key << "world_size" << YAML::Value << b.world_size;
  e << YAML::Key << "sources" << YAML::Value << YAML::BeginSeq;
  for (const BundleSource& s : b.sources) {
    e << YAML::BeginMap << YAML::Key << "path" << YAML::Value << s.path << YAML::Key << "sha256" << YAML::Value
      << s.sha256 << YAML::Key << "schemas" << YAML::Value << YAML::Flow << s.schemas << YAML::Key << "ranks"
      << YAML::Value << s.ranks << YAML::EndMap;
  }
  e << YAML::EndSeq;
  if (!b.capture_manifest.empty())
    e << YAML::Key << "capture_manifest" << YAML::Value << YAML::Literal << b.capture_manifest;
  e << YAML::Key << "process_groups" << YAML::Value << YAML::BeginSeq;
  for (const ProcessGroup& g : b.process_groups)
    e << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << g.name << YAML::Key << "desc"
      << YAML::Value << g.desc << YAML::Key << "backend" << YAML::Value << g.backend << YAML::Key << "ranks"
      << YAML::Value << (g.ranks.empty() ? "all" : rank_ranges(g.ranks)) << YAML::EndMap;
  e << YAML::EndSeq;
  e << YAML::Key << "roles" << YAML::Value << YAML::BeginSeq;
  for (const BundleRole& r : b.roles) {
    e << YAML::BeginMap << YAML::Key << "file" << YAML::Value << r.file << YAML::Key << "sha256" << YAML::Value
      << r.sha256 << YAML::Key << "ranks" << YAML::Value << rank_ranges(r.ranks) << YAML::Key << "source_rank"
      << YAML::Value << r.source_rank << YAML::Key << "nodes" << YAML::Value << r.nodes << YAML::Key << "collectives"
      << YAML::Value << r.collectives;
    if (!r.timeline.empty())
      e << YAML::Key << "timeline" << YAML::Value << r.timeline << YAML::Key << "timeline_sha256" << YAML::Value
        << r.timeline_sha256;
    e << YAML::EndMap;
  }
  e << YAML::EndSeq;
  e << YAML::Key << "transforms" << YAML::Value << YAML::BeginSeq;
  for (const BundleTransform& t : b.transforms)
    e << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << t.name << YAML::Key << "params"
      << YAML::Value << t.params << YAML::EndMap;
  e << YAML::EndSeq;
  e << YAML::Key << "replay" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "device" << YAML::Value
    << b.replay.device << YAML::Key << "iterations" << YAML::Value << b.replay.iterations << YAML::Key << "warmup"
    << YAML::Value << b.replay.warmup << YAML::EndMap;
  e << YAML::Key << "expected" << YAML::Value << YAML::BeginSeq;
  for (const RankExpectation& x : b.expected)
    e << YAML::Flow << YAML::BeginMap << YAML::Key << "rank" << YAML::Value << x.rank << YAML::Key
      << "iteration_seconds" << YAML::Value << YAML::Flow << x.iteration_seconds << YAML::EndMap;
  e << YAML::EndSeq;
  e << YAML::EndMap;
  return std::string("# A Reprise benchmark bundle (docs/bundle.md). Replay: reprise replay THIS_FOLDER\n") +
         e.c_str() + "\n";
}

void write_manifest(const Bundle& b) { write_text_file((fs::path(b.dir) / kManifestName).string(), manifest_yaml(b)); }

Bundle read_bundle(const std::string& dir) {
  const std::string path = (fs::path(dir) / kManifestName).string();
  if (!is_bundle(dir)) throw UserError(dir + ": not a bundle (no " + std::string(kManifestName) + ")");
  YamlFile f(path);
  const YAML::Node& m = f.root();
  if (!m.IsMap()) f.fail(m, "expected a bundle manifest (a map)");
  if (!m["format"] || f.string(m["format"], "format") != kFormat) f.fail(m, "format: expected reprise-bundle");
  Bundle b;
  b.dir = dir;
  b.version = static_cast<int>(f.integer(required(f, m, "version"), "version", 1, 1000));
  if (b.version > kBundleVersion)
    f.fail(m["version"], "version " + std::to_string(b.version) + " is newer than this Reprise reads (" +
                             std::to_string(kBundleVersion) + "): update Reprise");
  if (m["name"]) b.name = f.string(m["name"], "name");
  if (m["description"]) b.description = f.string(m["description"], "description");
  if (m["reprise_version"]) b.reprise_version = f.string(m["reprise_version"], "reprise_version");
  if (m["created"]) b.created = f.string(m["created"], "created");
  b.world_size = static_cast<int>(f.integer(required(f, m, "world_size"), "world_size", 1, 1 << 20));
  if (m["sources"])
    for (const auto& s : m["sources"]) {
      BundleSource x;
      x.path = f.string(required(f, s, "path"), "path");
      if (s["sha256"]) x.sha256 = f.string(s["sha256"], "sha256");
      if (s["schemas"]) x.schemas = f.strings(s["schemas"], "schemas");
      if (s["ranks"]) x.ranks = static_cast<int>(f.integer(s["ranks"], "ranks", 0, 1 << 20));
      b.sources.push_back(x);
    }
  if (m["capture_manifest"]) b.capture_manifest = f.string(m["capture_manifest"], "capture_manifest");
  if (m["process_groups"])
    for (const auto& g : m["process_groups"]) {
      ProcessGroup pg;
      pg.name = f.string(required(f, g, "name"), "name");
      if (g["desc"]) pg.desc = f.string(g["desc"], "desc");
      if (g["backend"]) pg.backend = f.string(g["backend"], "backend");
      if (g["ranks"] && !(g["ranks"].IsScalar() && g["ranks"].Scalar() == "all"))
        pg.ranks = parse_ranges(f, g["ranks"], "ranks");
      for (int64_t k : pg.ranks)
        if (k >= b.world_size)
          f.fail(g["ranks"], "ranks: process group " + pg.name + "'s rank " + std::to_string(k) +
                                 " is outside the world of " + std::to_string(b.world_size));
      pg.size = pg.ranks.empty() ? b.world_size : static_cast<int64_t>(pg.ranks.size());
      b.process_groups.push_back(pg);
    }
  std::vector<int> seen(static_cast<size_t>(b.world_size), 0);
  for (const auto& r : required(f, m, "roles")) {
    BundleRole x;
    x.file = f.string(required(f, r, "file"), "file");
    if (x.file.find("..") != std::string::npos || fs::path(x.file).is_absolute())
      f.fail(r["file"], "file: expected a path inside the bundle, not " + x.file);
    if (r["sha256"]) x.sha256 = f.string(r["sha256"], "sha256");
    x.ranks = parse_ranges(f, required(f, r, "ranks"), "ranks");
    for (int64_t k : x.ranks) {
      if (k >= b.world_size)
        f.fail(r["ranks"],
               "ranks: rank " + std::to_string(k) + " is outside the world of " + std::to_string(b.world_size));
      if (seen[static_cast<size_t>(k)]++) f.fail(r["ranks"], "ranks: rank " + std::to_string(k) + " has two roles");
    }
    if (r["source_rank"]) x.source_rank = f.integer(r["source_rank"], "source_rank", -1, 1 << 20);
    if (r["nodes"]) x.nodes = f.integer(r["nodes"], "nodes", 0, INT64_MAX);
    if (r["collectives"]) x.collectives = f.integer(r["collectives"], "collectives", 0, INT64_MAX);
    if (r["timeline"]) {
      x.timeline = f.string(r["timeline"], "timeline");
      if (x.timeline.find("..") != std::string::npos || fs::path(x.timeline).is_absolute())
        f.fail(r["timeline"], "timeline: expected a path inside the bundle, not " + x.timeline);
    }
    if (r["timeline_sha256"]) x.timeline_sha256 = f.string(r["timeline_sha256"], "timeline_sha256");
    b.roles.push_back(x);
  }
  for (size_t k = 0; k < seen.size(); ++k)
    if (!seen[k]) f.fail(m["roles"], "roles: rank " + std::to_string(k) + " has no role");
  if (m["transforms"])
    for (const auto& t : m["transforms"]) {
      BundleTransform x;
      x.name = f.string(required(f, t, "name"), "name");
      if (t["params"]) x.params = f.string(t["params"], "params");
      b.transforms.push_back(x);
    }
  if (const YAML::Node r = m["replay"]) {
    f.expect_map(r, "replay", {"device", "iterations", "warmup"});
    if (r["device"]) b.replay.device = f.device(r["device"], "device");
    if (r["iterations"]) b.replay.iterations = static_cast<int>(f.integer(r["iterations"], "iterations", 1, 1000000));
    if (r["warmup"]) b.replay.warmup = static_cast<int>(f.integer(r["warmup"], "warmup", 0, 1000000));
  }
  if (m["expected"])
    for (const auto& x : m["expected"]) {
      RankExpectation e;
      e.rank = f.integer(required(f, x, "rank"), "rank", 0, b.world_size - 1);
      if (x["iteration_seconds"])
        for (const auto& v : x["iteration_seconds"])
          e.iteration_seconds.push_back(f.number(v, "iteration_seconds", 0, 1e9));
      b.expected.push_back(e);
    }
  return b;
}

Trace load_bundle_rank(const Bundle& b, int64_t rank, const ReadOptions& options) {
  const BundleRole& role = b.role_of(rank);
  Trace t = read_et((fs::path(b.dir) / role.file).string(), options);
  if (!role.timeline.empty()) read_kineto((fs::path(b.dir) / role.timeline).string(), t, options);
  t.rank = rank;
  for (Collective& c : t.collectives) {
    if (c.is_send_recv()) continue;  // its rank argument is the peer's, kept in the role's text
    c.rank = rank;
    for (const ProcessGroup& g : t.process_groups)
      if (g.name == c.pg_name && !g.ranks.empty()) {
        auto it = std::find(g.ranks.begin(), g.ranks.end(), rank);
        c.rank = it == g.ranks.end() ? -1 : it - g.ranks.begin();
      }
  }
  return t;
}

std::vector<std::string> check_hashes(const Bundle& b) {
  std::vector<std::string> problems;
  auto check = [&](const std::string& file, const std::string& sha256) {
    const std::string path = (fs::path(b.dir) / file).string();
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (!fs::is_regular_file(st)) {
      // a folder or a link that loops is there, but is not the role file
      std::error_code link_ec;
      const bool there = fs::exists(fs::symlink_status(path, link_ec));
      problems.push_back(path + (!there                 ? ": missing"
                                 : fs::is_directory(st) ? ": a folder, not the role file"
                                 : ec                   ? ": cannot be read (" + ec.message() + ")"
                                                        : ": not a regular file"));
      return;
    }
    if (sha256.empty()) return;
    const std::string got = sha256_file(path);
    if (got != sha256) problems.push_back(path + ": sha256 " + got + ", the manifest says " + sha256);
  };
  for (const BundleRole& r : b.roles) {
    check(r.file, r.sha256);
    if (!r.timeline.empty()) check(r.timeline, r.timeline_sha256);
  }
  return problems;
}

std::string bundle_json(const Bundle& b) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = b.version;
  j["dir"] = b.dir;
  j["name"] = b.name;
  j["description"] = b.description;
  j["reprise_version"] = b.reprise_version;
  j["created"] = b.created;
  j["world_size"] = b.world_size;
  for (const BundleSource& s : b.sources)
    j["sources"].push_back({{"path", s.path}, {"sha256", s.sha256}, {"schemas", s.schemas}, {"ranks", s.ranks}});
  // Ranks as the manifest writes them: a group of every rank is "all" (an empty list reads as no rank at all).
  for (const ProcessGroup& g : b.process_groups)
    j["process_groups"].push_back({{"name", g.name},
                                   {"desc", g.desc},
                                   {"backend", g.backend},
                                   {"ranks", g.ranks.empty() ? nlohmann::json("all") : nlohmann::json(g.ranks)}});
  for (const BundleRole& r : b.roles) {
    nlohmann::json role = {{"file", r.file},   {"sha256", r.sha256},
                           {"ranks", r.ranks}, {"source_rank", r.source_rank},
                           {"nodes", r.nodes}, {"collectives", r.collectives}};
    if (!r.timeline.empty()) role["timeline"] = {{"file", r.timeline}, {"sha256", r.timeline_sha256}};
    j["roles"].push_back(role);
  }
  j["transforms"] = nlohmann::json::array();
  for (const BundleTransform& t : b.transforms) j["transforms"].push_back({{"name", t.name}, {"params", t.params}});
  j["replay"] = {{"device", b.replay.device}, {"iterations", b.replay.iterations}, {"warmup", b.replay.warmup}};
  if (!b.capture_manifest.empty()) {  // the capture's own JSON, as an object (text when it is not JSON)
    const nlohmann::json m = nlohmann::json::parse(b.capture_manifest, nullptr, false);
    j["capture_manifest"] = m.is_discarded() ? nlohmann::json(b.capture_manifest) : m;
  }
  j["expected"] = nlohmann::json::array();
  for (const RankExpectation& x : b.expected)
    j["expected"].push_back({{"rank", x.rank}, {"iteration_seconds", x.iteration_seconds}});
  return j.dump(2);
}

void print_bundle(std::FILE* out, const Bundle& b) {
  std::fprintf(out, "bundle      %s (format %d, Reprise %s, %s)\n", b.name.c_str(), b.version,
               b.reprise_version.c_str(), b.created.c_str());
  if (!b.description.empty()) std::fprintf(out, "            %s\n", b.description.c_str());
  std::fprintf(out, "world       %d rank(s), %zu role(s)\n", b.world_size, b.roles.size());
  for (const BundleSource& s : b.sources)
    std::fprintf(out, "source      %s (%d rank(s), sha256 %.12s)\n", s.path.c_str(), s.ranks, s.sha256.c_str());
  for (const ProcessGroup& g : b.process_groups)
    std::fprintf(out, "group       %-12s ranks %s%s%s\n", g.name.c_str(),
                 g.ranks.empty() ? "all" : rank_ranges(g.ranks).c_str(), g.desc.empty() ? "" : "  ", g.desc.c_str());
  for (const BundleTransform& t : b.transforms)
    std::fprintf(out, "transform   %-8s %s\n", t.name.c_str(), t.params.c_str());
  std::fprintf(out, "replay      device %s, %d iteration(s), %d warm-up\n", b.replay.device.c_str(),
               b.replay.iterations, b.replay.warmup);
  std::fprintf(out, "\n%-28s %-14s %8s %12s %12s\n", "role", "ranks", "source", "nodes", "collectives");
  for (const BundleRole& r : b.roles)
    std::fprintf(out, "%-28s %-14s %8lld %12s %12lld\n", r.file.c_str(), rank_ranges(r.ranks).c_str(),
                 static_cast<long long>(r.source_rank), human_count(r.nodes).c_str(),
                 static_cast<long long>(r.collectives));
  for (const RankExpectation& x : b.expected)
    if (!x.iteration_seconds.empty())
      std::fprintf(out, "expected    rank %lld: %zu iteration(s), first %s\n", static_cast<long long>(x.rank),
                   x.iteration_seconds.size(), human_seconds(x.iteration_seconds.front()).c_str());
}

namespace {

nlohmann::json parse_manifest(const std::string& text, const std::string& where) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(where + ": not JSON (" + e.what() + ")");
  }
}

CaptureFacts facts_of(const nlohmann::json& m, const std::string& where) {
  if (!m.is_object()) throw UserError(where + ": not a capture manifest (a JSON object)");
  auto integer = [&](const nlohmann::json& v, const std::string& at, int64_t lo, int64_t hi) {
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      throw UserError(where + ": " + at + ": expected an integer from " + std::to_string(lo) + " to " +
                      std::to_string(hi) + ", got " + v.dump().substr(0, 40));
    return v.get<int64_t>();
  };
  CaptureFacts f;
  if (m.contains("device")) {
    if (!m["device"].is_string()) throw UserError(where + ": device: expected a string, got " + m["device"].dump());
    f.device = m["device"].get<std::string>();
  }
  if (m.contains("threads")) f.threads = static_cast<int>(integer(m["threads"], "threads", 0, 1024));
  if (!m.contains("ranks")) return f;
  if (!m["ranks"].is_array()) throw UserError(where + ": ranks: expected a list");
  for (size_t k = 0; k < m["ranks"].size(); ++k) {
    const nlohmann::json& r = m["ranks"][k];
    const std::string at = "ranks[" + std::to_string(k) + "]";
    if (!r.is_object()) throw UserError(where + ": " + at + ": expected an object");
    const int64_t rank = r.contains("rank") ? integer(r["rank"], at + ": rank", 0, 1 << 24) : 0;
    auto seconds = [&](const char* key, std::map<int64_t, std::vector<double>>& into) {
      if (!r.contains(key)) return;
      const nlohmann::json& t = r[key];
      if (!t.is_array()) throw UserError(where + ": " + at + ": " + key + ": expected a list of seconds");
      std::vector<double>& out = into[rank];
      for (size_t i = 0; i < t.size(); ++i) {
        const double x = t[i].is_number() ? t[i].get<double>() : -1;
        if (!(x >= 0 && x <= 1e9))
          throw UserError(where + ": " + at + ": " + key + "[" + std::to_string(i) +
                          "]: expected seconds from 0 to 1e9, got " + t[i].dump().substr(0, 40));
        out.push_back(x);
      }
    };
    seconds("iteration_seconds", f.iteration_seconds);
    seconds("data_loader_seconds", f.data_loader_seconds);
    if (r.contains("peak_memory_bytes"))
      f.peak_memory_bytes[rank] =
          integer(r["peak_memory_bytes"], at + ": peak_memory_bytes", -1, std::numeric_limits<int64_t>::max());
  }
  return f;
}

}  // namespace

CaptureFacts read_capture_manifest(const std::string& text, const std::string& where) {
  return facts_of(parse_manifest(text, where), where);
}

std::optional<CaptureFacts> read_capture_manifest_if_ours(const std::string& text, const std::string& where) {
  const nlohmann::json m = parse_manifest(text, where);
  if (!m.is_object() || !m.contains("reprise_capture")) return std::nullopt;  // another tool's manifest.json
  return facts_of(m, where);
}

std::optional<CaptureFacts> read_capture_folder_manifest(const std::string& folder, std::string* text) {
  const std::filesystem::path manifest = std::filesystem::path(folder) / "manifest.json";
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec) || !std::filesystem::is_regular_file(manifest, ec))
    return std::nullopt;
  std::string read = read_text_file(manifest.string());
  std::optional<CaptureFacts> facts = read_capture_manifest_if_ours(read, manifest.string());
  if (facts && text) *text = std::move(read);
  return facts;
}

std::map<int64_t, double> capture_plain_steps(const std::vector<std::string>& inputs) {
  std::map<int64_t, double> plain;
  for (const std::string& in : inputs)
    if (const std::optional<CaptureFacts> facts = read_capture_folder_manifest(in))
      for (const auto& [rank, seconds] : facts->iteration_seconds)
        if (!seconds.empty()) plain[rank] = median(seconds);
  return plain;
}

double plain_step_seconds(const Bundle& b, const CaptureFacts& capture, int64_t rank) {
  if (std::any_of(b.expected.begin(), b.expected.end(), [&](const RankExpectation& x) { return x.rank == rank; }))
    return 0;  // the original's iteration times say it
  const BundleRole& role = b.role_of(rank);
  const auto it = capture.iteration_seconds.find(role.source_rank);
  if (role.timeline.empty() || it == capture.iteration_seconds.end() || it->second.empty()) return 0;
  return median(it->second);
}

double plain_data_loader_seconds(const Bundle& b, const CaptureFacts& capture, int64_t rank) {
  const BundleRole& role = b.role_of(rank);
  const auto it = capture.data_loader_seconds.find(role.source_rank);
  if (role.timeline.empty() || it == capture.data_loader_seconds.end() || it->second.empty()) return 0;
  return median(it->second);
}

}  // namespace reprise::gen
