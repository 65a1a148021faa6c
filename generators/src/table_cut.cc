#include "table_cut.h"

#include <algorithm>

#include "reprise/common/error.h"
#include "workspace.h"

namespace reprise::gen {
namespace {

bool is_one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Ops that only make a view of their input: they go when nothing kept reads what they return.
bool view_op(std::string_view name) {
  return is_one_of(
      name, {"aten::select", "aten::slice", "aten::narrow", "aten::as_strided", "aten::unbind", "aten::split",
             "aten::chunk", "aten::view", "aten::reshape", "aten::_reshape_alias", "aten::permute", "aten::transpose",
             "aten::t", "aten::squeeze", "aten::unsqueeze", "aten::expand", "aten::detach", "aten::alias"});
}

bool wrapper_kind(NodeKind k) {
  return k == NodeKind::Root || k == NodeKind::Thread || k == NodeKind::Annotation || k == NodeKind::Autograd;
}

}  // namespace

bool embedding_op(std::string_view name) {
  return is_one_of(
      name, {"aten::embedding_bag", "aten::_embedding_bag", "aten::_embedding_bag_forward_only", "aten::embedding"});
}

void TableCut::find_units() {
  unit_of_.assign(t_.nodes.size(), kNone32);
  for (uint32_t i = 0; i < t_.nodes.size(); ++i) {
    const Node& n = t_.nodes[i];
    const uint32_t p = n.parent;
    if (p != kNone32 && unit_of_[p] != kNone32) {
      unit_of_[i] = unit_of_[p];  // parents come before children in id order
    } else if (!wrapper_kind(n.kind) && (p == kNone32 || p == i || wrapper_kind(t_.nodes[p].kind))) {
      unit_of_[i] = static_cast<uint32_t>(units_.size());
      units_.push_back(i);
      members_.emplace_back();
    }
    if (unit_of_[i] != kNone32) members_[unit_of_[i]].push_back(i);
  }
  removed_.assign(units_.size(), false);
}

size_t TableCut::count_tables() {
  if (counted_) return tables_.size();
  counted_ = true;
  find_units();
  std::map<int64_t, size_t> table_index;
  for (uint32_t u = 0; u < units_.size(); ++u) {
    const Node& n = t_.nodes[units_[u]];
    if (!embedding_op(t_.name(n)) || n.num_inputs < 2 || t_.inputs(n)[0].kind != ValueKind::Tensor) continue;
    const int64_t weight = t_.tensors[t_.inputs(n)[0].ref].storage_id;
    auto [it, fresh] = table_index.try_emplace(weight, tables_.size());
    if (fresh) tables_.push_back(weight);
    lookups_.push_back({u, it->second});
  }
  if (tables_.empty()) {
    std::string other;  // table-batched lookups hold every table in one op
    for (uint32_t u = 0; u < units_.size() && other.empty(); ++u)
      if (t_.name(t_.nodes[units_[u]]).find("embedding") != std::string_view::npos)
        other = std::string(t_.name(t_.nodes[units_[u]]));
    const bool dense = op_base_name(other) == "dense_embedding_codegen_lookup_function";
    throw UserError("no embedding op (aten::embedding_bag, aten::embedding) reads a table" +
                    (other.empty() ? std::string()
                                   : "; " + other + " looks up every table in one op" +
                                         (dense ? ": data-parallel tables, alike on every rank"
                                                : ": a plan cannot place its tables, whose sizes the trace records "
                                                  "only summed (tables: reshard shards them)")));
  }
  return tables_.size();
}

// The weights embedding ops read are the tables; those `keep` names stay. The removed ones' weights and the other
// inputs only they read (their indices, per-sample weights) hold removed data from the start. Data is followed by
// tensor record, not storage: freed storages' ids are reused (for scalars wrapped as tensors, gradients made
// without a recorded op), and a view of removed data is the output of an op that goes.
void TableCut::taint_removed_tables(const std::function<bool(size_t)>& keep) {
  count_tables();
  tainted_.assign(t_.tensors.size(), false);
  std::vector<bool> kept_reads(t_.tensors.size(), false);
  for (auto [u, table] : lookups_) {
    const bool kept = keep(table);
    removed_[u] = !kept;
    if (!kept) continue;
    each_arg_tensor(t_, t_.nodes[units_[u]], false, [&](uint32_t r) { kept_reads[r] = true; });
    kept_embeddings_.push_back(t_.nodes[units_[u]].id);
  }
  for (auto [u, table] : lookups_)
    if (removed_[u])
      each_arg_tensor(t_, t_.nodes[units_[u]], false, [&](uint32_t r) { tainted_[r] = tainted_[r] || !kept_reads[r]; });
}

// In execution order: an op reading removed data goes and what it writes holds removed data; a list that mixes
// removed and kept elements loses the removed ones. What a kept op writes is clean (a record's ids may be reused).
// An op's data comes through its own arguments: the ops nested in it read those or what they made themselves, and
// a temporary the profiler did not see being made (a scalar wrapped as a tensor) can carry the ids of a record an
// earlier op wrote, so the nested ops' reads are not followed.
void TableCut::remove_tainted() {
  for (uint32_t u = 0; u < units_.size(); ++u) {
    const Node& n = t_.nodes[units_[u]];
    std::vector<Prune> prunes;
    bool remove = removed_[u];
    for (uint32_t k = 0; k < n.num_inputs && !remove; ++k) {
      const Value& v = t_.values[n.inputs + k];
      if (v.kind == ValueKind::Tensor) remove = tainted_[v.ref];
      if (v.kind != ValueKind::List) continue;
      Prune p{n.inputs + k, {}};
      for (const Value& e : t_.items(v))
        if (e.kind == ValueKind::Tensor && tainted_[e.ref]) p.drop.insert(e.ref);
      if (p.drop.empty()) continue;
      if (p.drop.size() == v.count) remove = true;
      prunes.push_back(std::move(p));
    }
    removed_[u] = remove;
    for (uint32_t i : members_[u]) each_arg_tensor(t_, t_.nodes[i], true, [&](uint32_t r) { tainted_[r] = remove; });
    if (!remove)
      for (Prune& p : prunes) prunes_[p.list] = std::move(p);
  }
}

// A kept view whose results only removed ops read goes too (the rows of a removed table's gradient); of a list of
// views (unbind), the elements only removed ops read go. Returns whether anything changed.
bool TableCut::remove_dead_views() {
  std::vector<uint8_t> read(t_.tensors.size(), 0);  // bit 0: a kept op reads it, bit 1: a removed one
  const std::vector<bool> gone = gone_nodes();
  for (uint32_t i = 0; i < t_.nodes.size(); ++i)               // ops read through their arguments, as above
    if (unit_op(i) || t_.nodes[i].kind == NodeKind::Autograd)  // autograd functions go with their ops
      each_arg_tensor(t_, t_.nodes[i], false, [&](uint32_t r) { read[r] |= gone[i] ? 2 : 1; });
  bool changed = false;
  for (uint32_t u = 0; u < units_.size(); ++u) {
    if (removed_[u] || !view_op(t_.name(t_.nodes[units_[u]]))) continue;
    const Node& n = t_.nodes[units_[u]];
    size_t outputs = 0, only_removed = 0;
    each_arg_tensor(t_, n, true, [&](uint32_t r) {
      ++outputs;
      only_removed += read[r] == 2;
    });
    if (only_removed == 0) continue;
    if (only_removed == outputs) {
      removed_[u] = changed = true;
      continue;
    }
    for (uint32_t k = 0; k < n.num_outputs; ++k) {
      const Value& v = t_.values[n.outputs + k];
      if (v.kind != ValueKind::List || prunes_.count(n.outputs + k)) continue;
      Prune p{n.outputs + k, {}};
      for (const Value& e : t_.items(v))
        if (e.kind == ValueKind::Tensor && read[e.ref] == 2) p.drop.insert(e.ref);
      if (!p.drop.empty()) {
        prunes_[p.list] = std::move(p);
        changed = true;
      }
    }
  }
  return changed;
}

// select(x, dim, k) over rows some of which went: the kept ones are renumbered among the rows that stay.
void TableCut::compact_selects() {
  std::map<std::tuple<uint32_t, int64_t>, std::vector<uint32_t>> groups;  // (input, dim) -> units
  for (uint32_t u = 0; u < units_.size(); ++u) {
    const Node& n = t_.nodes[units_[u]];
    Span<Value> in = t_.inputs(n);
    if (t_.name(n) != "aten::select" || in.size() < 3 || in[0].kind != ValueKind::Tensor ||
        in[1].kind != ValueKind::Int || in[2].kind != ValueKind::Int)
      continue;
    groups[{in[0].ref, in[1].i}].push_back(u);
  }
  for (auto& [key, members] : groups) {
    std::vector<int64_t> gone;
    for (uint32_t u : members)
      if (removed_[u]) gone.push_back(t_.inputs(t_.nodes[units_[u]])[2].i);
    if (gone.empty()) continue;
    for (uint32_t u : members) {
      if (removed_[u]) continue;
      Value& index = t_.values[t_.nodes[units_[u]].inputs + 2];
      index.i -= std::count_if(gone.begin(), gone.end(), [&](int64_t g) { return g < index.i; });
      compacted_.push_back(t_.nodes[units_[u]].id);
    }
  }
}

void TableCut::apply() {
  for (auto& [list, p] : prunes_) {
    std::vector<Value> keep;
    for (const Value& e : t_.items(t_.values[list]))
      if (!(e.kind == ValueKind::Tensor && p.drop.count(e.ref))) keep.push_back(e);
    replace_list(t_, list, keep);
  }
  std::vector<bool> keep = gone_nodes();
  keep.flip();
  keep_nodes(t_, keep);
}

std::vector<bool> TableCut::gone_nodes() const {
  std::vector<bool> gone(t_.nodes.size(), false);
  std::vector<uint8_t> below(t_.nodes.size(), 0);                        // bit 0: an op below, bit 1: a kept op below
  for (uint32_t i = static_cast<uint32_t>(t_.nodes.size()); i-- > 0;) {  // children after their parents
    const uint32_t u = unit_of_[i], p = t_.nodes[i].parent;
    if (u != kNone32) below[i] = removed_[u] ? 1 : 3;
    gone[i] = u != kNone32 ? removed_[u] : t_.nodes[i].kind == NodeKind::Autograd && below[i] == 1;
    if (p != kNone32 && p != i) below[p] |= below[i];
  }
  return gone;
}

size_t TableCut::run(const std::function<bool(size_t)>& keep, bool apply_cut) {
  taint_removed_tables(keep);
  remove_tainted();
  while (remove_dead_views()) {
  }
  if (apply_cut) {
    compact_selects();
    apply();
  }
  return static_cast<size_t>(std::count(removed_.begin(), removed_.end(), true));
}

void replace_list(Trace& t, uint32_t at, const std::vector<Value>& items) {
  Value now = t.values[at];
  now.ref = static_cast<uint32_t>(t.values.size());
  now.count = static_cast<uint32_t>(items.size());
  t.values.insert(t.values.end(), items.begin(), items.end());
  t.arg_types.resize(t.values.size(), 0);
  t.values[at] = now;
  if (t.arg_types[at] == 0) return;
  std::string type = "GenericList[";
  for (size_t k = 0; k < items.size(); ++k)
    type += (k ? "," : "") + (items[k].kind == ValueKind::Tensor
                                  ? "Tensor(" + std::string(t.str(t.tensors[items[k].ref].dtype)) + ")"
                                  : std::string(value_kind_name(items[k].kind)));
  t.arg_types[at] = t.strings.intern(type + "]");
}

// After shape inference: the results of selects whose row changed start where their new row does.
void place_selects(Trace& t, const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    const uint32_t i = t.find(id);
    if (i == kNone32) continue;
    const Node& n = t.nodes[i];
    Span<Value> in = t.inputs(n), out = t.outputs(n);
    if (out.empty() || out[0].kind != ValueKind::Tensor) continue;
    const Tensor& x = t.tensors[in[0].ref];
    const std::vector<int64_t> strides = t.strides(x);
    const int64_t d = in[1].i < 0 ? in[1].i + static_cast<int64_t>(strides.size()) : in[1].i;
    if (d < 0 || d >= static_cast<int64_t>(strides.size())) continue;
    const int64_t offset = x.offset + in[2].i * strides[static_cast<size_t>(d)];
    t.tensors[out[0].ref].offset = offset;
    for (uint32_t c : t.children(n)) {  // as_strided(self, size, stride, storage_offset)
      const Node& s = t.nodes[c];
      if (t.name(s) == "aten::as_strided" && s.num_inputs > 3 && t.values[s.inputs + 3].kind == ValueKind::Int)
        t.values[s.inputs + 3].i = offset;
    }
  }
}

namespace {

// A tensor record's first dimension grows `factor` times (offsets with a trailing end offset keep one end).
void grow_rows(Trace& t, uint32_t r, int64_t factor, bool end_offset) {
  Tensor& x = t.tensors[r];
  if (x.rank == 0) return;
  std::vector<int64_t> dims(t.dims(x).begin(), t.dims(x).end());
  dims[0] = end_offset ? (dims[0] - 1) * factor + 1 : dims[0] * factor;
  set_dims(t, x, dims);
}

}  // namespace

// The index, offset and per-sample-weight tensors of the kept lookups cover an f times larger global batch. They
// must come from outside the iteration (a data loader's output): a tensor an op of the trace makes would be made
// again at its recorded size.
size_t grow_lookups(Trace& t, const std::vector<int64_t>& embedding_ids, int64_t factor) {
  std::vector<bool> grown(t.tensors.size(), false);
  std::vector<uint32_t> producer(t.tensors.size(), kNone32);  // the first node that returns it
  for (uint32_t i = static_cast<uint32_t>(t.nodes.size()); i-- > 0;)
    each_arg_tensor(t, t.nodes[i], true, [&](uint32_t r) { producer[r] = i; });
  size_t count = 0;
  for (int64_t id : embedding_ids) {
    const uint32_t i = t.find(id);
    const Node& n = t.nodes[i];
    Span<Value> in = t.inputs(n);
    const bool bag = t.name(n) != "aten::embedding";
    const bool end_offset = bag && in.size() > 7 && in[7].kind == ValueKind::Bool && in[7].i != 0;
    const std::vector<size_t> positions = bag ? std::vector<size_t>{1, 2, 6} : std::vector<size_t>{1};
    for (size_t k : positions) {
      if (k >= in.size() || in[k].kind != ValueKind::Tensor || grown[in[k].ref]) continue;
      const uint32_t r = in[k].ref;
      if (producer[r] < i)
        throw UserError("node " + std::to_string(n.id) + " (" + std::string(t.name(n)) + ") looks up indices node " +
                        std::to_string(t.nodes[producer[r]].id) +
                        " makes in the iteration: only indices read from outside it are resharded");
      grow_rows(t, r, factor, k == 2 && end_offset);
      grown[r] = true;
      ++count;
    }
  }
  return count;
}

size_t collective_count(const Trace& t) {
  return static_cast<size_t>(
      std::count_if(t.collectives.begin(), t.collectives.end(), [](const Collective& c) { return !c.is_wait; }));
}

}  // namespace reprise::gen
