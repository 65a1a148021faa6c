// The generator's driver: read the config, load the sources, apply the transforms in order, check the ranks
// against each other, dry-run every role, and only then write the bundle (into a temporary folder renamed into
// place, so a failure leaves nothing).
#include "reprise/generators/generate.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <utility>

#include "invariants.h"
#include "reprise/common/clock.h"
#include "reprise/common/error.h"
#include "reprise/common/files.h"
#include "reprise/trace/output.h"
#include "reprise/trace/write.h"
#include "reprise/version.h"
#include "sha256.h"
#include "transform.h"

namespace fs = std::filesystem;

namespace reprise::gen {
namespace {

// Role files are written at gzip level 1: on a 1 GB trace it writes about 3x faster than level 6 for files about
// a third larger (docs/performance.md, generation).
constexpr int kRoleGzipLevel = 1;

struct Config {
  std::string name, description;
  std::string source;
  std::vector<std::pair<std::string, TransformStep>> steps;  // name, step
  std::vector<std::string> step_places;                      // each step's place in the config (FILE:LINE:COL)
  std::vector<BundleTransform> recorded;
  ReplayDefaults replay;
};

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string source_hash(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return sha256_file(path);
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(path, ec))
    if (e.is_regular_file()) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::string all;
  for (const std::string& f : files) all += fs::relative(f, path).string() + " " + sha256_file(f) + "\n";
  return sha256_text(all);
}

// Expected original iteration times: a capture manifest's per-rank uninstrumented times, else the linked Kineto
// trace's ProfilerStep durations.
std::vector<double> original_times(const Trace& t, const CaptureFacts& capture, int64_t source_rank) {
  if (const auto it = capture.iteration_seconds.find(source_rank); it != capture.iteration_seconds.end())
    return it->second;
  std::vector<double> out;
  for (const Iteration& it : t.iterations)
    if (it.profiler_step && t.nodes[it.node].dur_us > 0) out.push_back(t.nodes[it.node].dur_us * 1e-6);
  return out;
}

struct Loaded {
  Workspace ws;
  Bundle meta;           // sources, capture manifest, replay defaults of a source bundle
  CaptureFacts capture;  // what the capture manifest says, checked
};

Loaded load_source(const std::string& source, const GenerateOptions& o) {
  Loaded l;
  l.ws.warn = o.warn;
  l.ws.infer_shapes = o.infer_shapes;
  ReadOptions ro;
  ro.warn = o.warn;
  BundleSource src;
  src.path = source;
  if (is_bundle(source)) {
    Bundle b = read_bundle(source);
    for (const BundleRole& r : b.roles) {
      l.ws.roles.push_back(load_bundle_rank(b, r.ranks.front(), ro));
      l.ws.source_rank.push_back(r.source_rank);
    }
    l.ws.role_of_rank.assign(static_cast<size_t>(b.world_size), 0);
    for (size_t k = 0; k < b.roles.size(); ++k)
      for (int64_t r : b.roles[k].ranks) l.ws.role_of_rank[static_cast<size_t>(r)] = static_cast<uint32_t>(k);
    l.meta.sources = b.sources;
    l.meta.transforms = b.transforms;
    l.meta.replay = b.replay;
    l.meta.capture_manifest = b.capture_manifest;
    if (!b.capture_manifest.empty())
      l.capture = read_capture_manifest(b.capture_manifest, b.dir + "/benchmark.yaml: capture_manifest");
    src.ranks = b.world_size;
  } else {
    std::error_code ec;
    if (!fs::exists(source, ec)) throw UserError(source + ": no such file or folder");
    TraceSet set = load_traces({source}, ro);
    for (Trace& t : set.ranks) {
      if (t.from_kineto_only)
        throw UserError(t.source +
                        ": a Kineto trace alone cannot make a benchmark: it records no operator "
                        "arguments; give the ET (with its Kineto trace beside it for the original times)");
      l.ws.source_rank.push_back(t.rank);
      l.ws.role_of_rank.push_back(static_cast<uint32_t>(l.ws.roles.size()));
      if (std::find(src.schemas.begin(), src.schemas.end(), t.schema) == src.schemas.end())
        src.schemas.push_back(t.schema);
      l.ws.roles.push_back(std::move(t));
    }
    src.ranks = static_cast<int>(set.ranks.size());
    // A job's traces are its ranks 0..N-1; a folder of some of them (rank-0 and rank-5) is numbered again.
    std::string listed;
    bool renumbered = false;
    for (size_t i = 0; i < l.ws.source_rank.size(); ++i) {
      listed += (i ? ", " : "") + std::to_string(l.ws.source_rank[i]);
      renumbered = renumbered || l.ws.source_rank[i] != static_cast<int64_t>(i);
    }
    if (renumbered && l.ws.source_rank.size() > 1 && ro.warn)
      ro.warn(source + ": its traces are ranks " + listed + ", not 0 to " + std::to_string(src.ranks - 1) +
              ": the bundle's ranks 0 to " + std::to_string(src.ranks - 1) +
              " replay them in that order (benchmark.yaml names each role's source_rank)");
    if (l.ws.roles.size() == 1) l.ws.role_of_rank.assign(static_cast<size_t>(spanned_world(l.ws.roles[0])), 0);
    // Checked before it is bundled; another tool's manifest.json is not ours to read, text that is not JSON no
    // tool's (one line, as replay gives for it).
    if (std::optional<CaptureFacts> facts = read_capture_folder_manifest(source, &l.meta.capture_manifest)) {
      l.capture = std::move(*facts);
      const std::string& device = l.capture.device;
      if (!device.empty()) l.meta.replay.device = device.rfind("cuda", 0) == 0 ? "cuda" : device;
    }
  }
  if (l.ws.roles.empty()) throw UserError(source + ": no traces");
  src.sha256 = source_hash(source);
  l.meta.sources.push_back(src);
  return l;
}

// Moves the finished folder `tmp` to `out`. An old bundle there is swapped out in one step, so no moment holds
// neither, and then removed from where `tmp` was.
void move_into_place(const std::string& tmp, const std::string& out) {
  std::error_code ec;
  if (fs::exists(out, ec) && renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) == 0) {
    remove_tree(tmp);
    return;
  }
  // No old bundle, or a file system that cannot swap.
  if (fs::exists(out, ec)) remove_tree(out);
  fs::rename(tmp, out, ec);
  if (ec) throw UserError(out + ": cannot move the bundle into place: " + ec.message());
}

void check_out(const GenerateOptions& o) {
  if (o.out.empty()) throw UserError("generate: no output folder given");
  std::error_code ec;
  if (fs::exists(o.out, ec) && !o.force)
    throw UserError(o.out + ": exists already (remove it, or replace it with --force)");
  if (fs::exists(o.out, ec) && !is_bundle(o.out)) throw UserError(o.out + ": exists and is not a bundle: not replaced");
  // The bundle is written beside its place (OUT.tmp-PID) and renamed into it: that folder must exist and be
  // writable, as every other command's output folder must (a typo in the path is not a new tree of folders).
  fs::path where = fs::path(o.out).lexically_normal();
  if (!where.has_filename()) where = where.parent_path();  // "out/"
  try {
    check_output_file(where.string() + ".tmp");
  } catch (const UserError& e) {  // said of the bundle, not of the name it is first written under
    const std::string why = e.what();
    throw UserError(o.out + why.substr(std::min(why.size(), where.string().size() + 4)));
  }
}

// A role's ET text with each collective's rank argument blanked: data-parallel ranks differ only there, and a
// bundle gives every rank its ids back when it loads its role (load_bundle_rank).
std::string text_without_rank_ids(Trace& t) {
  std::vector<std::pair<uint32_t, int64_t>> saved;
  for (const Collective& c : t.collectives) {
    if (c.is_send_recv()) continue;  // a peer: ranks that send to different peers are different roles
    const Node& n = t.nodes[c.node];
    for (uint32_t k = 1; k < n.num_inputs; ++k)
      if (t.values[n.inputs + k].kind == ValueKind::String) {
        Value& rank = t.values[n.inputs + k - 1];
        if (rank.kind == ValueKind::Int) saved.push_back({n.inputs + k - 1, std::exchange(rank.i, -1)});
        break;
      }
  }
  std::string text = et_json(t);
  for (const auto& [at, v] : saved) t.values[at].i = v;
  return text;
}

// Roles no rank replays go; roles whose traces are the same text become one. (Only with several roles: the text
// of one role is never held.)
void merge_roles(Workspace& ws, std::vector<std::string>& texts) {
  std::vector<uint32_t> target(ws.roles.size());
  std::vector<bool> used(ws.roles.size(), false);
  for (uint32_t r : ws.role_of_rank) used[r] = true;
  std::vector<Trace> roles;
  std::vector<int64_t> sources;
  for (size_t r = 0; r < ws.roles.size(); ++r) {
    if (!used[r]) continue;
    std::string text = text_without_rank_ids(ws.roles[r]);
    auto same = std::find(texts.begin(), texts.end(), text);
    if (same != texts.end()) {
      target[r] = static_cast<uint32_t>(same - texts.begin());
      continue;
    }
    target[r] = static_cast<uint32_t>(roles.size());
    texts.push_back(std::move(text));
    roles.push_back(std::move(ws.roles[r]));
    sources.push_back(ws.source_rank[r]);
  }
  for (uint32_t& r : ws.role_of_rank) r = target[r];
  ws.roles = std::move(roles);
  ws.source_rank = std::move(sources);
}

bool has_op_times(const Trace& t) {
  return std::any_of(t.nodes.begin(), t.nodes.end(), [](const Node& n) { return n.timed(); });
}

// The role's op times beside its ET, for replay's --host-time (docs/bundle.md).
void write_timeline(const Trace& t, const std::string& dir, size_t r, BundleRole& role, Workspace& ws) {
  if (!has_op_times(t)) return;
  const std::string json = host_timeline_json(t);
  if (json.empty()) {
    ws.note("host time: role " + std::to_string(r) + "'s op times are not kept (its timed nodes share rf_ids)");
    return;
  }
  role.timeline = "traces/role-" + std::to_string(r) + ".kineto.json.gz";
  const std::string path = (fs::path(dir) / role.timeline).string();
  write_text_file(path, json);
  role.timeline_sha256 = sha256_file(path);
}

GenerateReport finish(Loaded& l, const Config& c, const GenerateOptions& o, double t0) {
  Workspace& ws = l.ws;
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  say("checking " + std::to_string(ws.world_size()) + " rank(s) against each other");
  check_ranks(ws);
  std::string applied;
  for (const BundleTransform& t : c.recorded) applied += (applied.empty() ? ", after " : " then ") + t.name;
  if (o.dry_run)
    for (size_t r = 0; r < ws.roles.size(); ++r) {
      const std::vector<int64_t> steps = distinct_steps(ws.roles[r]);
      say("dry run of role " + std::to_string(r) + " on the meta device (" +
          (steps.empty() ? std::string("the whole trace") : std::to_string(steps.size()) + " distinct iteration(s)") +
          ")");
      o.dry_run(ws.roles[r],
                "role " + std::to_string(r) + " (from source rank " + std::to_string(ws.source_rank[r]) + applied + ")",
                steps);
    }

  Bundle b = l.meta;
  b.dir = o.out;
  b.name = c.name;
  b.description = c.description;
  b.reprise_version = REPRISE_VERSION;
  b.created = utc_now();
  b.world_size = ws.world_size();
  b.transforms.insert(b.transforms.end(), c.recorded.begin(), c.recorded.end());
  b.replay = c.replay;
  b.process_groups = ws.roles.front().process_groups;
  if (ws.roles.size() > 1) {
    std::vector<std::string> texts;
    merge_roles(ws, texts);
  }
  if (ws.timing_valid)
    for (int64_t r = 0; r < ws.world_size(); ++r) {
      const uint32_t role = ws.role_of_rank[static_cast<size_t>(r)];
      RankExpectation x;
      x.rank = r;
      x.iteration_seconds = original_times(ws.roles[role], l.capture, ws.source_rank[role]);
      if (!x.iteration_seconds.empty()) b.expected.push_back(x);
    }

  const bool keep_op_times = ws.op_times_valid;
  if (!keep_op_times && std::any_of(ws.roles.begin(), ws.roles.end(), has_op_times))
    ws.note(
        "host time: the source's op times are not kept (a transform changed the ops): the bundle replays with "
        "no host time re-spent");

  const std::string tmp = o.out + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  remove_tree(tmp);
  const RemovedOnSignal guard(tmp);
  try {
    fs::create_directories(fs::path(tmp) / "traces", ec);
    if (ec) throw UserError(tmp + ": cannot create folder: " + ec.message());
    for (size_t r = 0; r < ws.roles.size(); ++r) {
      say("writing role " + std::to_string(r + 1) + " of " + std::to_string(ws.roles.size()));
      BundleRole role;
      role.file = "traces/role-" + std::to_string(r) + ".et.json.gz";
      for (int64_t k = 0; k < ws.world_size(); ++k)
        if (ws.role_of_rank[static_cast<size_t>(k)] == r) role.ranks.push_back(k);
      Trace& t = ws.roles[r];
      t.rank = role.ranks.front();
      write_et(t, (fs::path(tmp) / role.file).string(), kRoleGzipLevel);
      role.sha256 = sha256_file((fs::path(tmp) / role.file).string());
      if (keep_op_times) write_timeline(t, tmp, r, role, ws);
      role.source_rank = ws.source_rank[r];
      role.nodes = static_cast<int64_t>(t.nodes.size());
      for (const Collective& x : t.collectives) role.collectives += x.is_wait ? 0 : 1;
      b.roles.push_back(role);
    }
    Bundle written = b;
    written.dir = tmp;
    write_manifest(written);
    move_into_place(tmp, o.out);
  } catch (...) {
    remove_tree(tmp);
    throw;
  }
  GenerateReport report;
  report.bundle = b;
  report.notes = ws.notes;
  report.seconds = now_seconds() - t0;
  return report;
}

Config parse_config(const YamlFile& f) {
  const YAML::Node& m = f.root();
  f.expect_map(m, "config", {"name", "description", "source", "transforms", "replay"});
  Config c;
  c.name = m["name"] ? f.string(m["name"], "name") : fs::path(f.path()).stem().string();
  if (m["description"]) c.description = f.string(m["description"], "description");
  if (!m["source"]) f.fail(m, "config: expected 'source' (a trace file, folder, archive, capture folder or bundle)");
  if (!m["source"].IsScalar())
    f.fail(m["source"], "source: expected one trace file, folder, archive, capture folder or bundle");
  c.source = f.path(m["source"], "source");
  const ConfigContext cx{f, fs::path(f.path()).parent_path().string()};
  if (const YAML::Node ts = m["transforms"]) {
    if (!ts.IsSequence()) f.fail(ts, "transforms: expected a list such as [{select: {iterations: 6}}]");
    for (const auto& t : ts) {
      if (!t.IsMap() || t.size() != 1) f.fail(t, "transforms: each entry is one transform: {NAME: {PARAMETERS}}");
      const std::string name = t.begin()->first.Scalar();
      const TransformDescriptor* d = find_transform(name);
      if (!d) {
        std::string known;
        for (const TransformDescriptor* x : transform_table())
          known += (known.empty() ? "" : ", ") + std::string(x->name);
        f.fail(t.begin()->first, "transforms: unknown transform '" + name + "' (expected one of " + known + ")");
      }
      c.steps.push_back({name, d->parse(t.begin()->second, cx)});
      c.step_places.push_back(f.where(t));
      c.recorded.push_back({name, flow_text(t.begin()->second)});
    }
  }
  if (const YAML::Node r = m["replay"]) {
    f.expect_map(r, "replay", {"device", "iterations", "warmup"});
    if (r["device"]) c.replay.device = f.device(r["device"], "device");
    if (r["iterations"]) c.replay.iterations = static_cast<int>(f.integer(r["iterations"], "iterations", 1, 1000000));
    if (r["warmup"]) c.replay.warmup = static_cast<int>(f.integer(r["warmup"], "warmup", 0, 1000000));
  }
  return c;
}

}  // namespace

bool is_config(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  std::error_code ec;
  return (ext == ".yaml" || ext == ".yml") && fs::is_regular_file(path, ec);
}

GenerateReport generate_from_trace(const std::string& source, const GenerateOptions& o) {
  const double t0 = now_seconds();
  check_out(o);
  if (o.progress) o.progress("reading " + source);
  Loaded l = load_source(source, o);
  Config c;
  c.name = fs::path(source).filename().string();
  c.replay = l.meta.replay;
  return finish(l, c, o, t0);
}

GenerateReport generate_from_config(const std::string& config, const GenerateOptions& o) {
  const double t0 = now_seconds();
  YamlFile f(config);
  Config c = parse_config(f);
  check_out(o);
  if (o.progress) o.progress("reading " + c.source);
  Loaded l = load_source(c.source, o);
  if (!f.root()["replay"] || !f.root()["replay"]["device"]) c.replay.device = l.meta.replay.device;
  for (size_t k = 0; k < c.steps.size(); ++k) {
    if (o.progress) o.progress("applying " + c.steps[k].first);
    try {
      c.steps[k].second(l.ws);
    } catch (const UserError& e) {
      // What only the traces reveal is said at the transform's place, unless the step named a place of its own.
      const std::string what = e.what();
      if (what.rfind(f.path() + ":", 0) == 0) throw;
      throw UserError(c.step_places[k] + ": " + what);
    }
  }
  return finish(l, c, o, t0);
}

void check_bundle_ranks(const Bundle& b, const ReadOptions& options) {
  Workspace ws;
  for (const BundleRole& r : b.roles) {
    ws.roles.push_back(load_bundle_rank(b, r.ranks.front(), options));
    ws.source_rank.push_back(r.source_rank);
  }
  ws.role_of_rank.assign(static_cast<size_t>(b.world_size), 0);
  for (size_t k = 0; k < b.roles.size(); ++k)
    for (int64_t r : b.roles[k].ranks) ws.role_of_rank[static_cast<size_t>(r)] = static_cast<uint32_t>(k);
  check_ranks(ws);
}

std::vector<TransformInfo> transform_infos() {
  std::vector<TransformInfo> out;
  for (const TransformDescriptor* d : transform_table()) {
    TransformInfo i;
    i.name = d->name;
    i.summary = d->summary;
    for (const char* k : d->keys) i.keys.push_back(k);
    out.push_back(i);
  }
  return out;
}

}  // namespace reprise::gen
