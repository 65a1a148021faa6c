// A benchmark bundle: a self-contained folder a user can copy to another machine and replay with nothing else.
//
//   bundle/
//     benchmark.yaml          the manifest: provenance, world size, process groups, roles, transforms, defaults
//     traces/role-0.et.json.gz  one ET per role; ranks whose traces differ only in their rank ids share a role
//     traces/role-0.kineto.json.gz  the role's original op times, when the source had them (replay's --host-time)
//
//   Bundle b = read_bundle("dlrm-16");
//   Trace t = load_bundle_rank(b, 5);  // rank 5's trace, its rank ids substituted
//
// The format is documented in docs/bundle.md; kBundleVersion changes whenever a reader of the old one would
// misread the new one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "reprise/trace/read.h"
#include "reprise/trace/trace.h"

namespace reprise::gen {

inline constexpr int kBundleVersion = 1;
inline constexpr const char* kManifestName = "benchmark.yaml";

struct BundleSource {
  std::string path;    // as the config named it (absolute when generated from the command line)
  std::string sha256;  // of the file; of each file in name order, hashed again, for a folder
  std::vector<std::string> schemas;
  int ranks = 0;
};

struct BundleRole {
  std::string file;            // relative to the bundle folder
  std::string sha256;          // of the file as written
  std::vector<int64_t> ranks;  // the world ranks that replay it
  int64_t source_rank = -1;    // the source trace's rank it was made from
  int64_t nodes = 0;           // nodes in its trace
  int64_t collectives = 0;     // collectives (waits excluded) in it
  // The original's op times beside it (host_timeline_json), for replay's --host-time; empty when the source had none
  // or a transform changed the ops.
  std::string timeline;
  std::string timeline_sha256;
};

struct BundleTransform {
  std::string name;    // "select", "scale", ...
  std::string params;  // its parameters as one line of YAML flow text, as the config gave them
};

struct ReplayDefaults {
  std::string device = "cpu";
  int iterations = 5;
  int warmup = 1;
};

// What the original run measured, when the source said (a linked Kineto trace or a capture manifest).
struct RankExpectation {
  int64_t rank = 0;
  std::vector<double> iteration_seconds;  // original, per iteration kept
};

struct Bundle {
  std::string dir;  // where it was read from or written to
  int version = kBundleVersion;
  std::string name, description;
  std::string reprise_version;
  std::string created;  // UTC, ISO 8601
  int world_size = 1;
  std::vector<BundleSource> sources;
  std::string capture_manifest;  // the source capture's manifest.json, verbatim, when there was one
  std::vector<ProcessGroup> process_groups;
  std::vector<BundleRole> roles;
  std::vector<BundleTransform> transforms;
  ReplayDefaults replay;
  std::vector<RankExpectation> expected;

  // The role world rank `rank` replays; throws UserError when the bundle has no such rank.
  const BundleRole& role_of(int64_t rank) const;
};

// Whether `path` is a bundle folder (it holds benchmark.yaml).
bool is_bundle(const std::string& path);
// Reads a bundle's manifest. Throws UserError naming the file (and the YAML line) when it is not one.
Bundle read_bundle(const std::string& dir);
// Writes the manifest of `b` into b.dir (the traces must be there already).
void write_manifest(const Bundle& b);
// The manifest's text.
std::string manifest_yaml(const Bundle& b);
// Reads rank `rank`'s role trace, with its op times linked when the role has a timeline, and gives it that rank's ids
// (the trace's rank, each collective's rank in its group).
Trace load_bundle_rank(const Bundle& b, int64_t rank, const ReadOptions& options = {});
// Files whose hash differs from the manifest's, or that are missing: one line each; empty when all match.
std::vector<std::string> check_hashes(const Bundle& b);
// The manifest as JSON (inspect --json).
std::string bundle_json(const Bundle& b);
// A table for people: name, provenance, world, groups, roles, transforms, defaults.
void print_bundle(std::FILE* out, const Bundle& b);
// "0-7,9,12-15": sorted ranks as ranges.
std::string rank_ranges(const std::vector<int64_t>& ranks);

// What replay and generate take from a capture folder's manifest.json (or a bundle's copy of it): the device and the
// threads it ran with (0: not said) and each rank's uninstrumented iteration times and peak memory. Every value is
// checked: a manifest edited by hand is one line naming `where` and the key (`ranks[0]: iteration_seconds[1]: ...`),
// never a replay of 100,000 threads or an original time of -1 s.
struct CaptureFacts {
  std::string device;  // what the capture ran on ("cuda:0"); empty when not said
  int threads = 0;
  std::map<int64_t, std::vector<double>> iteration_seconds;  // by rank
  std::map<int64_t, int64_t> peak_memory_bytes;              // by rank, -1 unknown
  // By rank: each timed step's DataLoader calls' host time without the observers (a workload with a loader built in)
  std::map<int64_t, std::vector<double>> data_loader_seconds;
};
CaptureFacts read_capture_manifest(const std::string& text, const std::string& where);
// The same for a manifest.json found beside traces: nullopt for valid JSON of another tool's (no "reprise_capture"
// key); text that is not JSON is an error all the same.
std::optional<CaptureFacts> read_capture_manifest_if_ours(const std::string& text, const std::string& where);
// The manifest.json of a capture folder (read_capture_manifest_if_ours): nullopt when `folder` is not a folder or
// holds none or another tool's. `text`, when given, receives the file's text.
std::optional<CaptureFacts> read_capture_folder_manifest(const std::string& folder, std::string* text = nullptr);
// By rank: the median of the rank's iteration times without the observers, from the capture folders among `inputs`
// (their manifests); empty where none is one. What `reprise analyze` takes the observers' cost out of a step with.
std::map<int64_t, double> capture_plain_steps(const std::vector<std::string>& inputs);
// The source step's time without the observers for world rank `rank` of `b` (the median of its source rank's in
// `capture`, b's capture manifest), when the bundle keeps that role's op times but not the original's iteration times
// (its work has other sizes or dtypes): replay's host time takes the observers' share out with it
// (ReplayOptions::plain_step_seconds). 0 otherwise.
double plain_step_seconds(const Bundle& b, const CaptureFacts& capture, int64_t rank);
// The source step's DataLoader calls' time without the observers for world rank `rank` of `b` (the median of its
// source rank's CaptureFacts::data_loader_seconds) when that role keeps its op times, for replay's and predict's
// --data-loader (ReplayOptions::plain_data_loader_seconds). 0 otherwise.
double plain_data_loader_seconds(const Bundle& b, const CaptureFacts& capture, int64_t rank);

}  // namespace reprise::gen
