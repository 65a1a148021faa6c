#include "splice_graph.h"

#include <algorithm>
#include <climits>
#include <set>

#include "perturb_edit.h"
#include "select_nodes.h"

namespace reprise::gen {

SpliceUnit find_unit(const Trace& t, const std::string& name) {
  SpliceUnit u;
  u.name = name;
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (t.name(t.nodes[i]) == name) {
      bool nested = false;
      for (uint32_t p = t.nodes[i].parent; p != kNone32 && !nested; p = t.nodes[p].parent)
        nested = t.name(t.nodes[p]) == name;
      if (!nested) u.roots.push_back(i);
    }
  u.forward.assign(t.nodes.size(), false);
  u.backward.assign(t.nodes.size(), false);
  for (uint32_t r : u.roots) mark_subtree(t, r, u.forward);
  std::set<int64_t> seqs, ids;
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (u.forward[i]) {
      if (t.nodes[i].seq_id >= 0) seqs.insert(t.nodes[i].seq_id);
      ids.insert(t.nodes[i].id);
    }
  // A linked node is taken with its autograd wrappers ("autograd::engine::evaluate_function: XBackward0" holds the
  // gradient sums too); a gradient accumulation (AccumulateGrad) belongs to the unit whose backward wrote its input.
  auto take = [&](uint32_t i) {
    while (t.nodes[i].parent != kNone32 && t.nodes[t.nodes[i].parent].kind == NodeKind::Autograd &&
           !u.forward[t.nodes[i].parent])
      i = t.nodes[i].parent;
    if (u.backward[i]) return;
    u.back_roots.push_back(i);
    mark_subtree(t, i, u.backward);
  };
  std::vector<uint32_t> writer(t.tensors.size(), kNone32);
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (!u.has(i) && (n.kind == NodeKind::Autograd || n.scope == kScopeBackwardFunction)) {
      bool linked = (n.seq_id >= 0 && seqs.count(n.seq_id)) ||
                    ((n.fields & kHasFwParent) && n.fw_parent != 0 && ids.count(n.fw_parent));
      if (!linked && t.name(n).find("AccumulateGrad") != std::string_view::npos)
        each_arg_tensor(t, n, false,
                        [&](uint32_t x) { linked = linked || (writer[x] != kNone32 && u.backward[writer[x]]); });
      if (linked) take(i);
    }
    each_arg_tensor(t, n, true, [&](uint32_t x) { writer[x] = i; });
  }
  std::sort(u.back_roots.begin(), u.back_roots.end());
  return u;
}

Seams find_seams(const Trace& t, const SpliceUnit& u) {
  const size_t count = t.tensors.size();
  Seams s;
  s.state.assign(count, 0);
  // Ids are reused after frees, so a read belongs to the latest write before it.
  std::vector<uint32_t> last_writer(count, kNone32);
  std::vector<bool> is_out(count, false);
  std::vector<uint32_t> stack;
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (u.has(i)) {
      each_arg_tensor(t, n, false, [&](uint32_t x) {
        if (s.state[x] != 0) return;
        s.state[x] = 1;
        if (last_writer[x] != kNone32 && !u.has(last_writer[x])) s.in.push_back({x, i, last_writer[x], u.backward[i]});
      });
      each_arg_tensor(t, n, true, [&](uint32_t x) {
        if (s.state[x] == 0) s.state[x] = 2;
      });
    } else {
      for (uint32_t a = n.inputs; a < n.inputs + n.num_inputs; ++a) stack.push_back(a);
      while (!stack.empty()) {
        const uint32_t at = stack.back();
        stack.pop_back();
        const Value& v = t.values[at];
        if (v.kind == ValueKind::Tensor && last_writer[v.ref] != kNone32 && u.has(last_writer[v.ref])) {
          s.rebind.push_back(at);
          if (!is_out[v.ref]) {
            is_out[v.ref] = true;
            s.out.push_back({v.ref, last_writer[v.ref], i, u.backward[last_writer[v.ref]]});
          }
        }
        if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple)
          for (uint32_t c = 0; c < v.count; ++c) stack.push_back(v.ref + c);
      }
    }
    each_arg_tensor(t, n, true, [&](uint32_t x) { last_writer[x] = i; });
  }
  std::sort(s.out.begin(), s.out.end(), [](const SeamOut& a, const SeamOut& b) { return a.writer < b.writer; });
  return s;
}

bool same_shape(const Trace& a, uint32_t x, const Trace& b, uint32_t y) {
  const Tensor &p = a.tensors[x], &q = b.tensors[y];
  if (a.str(p.dtype) != b.str(q.dtype) || p.rank != q.rank) return false;
  auto dp = a.dims(p), dq = b.dims(q);
  return std::equal(dp.begin(), dp.end(), dq.begin());
}

std::string tensor_text(const Trace& t, uint32_t x) {
  const Tensor& v = t.tensors[x];
  std::string dims;
  for (int64_t d : t.dims(v)) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  return "tensor " + std::to_string(v.id) + " [" + dims + "] " + std::string(t.str(v.dtype));
}

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

Fresh::Fresh(const Trace& t) {
  for (const Tensor& x : t.tensors) {
    next_id = std::max(next_id, x.id + 1);
    next_storage = std::max(next_storage, x.storage_id + 1);
  }
  for (const Node& n : t.nodes) next_id = std::max(next_id, n.id + 1);
}

namespace {

int64_t remap_id(std::unordered_map<int64_t, int64_t>& m, int64_t old, int64_t& next) {
  auto [it, fresh] = m.try_emplace(old, next);
  if (fresh) ++next;
  return it->second;
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
    if (v.kind == ValueKind::Tensor && v.ref < remap.size() && remap[v.ref] != kNone32) v.ref = remap[v.ref];
    if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple) v.ref = copy_args(t, v.ref, v.count, remap);
    t.values[out + k] = v;
  }
  return out;
}

}  // namespace

uint32_t fresh_tensor(Trace& t, uint32_t x, std::unordered_map<int64_t, int64_t>& ids,
                      std::unordered_map<int64_t, int64_t>& storages, Fresh& f, bool own_storage) {
  Tensor n = t.tensors[x];
  n.id = remap_id(ids, n.id, f.next_id);
  if (own_storage && n.storage_id != 0) n.storage_id = remap_id(storages, n.storage_id, f.next_storage);
  t.tensors.push_back(n);
  return static_cast<uint32_t>(t.tensors.size() - 1);
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

NodeImporter::NodeImporter(Trace& into, const Trace& from, std::vector<uint32_t> map, int64_t seq_shift)
    : to_(into),
      from_(from),
      map_(std::move(map)),
      strs_(from.strings.size(), kNone32),
      fresh_(into),
      seq_shift_(seq_shift) {
  map_.resize(from.tensors.size(), kNone32);
}

StrId NodeImporter::str(StrId s) {
  if (s == 0) return 0;
  if (strs_[s] == kNone32) strs_[s] = to_.strings.intern(from_.str(s));
  return strs_[s];
}

uint32_t NodeImporter::tensor(uint32_t x) {
  if (map_[x] != kNone32) return map_[x];
  const Tensor& src = from_.tensors[x];
  Tensor n = src;
  n.id = remap_id(ids_, src.id, fresh_.next_id);
  n.storage_id = src.storage_id == 0 ? 0 : remap_id(storages_, src.storage_id, fresh_.next_storage);
  n.device = str(src.device);
  n.dtype = str(src.dtype);
  n.dims = static_cast<uint32_t>(to_.ints.size());
  for (int64_t d : from_.dims(src)) to_.ints.push_back(d);
  if (src.has_strides) {
    n.strides = static_cast<uint32_t>(to_.ints.size());
    for (uint32_t k = 0; k < src.rank; ++k) to_.ints.push_back(from_.ints[src.strides + k]);
  }
  to_.tensors.push_back(n);
  return map_[x] = static_cast<uint32_t>(to_.tensors.size() - 1);
}

uint32_t NodeImporter::values(uint32_t first, uint32_t count) {
  const uint32_t out = static_cast<uint32_t>(to_.values.size());
  for (uint32_t k = 0; k < count; ++k) {
    to_.values.push_back(from_.values[first + k]);
    to_.arg_types.push_back(first + k < from_.arg_types.size() ? str(from_.arg_types[first + k]) : 0);
  }
  for (uint32_t k = 0; k < count; ++k) {
    Value v = to_.values[out + k];
    if (v.kind == ValueKind::Tensor) v.ref = tensor(v.ref);
    if (v.kind == ValueKind::String || v.kind == ValueKind::Device) v.ref = str(v.ref);
    if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple) v.ref = values(v.ref, v.count);
    to_.values[out + k] = v;
  }
  return out;
}

Node NodeImporter::node(uint32_t i) {
  Node n = from_.nodes[i];
  n.name = str(n.name);
  n.op_schema = str(n.op_schema);
  n.kernel_backend = str(n.kernel_backend);
  n.kernel_file = str(n.kernel_file);
  n.tensor_range = str(n.tensor_range);
  n.inputs = values(n.inputs, n.num_inputs);
  n.outputs = values(n.outputs, n.num_outputs);
  const uint32_t attrs = static_cast<uint32_t>(to_.attrs.size());
  for (uint32_t a = 0; a < n.num_attrs; ++a) {
    Attr x = from_.attrs[n.attrs + a];
    x.name = str(x.name);
    x.type = str(x.type);
    x.value = values(x.value, 1);
    to_.attrs.push_back(x);
  }
  n.attrs = attrs;
  if (n.seq_id >= 0) n.seq_id += seq_shift_;
  n.fw_parent = 0;  // another trace's ids
  n.fields &= static_cast<uint16_t>(~kHasFwParent);
  n.collective = -1;
  n.num_children = 0;
  return n;
}

namespace {

// Where a collective's sequence number is written: its positional argument (before the process group, rank and name;
// or the first item of [seq, isP2P]) and a `seq` attribute, when present.
std::vector<uint32_t> seq_values(const Trace& t, const Node& n) {
  std::vector<uint32_t> at;
  for (uint32_t k = 0; k < n.num_inputs; ++k)
    if (t.values[n.inputs + k].kind == ValueKind::String) {
      if (k >= 3) {
        const uint32_t v = n.inputs + k - 3;
        const Value& x = t.values[v];
        if (x.kind == ValueKind::Int) at.push_back(v);
        if ((x.kind == ValueKind::List || x.kind == ValueKind::Tuple) && x.count > 0 &&
            t.values[x.ref].kind == ValueKind::Int)
          at.push_back(x.ref);
      }
      break;
    }
  for (const Attr& a : t.node_attrs(n))
    if (t.str(a.name) == "seq" && t.values[a.value].kind == ValueKind::Int) at.push_back(a.value);
  return at;
}

}  // namespace

void renumber_collective_seqs(Trace& t) {
  struct Counter {
    int64_t prev = INT64_MIN, shift = 0;
  };
  std::unordered_map<std::string, Counter> groups;
  std::vector<int64_t> seq(t.collectives.size(), INT64_MIN);
  bool changed = false;
  for (size_t c = 0; c < t.collectives.size(); ++c) {  // in node order
    const Collective& col = t.collectives[c];
    if (col.seq < 0) continue;
    if (col.is_wait) {
      if (col.waits_for >= 0) seq[c] = seq[static_cast<size_t>(col.waits_for)];
    } else {
      Counter& g = groups[col.pg_name + (col.p2p ? "/p2p" : "")];
      int64_t s = col.seq + g.shift;
      if (g.prev != INT64_MIN && s <= g.prev) {
        g.shift += g.prev + 1 - s;
        s = g.prev + 1;
      }
      g.prev = seq[c] = s;
    }
    changed = changed || (seq[c] != INT64_MIN && seq[c] != col.seq);
  }
  if (!changed) return;
  for (size_t c = 0; c < seq.size(); ++c)
    if (seq[c] != INT64_MIN)
      for (uint32_t v : seq_values(t, t.nodes[t.collectives[c].node])) t.values[v].i = seq[c];
  reindex(t);
}

size_t graft(Trace& into, const Trace& from) {
  std::vector<uint32_t> threads;
  for (uint32_t i = 0; i < into.nodes.size(); ++i)
    if (into.nodes[i].kind == NodeKind::Thread) threads.push_back(i);
  if (threads.empty()) throw UserError(into.source + ": no thread node to append to");
  int64_t max_step = -1;
  for (const Iteration& it : into.iterations)
    if (it.profiler_step) max_step = std::max(max_step, it.step);
  int64_t seq_shift = 0;
  for (const Node& n : into.nodes) seq_shift = std::max(seq_shift, n.seq_id + 1);
  NodeImporter g(into, from, {}, seq_shift);
  // One insertion after the last top-level node of the target (in id order, over every thread), so the grafted ops
  // run after all of the target's; each top-level copy goes under the target's thread of its tid afterwards.
  Insertion in;
  std::unordered_map<uint32_t, int> pos;         // source node -> index in the insertion
  std::vector<std::pair<size_t, int64_t>> tops;  // insertion index, tid
  size_t added = 0;
  for (uint32_t i = 0; i < from.nodes.size(); ++i) {
    const Node& n = from.nodes[i];
    if (n.kind == NodeKind::Root || n.kind == NodeKind::Thread) continue;
    uint32_t top = i;
    while (from.nodes[top].parent != kNone32 && from.nodes[from.nodes[top].parent].kind != NodeKind::Thread &&
           from.nodes[from.nodes[top].parent].kind != NodeKind::Root)
      top = from.nodes[top].parent;
    if (from.name(from.nodes[top]) == "## process_group:init ##") continue;
    Node copy = g.node(i);
    if (from.name(n).rfind("ProfilerStep#", 0) == 0)
      copy.name = into.strings.intern("ProfilerStep#" + std::to_string(++max_step));
    pos[i] = static_cast<int>(in.nodes.size());
    auto p = i == top ? pos.end() : pos.find(n.parent);
    if (i == top) tops.push_back({in.nodes.size(), n.tid});
    in.parent.push_back(p == pos.end() ? -1 : p->second);
    in.nodes.push_back(copy);
    ++added;
  }
  if (added == 0) throw UserError(from.source + ": no ops to append");
  uint32_t last = kNone32;
  for (uint32_t th : threads)
    for (uint32_t c : into.children(into.nodes[th])) last = last == kNone32 ? c : std::max(last, c);
  if (last == kNone32) throw UserError(into.source + ": no ops to append after");
  in.anchor = last;
  std::vector<Insertion> ins;
  ins.push_back(std::move(in));
  const std::vector<int64_t> ids = insert_nodes(into, std::move(ins)).front();
  std::unordered_map<int64_t, int64_t> thread_of_tid;
  for (const Node& n : into.nodes)
    if (n.kind == NodeKind::Thread) thread_of_tid.emplace(n.tid, n.id);
  bool moved = false;
  for (const auto& [k, tid] : tops) {
    auto th = thread_of_tid.find(tid);
    const uint32_t node = into.find(ids[k]);
    if (th != thread_of_tid.end() && node != kNone32 && into.nodes[node].parent_id != th->second) {
      into.nodes[node].parent_id = th->second;
      moved = true;
    }
  }
  if (moved) reindex(into);
  into.kineto.reset();
  return added;
}

}  // namespace reprise::gen
