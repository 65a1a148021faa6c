#include "reprise/trace/summary.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

namespace reprise {
namespace {

void count_ops(const Trace& t, size_t top, RankSummary& r) {
  std::unordered_map<StrId, OpStat> ops;
  for (const Node& n : t.nodes) {
    ++r.by_kind[static_cast<int>(n.kind)];
    if (n.kind == NodeKind::Operator || n.kind == NodeKind::TritonKernel || n.kind == NodeKind::CommOp ||
        n.gpu_us > 0) {
      OpStat& s = ops[n.name];
      ++s.count;
      s.gpu_us += n.gpu_us;
    }
    r.gpu_us += n.gpu_us;
  }
  r.distinct_ops = ops.size();
  std::vector<OpStat> all;
  for (auto& [id, s] : ops) {
    s.name = std::string(t.str(id));
    all.push_back(s);
  }
  std::sort(all.begin(), all.end(),
            [](const OpStat& a, const OpStat& b) { return a.count != b.count ? a.count > b.count : a.name < b.name; });
  r.top_by_count.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(std::min(top, all.size())));
  if (r.gpu_us > 0) {
    std::sort(all.begin(), all.end(), [](const OpStat& a, const OpStat& b) {
      return a.gpu_us != b.gpu_us ? a.gpu_us > b.gpu_us : a.name < b.name;
    });
    for (auto& s : all)
      if (s.gpu_us > 0 && r.top_by_gpu.size() < top) r.top_by_gpu.push_back(s);
  }
}

void count_collectives(const Trace& t, RankSummary& r) {
  const std::map<std::string, std::string> labels = process_group_labels(t);
  std::map<std::tuple<std::string, std::string, std::string>, CollectiveStat> cs;
  for (const Collective& c : t.collectives) {
    if (c.is_wait) {
      ++r.waits;
      continue;
    }
    ++r.collectives;
    std::string pg = c.pg_desc.empty() ? c.pg_name : c.pg_name + " (" + c.pg_desc + ")";
    CollectiveStat& s = cs[{c.name, pg, c.dtype}];
    s.name = c.name;
    s.pg = pg;
    s.pg_label = labels.at(c.pg_name);
    s.dtype = c.dtype;
    ++s.count;
    s.bytes += std::max(c.in_bytes(), c.out_bytes());
  }
  for (auto& [k, s] : cs) r.collective_stats.push_back(s);
  r.process_groups = t.process_groups;
  for (const ProcessGroup& pg : t.process_groups) r.process_group_labels.push_back(labels.at(pg.name));
}

void count_tensors(const Trace& t, RankSummary& r) {
  r.tensors = t.tensors.size();
  std::set<std::string> devs;
  std::map<std::pair<int64_t, StrId>, int64_t> extent;
  for (const Tensor& x : t.tensors) {
    int64_t& e = extent[{x.storage_id, x.device}];
    e = std::max(e, (x.offset + x.numel) * x.itemsize);
    if (x.has_device) devs.insert(std::string(t.str(x.device)));
  }
  for (auto& [k, e] : extent) r.storage_bytes += e;
  r.devices.assign(devs.begin(), devs.end());
}

RankSummary summarize_rank(const Trace& t, size_t top) {
  RankSummary r;
  r.rank = t.rank;
  r.source = t.source;
  r.schema = t.from_kineto_only ? "kineto" : (t.schema.empty() ? "(untagged)" : t.schema);
  r.nodes = t.nodes.size();
  count_ops(t, top, r);
  count_collectives(t, r);
  for (const Iteration& it : t.iterations) (it.profiler_step ? r.iterations : r.annotations).push_back(it.name);
  count_tensors(t, r);
  if (t.kineto) {
    r.kineto_source = t.kineto->source;
    r.link_method = t.kineto->link_method;
    r.kineto_events = t.kineto->events.size();
    r.kineto_linked_ops = t.kineto->linked_ops;
    r.kineto_cpu_ops = t.kineto->cpu_ops;
    for (const GpuDevice& d : t.kineto->devices) r.gpus.push_back(d.name);
    std::sort(r.gpus.begin(), r.gpus.end());
    r.gpus.erase(std::unique(r.gpus.begin(), r.gpus.end()), r.gpus.end());
  }
  r.model_bytes = t.memory_bytes();
  return r;
}

// "ProfilerStep#5 ProfilerStep#6" or "## forward ## x3 ## backward ## x3 ...": names in order of first appearance,
// repeats counted, the first 12 shown.
std::string names_line(const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, int64_t>> distinct;
  std::map<std::string, size_t> index;
  for (const std::string& n : names) {
    auto [it, fresh] = index.emplace(n, distinct.size());
    if (fresh) distinct.emplace_back(n, 0);
    ++distinct[it->second].second;
  }
  std::string line;
  for (size_t k = 0; k < distinct.size(); ++k) {
    if (k == 12) return line + " ... (" + std::to_string(distinct.size()) + " distinct)";
    line += (k ? ", " : " ") + distinct[k].first;
    if (distinct[k].second > 1) line += " x" + std::to_string(distinct[k].second);
  }
  return line;
}

// Wide enough for every label and the heading, so the rows stay aligned whatever the trace calls its groups.
int label_width(const std::vector<std::string>& labels, size_t least) {
  size_t w = least;
  for (const std::string& l : labels) w = std::max(w, l.size());
  return static_cast<int>(w);
}

void print_header(std::ostream& o, const RankSummary& r) {
  o << "== rank " << r.rank << ": " << r.source << "\n";
  o << "schema      " << r.schema << "\n";
  if (!r.kineto_source.empty()) {
    o << "kineto      " << r.kineto_source << " (" << r.kineto_events << " events";
    if (r.link_method != "kineto-only")
      o << "; " << r.kineto_linked_ops << " of " << r.kineto_cpu_ops << " CPU ops linked by " << r.link_method;
    o << ")\n";
  }
  o << "nodes       " << r.nodes << " (";
  bool first = true;
  for (int k = 0; k < kNodeKindCount; ++k) {
    if (!r.by_kind[k]) continue;
    o << (first ? "" : ", ") << node_kind_name(static_cast<NodeKind>(k)) << " " << r.by_kind[k];
    first = false;
  }
  o << ")\n";
  o << "tensors     " << r.tensors << " distinct, storages " << human_bytes(static_cast<double>(r.storage_bytes))
    << "\n";
  if (!r.devices.empty()) {
    o << "devices    ";
    for (auto& d : r.devices)
      if (!d.empty()) o << " " << d;
    o << "\n";
  }
  if (!r.gpus.empty()) {
    o << "gpus       ";
    for (auto& d : r.gpus) o << " " << d;
    o << "\n";
  }
  if (!r.iterations.empty()) o << "iterations " << names_line(r.iterations) << "\n";
  if (!r.annotations.empty()) o << "annotations" << names_line(r.annotations) << "\n";
}

void print_groups_and_collectives(std::ostream& o, const RankSummary& r) {
  char line[512];
  if (!r.process_groups.empty()) {
    o << "process groups:\n";
    int w = label_width(r.process_group_labels, 6);
    for (size_t k = 0; k < r.process_groups.size(); ++k) {
      const ProcessGroup& pg = r.process_groups[k];
      std::string ranks;
      for (int64_t x : pg.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(x);
      std::snprintf(line, sizeof line, "  %-*s %-18s size %-4lld ranks [%s]\n", w, r.process_group_labels[k].c_str(),
                    pg.backend.c_str(), static_cast<long long>(pg.size), ranks.empty() ? "all" : ranks.c_str());
      o << line;
    }
  }
  o << "collectives " << r.collectives << " (+" << r.waits << " waits)\n";
  std::vector<std::string> labels;
  for (const CollectiveStat& c : r.collective_stats) labels.push_back(c.pg_label);
  int w = label_width(labels, 6);
  for (const CollectiveStat& c : r.collective_stats) {
    std::snprintf(line, sizeof line, "  %-16s %-*s %-9s x%-5lld %12s\n", c.name.c_str(), w, c.pg_label.c_str(),
                  c.dtype.c_str(), static_cast<long long>(c.count), human_bytes(static_cast<double>(c.bytes)).c_str());
    o << line;
  }
}

void print_top_ops(std::ostream& o, const RankSummary& r) {
  char line[512];
  o << "top ops by count (" << r.distinct_ops << " distinct):\n";
  for (const OpStat& op : r.top_by_count) {
    std::snprintf(line, sizeof line, "  %8lld  %s\n", static_cast<long long>(op.count), op.name.c_str());
    o << line;
  }
  if (r.top_by_gpu.empty()) return;
  o << "top ops by GPU time (total " << human_seconds(r.gpu_us * 1e-6) << "):\n";
  for (const OpStat& op : r.top_by_gpu) {
    std::snprintf(line, sizeof line, "  %10s %5.1f%%  x%-6lld %s\n", human_seconds(op.gpu_us * 1e-6).c_str(),
                  100.0 * op.gpu_us / r.gpu_us, static_cast<long long>(op.count), op.name.c_str());
    o << line;
  }
}

}  // namespace

std::map<std::string, std::string> process_group_labels(const Trace& t) {
  // Every group in order of first appearance (the init node's list, then the collectives; waits often name no group).
  std::vector<std::pair<std::string, std::string>> groups;
  std::map<std::string, size_t> index;
  auto add = [&](const std::string& name, const std::string& desc) {
    if (index.emplace(name, groups.size()).second) groups.emplace_back(name, desc);
  };
  for (const ProcessGroup& pg : t.process_groups) add(pg.name, pg.desc);
  for (const Collective& c : t.collectives)
    if (!c.is_wait) add(c.pg_name, c.pg_desc);
  std::map<std::string, int> desc_uses;
  for (const auto& g : groups) ++desc_uses[g.second];
  std::map<std::string, std::string> labels;
  for (size_t k = 0; k < groups.size(); ++k) {
    const auto& [name, desc] = groups[k];
    labels[name] = !desc.empty() && desc_uses[desc] == 1 ? desc : "pg" + std::to_string(k);
  }
  // Older traces name a group in collectives by its backend id.
  for (const ProcessGroup& pg : t.process_groups)
    if (pg.backend_id >= 0) labels.emplace(std::to_string(pg.backend_id), labels[pg.name]);
  return labels;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024 && u < 6) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

std::string human_seconds(double s) {
  char buf[32];
  if (s >= 1)
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (s >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  return buf;
}

std::string human_count(int64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > (n < 0 ? 1 : 0); i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string human_percent(int64_t part, int64_t whole) {
  if (whole <= 0 || part <= 0) return "0.0%";
  if (part >= whole) return "100.0%";
  // long double holds an int64 exactly, so p < 100 whenever part < whole, however close
  const long double p = 100.0L * static_cast<long double>(part) / static_cast<long double>(whole);
  char buf[64];
  for (int digits = 1;; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*Lf%%", digits, p);
    const long double shown = std::strtold(buf, nullptr);
    if ((shown < 100.0L && shown > 0.0L) || digits >= 24) return buf;
  }
}

Summary summarize(const TraceSet& set, size_t top) {
  Summary s;
  for (const Trace& t : set.ranks) s.ranks.push_back(summarize_rank(t, top));
  return s;
}

void print_summary(std::ostream& o, const Summary& s) {
  for (const RankSummary& r : s.ranks) {
    print_header(o, r);
    print_groups_and_collectives(o, r);
    print_top_ops(o, r);
    o << "\n";
  }
}

std::string summary_json(const Summary& s) {
  nlohmann::json out;
  out["ranks"] = nlohmann::json::array();
  for (const RankSummary& r : s.ranks) {
    nlohmann::json j;
    j["rank"] = r.rank;
    j["source"] = r.source;
    j["schema"] = r.schema;
    j["nodes"] = r.nodes;
    nlohmann::json kinds = nlohmann::json::object();
    for (int k = 0; k < kNodeKindCount; ++k) kinds[node_kind_name(static_cast<NodeKind>(k))] = r.by_kind[k];
    j["nodes_by_kind"] = kinds;
    j["distinct_ops"] = r.distinct_ops;
    auto ops = [](const std::vector<OpStat>& v) {
      nlohmann::json a = nlohmann::json::array();
      for (auto& op : v) a.push_back({{"name", op.name}, {"count", op.count}, {"gpu_us", op.gpu_us}});
      return a;
    };
    j["top_ops_by_count"] = ops(r.top_by_count);
    j["top_ops_by_gpu_time"] = ops(r.top_by_gpu);
    j["gpu_us"] = r.gpu_us;
    j["collectives"] = r.collectives;
    j["waits"] = r.waits;
    nlohmann::json cs = nlohmann::json::array();
    for (auto& c : r.collective_stats)
      cs.push_back({{"name", c.name},
                    {"pg", c.pg},
                    {"pg_label", c.pg_label},
                    {"dtype", c.dtype},
                    {"count", c.count},
                    {"bytes", c.bytes}});
    j["collectives_by_type"] = cs;
    nlohmann::json pgs = nlohmann::json::array();
    for (size_t k = 0; k < r.process_groups.size(); ++k) {
      const ProcessGroup& pg = r.process_groups[k];
      pgs.push_back({{"name", pg.name},
                     {"label", r.process_group_labels[k]},
                     {"desc", pg.desc},
                     {"backend", pg.backend},
                     {"size", pg.size},
                     {"ranks", pg.ranks}});
    }
    j["process_groups"] = pgs;
    j["iterations"] = r.iterations;
    j["annotations"] = r.annotations;
    j["tensors"] = r.tensors;
    j["storage_bytes"] = r.storage_bytes;
    j["devices"] = r.devices;
    j["gpus"] = r.gpus;
    if (!r.kineto_source.empty())
      j["kineto"] = {{"source", r.kineto_source},
                     {"events", r.kineto_events},
                     {"link_method", r.link_method},
                     {"linked_cpu_ops", r.kineto_linked_ops},
                     {"cpu_ops", r.kineto_cpu_ops}};
    j["model_bytes"] = r.model_bytes;
    out["ranks"].push_back(j);
  }
  return out.dump(2);
}

}  // namespace reprise
