#include "reprise/trace/summary.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

namespace reprise {
namespace {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

std::string fmt_us(double us) {
  char buf[32];
  if (us >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f s", us / 1e6);
  else if (us >= 1e3)
    std::snprintf(buf, sizeof buf, "%.2f ms", us / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.1f us", us);
  return buf;
}

RankSummary summarize_rank(const Trace& t, size_t top) {
  RankSummary r;
  r.rank = t.rank;
  r.source = t.source;
  r.schema = t.from_kineto_only ? "kineto" : (t.schema.empty() ? "(untagged)" : t.schema);
  r.nodes = t.nodes.size();
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
    s.dtype = c.dtype;
    ++s.count;
    s.bytes += std::max(c.in_bytes(), c.out_bytes());
  }
  for (auto& [k, s] : cs) r.collective_stats.push_back(s);
  r.process_groups = t.process_groups;
  for (const Iteration& it : t.iterations) r.iterations.push_back(it.name);
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

}  // namespace

Summary summarize(const TraceSet& set, size_t top) {
  Summary s;
  for (const Trace& t : set.ranks) s.ranks.push_back(summarize_rank(t, top));
  return s;
}

void print_summary(std::ostream& o, const Summary& s) {
  char line[512];
  for (const RankSummary& r : s.ranks) {
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
      for (auto& d : r.devices) o << " " << d;
      o << "\n";
    }
    if (!r.gpus.empty()) {
      o << "gpus       ";
      for (auto& d : r.gpus) o << " " << d;
      o << "\n";
    }
    if (!r.iterations.empty()) {
      o << "iterations ";
      size_t shown = 0;
      for (auto& i : r.iterations) {
        if (shown++ == 12) {
          o << " ... (" << r.iterations.size() << ")";
          break;
        }
        o << " " << i;
      }
      o << "\n";
    }
    if (!r.process_groups.empty()) {
      o << "process groups:\n";
      for (const ProcessGroup& pg : r.process_groups) {
        std::string ranks;
        for (int64_t x : pg.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(x);
        std::snprintf(line, sizeof line, "  %-6s %-16s %-18s size %-4lld ranks [%s]\n", pg.name.c_str(),
                      pg.desc.c_str(), pg.backend.c_str(), static_cast<long long>(pg.size),
                      ranks.empty() ? "all" : ranks.c_str());
        o << line;
      }
    }
    o << "collectives " << r.collectives << " (+" << r.waits << " waits)\n";
    for (const CollectiveStat& c : r.collective_stats) {
      std::snprintf(line, sizeof line, "  %-16s %-20s %-9s x%-5lld %12s\n", c.name.c_str(), c.pg.c_str(),
                    c.dtype.c_str(), static_cast<long long>(c.count),
                    human_bytes(static_cast<double>(c.bytes)).c_str());
      o << line;
    }
    o << "top ops by count (" << r.distinct_ops << " distinct):\n";
    for (const OpStat& op : r.top_by_count) {
      std::snprintf(line, sizeof line, "  %8lld  %s\n", static_cast<long long>(op.count), op.name.c_str());
      o << line;
    }
    if (!r.top_by_gpu.empty()) {
      o << "top ops by GPU time (total " << fmt_us(r.gpu_us) << "):\n";
      for (const OpStat& op : r.top_by_gpu) {
        std::snprintf(line, sizeof line, "  %10s %5.1f%%  x%-6lld %s\n", fmt_us(op.gpu_us).c_str(),
                      100.0 * op.gpu_us / r.gpu_us, static_cast<long long>(op.count), op.name.c_str());
        o << line;
      }
    }
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
      cs.push_back({{"name", c.name}, {"pg", c.pg}, {"dtype", c.dtype}, {"count", c.count}, {"bytes", c.bytes}});
    j["collectives_by_type"] = cs;
    nlohmann::json pgs = nlohmann::json::array();
    for (auto& pg : r.process_groups)
      pgs.push_back(
          {{"name", pg.name}, {"desc", pg.desc}, {"backend", pg.backend}, {"size", pg.size}, {"ranks", pg.ranks}});
    j["process_groups"] = pgs;
    j["iterations"] = r.iterations;
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
