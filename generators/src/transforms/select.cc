// select: keep part of each trace (iterations, scopes, ops, node ids, comms or compute) or of the job (ranks).
// Filters combine: a node stays when every filter given keeps it. Op filters match the outermost ops, the ones
// replay issues (an op's inner ops go and stay with it).
#include <regex>
#include <unordered_map>

#include "group_resize.h"
#include "reprise/common/error.h"
#include "select_nodes.h"
#include "transform.h"

namespace reprise::gen {
namespace {

struct Pattern {
  std::regex re;
  std::string text, where;
};

struct SelectSpec {
  std::vector<int64_t> iterations;
  std::string iterations_where;
  std::vector<Pattern> scopes, ops, exclude;
  std::vector<int64_t> ranks;
  std::string ranks_where;
  std::vector<std::pair<int64_t, int64_t>> node_ranges;
  std::string comms = "keep", compute = "keep";
  bool backward = true;
};

std::vector<Pattern> patterns(const YamlFile& f, const YAML::Node& n, const std::string& key) {
  std::vector<Pattern> out;
  auto one = [&](const YAML::Node& e) {
    Pattern p;
    p.text = f.string(e, key);
    p.where = f.where(e);
    try {
      p.re = std::regex(p.text, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& err) {
      f.fail(e, key + ": not a regular expression: " + p.text + " (" + err.what() + ")");
    }
    out.push_back(std::move(p));
  };
  if (n.IsSequence()) {
    for (const auto& e : n) one(e);
  } else {
    one(n);
  }
  return out;
}

// Which of `patterns` match a name, cached by string id: traces repeat a few thousand names millions of times.
class Matcher {
 public:
  Matcher(const Trace& t, const std::vector<Pattern>& p) : t_(t), p_(p), used_(p.size(), false) {}
  bool any(StrId name) {
    auto [it, fresh] = cache_.try_emplace(name, 0);
    if (fresh) {
      const std::string s(t_.str(name));
      for (size_t k = 0; k < p_.size(); ++k)
        if (std::regex_search(s, p_[k].re)) it->second |= uint64_t{1} << std::min<size_t>(k, 63);
    }
    for (size_t k = 0; k < p_.size(); ++k)
      if (it->second & (uint64_t{1} << std::min<size_t>(k, 63))) used_[k] = true;
    return it->second != 0;
  }
  bool used(size_t k) const { return used_[k]; }

 private:
  const Trace& t_;
  const std::vector<Pattern>& p_;
  std::vector<bool> used_;
  std::unordered_map<StrId, uint64_t> cache_;
};

void check_used(const Matcher& m, const std::vector<Pattern>& p, const std::string& key, const std::string& what) {
  for (size_t k = 0; k < p.size(); ++k)
    if (!m.used(k)) throw UserError(p[k].where + ": " + key + ": '" + p[k].text + "' matches no " + what);
}

void select_trace(Trace& t, const SelectSpec& s, Workspace& ws) {
  const std::vector<uint32_t> outer = outermost_ops(t);
  std::vector<bool> keep(t.nodes.size(), true);
  auto restrict_to = [&](const std::vector<bool>& mask) {
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = keep[i] && mask[i];
  };
  if (!s.iterations.empty()) restrict_to(nodes_in_iterations(t, s.iterations, s.iterations_where));
  // Whole iterations keep their ops' times meaningful; any filter below that drops one of their ops does not (counted
  // over the ops replay issues: the comms split may take a collective out of a backward function's wrapper).
  const std::vector<uint32_t> units = replayed_ops(t);
  auto kept_whole = [&](uint32_t i) {  // an op stays when it and every node above it stay (a wrapper takes its ops)
    for (uint32_t p = i; p != kNone32; p = t.nodes[p].parent)
      if (!keep[p]) return false;
    return true;
  };
  size_t in_iterations = 0;
  for (uint32_t i : units) in_iterations += kept_whole(i);
  if (!s.node_ranges.empty()) restrict_to(nodes_in_id_ranges(t, s.node_ranges));
  if (!s.scopes.empty()) {
    Matcher m(t, s.scopes);
    std::vector<uint32_t> roots;
    for (uint32_t i = 0; i < t.nodes.size(); ++i)
      if (t.nodes[i].kind != NodeKind::Root && t.nodes[i].kind != NodeKind::Thread && m.any(t.nodes[i].name))
        roots.push_back(i);
    check_used(m, s.scopes, "scopes", "annotation or record_function scope in " + t.source);
    restrict_to(nodes_in_scopes(t, roots, s.backward));
  }
  if (!s.ops.empty() || !s.exclude.empty()) {
    Matcher inc(t, s.ops), exc(t, s.exclude);
    std::vector<bool> mask(t.nodes.size(), true);
    for (uint32_t i : outer) {
      const bool in = s.ops.empty() || inc.any(t.nodes[i].name);
      const bool out = !s.exclude.empty() && exc.any(t.nodes[i].name);
      mask[i] = in && !out;
    }
    check_used(inc, s.ops, "ops", "replayed op in " + t.source);
    check_used(exc, s.exclude, "exclude", "replayed op in " + t.source);
    restrict_to(mask);
  }
  if (s.comms != "keep" || s.compute != "keep") {
    // By the ops replay issues: DDP's all_reduce inside AccumulateGrad's wrapper is communication, the gradient
    // work beside it compute (the communication skeleton keeps the one, not the other).
    const std::vector<bool> comm = comm_ops(t, units);
    std::vector<bool> mask(t.nodes.size(), true);
    for (uint32_t i : units) {
      if (comm[i] && s.comms == "drop") mask[i] = false;
      if (!comm[i] && (s.comms == "only" || s.compute == "drop")) mask[i] = false;
    }
    restrict_to(mask);
  }
  const size_t before = units.size();
  size_t kept = 0;
  for (uint32_t i : units) kept += kept_whole(i);
  if (kept < in_iterations) ws.work_changed();  // what the original's steps took no longer describes what is left
  keep_structure(t, keep);
  keep_nodes(t, keep);
  const size_t after = replayed_ops(t).size();
  ws.note("select: " + t.source + ": " + std::to_string(after) + " of " + std::to_string(before) +
          " replayed ops kept");
  if (after == 0) throw UserError("select: nothing is left of " + t.source + " (every op was filtered out)");
}

TransformStep parse_select(const YAML::Node& p, const ConfigContext& cx) {
  const YamlFile& f = cx.file;
  f.expect_map(p, "select",
               {"iterations", "scopes", "ops", "exclude", "nodes", "ranks", "comms", "compute", "backward"});
  auto s = std::make_shared<SelectSpec>();
  if (p["iterations"]) {
    s->iterations = f.int_ranges(p["iterations"], "iterations", 0, INT64_MAX / 2);
    s->iterations_where = f.where(p["iterations"]);
  }
  if (p["scopes"]) s->scopes = patterns(f, p["scopes"], "scopes");
  if (p["ops"]) s->ops = patterns(f, p["ops"], "ops");
  if (p["exclude"]) s->exclude = patterns(f, p["exclude"], "exclude");
  if (p["nodes"]) {
    std::vector<int64_t> ids = f.int_ranges(p["nodes"], "nodes", 0, INT64_MAX / 2);
    for (int64_t id : ids) {
      if (!s->node_ranges.empty() && s->node_ranges.back().second + 1 == id)
        s->node_ranges.back().second = id;
      else
        s->node_ranges.push_back({id, id});
    }
  }
  if (p["ranks"]) {
    s->ranks = f.int_ranges(p["ranks"], "ranks", 0, (1 << 20) - 1);
    s->ranks_where = f.where(p["ranks"]);
  }
  if (p["comms"]) s->comms = f.choice(p["comms"], "comms", {"keep", "drop", "only"});
  if (p["compute"]) s->compute = f.choice(p["compute"], "compute", {"keep", "drop"});
  if (p["backward"]) s->backward = f.boolean(p["backward"], "backward");
  if (s->comms == "drop" && s->compute == "drop") f.fail(p, "select: comms: drop with compute: drop leaves nothing");
  return [s](Workspace& ws) {
    if (!s->ranks.empty()) {
      for (int64_t r : s->ranks)
        if (r >= ws.world_size())
          throw UserError(s->ranks_where + ": ranks: rank " + std::to_string(r) + " is not in the job (it has " +
                          std::to_string(ws.world_size()) + " ranks)");
      keep_ranks(ws, s->ranks);
    }
    for (Trace& t : ws.roles) select_trace(t, *s, ws);
  };
}

}  // namespace

const TransformDescriptor kSelect{
    "select",
    "keep iterations, scopes, ops (regex include/exclude), node-id ranges, ranks, comms or compute",
    {"iterations", "scopes", "ops", "exclude", "nodes", "ranks", "comms", "compute", "backward"},
    parse_select};

}  // namespace reprise::gen
