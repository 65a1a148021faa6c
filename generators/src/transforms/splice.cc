// splice: repeat a scope (a transformer block: its forward, optimizer and gradient subtrees, and its backward) or an
// iteration, with fresh tensors for each copy and the seams rebound by shape and dtype (docs/configs.md, splice).
#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <unordered_map>

#include "perturb_edit.h"
#include "reprise/common/error.h"
#include "reprise/trace/read.h"
#include "select_nodes.h"
#include "trace_graft.h"
#include "transform.h"

namespace reprise::gen {
namespace {

struct SpliceSpec {
  std::regex scope;
  std::string scope_text, where;
  int64_t times = 2;
  bool iterations = false;          // repeat each iteration instead of a scope
  std::vector<std::string> concat;  // sources whose ops follow the trace's
};

template <typename F>
void each_tensor(const Trace& t, const Value& v, F&& f) {
  if (v.kind == ValueKind::Tensor) f(v.ref);
  if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple)
    for (uint32_t k = 0; k < v.count; ++k) each_tensor(t, t.values[v.ref + k], f);
}

template <typename F>
void each_arg_tensor(const Trace& t, const Node& n, bool outputs, F&& f) {
  const uint32_t first = outputs ? n.outputs : n.inputs, count = outputs ? n.num_outputs : n.num_inputs;
  for (uint32_t a = first; a < first + count; ++a) each_tensor(t, t.values[a], f);
}

// Copies `count` values from `first` (their list items too) to the end of the pools, tensors through `remap`.
uint32_t copy_args(Trace& t, uint32_t first, uint32_t count, const std::vector<uint32_t>& remap) {
  const uint32_t out = static_cast<uint32_t>(t.values.size());
  for (uint32_t k = 0; k < count; ++k) {
    t.values.push_back(t.values[first + k]);
    t.arg_types.push_back(first + k < t.arg_types.size() ? t.arg_types[first + k] : 0);
  }
  for (uint32_t k = 0; k < count; ++k) {
    Value v = t.values[out + k];
    if (v.kind == ValueKind::Tensor && remap[v.ref] != kNone32) v.ref = remap[v.ref];
    if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple) v.ref = copy_args(t, v.ref, v.count, remap);
    t.values[out + k] = v;
  }
  return out;
}

Node copy_with(Trace& t, uint32_t i, const std::vector<uint32_t>& remap, int64_t seq_shift) {
  Node n = t.nodes[i];
  n.inputs = copy_args(t, n.inputs, n.num_inputs, remap);
  n.outputs = copy_args(t, n.outputs, n.num_outputs, remap);
  const uint32_t attrs = static_cast<uint32_t>(t.attrs.size());
  for (uint32_t a = 0; a < n.num_attrs; ++a) {
    Attr x = t.attrs[n.attrs + a];
    x.value = copy_args(t, x.value, 1, remap);
    t.attrs.push_back(x);
  }
  n.attrs = attrs;
  if (n.seq_id >= 0) n.seq_id += seq_shift;
  n.fw_parent = 0;
  n.collective = -1;
  n.num_children = 0;
  return n;
}

// A subtree in the trace's order (by id: execution order, which a copy must keep), with each node's parent as an
// index in the list (-1 for the root).
void subtree(const Trace& t, uint32_t root, std::vector<uint32_t>& nodes, std::vector<int>& parent) {
  std::vector<uint32_t> found{root};
  for (size_t k = 0; k < found.size(); ++k)
    for (uint32_t c : t.children(t.nodes[found[k]])) found.push_back(c);
  std::sort(found.begin(), found.end());
  std::unordered_map<uint32_t, int> at;
  for (uint32_t i : found) {
    at[i] = static_cast<int>(at.size());
    nodes.push_back(i);
    auto p = i == root ? at.end() : at.find(t.nodes[i].parent);
    parent.push_back(p == at.end() ? -1 : p->second);
  }
}

struct Fresh {
  int64_t next_id, next_storage;
};

// A copy of tensor x with its own id; with its own storage too when `own_storage` (a parameter or input of the copy).
// Tensors the copy produces keep their storage ids: traces reuse storage ids after frees, and the copy reuses them in
// the same order as the original, which replay reads the same way.
uint32_t fresh_tensor(Trace& t, uint32_t x, std::unordered_map<int64_t, int64_t>& ids,
                      std::unordered_map<int64_t, int64_t>& storages, Fresh& f, bool own_storage) {
  Tensor n = t.tensors[x];
  auto id = ids.try_emplace(n.id, f.next_id);
  if (id.second) ++f.next_id;
  n.id = id.first->second;
  if (own_storage && n.storage_id != 0) {
    auto s = storages.try_emplace(n.storage_id, f.next_storage);
    if (s.second) ++f.next_storage;
    n.storage_id = s.first->second;
  }
  t.tensors.push_back(n);
  return static_cast<uint32_t>(t.tensors.size() - 1);
}

Fresh fresh_start(const Trace& t) {
  Fresh f{1, 1};
  for (const Tensor& x : t.tensors) {
    f.next_id = std::max(f.next_id, x.id + 1);
    f.next_storage = std::max(f.next_storage, x.storage_id + 1);
  }
  for (const Node& n : t.nodes) f.next_id = std::max(f.next_id, n.id + 1);
  return f;
}

bool same_shape(const Trace& t, uint32_t a, uint32_t b) {
  const Tensor &x = t.tensors[a], &y = t.tensors[b];
  if (x.dtype != y.dtype || x.rank != y.rank) return false;
  auto dx = t.dims(x), dy = t.dims(y);
  return std::equal(dx.begin(), dx.end(), dy.begin());
}

// One unit: every subtree named `name`, and the backward of their ops, repeated to `times` copies.
void repeat_unit(Trace& t, const std::string& name, int64_t times, Workspace& ws) {
  std::vector<uint32_t> roots;
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (t.name(t.nodes[i]) == name) {
      bool nested = false;  // a match inside a match belongs to the outer one
      for (uint32_t p = t.nodes[i].parent; p != kNone32 && !nested; p = t.nodes[p].parent)
        nested = t.name(t.nodes[p]) == name;
      if (!nested) roots.push_back(i);
    }
  std::vector<bool> forward(t.nodes.size(), false), unit(t.nodes.size(), false);
  for (uint32_t r : roots) mark_subtree(t, r, forward);
  // The backward: autograd nodes with a sequence number of a forward op, or a forward parent among them.
  std::set<int64_t> seqs, ids;
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (forward[i]) {
      if (t.nodes[i].seq_id >= 0) seqs.insert(t.nodes[i].seq_id);
      ids.insert(t.nodes[i].id);
    }
  // A linked node is taken with its autograd wrappers ("autograd::engine::evaluate_function: XBackward0" holds the
  // gradient sums too); a gradient accumulation (AccumulateGrad) belongs to the unit whose backward wrote its input.
  std::vector<uint32_t> back_roots;
  std::vector<bool> backward(t.nodes.size(), false);
  auto take = [&](uint32_t i) {
    while (t.nodes[i].parent != kNone32 && t.nodes[t.nodes[i].parent].kind == NodeKind::Autograd &&
           !forward[t.nodes[i].parent])
      i = t.nodes[i].parent;
    if (backward[i]) return;
    back_roots.push_back(i);
    mark_subtree(t, i, backward);
  };
  std::vector<uint32_t> writer(t.tensors.size(), kNone32);
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (!forward[i] && !backward[i] && (n.kind == NodeKind::Autograd || n.scope == kScopeBackwardFunction)) {
      bool linked = (n.seq_id >= 0 && seqs.count(n.seq_id)) ||
                    ((n.fields & kHasFwParent) && n.fw_parent != 0 && ids.count(n.fw_parent));
      if (!linked && t.name(n).find("AccumulateGrad") != std::string_view::npos)
        each_arg_tensor(t, n, false,
                        [&](uint32_t x) { linked = linked || (writer[x] != kNone32 && backward[writer[x]]); });
      if (linked) take(i);
    }
    each_arg_tensor(t, n, true, [&](uint32_t x) { writer[x] = i; });
  }
  std::sort(back_roots.begin(), back_roots.end());
  for (size_t i = 0; i < unit.size(); ++i) unit[i] = forward[i] || backward[i];

  // Tensors: produced inside the unit, or read from outside (parameters, data, incoming gradients).
  const size_t tensor_count = t.tensors.size();
  std::vector<uint8_t> state(tensor_count, 0);  // 1 read from outside, 2 produced inside
  std::vector<bool> forward_external(tensor_count, false);
  std::vector<uint32_t> last_producer(tensor_count, kNone32);
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    if (!unit[i]) continue;
    each_arg_tensor(t, t.nodes[i], false, [&](uint32_t x) {
      if (state[x] == 0) {
        state[x] = 1;
        if (forward[i]) forward_external[x] = true;
      }
    });
    each_arg_tensor(t, t.nodes[i], true, [&](uint32_t x) {
      if (state[x] == 0) state[x] = 2;
      if (state[x] == 2) last_producer[x] = i;
    });
  }
  // Seams: tensors the unit's forward wrote last when an op outside it reads them (ids are reused after frees, so a
  // read belongs to the latest write before it), and the outside inputs of the same shape.
  std::vector<uint32_t> seam_out, last_writer(tensor_count, kNone32);
  std::vector<bool> is_seam_out(tensor_count, false);
  std::vector<uint32_t> rebind;  // value indices of outside reads of a seam tensor
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (!unit[i]) {
      std::vector<uint32_t> stack;
      for (uint32_t a = n.inputs; a < n.inputs + n.num_inputs; ++a) stack.push_back(a);
      while (!stack.empty()) {
        const uint32_t at = stack.back();
        stack.pop_back();
        const Value& v = t.values[at];
        if (v.kind == ValueKind::Tensor && last_writer[v.ref] != kNone32 && forward[last_writer[v.ref]]) {
          rebind.push_back(at);
          if (!is_seam_out[v.ref]) {
            is_seam_out[v.ref] = true;
            seam_out.push_back(v.ref);
          }
        }
        if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple)
          for (uint32_t c = 0; c < v.count; ++c) stack.push_back(v.ref + c);
      }
    }
    each_arg_tensor(t, n, true, [&](uint32_t x) { last_writer[x] = i; });
  }
  std::sort(seam_out.begin(), seam_out.end(),
            [&](uint32_t a, uint32_t b) { return last_producer[a] < last_producer[b]; });
  std::vector<uint32_t> seam_of(tensor_count, kNone32);  // outside input -> the unit output it takes in copy k+1
  for (uint32_t x = 0; x < tensor_count; ++x) {
    if (state[x] != 1 || !forward_external[x]) continue;
    for (auto it = seam_out.rbegin(); it != seam_out.rend(); ++it)
      if (same_shape(t, x, *it)) {
        seam_of[x] = *it;
        break;
      }
  }

  Fresh fresh = fresh_start(t);
  int64_t max_seq = 0;
  for (const Node& n : t.nodes) max_seq = std::max(max_seq, n.seq_id);
  std::vector<std::vector<uint32_t>> remap(static_cast<size_t>(times));  // copy k: tensor index -> its tensor
  remap[0].resize(tensor_count);
  for (uint32_t x = 0; x < tensor_count; ++x) remap[0][x] = x;
  for (int64_t k = 1; k < times; ++k) {
    std::vector<uint32_t>& m = remap[static_cast<size_t>(k)];
    m.assign(tensor_count, kNone32);
    std::unordered_map<int64_t, int64_t> id_map, storage_map;
    for (uint32_t x = 0; x < tensor_count; ++x)
      if (seam_of[x] != kNone32) {
        m[x] = remap[static_cast<size_t>(k - 1)][seam_of[x]];
      }
    for (uint32_t x = 0; x < tensor_count; ++x)
      if (state[x] != 0 && m[x] == kNone32) m[x] = fresh_tensor(t, x, id_map, storage_map, fresh, state[x] == 1);
  }
  // Ops after the unit read the last copy's outputs.
  const std::vector<uint32_t>& last = remap.back();
  for (uint32_t at : rebind) t.values[at].ref = last[t.values[at].ref];

  // The copies: each forward subtree's right after it, the backward's before the original's, last copy first.
  std::vector<Insertion> ins;
  struct Made {
    size_t insertion, position;
    uint32_t source;
    int64_t copy;
  };
  std::vector<Made> made;
  std::unordered_map<int64_t, std::pair<size_t, size_t>> forward_copy;  // (source id, copy) key below
  auto key = [](int64_t id, int64_t k) { return id * 1024 + k; };
  // Appends copy k of the subtree at `r` to `in`.
  auto append_copy = [&](Insertion& in, uint32_t r, int64_t k, bool record_forward) {
    std::vector<uint32_t> nodes;
    std::vector<int> parent;
    subtree(t, r, nodes, parent);
    const int base = static_cast<int>(in.nodes.size());
    for (size_t j = 0; j < nodes.size(); ++j) {
      if (record_forward) forward_copy[key(t.nodes[nodes[j]].id, k)] = {ins.size(), in.nodes.size()};
      made.push_back({ins.size(), in.nodes.size(), nodes[j], k});
      in.nodes.push_back(copy_with(t, nodes[j], remap[static_cast<size_t>(k)], k * (max_seq + 1)));
      in.parent.push_back(parent[j] < 0 ? -1 : parent[j] + base);
    }
  };
  for (uint32_t r : roots) {
    Insertion in;
    in.anchor = r;
    for (int64_t k = 1; k < times; ++k) append_copy(in, r, k, true);
    ins.push_back(std::move(in));
  }
  if (!back_roots.empty()) {  // backward runs last layer first: the last copy's backward comes first
    Insertion in;
    in.anchor = back_roots.front();
    in.before = true;
    for (int64_t k = times - 1; k >= 1; --k)
      for (uint32_t r : back_roots) append_copy(in, r, k, false);
    ins.push_back(std::move(in));
  }
  // Forward parents of backward copies name their forward copies (ids known once inserted).
  std::vector<int64_t> want_fw(made.size(), 0);
  for (size_t m = 0; m < made.size(); ++m) {
    const Node& src = t.nodes[made[m].source];
    if (!(src.fields & kHasFwParent) || src.fw_parent == 0) continue;
    auto it = forward_copy.find(key(src.fw_parent, made[m].copy));
    if (it != forward_copy.end())
      want_fw[m] = static_cast<int64_t>(it->second.first * (1ull << 32) + it->second.second);
  }
  const size_t copies = made.size();
  auto new_ids = insert_nodes(t, std::move(ins));
  for (size_t m = 0; m < copies; ++m) {
    if (want_fw[m] == 0) continue;
    const size_t fi = static_cast<size_t>(want_fw[m]) >> 32, fj = static_cast<size_t>(want_fw[m]) & 0xffffffffu;
    const uint32_t node = t.find(new_ids[made[m].insertion][made[m].position]);
    if (node != kNone32) t.nodes[node].fw_parent = new_ids[fi][fj];
  }
  t.kineto.reset();
  reindex(t);
  size_t nf = 0, nb = 0;
  for (size_t i = 0; i < unit.size(); ++i) (forward[i] ? nf : nb) += unit[i] ? 1 : 0;
  ws.note("splice: " + t.source + ": '" + name + "' (" + std::to_string(roots.size()) + " subtree(s), " +
          std::to_string(nf) + " nodes, " + std::to_string(nb) + " backward nodes) x" + std::to_string(times) + ", " +
          std::to_string(seam_out.size()) + " seam tensor(s)");
}

void repeat_scope(Trace& t, const SpliceSpec& s, Workspace& ws) {
  std::vector<std::string> names;
  for (const Node& n : t.nodes)
    if (n.kind != NodeKind::Root && n.kind != NodeKind::Thread && std::regex_search(std::string(t.name(n)), s.scope)) {
      std::string name(t.name(n));
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  if (names.empty())
    throw UserError(s.where + ": scope: '" + s.scope_text + "' matches no annotation or record_function scope in " +
                    t.source);
  for (const std::string& name : names) repeat_unit(t, name, s.times, ws);
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
  Fresh fresh = fresh_start(t);
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
    uint32_t last_top = tops.back();
    Insertion in;
    in.anchor = last_top;
    for (int64_t k = 1; k < s.times; ++k) {
      std::vector<uint32_t> m(t.tensors.size(), kNone32);
      std::unordered_map<int64_t, int64_t> id_map, storage_map;
      for (uint32_t x = 0; x < produced.size(); ++x)  // the original's tensors, not earlier copies'
        if (produced[x] == 2) m[x] = fresh_tensor(t, x, id_map, storage_map, fresh, false);
      m.resize(t.tensors.size(), kNone32);
      for (uint32_t top : tops) {
        std::vector<uint32_t> nodes;
        std::vector<int> parent;
        subtree(t, top, nodes, parent);
        const int base = static_cast<int>(in.nodes.size());
        for (size_t j = 0; j < nodes.size(); ++j) {
          Node n = copy_with(t, nodes[j], m, k * (max_seq + 1));
          if (t.nodes[nodes[j]].parent != kNone32 && !in_range[nodes[j]]) n.parent_id = t.nodes[nodes[j]].parent_id;
          if (nodes[j] == steps.front()->node || t.name(t.nodes[nodes[j]]).rfind("ProfilerStep#", 0) == 0)
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

// concat: each source's ops after the role's; a source of one rank serves every role, else it has the job's ranks.
void concat_sources(Workspace& ws, const SpliceSpec& s) {
  for (const std::string& path : s.concat) {
    ReadOptions ro;
    ro.warn = ws.warn;
    TraceSet src = load_traces({path}, ro);
    const size_t n = src.ranks.size();
    if (n != 1 && n != static_cast<size_t>(ws.world_size()))
      throw UserError(s.where + ": concat: " + path + " has " + std::to_string(n) + " ranks, the job " +
                      std::to_string(ws.world_size()) + ": give one rank or the job's");
    for (size_t r = 0; r < ws.roles.size(); ++r) {
      size_t rank = 0;
      while (n > 1 && ws.role_of_rank[rank] != r) ++rank;
      const size_t added = graft(ws.roles[r], src.ranks[n == 1 ? 0 : rank]);
      ws.note("splice: " + ws.roles[r].source + ": " + std::to_string(added) + " nodes of " + path + " appended");
    }
  }
}

TransformStep parse_splice(const YAML::Node& p, const ConfigContext& cx) {
  const YamlFile& f = cx.file;
  f.expect_map(p, "splice", {"repeat", "concat"});
  if (!p["repeat"] && !p["concat"])
    f.fail(p, "splice: expected repeat: {scope: REGEX, times: K}, repeat: {iterations: K} or concat: {sources: [...]}");
  if (p["repeat"] && p["concat"]) f.fail(p, "splice: one of repeat and concat per entry (write two entries)");
  if (const YAML::Node c = p["concat"]) {
    f.expect_map(c, "concat", {"sources"});
    if (!c["sources"]) f.fail(c, "concat: expected sources: [TRACE, ...]");
    auto s = std::make_shared<SpliceSpec>();
    s->where = f.where(c);
    const YAML::Node list = c["sources"];
    if (list.IsSequence()) {
      for (const auto& e : list) s->concat.push_back(f.path(e, "sources"));
    } else {
      s->concat.push_back(f.path(list, "sources"));
    }
    if (s->concat.empty()) f.fail(list, "sources: expected at least one trace");
    return [s](Workspace& ws) {
      ws.timing_valid = false;
      concat_sources(ws, *s);
    };
  }
  const YAML::Node r = p["repeat"];
  f.expect_map(r, "repeat", {"scope", "times", "iterations"});
  auto s = std::make_shared<SpliceSpec>();
  s->where = f.where(r);
  if (r["scope"] && r["iterations"]) f.fail(r, "repeat: scope and iterations exclude each other");
  if (r["iterations"]) {
    s->iterations = true;
    s->times = f.integer(r["iterations"], "iterations", 2, 100000);
    if (r["times"]) f.fail(r["times"], "times: goes with scope (iterations: K is the number of copies)");
  } else {
    if (!r["scope"]) f.fail(r, "repeat: expected scope: REGEX (with times: K) or iterations: K");
    s->scope_text = f.string(r["scope"], "scope");
    s->where = f.where(r["scope"]);
    try {
      s->scope = std::regex(s->scope_text, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      f.fail(r["scope"], "scope: not a regular expression: " + s->scope_text + " (" + e.what() + ")");
    }
    if (!r["times"]) f.fail(r, "repeat: expected times: K (the copies in all, at least 2)");
    s->times = f.integer(r["times"], "times", 2, 10000);
  }
  return [s](Workspace& ws) {
    ws.timing_valid = false;
    for (Trace& t : ws.roles) s->iterations ? repeat_iterations(t, *s, ws) : repeat_scope(t, *s, ws);
  };
}

}  // namespace

const TransformDescriptor kSplice{"splice",
                                  "repeat a scope (a layer with its backward) or an iteration, with fresh tensors "
                                  "per copy and the seams rebound by shape and dtype; concat other sources' ops",
                                  {"repeat", "concat"},
                                  parse_splice};

}  // namespace reprise::gen
