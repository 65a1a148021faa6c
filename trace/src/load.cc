#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>

#include "reader_internal.h"
#include "reprise/trace/link.h"

namespace reprise {
namespace fs = std::filesystem;

namespace {

std::string base_name(std::string_view path) {
  size_t slash = path.find_last_of("/:");
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

bool looks_like_trace_name(std::string_view name) {
  std::string b = base_name(name);
  if (b.rfind("._", 0) == 0 || b.empty() || b[0] == '.') return false;  // macOS resource forks, hidden files
  auto ends = [&](std::string_view s) {
    return b.size() >= s.size() && b.compare(b.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".json") || ends(".json.gz");
}

struct Loaded {
  std::vector<Trace> ets;
  std::vector<Trace> kinetos;  // Kineto-only traces, to pair or stand alone
};

// `in_folder`: the file was found in a folder, not named: other JSON there (a capture manifest, replay results)
// is skipped with a warning instead of failing the load.
void load_stream(detail::ByteSource& src, const std::string& name, Loaded& out, const ReadOptions& opt,
                 bool in_folder = false) {
  std::string head(4096, '\0');
  head.resize(detail::read_full(src, head.data(), head.size()));
  TraceFormat f = detect_format(head, name);
  detail::PrefixedSource all(head, src);
  if (f == TraceFormat::ExecutionTrace) {
    Trace t = detail::read_et_source(all, opt);
    t.rank = rank_from_name(name);
    out.ets.push_back(std::move(t));
  } else if (f == TraceFormat::Kineto) {
    Trace t;
    t.source = name;
    const detail::PaddedBuffer text = detail::read_all_padded(all, detail::kineto_padding());
    detail::read_kineto_events(text, name, t, opt);  // nodes are built only if no ET claims it
    t.rank = t.kineto->dist_rank >= 0 ? t.kineto->dist_rank : rank_from_name(name);
    out.kinetos.push_back(std::move(t));
  } else if (in_folder) {
    if (opt.warn && base_name(name) != "manifest.json") opt.warn(name + ": not a trace, skipped");
  } else {
    throw UserError(name + ": neither a PyTorch ET (\"nodes\") nor a Kineto trace (\"traceEvents\")");
  }
}

void load_path(const std::string& path, Loaded& out, const ReadOptions& opt, bool explicit_file) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw UserError(path + ": no such file or directory");
  if (fs::is_directory(st)) {
    std::vector<std::string> files;
    for (auto& e : fs::directory_iterator(path)) {
      std::string p = e.path().string();
      if (e.is_directory() || detail::is_tar_name(p) || looks_like_trace_name(p)) files.push_back(p);
    }
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      if (fs::is_directory(f)) continue;  // one level: a folder of per-rank files
      load_path(f, out, opt, false);
    }
    return;
  }
  if (detail::is_tar_name(path)) {
    detail::TarReader tar(path);
    detail::TarMember m;
    while (tar.next(m)) {
      if (!looks_like_trace_name(m.name)) continue;
      load_stream(tar.member_source(), path + ":" + m.name, out, opt);
    }
    return;
  }
  if (!explicit_file && !looks_like_trace_name(path)) return;
  auto src = detail::open_file(path);
  load_stream(*src, path, out, opt, !explicit_file);
}

// Ranks from names when every name has a distinct one; else the order given, with a warning when two names give
// the same rank (rank-0.json beside rank-0.json.gz: which is rank 1 is a guess the user should know of).
void assign_ranks(std::vector<Trace>& ts, const ReadOptions& opt) {
  std::vector<int64_t> seen;
  bool ok = true;
  std::string twice;
  for (size_t i = 0; i < ts.size(); ++i) {
    const auto at = std::find(seen.begin(), seen.end(), ts[i].rank);
    if (ts[i].rank < 0 || at != seen.end()) ok = false;
    if (ts[i].rank >= 0 && at != seen.end() && twice.empty())
      twice = ts[static_cast<size_t>(at - seen.begin())].source + " and " + ts[i].source + " both name rank " +
              std::to_string(ts[i].rank);
    seen.push_back(ts[i].rank);
  }
  if (!twice.empty() && opt.warn) opt.warn(twice + ": ranks are taken in the order of the files instead");
  if (!ok)
    for (size_t i = 0; i < ts.size(); ++i) ts[i].rank = static_cast<int64_t>(i);
  std::stable_sort(ts.begin(), ts.end(), [](const Trace& a, const Trace& b) { return a.rank < b.rank; });
}

}  // namespace

TraceFormat detect_format(std::string_view head, std::string_view name) {
  size_t et = std::min(head.find("\"nodes\""), head.find("\"schema\""));
  size_t kin = std::min({head.find("\"traceEvents\""), head.find("\"schemaVersion\""),
                         head.find("\"deviceProperties\""), head.find("\"displayTimeUnit\"")});
  if (et != std::string_view::npos && (kin == std::string_view::npos || et < kin)) return TraceFormat::ExecutionTrace;
  if (kin != std::string_view::npos) return TraceFormat::Kineto;
  size_t i = 0;
  while (i < head.size() && std::isspace(static_cast<unsigned char>(head[i]))) ++i;
  if (i < head.size() && head[i] == '[' && head.find("\"ph\"") != std::string_view::npos) return TraceFormat::Kineto;
  std::string b = base_name(name);
  if (b.find(".pt.trace.json") != std::string::npos || b.find("kineto") != std::string::npos)
    return TraceFormat::Kineto;
  if (b.find("_et") != std::string::npos || b.find("rank") != std::string::npos) return TraceFormat::ExecutionTrace;
  return TraceFormat::Unknown;
}

int64_t rank_from_name(std::string_view name) {
  std::string b = base_name(name);
  std::string lower = b;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  auto number_after = [&](const std::string& key) -> int64_t {
    size_t p = lower.find(key);
    while (p != std::string::npos) {
      size_t i = p + key.size();
      while (i < lower.size() && (lower[i] == '-' || lower[i] == '_' || lower[i] == '.')) ++i;
      if (i < lower.size() && std::isdigit(static_cast<unsigned char>(lower[i])))
        return std::strtoll(lower.c_str() + i, nullptr, 10);
      p = lower.find(key, p + 1);
    }
    return -1;
  };
  for (const char* key : {"rank", "worker"}) {
    int64_t r = number_after(key);
    if (r >= 0) return r;
  }
  // dlrm_eg_3.json, trace_3.json.gz: the number right before the extension
  size_t dot = lower.find(".json");
  if (dot != std::string::npos && dot > 0) {
    size_t i = dot;
    while (i > 0 && std::isdigit(static_cast<unsigned char>(lower[i - 1]))) --i;
    if (i < dot && i > 0 && (lower[i - 1] == '_' || lower[i - 1] == '-'))
      return std::strtoll(lower.c_str() + i, nullptr, 10);
  }
  return -1;
}

bool is_archive_name(std::string_view path) { return detail::is_tar_name(path); }

std::string kineto_beside(const std::string& et_path) {
  std::string stem = et_path;
  for (const char* ext : {".json.gz", ".json"})
    if (stem.size() > std::strlen(ext) && stem.compare(stem.size() - std::strlen(ext), std::string::npos, ext) == 0) {
      stem.resize(stem.size() - std::strlen(ext));
      break;
    }
  std::error_code ec;
  if (stem.size() > 7 && stem.compare(stem.size() - 7, 7, ".kineto") == 0) return "";  // a Kineto trace itself
  for (const char* ext : {".kineto.json.gz", ".kineto.json"})
    if (fs::is_regular_file(stem + ext, ec)) return stem + ext;
  return "";
}

TraceSet load_traces(const std::vector<std::string>& inputs, const ReadOptions& opt) {
  if (inputs.empty()) throw UserError("no trace given");
  Loaded all;
  for (const std::string& in : inputs) load_path(in, all, opt, true);
  // One ET file named alone takes the Kineto trace a capture writes beside it (rank-0.json.gz, rank-0.kineto.json.gz),
  // as a load of their folder pairs them.
  std::error_code ec;
  if (inputs.size() == 1 && all.ets.size() == 1 && all.kinetos.empty() && fs::is_regular_file(inputs[0], ec))
    if (const std::string beside = kineto_beside(inputs[0]); !beside.empty()) {
      try {
        load_path(beside, all, opt, true);
      } catch (const UserError& e) {  // not named by the user: the ET stands without it
        all.kinetos.clear();
        if (opt.warn) opt.warn(std::string(e.what()) + " (the Kineto trace beside " + inputs[0] + "; left out)");
      }
    }
  TraceSet set;
  if (all.ets.empty() && all.kinetos.empty()) {
    if (fs::is_regular_file(fs::path(inputs[0]) / "benchmark.yaml", ec))  // its traces are its roles, in traces/
      throw UserError(inputs[0] +
                      ": a Reprise bundle, not a trace or a folder of traces (replay, inspect, predict, "
                      "verify and convert --to chakra take bundles)");
    throw UserError(inputs[0] + ": no traces found");
  }
  if (all.ets.empty()) {
    for (Trace& k : all.kinetos) detail::build_nodes_from_kineto(k);
    assign_ranks(all.kinetos, opt);
    set.ranks = std::move(all.kinetos);
    return set;
  }
  assign_ranks(all.ets, opt);
  if (!all.kinetos.empty()) {
    if (all.ets.size() == 1 && all.kinetos.size() == 1) all.kinetos[0].rank = all.ets[0].rank;
    for (Trace& k : all.kinetos) {
      auto et = std::find_if(all.ets.begin(), all.ets.end(), [&](const Trace& e) { return e.rank == k.rank; });
      if (et == all.ets.end()) {
        if (opt.warn) opt.warn(k.source + ": Kineto trace of rank " + std::to_string(k.rank) + " has no ET; ignored");
        continue;
      }
      if (et->kineto) {
        if (opt.warn) opt.warn(k.source + ": a second Kineto trace for rank " + std::to_string(k.rank) + "; ignored");
        continue;
      }
      // Move the events over, re-interning their names into the ET's string table.
      KinetoInfo info = std::move(*k.kineto);
      for (KinetoEvent& e : info.events) e.name = et->strings.intern(k.strings.str(e.name));
      for (KinetoFlow& f : info.flows) f.cat = et->strings.intern(k.strings.str(f.cat));
      for (KinetoInput& in : info.inputs) in.type = et->strings.intern(k.strings.str(in.type));
      auto rename = [&](int64_t& id) {
        if (id <= kNamedId)
          id = kNamedId - static_cast<int64_t>(et->strings.intern(k.strings.str(static_cast<StrId>(kNamedId - id))));
      };
      for (KinetoEvent& e : info.events) {
        rename(e.pid);
        rename(e.tid);
      }
      et->kineto = std::move(info);
      if (opt.link) link_kineto(*et, opt);
    }
  }
  set.ranks = std::move(all.ets);
  return set;
}

}  // namespace reprise
