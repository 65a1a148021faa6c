#include "reshard.h"

#include <algorithm>
#include <map>
#include <set>

#include "group_resize.h"
#include "reprise/common/error.h"

namespace reprise::gen {
namespace {

bool is_one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool embedding_op(std::string_view name) {
  return is_one_of(
      name, {"aten::embedding_bag", "aten::_embedding_bag", "aten::_embedding_bag_forward_only", "aten::embedding"});
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

// A list argument losing some elements: (value index of the list, element records to drop).
struct Prune {
  uint32_t list = 0;
  std::set<uint32_t> drop;
};

// One slice of one role: which ops of the trace go, and the edits the kept ones need.
class TableCut {
 public:
  TableCut(Trace& t, int64_t slice, int64_t slices) : t_(t), slice_(slice), slices_(slices) {}

  // Returns the number of ops removed; throws UserError (without a place) for a trace it cannot cut.
  size_t run();
  int64_t tables() const { return static_cast<int64_t>(tables_.size()); }
  int64_t first_kept() const { return slice_ * tables() / slices_; }
  const std::vector<int64_t>& kept_embeddings() const { return kept_embeddings_; }  // node ids
  // After shape inference: the renumbered selects' results start where their new row does.
  void place_selects();

 private:
  void find_units();
  void taint_removed_tables();
  void remove_tainted();
  bool remove_dead_views();
  void compact_selects();
  void apply();
  // Per node: whether it goes: a node of a removed op, or an autograd wrapper whose every op went (wrappers
  // without ops stay).
  std::vector<bool> gone_nodes() const;

  Trace& t_;
  int64_t slice_, slices_;
  std::vector<uint32_t> units_;                 // nodes replay issues: the first below wrappers (autograd, annotations)
  std::vector<uint32_t> unit_of_;               // per node: index in units_ of its unit, kNone32 for wrappers
  std::vector<std::vector<uint32_t>> members_;  // per unit: its nodes (the op and those nested in it), in order
  std::vector<bool> removed_;                   // per unit
  std::vector<int64_t> tables_;                 // weight storages, in order of first use
  std::vector<bool> tainted_;                   // per tensor record: holds data of removed tables
  std::map<uint32_t, Prune> prunes_;            // by list value index
  std::vector<int64_t> compacted_;              // node ids of the kept selects over rows some of which went
  std::vector<int64_t> kept_embeddings_;
};

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

// The weights embedding ops read are the tables; the slice's tables stay. The removed ones' weights and the other
// inputs only they read (their indices, per-sample weights) hold removed data from the start. Data is followed by
// tensor record, not storage: freed storages' ids are reused (for scalars wrapped as tensors, gradients made
// without a recorded op), and a view of removed data is the output of an op that goes.
void TableCut::taint_removed_tables() {
  std::map<int64_t, size_t> table_index;
  std::vector<std::pair<uint32_t, size_t>> lookups;  // unit, table
  for (uint32_t u = 0; u < units_.size(); ++u) {
    const Node& n = t_.nodes[units_[u]];
    if (!embedding_op(t_.name(n)) || n.num_inputs < 2 || t_.inputs(n)[0].kind != ValueKind::Tensor) continue;
    const int64_t weight = t_.tensors[t_.inputs(n)[0].ref].storage_id;
    auto [it, fresh] = table_index.try_emplace(weight, tables_.size());
    if (fresh) tables_.push_back(weight);
    lookups.push_back({u, it->second});
  }
  const size_t per = tables_.size() / static_cast<size_t>(slices_);
  if (tables_.empty()) {
    std::string other;  // table-batched lookups hold every table in one op
    for (uint32_t u = 0; u < units_.size() && other.empty(); ++u)
      if (t_.name(t_.nodes[units_[u]]).find("embedding") != std::string_view::npos)
        other = std::string(t_.name(t_.nodes[units_[u]]));
    throw UserError(
        "no embedding op (aten::embedding_bag, aten::embedding) reads a table" +
        (other.empty() ? std::string() : "; " + other + " looks up every table in one op, which is not resharded yet"));
  }
  if (tables_.size() % static_cast<size_t>(slices_) != 0)
    throw UserError("its " + std::to_string(tables_.size()) + " embedding tables do not split into " +
                    std::to_string(slices_) + " equal slices");
  tainted_.assign(t_.tensors.size(), false);
  std::vector<bool> kept_reads(t_.tensors.size(), false);
  for (auto [u, table] : lookups) {
    const bool kept = table / per == static_cast<size_t>(slice_);
    removed_[u] = !kept;
    if (!kept) continue;
    each_arg_tensor(t_, t_.nodes[units_[u]], false, [&](uint32_t r) { kept_reads[r] = true; });
    kept_embeddings_.push_back(t_.nodes[units_[u]].id);
  }
  for (auto [u, table] : lookups)
    if (removed_[u])
      each_arg_tensor(t_, t_.nodes[units_[u]], false, [&](uint32_t r) { tainted_[r] = tainted_[r] || !kept_reads[r]; });
}

// In execution order: an op reading removed data goes and what it writes holds removed data; a list that mixes
// removed and kept elements loses the removed ones. What a kept op writes is clean (a record's ids may be reused).
void TableCut::remove_tainted() {
  for (uint32_t u = 0; u < units_.size(); ++u) {
    std::vector<Prune> prunes;
    std::vector<uint32_t> written;  // inside the op, in order: a read of one of them is the op's own data
    bool remove = removed_[u];
    for (uint32_t i : members_[u]) {
      const Node& n = t_.nodes[i];
      for (uint32_t k = 0; k < n.num_inputs && !remove; ++k) {
        const Value& v = t_.values[n.inputs + k];
        if (v.kind == ValueKind::Tensor)
          remove = tainted_[v.ref] && std::find(written.begin(), written.end(), v.ref) == written.end();
        if (v.kind != ValueKind::List) continue;
        Prune p{n.inputs + k, {}};
        for (const Value& e : t_.items(v))
          if (e.kind == ValueKind::Tensor && tainted_[e.ref]) p.drop.insert(e.ref);
        if (p.drop.empty()) continue;
        if (p.drop.size() == v.count) remove = true;
        prunes.push_back(std::move(p));
      }
      each_arg_tensor(t_, n, true, [&](uint32_t r) { written.push_back(r); });
    }
    removed_[u] = remove;
    for (uint32_t r : written) tainted_[r] = remove;
    if (!remove)
      for (Prune& p : prunes) prunes_[p.list] = std::move(p);
  }
}

// A kept view whose results only removed ops read goes too (the rows of a removed table's gradient); of a list of
// views (unbind), the elements only removed ops read go. Returns whether anything changed.
bool TableCut::remove_dead_views() {
  std::vector<uint8_t> read(t_.tensors.size(), 0);  // bit 0: a kept op reads it, bit 1: a removed one
  const std::vector<bool> gone = gone_nodes();
  for (uint32_t i = 0; i < t_.nodes.size(); ++i)
    if (unit_of_[i] != kNone32 || t_.nodes[i].kind == NodeKind::Autograd)  // autograd functions go with their ops
      each_arg_tensor(t_, t_.nodes[i], false, [&](uint32_t r) { read[r] |= gone[i] ? 2 : 1; });
  bool changed = false;
  for (uint32_t u = 0; u < units_.size(); ++u) {
    if (removed_[u] || !view_op(t_.name(t_.nodes[units_[u]]))) continue;
    const Node& n = t_.nodes[units_[u]];
    // Its own nested ops read its input, never its outputs: a read of an output is someone else's.
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
    const Value old = t_.values[list];
    std::vector<Value> keep;
    for (const Value& e : t_.items(old))
      if (!(e.kind == ValueKind::Tensor && p.drop.count(e.ref))) keep.push_back(e);
    Value now = old;
    now.ref = static_cast<uint32_t>(t_.values.size());
    now.count = static_cast<uint32_t>(keep.size());
    t_.values.insert(t_.values.end(), keep.begin(), keep.end());
    t_.values[list] = now;
    std::string type = "GenericList[";
    for (size_t k = 0; k < keep.size(); ++k)
      type += (k ? "," : "") + (keep[k].kind == ValueKind::Tensor
                                    ? "Tensor(" + std::string(t_.str(t_.tensors[keep[k].ref].dtype)) + ")"
                                    : std::string(value_kind_name(keep[k].kind)));
    t_.arg_types.resize(t_.values.size(), 0);
    if (list < t_.arg_types.size() && t_.arg_types[list] != 0) t_.arg_types[list] = t_.strings.intern(type + "]");
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

size_t TableCut::run() {
  find_units();
  taint_removed_tables();
  remove_tainted();
  while (remove_dead_views()) {
  }
  compact_selects();
  apply();
  return static_cast<size_t>(std::count(removed_.begin(), removed_.end(), true));
}

void TableCut::place_selects() {
  for (int64_t id : compacted_) {
    const uint32_t i = t_.find(id);
    if (i == kNone32) continue;
    const Node& n = t_.nodes[i];
    Span<Value> in = t_.inputs(n), out = t_.outputs(n);
    if (out.empty() || out[0].kind != ValueKind::Tensor) continue;
    const Tensor& x = t_.tensors[in[0].ref];
    const std::vector<int64_t> strides = t_.strides(x);
    const int64_t d = in[1].i < 0 ? in[1].i + static_cast<int64_t>(strides.size()) : in[1].i;
    if (d < 0 || d >= static_cast<int64_t>(strides.size())) continue;
    const int64_t offset = x.offset + in[2].i * strides[static_cast<size_t>(d)];
    t_.tensors[out[0].ref].offset = offset;
    for (uint32_t c : t_.children(n)) {  // as_strided(self, size, stride, storage_offset)
      const Node& s = t_.nodes[c];
      if (t_.name(s) == "aten::as_strided" && s.num_inputs > 3 && t_.values[s.inputs + 3].kind == ValueKind::Int)
        t_.values[s.inputs + 3].i = offset;
    }
  }
}

// A tensor record's first dimension grows `factor` times (offsets with a trailing end offset keep one end).
void grow_rows(Trace& t, uint32_t r, int64_t factor, bool end_offset) {
  Tensor& x = t.tensors[r];
  if (x.rank == 0) return;
  std::vector<int64_t> dims(t.dims(x).begin(), t.dims(x).end());
  dims[0] = end_offset ? (dims[0] - 1) * factor + 1 : dims[0] * factor;
  x.dims = static_cast<uint32_t>(t.ints.size());
  t.ints.insert(t.ints.end(), dims.begin(), dims.end());
  x.numel = 1;
  for (int64_t d : dims) x.numel *= d;
}

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

}  // namespace

void reshard_tables(Workspace& ws, int64_t world_size, const std::string& where) {
  const int64_t n = ws.world_size();
  if (world_size <= n || world_size % n != 0)
    throw UserError(where + ": tables: reshard: world_size " + std::to_string(world_size) +
                    " is not a multiple (2 or more times) of the job's " + std::to_string(n) + " ranks");
  if (!ws.infer_shapes)
    throw UserError(where + ": tables: reshard needs shape inference on the meta device: use reprise-torch generate");
  const int64_t f = world_size / n;
  std::vector<int64_t> sources;
  for (int64_t k = 0; k < world_size; ++k) sources.push_back(k / f);
  resize_world(ws, sources, Scaling::Weak, where);

  // Each (role, slice) becomes a role of its own.
  std::map<std::pair<uint32_t, int64_t>, uint32_t> role_of;
  std::vector<std::pair<uint32_t, int64_t>> made;
  std::vector<uint32_t> role_of_rank;
  for (int64_t k = 0; k < world_size; ++k) {
    const std::pair<uint32_t, int64_t> key{ws.role_of_rank[static_cast<size_t>(k)], k % f};
    auto [it, fresh] = role_of.try_emplace(key, static_cast<uint32_t>(made.size()));
    if (fresh) made.push_back(key);
    role_of_rank.push_back(it->second);
  }
  std::vector<Trace> roles;
  std::vector<int64_t> source_rank;
  const std::vector<gen::DimChange> changes{{"world", n, world_size}};
  for (size_t r = 0; r < made.size(); ++r) {
    const auto [old, slice] = made[r];
    const std::string role = "role " + std::to_string(r) + " (source rank " + std::to_string(ws.source_rank[old]) +
                             ", tables slice " + std::to_string(slice + 1) + " of " + std::to_string(f) + ")";
    Trace t = clone(ws.roles[old]);
    const size_t collectives = collective_count(t);
    TableCut cut(t, slice, f);
    size_t removed = 0, grown = 0;
    std::vector<std::string> notes;
    try {
      removed = cut.run();
      if (collective_count(t) != collectives)
        throw UserError("removing the other tables' ops removes " + std::to_string(collectives - collective_count(t)) +
                        " collective(s): only tables whose ops run no collectives of their own are resharded");
      const Trace recorded = clone(t);
      grown = grow_lookups(t, cut.kept_embeddings(), f);
      notes = ws.infer_shapes(recorded, t, changes);
      cut.place_selects();
    } catch (const UserError& e) {
      throw UserError(where + ": tables: reshard: " + role + ": " + e.what());
    }
    reindex(t);
    const int64_t per = cut.tables() / f;
    ws.note("scale: tables: " + role + " keeps tables " + std::to_string(cut.first_kept()) + ".." +
            std::to_string(cut.first_kept() + per - 1) + " of " + std::to_string(cut.tables()) + " (" +
            std::to_string(removed) + " ops removed), " + std::to_string(grown) + " lookup tensor(s) x" +
            std::to_string(f) + ", propagated on meta");
    for (const std::string& x : notes)
      if (ws.warn) ws.warn("scale: tables: " + role + ": " + x);
    roles.push_back(std::move(t));
    source_rank.push_back(ws.source_rank[old]);
  }
  ws.roles = std::move(roles);
  ws.source_rank = std::move(source_rank);
  ws.role_of_rank = std::move(role_of_rank);
  ws.work_changed();
}

}  // namespace reprise::gen
