#include "trace_graft.h"

#include <algorithm>
#include <unordered_map>

#include "perturb_edit.h"
#include "reprise/common/error.h"

namespace reprise::gen {
namespace {

class Grafter {
 public:
  Grafter(Trace& into, const Trace& from) : to_(into), from_(from), strs_(from.strings.size(), kNone32) {
    for (const Tensor& x : into.tensors) {
      next_id_ = std::max(next_id_, x.id + 1);
      next_storage_ = std::max(next_storage_, x.storage_id + 1);
    }
    for (const Node& n : into.nodes) {
      next_id_ = std::max(next_id_, n.id + 1);
      seq_shift_ = std::max(seq_shift_, n.seq_id + 1);
    }
  }

  StrId str(StrId s) {
    if (s == 0) return 0;
    if (strs_[s] == kNone32) strs_[s] = to_.strings.intern(from_.str(s));
    return strs_[s];
  }

  uint32_t tensor(uint32_t x) {
    auto [it, fresh] = tensors_.try_emplace(x, 0);
    if (!fresh) return it->second;
    const Tensor& src = from_.tensors[x];
    Tensor n = src;
    n.id = remap(ids_, src.id, next_id_);
    n.storage_id = src.storage_id == 0 ? 0 : remap(storages_, src.storage_id, next_storage_);
    n.device = str(src.device);
    n.dtype = str(src.dtype);
    n.dims = static_cast<uint32_t>(to_.ints.size());
    for (int64_t d : from_.dims(src)) to_.ints.push_back(d);
    if (src.has_strides) {
      n.strides = static_cast<uint32_t>(to_.ints.size());
      for (uint32_t k = 0; k < src.rank; ++k) to_.ints.push_back(from_.ints[src.strides + k]);
    }
    to_.tensors.push_back(n);
    return it->second = static_cast<uint32_t>(to_.tensors.size() - 1);
  }

  // `count` values from `first` of `from` (with their list items) appended to `into`'s pools.
  uint32_t values(uint32_t first, uint32_t count) {
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

  Node node(uint32_t i) {
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
    n.fw_parent = 0;
    n.fields &= static_cast<uint16_t>(~kHasFwParent);
    n.collective = -1;
    n.num_children = 0;
    return n;
  }

 private:
  static int64_t remap(std::unordered_map<int64_t, int64_t>& m, int64_t old, int64_t& next) {
    auto [it, fresh] = m.try_emplace(old, next);
    if (fresh) ++next;
    return it->second;
  }

  Trace& to_;
  const Trace& from_;
  std::vector<StrId> strs_;
  std::unordered_map<uint32_t, uint32_t> tensors_;
  std::unordered_map<int64_t, int64_t> ids_, storages_;
  int64_t next_id_ = 1, next_storage_ = 1, seq_shift_ = 0;
};

}  // namespace

size_t graft(Trace& into, const Trace& from) {
  std::vector<uint32_t> threads;
  for (uint32_t i = 0; i < into.nodes.size(); ++i)
    if (into.nodes[i].kind == NodeKind::Thread) threads.push_back(i);
  if (threads.empty()) throw UserError(into.source + ": no thread node to append to");
  int64_t max_step = -1;
  for (const Iteration& it : into.iterations)
    if (it.profiler_step) max_step = std::max(max_step, it.step);
  Grafter g(into, from);
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
