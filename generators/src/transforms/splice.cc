// splice: repeat a scope (a transformer block: its forward, optimizer and gradient subtrees, and its backward) or an
// iteration, with fresh tensors for each copy and the seams rebound by shape and dtype; append other sources' ops;
// replace a scope by another source's (docs/configs.md, splice).
#include <algorithm>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <unordered_map>

#include "perturb_edit.h"
#include "reprise/common/error.h"
#include "reprise/trace/read.h"
#include "select_nodes.h"
#include "splice_graph.h"
#include "transform.h"

namespace reprise::gen {
namespace {

struct SpliceSpec {
  std::regex scope;
  std::string scope_text, where;
  int64_t times = 2;
  bool iterations = false;           // repeat each iteration instead of a scope
  bool has_scope = false;            // concat: only the matched scopes of the sources
  std::vector<std::string> sources;  // concat: whose ops follow the trace's; replace: the one source
  std::regex with_scope;             // replace: the source's scope
  std::string with_text;
};

std::string id_text(const Trace& t, uint32_t i) { return std::to_string(t.nodes[i].id); }

int64_t max_seq_id(const Trace& t) {
  int64_t m = 0;
  for (const Node& n : t.nodes) m = std::max(m, n.seq_id);
  return m;
}

bool is_iteration(std::string_view name) { return name.rfind("ProfilerStep#", 0) == 0; }

// A scope a regex may name: an annotation or record_function scope (`## block.0 ##`, a module's name), not an op, an
// iteration (ProfilerStep#N: `repeat: {iterations: K}` repeats those) or the process-group node.
bool scope_node(const Trace& t, const Node& n) {
  const std::string_view name = t.name(n);
  return (n.kind == NodeKind::Annotation || n.kind == NodeKind::Other) && !is_iteration(name) &&
         name != "## process_group:init ##";
}

// The distinct names of the scopes whose name matches, in order of first appearance.
std::vector<std::string> matched_names(const Trace& t, const std::regex& re) {
  std::vector<std::string> names;
  for (const Node& n : t.nodes)
    if (scope_node(t, n) && std::regex_search(std::string(t.name(n)), re)) {
      std::string name(t.name(n));
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  return names;
}

[[noreturn]] void no_scope(const Trace& t, const std::regex& re, const std::string& text, const std::string& where) {
  bool iteration = false;
  for (const Node& n : t.nodes)
    iteration = iteration || (is_iteration(t.name(n)) && std::regex_search(std::string(t.name(n)), re));
  throw UserError(where + ": scope: '" + text + "' matches no annotation or record_function scope in " + t.source +
                  (iteration ? " (it matches iterations: repeat them with {iterations: K}, select them with "
                               "{iterations: ...})"
                             : ""));
}

std::vector<std::string> names_or_fail(const Trace& t, const std::regex& re, const std::string& text,
                                       const std::string& where) {
  std::vector<std::string> names = matched_names(t, re);
  if (names.empty()) no_scope(t, re, text, where);
  return names;
}

// Copies of the subtrees of a unit placed by Insertions, and the forward parents their backward copies must name.
class CopyPlan {
 public:
  explicit CopyPlan(Trace& t) : t_(t) {}
  // Appends the subtree at `root` of `from` to `in`, each node made by `make`.
  template <typename Make>
  void add(Insertion& in, const Trace& from, uint32_t root, int64_t copy, Make&& make) {
    std::vector<uint32_t> nodes;
    std::vector<int> parent;
    subtree(from, root, nodes, parent);
    const int base = static_cast<int>(in.nodes.size());
    const int64_t tid = t_.nodes[in.anchor].tid;
    for (size_t j = 0; j < nodes.size(); ++j) {
      const Node& src = from.nodes[nodes[j]];
      at_[{src.id, copy}] = {ins_.size(), in.nodes.size()};
      if ((src.fields & kHasFwParent) && src.fw_parent != 0)
        want_.push_back({ins_.size(), in.nodes.size(), src.fw_parent, copy});
      Node n = make(nodes[j]);
      n.tid = tid;
      in.nodes.push_back(n);
      in.parent.push_back(parent[j] < 0 ? -1 : parent[j] + base);
    }
  }
  void push(Insertion in) { ins_.push_back(std::move(in)); }
  // Inserts every copy (reindexes) and links forward parents; returns the ids given, per insertion.
  std::vector<std::vector<int64_t>> insert() {
    auto ids = insert_nodes(t_, std::move(ins_));
    for (const Want& w : want_) {
      auto it = at_.find({w.fw_parent, w.copy});
      if (it == at_.end()) continue;
      const uint32_t node = t_.find(ids[w.insertion][w.position]);
      if (node != kNone32) t_.nodes[node].fw_parent = ids[it->second.first][it->second.second];
    }
    return ids;
  }

 private:
  struct Want {
    size_t insertion, position;
    int64_t fw_parent, copy;
  };
  Trace& t_;
  std::vector<Insertion> ins_;
  std::map<std::pair<int64_t, int64_t>, std::pair<size_t, size_t>> at_;  // (source id, copy) -> place
  std::vector<Want> want_;
};

// The most nodes a repeat may leave in a trace: at about 1 KB of memory a node (its values and tensors), past this
// a generate takes tens of GB and an hour, which is no benchmark anyone meant to make.
constexpr double kMostNodesAfterRepeat = 16e6;

void check_repeat_size(const Trace& t, size_t per_copy, int64_t times, const std::string& where,
                       const std::string& what) {
  const double after =
      static_cast<double>(t.nodes.size()) + static_cast<double>(per_copy) * static_cast<double>(times - 1);
  if (after > kMostNodesAfterRepeat)
    throw UserError(where + ": " + what + " of " + std::to_string(per_copy) + " nodes to " + std::to_string(times) +
                    " copies would make " + t.source + " " + std::to_string(static_cast<int64_t>(after)) +
                    " nodes, more than the 16,000,000 a bundle may hold: ask for fewer copies");
}

// One unit, every subtree named `name` and its backward, repeated to `times` copies.
void repeat_unit(Trace& t, const std::string& name, int64_t times, const std::string& where, Workspace& ws) {
  const SpliceUnit u = find_unit(t, name);
  size_t unit_nodes = 0;
  for (uint32_t i = 0; i < t.nodes.size(); ++i) unit_nodes += u.has(i);
  check_repeat_size(t, unit_nodes, times, where, "repeat: '" + name + "'");
  const Seams s = find_seams(t, u);
  const size_t count = t.tensors.size();
  // Each outside input takes, in the next copy, the first tensor of its shape and dtype the unit hands on after
  // reading it (forward: the previous copy's output; backward: the next copy's gradient, as gradients flow back).
  std::vector<uint32_t> seam_of(count, kNone32), grad_of(count, kNone32);
  std::vector<bool> forward_out(count, false);
  const SeamIn* unbound = nullptr;
  bool chained = false;
  for (const SeamIn& in : s.in) {
    uint32_t to = kNone32;
    for (const SeamOut& o : s.out)
      if (o.backward == in.backward && o.writer >= in.reader && same_shape(t, in.tensor, t, o.tensor)) {
        to = o.tensor;
        break;
      }
    (in.backward ? grad_of : seam_of)[in.tensor] = to;
    if (!in.backward) {
      chained = chained || to != kNone32;
      if (to == kNone32 && !unbound) unbound = &in;
    }
  }
  const SeamOut* first_out = nullptr;
  for (const SeamOut& o : s.out)
    if (!o.backward) {
      forward_out[o.tensor] = true;
      if (!first_out) first_out = &o;
    }
  if (!chained && unbound && first_out)
    throw UserError(where + ": incompatible seam: '" + name + "' of " + t.source + ": node " +
                    id_text(t, unbound->reader) + " reads " + tensor_text(t, unbound->tensor) + " written by node " +
                    id_text(t, unbound->writer) + " before it, but the scope hands on no tensor of that shape and " +
                    "dtype for the next copy to read (it hands on " + tensor_text(t, first_out->tensor) +
                    " from node " + id_text(t, first_out->writer) + ")");

  Fresh fresh(t);
  std::vector<std::vector<uint32_t>> remap(static_cast<size_t>(times));  // copy k: tensor index -> its tensor
  remap[0].resize(count);
  for (uint32_t x = 0; x < count; ++x) remap[0][x] = x;
  for (size_t k = 1; k < remap.size(); ++k) {
    std::vector<uint32_t>& m = remap[k];
    m.assign(count, kNone32);
    std::unordered_map<int64_t, int64_t> id_map, storage_map;
    for (uint32_t x = 0; x < count; ++x)
      if (seam_of[x] != kNone32) m[x] = remap[k - 1][seam_of[x]];
    for (uint32_t x = 0; x < count; ++x)
      if (s.state[x] != 0 && m[x] == kNone32 && grad_of[x] == kNone32)
        m[x] = fresh_tensor(t, x, id_map, storage_map, fresh, s.state[x] == 1);
  }
  // Copy k reads the gradient copy k+1 wrote; the last copy reads the one from outside.
  for (size_t k = remap.size() - 1; k >= 1; --k)
    for (uint32_t x = 0; x < count; ++x)
      if (grad_of[x] != kNone32) remap[k][x] = k + 1 == remap.size() ? x : remap[k + 1][grad_of[x]];
  // Ops after the unit read the last copy's outputs (the original's backward runs last: its gradients stay).
  for (uint32_t at : s.rebind)
    if (forward_out[t.values[at].ref]) t.values[at].ref = remap.back()[t.values[at].ref];

  // The copies: each forward subtree's right after it, the backward's before the original's, last copy first.
  const int64_t seq_step = max_seq_id(t) + 1;
  CopyPlan plan(t);
  for (uint32_t r : u.roots) {
    Insertion in;
    in.anchor = r;
    for (int64_t k = 1; k < times; ++k)
      plan.add(in, t, r, k, [&](uint32_t i) { return copy_with(t, i, remap[static_cast<size_t>(k)], k * seq_step); });
    plan.push(std::move(in));
  }
  if (!u.back_roots.empty()) {
    Insertion in;
    in.anchor = u.back_roots.front();
    in.before = true;
    for (int64_t k = times - 1; k >= 1; --k)
      for (uint32_t r : u.back_roots)
        plan.add(in, t, r, k, [&](uint32_t i) { return copy_with(t, i, remap[static_cast<size_t>(k)], k * seq_step); });
    plan.push(std::move(in));
  }
  // The original's backward reads the gradient copy 1 wrote (after the copies were made from it).
  std::vector<uint32_t> stack;
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    if (!u.backward[i]) continue;
    for (uint32_t a = t.nodes[i].inputs; a < t.nodes[i].inputs + t.nodes[i].num_inputs; ++a) stack.push_back(a);
    while (!stack.empty()) {
      Value& v = t.values[stack.back()];
      stack.pop_back();
      if (v.kind == ValueKind::Tensor && v.ref < count && grad_of[v.ref] != kNone32) v.ref = remap[1][grad_of[v.ref]];
      if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple)
        for (uint32_t c = 0; c < v.count; ++c) stack.push_back(v.ref + c);
    }
  }
  plan.insert();
  t.kineto.reset();
  renumber_collective_seqs(t);
  size_t nf = 0, nb = 0;
  for (size_t i = 0; i < u.forward.size(); ++i) {
    nf += u.forward[i];
    nb += u.backward[i];
  }
  ws.note("splice: " + t.source + ": '" + name + "' (" + std::to_string(u.roots.size()) + " subtree(s), " +
          std::to_string(nf) + " nodes, " + std::to_string(nb) + " backward nodes) x" + std::to_string(times) + ", " +
          std::to_string(s.in.size()) + " seam input(s), " + std::to_string(s.out.size()) + " seam output(s)");
}

void repeat_scope(Trace& t, const SpliceSpec& s, Workspace& ws) {
  for (const std::string& name : names_or_fail(t, s.scope, s.scope_text, s.where))
    repeat_unit(t, name, s.times, s.where, ws);
}

// Each ProfilerStep, with the ops of its id range on every thread, repeated; outside inputs (parameters, data) are
// shared by the copies, as a training loop's iterations share them.
void repeat_iterations(Trace& t, const SpliceSpec& s, Workspace& ws) {
  std::vector<const Iteration*> steps;
  for (const Iteration& it : t.iterations)
    if (it.profiler_step) steps.push_back(&it);
  if (steps.empty()) throw UserError(s.where + ": iterations: " + t.source + " has no ProfilerStep to repeat");
  int64_t max_step = 0;
  for (const Iteration* it : steps) max_step = std::max(max_step, it->step);
  std::vector<IdRange> ranges = step_ranges(t);
  Fresh fresh(t);
  int64_t max_seq = 0;
  for (const Node& n : t.nodes) max_seq = std::max(max_seq, n.seq_id);
  std::vector<Insertion> ins;
  int64_t made = 0;
  for (const IdRange& r : ranges) {
    // Top-level nodes of the range: those whose parent is outside it.
    std::vector<uint32_t> tops;
    std::vector<bool> in_range(t.nodes.size(), false);
    for (uint32_t i = 0; i < t.nodes.size(); ++i) in_range[i] = t.nodes[i].id >= r.first && t.nodes[i].id <= r.last;
    for (uint32_t i = 0; i < t.nodes.size(); ++i)
      if (in_range[i] && (t.nodes[i].parent == kNone32 || !in_range[t.nodes[i].parent])) tops.push_back(i);
    if (tops.empty()) continue;
    std::vector<uint8_t> produced(t.tensors.size(), 0);
    for (uint32_t i = 0; i < t.nodes.size(); ++i) {
      if (!in_range[i]) continue;
      each_arg_tensor(t, t.nodes[i], false, [&](uint32_t x) {
        if (produced[x] == 0) produced[x] = 1;
      });
      each_arg_tensor(t, t.nodes[i], true, [&](uint32_t x) {
        if (produced[x] == 0) produced[x] = 2;
      });
    }
    // Each top's subtree (its nodes, each one's parent within it), found once: every copy copies the same nodes.
    std::vector<std::pair<std::vector<uint32_t>, std::vector<int>>> trees(tops.size());
    size_t per_copy = 0;
    for (size_t j = 0; j < tops.size(); ++j) {
      subtree(t, tops[j], trees[j].first, trees[j].second);
      per_copy += trees[j].first.size();
    }
    check_repeat_size(t, per_copy, s.times, s.where, "repeat: iterations: its first iteration");
    uint32_t last_top = tops.back();
    Insertion in;
    in.anchor = last_top;
    for (int64_t k = 1; k < s.times; ++k) {
      std::vector<uint32_t> m(t.tensors.size(), kNone32);
      std::unordered_map<int64_t, int64_t> id_map, storage_map;
      for (uint32_t x = 0; x < produced.size(); ++x)  // the original's tensors, not earlier copies'
        if (produced[x] == 2) m[x] = fresh_tensor(t, x, id_map, storage_map, fresh, false);
      m.resize(t.tensors.size(), kNone32);
      for (const auto& [nodes, parent] : trees) {
        const int base = static_cast<int>(in.nodes.size());
        for (size_t j = 0; j < nodes.size(); ++j) {
          Node n = copy_with(t, nodes[j], m, k * (max_seq + 1));
          if (t.nodes[nodes[j]].parent != kNone32 && !in_range[nodes[j]]) n.parent_id = t.nodes[nodes[j]].parent_id;
          if (nodes[j] == steps.front()->node || is_iteration(t.name(t.nodes[nodes[j]])))
            n.name = t.strings.intern("ProfilerStep#" + std::to_string(max_step + (++made)));
          in.nodes.push_back(n);
          in.parent.push_back(parent[j] < 0 ? -1 : parent[j] + base);
        }
      }
    }
    ins.push_back(std::move(in));
    break;  // one iteration's copies at a time keeps ids simple: the loop below repeats
  }
  if (ins.empty()) throw UserError(s.where + ": iterations: " + t.source + ": its ProfilerSteps hold no nodes");
  insert_nodes(t, std::move(ins));
  t.kineto.reset();
  reindex(t);
  ws.note("splice: " + t.source + ": its first iteration repeated to " + std::to_string(s.times) + " copies (" +
          std::to_string(made) + " new ProfilerStep(s))");
}

// A job's sources: one rank serves every role, else rank k's trace serves the role of rank k.
struct Source {
  std::string path;
  TraceSet set;
  const Trace& for_role(const Workspace& ws, size_t role) const {
    size_t rank = 0;
    while (set.ranks.size() > 1 && ws.role_of_rank[rank] != role) ++rank;
    return set.ranks[set.ranks.size() == 1 ? 0 : rank];
  }
};

Source load_source(const Workspace& ws, const std::string& path, const std::string& where) {
  ReadOptions ro;
  ro.warn = ws.warn;
  Source s{path, load_traces({path}, ro)};
  for (const Trace& t : s.set.ranks)
    if (t.from_kineto_only)
      throw UserError(where + ": " + t.source +
                      ": a Kineto trace alone has no operator arguments to splice in; give "
                      "its ET");
  const size_t n = s.set.ranks.size();
  if (n != 1 && n != static_cast<size_t>(ws.world_size()))
    throw UserError(where + ": " + path + " has " + std::to_string(n) + " ranks, the job " +
                    std::to_string(ws.world_size()) + ": give one rank or the job's");
  return s;
}

// Where a unit of `b` reads (or hands on) a seam tensor, the unit of `a` must have one of the same shape and dtype in
// the same pass: the first not taken yet, else the first. Returns its index in `a_seams`, or -1.
template <typename S>
int match_seam(const Trace& b, const S& want, const Trace& a, const std::vector<S>& a_seams, std::vector<bool>& taken) {
  int any = -1;
  for (size_t k = 0; k < a_seams.size(); ++k) {
    if (a_seams[k].backward != want.backward || !same_shape(b, want.tensor, a, a_seams[k].tensor)) continue;
    if (!taken[k]) {
      taken[k] = true;
      return static_cast<int>(k);
    }
    if (any < 0) any = static_cast<int>(k);
  }
  return any;
}

// The unit `name` of t replaced by the unit `with` of src: its subtrees one for one, its backward before t's.
void replace_unit(Trace& t, const std::string& name, const Trace& src, const std::string& with,
                  const std::string& where, Workspace& ws) {
  const SpliceUnit u = find_unit(t, name), v = find_unit(src, with);
  if (u.roots.size() != v.roots.size())
    throw UserError(where + ": replace: '" + name + "' is " + std::to_string(u.roots.size()) + " subtree(s) in " +
                    t.source + " (node " + id_text(t, u.roots.front()) + " first), '" + with + "' is " +
                    std::to_string(v.roots.size()) + " in " + src.source + " (node " + id_text(src, v.roots.front()) +
                    " first): they are replaced one for one (select one iteration of each first)");
  const Seams a = find_seams(t, u), b = find_seams(src, v);
  std::vector<uint32_t> map(src.tensors.size(), kNone32);
  std::vector<bool> taken_in(a.in.size(), false), taken_out(b.out.size(), false);
  for (const SeamIn& in : b.in) {
    const int k = match_seam(src, in, t, a.in, taken_in);
    if (k < 0)
      throw UserError(where + ": incompatible seam: node " + id_text(src, in.reader) + " of " + src.source + " reads " +
                      tensor_text(src, in.tensor) + " from outside '" + with + "', and '" + name + "' (node " +
                      id_text(t, u.roots.front()) + ") of " + t.source +
                      " reads no tensor of that shape and dtype from outside");
    map[in.tensor] = a.in[static_cast<size_t>(k)].tensor;
  }
  NodeImporter im(t, src, std::move(map), max_seq_id(t) + 1);
  std::vector<uint32_t> out_of(t.tensors.size(), kNone32);
  for (const SeamOut& o : a.out) {
    const int k = match_seam(t, o, src, b.out, taken_out);
    if (k < 0)
      throw UserError(where + ": incompatible seam: node " + id_text(t, o.reader) + " of " + t.source + " reads " +
                      tensor_text(t, o.tensor) + " from '" + name + "' (node " + id_text(t, o.writer) + "), and '" +
                      with + "' (node " + id_text(src, v.roots.front()) + ") of " + src.source +
                      " hands on no tensor of that shape and dtype");
    out_of[o.tensor] = im.tensor(b.out[static_cast<size_t>(k)].tensor);
  }
  for (uint32_t at : a.rebind)
    if (out_of[t.values[at].ref] != kNone32) t.values[at].ref = out_of[t.values[at].ref];

  CopyPlan plan(t);
  for (size_t k = 0; k < u.roots.size(); ++k) {
    Insertion in;
    in.anchor = u.roots[k];
    in.before = true;
    plan.add(in, src, v.roots[k], 0, [&](uint32_t i) { return im.node(i); });
    plan.push(std::move(in));
  }
  // A trace without backward gets none; one with backward gets the source's in its place.
  if (!u.back_roots.empty() && !v.back_roots.empty()) {
    Insertion in;
    in.anchor = u.back_roots.front();
    in.before = true;
    for (uint32_t r : v.back_roots) plan.add(in, src, r, 0, [&](uint32_t i) { return im.node(i); });
    plan.push(std::move(in));
  }
  const auto ids = plan.insert();
  // The original unit goes: inserted nodes aside, the trace's nodes keep their order.
  std::set<int64_t> inserted;
  for (const auto& list : ids) inserted.insert(list.begin(), list.end());
  std::vector<bool> keep(t.nodes.size(), true);
  for (uint32_t i = 0, old = 0; i < t.nodes.size(); ++i)
    if (!inserted.count(t.nodes[i].id)) keep[i] = !u.has(old++);
  keep_nodes(t, keep);
  t.kineto.reset();
  renumber_collective_seqs(t);
  ws.note("splice: " + t.source + ": '" + name + "' replaced by '" + with + "' of " + src.source + " (" +
          std::to_string(inserted.size()) + " nodes, " + std::to_string(b.in.size()) + " seam input(s), " +
          std::to_string(a.out.size()) + " seam output(s) rebound)");
}

void replace_scope(Workspace& ws, const SpliceSpec& s) {
  const Source src = load_source(ws, s.sources.front(), s.where);
  for (size_t r = 0; r < ws.roles.size(); ++r) {
    const Trace& from = src.for_role(ws, r);
    const std::vector<std::string> with = matched_names(from, s.with_scope);
    if (with.size() != 1) {
      std::string list;
      for (const std::string& n : with) list += (list.empty() ? "" : ", ") + n;
      throw UserError(s.where + ": with: scope: '" + s.with_text + "' matches " + std::to_string(with.size()) +
                      " scope names in " + from.source + (list.empty() ? "" : " (" + list + ")") + ": give one");
    }
    for (const std::string& name : names_or_fail(ws.roles[r], s.scope, s.scope_text, s.where))
      replace_unit(ws.roles[r], name, from, with.front(), s.where, ws);
  }
}

// A source reduced to its matched scopes and their backward (with their ProfilerSteps and threads).
Trace only_scopes(const Trace& src, const SpliceSpec& s) {
  std::vector<uint32_t> scopes;
  for (uint32_t i = 0; i < src.nodes.size(); ++i)
    if (scope_node(src, src.nodes[i]) && std::regex_search(std::string(src.name(src.nodes[i])), s.scope))
      scopes.push_back(i);
  if (scopes.empty()) no_scope(src, s.scope, s.scope_text, s.where);
  Trace t = clone(src);
  std::vector<bool> keep = nodes_in_scopes(t, scopes, true);
  keep_structure(t, keep);
  keep_nodes(t, keep);
  return t;
}

void concat_sources(Workspace& ws, const SpliceSpec& s) {
  for (const std::string& path : s.sources) {
    const Source src = load_source(ws, path, s.where);
    for (size_t r = 0; r < ws.roles.size(); ++r) {
      const Trace& from = src.for_role(ws, r);
      const size_t added = s.has_scope ? graft(ws.roles[r], only_scopes(from, s)) : graft(ws.roles[r], from);
      renumber_collective_seqs(ws.roles[r]);
      ws.note("splice: " + ws.roles[r].source + ": " + std::to_string(added) + " nodes of " + path + " appended" +
              (s.has_scope ? " (scope '" + s.scope_text + "')" : ""));
    }
  }
}

std::regex regex_at(const YamlFile& f, const YAML::Node& n, const std::string& key, std::string& text) {
  text = f.string(n, key);
  try {
    return std::regex(text, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    f.fail(n, key + ": not a regular expression: " + text + " (" + e.what() + ")");
  }
}

void parse_concat(const YamlFile& f, const YAML::Node& c, SpliceSpec& s) {
  f.expect_map(c, "concat", {"sources", "scope"});
  if (!c["sources"]) f.fail(c, "concat: expected sources: [TRACE, ...]");
  const YAML::Node list = c["sources"];
  if (list.IsSequence()) {
    for (const auto& e : list) s.sources.push_back(f.path(e, "sources"));
  } else {
    s.sources.push_back(f.path(list, "sources"));
  }
  if (s.sources.empty()) f.fail(list, "sources: expected at least one trace");
  if (c["scope"]) {
    s.has_scope = true;
    s.scope = regex_at(f, c["scope"], "scope", s.scope_text);
    s.where = f.where(c["scope"]);
  }
}

void parse_replace(const YamlFile& f, const YAML::Node& r, SpliceSpec& s) {
  f.expect_map(r, "replace", {"scope", "with"});
  if (!r["scope"] || !r["with"]) f.fail(r, "replace: expected scope: REGEX and with: {source: TRACE, scope: REGEX}");
  s.scope = regex_at(f, r["scope"], "scope", s.scope_text);
  s.where = f.where(r["scope"]);
  const YAML::Node w = r["with"];
  f.expect_map(w, "with", {"source", "scope"});
  if (!w["source"] || !w["scope"]) f.fail(w, "with: expected source: TRACE and scope: REGEX");
  s.sources.push_back(f.path(w["source"], "source"));
  s.with_scope = regex_at(f, w["scope"], "scope", s.with_text);
}

void parse_repeat(const YamlFile& f, const YAML::Node& r, SpliceSpec& s) {
  f.expect_map(r, "repeat", {"scope", "times", "iterations"});
  if (r["scope"] && r["iterations"]) f.fail(r, "repeat: scope and iterations exclude each other");
  if (r["iterations"]) {
    s.iterations = true;
    s.times = f.integer(r["iterations"], "iterations", 2, 100000);
    if (r["times"]) f.fail(r["times"], "times: goes with scope (iterations: K is the number of copies)");
    return;
  }
  if (!r["scope"]) f.fail(r, "repeat: expected scope: REGEX (with times: K) or iterations: K");
  s.scope = regex_at(f, r["scope"], "scope", s.scope_text);
  s.where = f.where(r["scope"]);
  if (!r["times"]) f.fail(r, "repeat: expected times: K (the copies in all, at least 2)");
  s.times = f.integer(r["times"], "times", 2, 10000);
}

TransformStep parse_splice(const YAML::Node& p, const ConfigContext& cx) {
  const YamlFile& f = cx.file;
  f.expect_map(p, "splice", {"repeat", "concat", "replace"});
  const int given = !!p["repeat"] + !!p["concat"] + !!p["replace"];
  if (given != 1)
    f.fail(p,
           "splice: expected one of repeat: {scope: REGEX, times: K}, repeat: {iterations: K}, concat: {sources: "
           "[...]} and replace: {scope: REGEX, with: {...}} (write one entry each)");
  auto s = std::make_shared<SpliceSpec>();
  const char* op = p["repeat"] ? "repeat" : p["concat"] ? "concat" : "replace";
  const YAML::Node body = p[op];
  s->where = f.where(body);
  if (p["repeat"]) parse_repeat(f, body, *s);
  if (p["concat"]) parse_concat(f, body, *s);
  if (p["replace"]) parse_replace(f, body, *s);
  const std::string what = op;
  return [s, what](Workspace& ws) {
    ws.work_changed();
    if (what == "concat") return concat_sources(ws, *s);
    if (what == "replace") return replace_scope(ws, *s);
    for (Trace& t : ws.roles) s->iterations ? repeat_iterations(t, *s, ws) : repeat_scope(t, *s, ws);
  };
}

}  // namespace

const TransformDescriptor kSplice{"splice",
                                  "repeat a scope (a layer with its backward) or an iteration with fresh tensors per "
                                  "copy, append other sources' ops, or replace a scope by another source's; seams "
                                  "rebound by shape and dtype",
                                  {"repeat", "concat", "replace"},
                                  parse_splice};

}  // namespace reprise::gen
