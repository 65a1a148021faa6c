#include "reshard.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

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

// The tables of one role and the ops that go with those it does not keep, and the edits the kept ones need.
class TableCut {
 public:
  explicit TableCut(Trace& t) : t_(t) {}

  // The role's tables (the distinct weights its embedding lookups read, in order of first use); throws UserError
  // (without a place) when no embedding op reads one.
  size_t count_tables();
  // Keeps the tables `keep` says (by index in that order) and returns the number of ops removed; throws UserError
  // (without a place) for a trace it cannot cut.
  size_t run(const std::function<bool(size_t table)>& keep);
  const std::vector<int64_t>& kept_embeddings() const { return kept_embeddings_; }  // node ids
  // After shape inference: the renumbered selects' results start where their new row does.
  void place_selects();

 private:
  void find_units();
  void taint_removed_tables(const std::function<bool(size_t)>& keep);
  void remove_tainted();
  bool remove_dead_views();
  void compact_selects();
  void apply();
  // Per node: whether it goes: a node of a removed op, or an autograd wrapper whose every op went (wrappers
  // without ops stay).
  std::vector<bool> gone_nodes() const;

  Trace& t_;
  bool counted_ = false;
  std::vector<uint32_t> units_;                 // nodes replay issues: the first below wrappers (autograd, annotations)
  std::vector<uint32_t> unit_of_;               // per node: index in units_ of its unit, kNone32 for wrappers
  std::vector<std::vector<uint32_t>> members_;  // per unit: its nodes (the op and those nested in it), in order
  std::vector<bool> removed_;                   // per unit
  std::vector<int64_t> tables_;                 // weight storages, in order of first use
  std::vector<std::pair<uint32_t, size_t>> lookups_;  // (unit, table) of each lookup
  std::vector<bool> tainted_;                         // per tensor record: holds data of removed tables
  std::map<uint32_t, Prune> prunes_;                  // by list value index
  std::vector<int64_t> compacted_;                    // node ids of the kept selects over rows some of which went
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
    throw UserError(
        "no embedding op (aten::embedding_bag, aten::embedding) reads a table" +
        (other.empty() ? std::string() : "; " + other + " looks up every table in one op, which is not resharded yet"));
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

size_t TableCut::run(const std::function<bool(size_t)>& keep) {
  taint_removed_tables(keep);
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

// One new role: `t` (a source role, already resized) keeps the tables `keep` names (by index among its `tables`, in
// order of first use), its kept lookups cover an f times larger global batch, and shapes follow on meta. Throws
// UserError without a place.
struct CutRole {
  size_t tables = 0, removed = 0, grown = 0;
  std::vector<std::string> notes;
};
CutRole cut_role(const Workspace& ws, Trace& t, const std::function<bool(size_t table, size_t tables)>& keep, int64_t f,
                 const std::vector<DimChange>& changes) {
  CutRole c;
  const size_t collectives = collective_count(t);
  TableCut cut(t);
  c.tables = cut.count_tables();
  c.removed = cut.run([&](size_t table) { return keep(table, c.tables); });
  if (collective_count(t) != collectives)
    throw UserError("removing the other tables' ops removes " + std::to_string(collectives - collective_count(t)) +
                    " collective(s): only tables whose ops run no collectives of their own are moved");
  const Trace recorded = clone(t);
  if (f > 1) c.grown = grow_lookups(t, cut.kept_embeddings(), f);
  c.notes = ws.infer_shapes(recorded, t, changes);
  cut.place_selects();
  reindex(t);
  return c;
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
    const size_t kept = static_cast<size_t>(slice);  // a structured binding is not captured before C++20
    CutRole c;
    try {
      c = cut_role(
          ws, t,
          [&](size_t table, size_t tables) {
            if (tables % static_cast<size_t>(f) != 0)
              throw UserError("its " + std::to_string(tables) + " embedding tables do not split into " +
                              std::to_string(f) + " equal slices");
            return table / (tables / static_cast<size_t>(f)) == kept;
          },
          f, changes);
    } catch (const UserError& e) {
      throw UserError(where + ": tables: reshard: " + role + ": " + e.what());
    }
    const int64_t per = static_cast<int64_t>(c.tables) / f, first = slice * per;
    ws.note("scale: tables: " + role + " keeps tables " + std::to_string(first) + ".." +
            std::to_string(first + per - 1) + " of " + std::to_string(c.tables) + " (" + std::to_string(c.removed) +
            " ops removed), " + std::to_string(c.grown) + " lookup tensor(s) x" + std::to_string(f) +
            ", propagated on meta");
    const std::vector<std::string>& notes = c.notes;
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

namespace {

bool uniform(const std::vector<int64_t>& splits) {
  return std::adjacent_find(splits.begin(), splits.end(), std::not_equal_to<>()) == splits.end();
}

bool is_all_to_all(const Collective& c) { return c.name == "all_to_all" || c.name == "all_to_allv"; }

// Elements of the first tensor among `values` (a list's first element counts): what a collective sends or receives,
// -1 when it records none.
int64_t first_numel(const Trace& t, Span<Value> values) {
  for (const Value& v : values) {
    if (v.kind == ValueKind::Tensor) return t.tensors[v.ref].numel;
    if (v.kind == ValueKind::List)
      for (const Value& e : t.items(v))
        if (e.kind == ValueKind::Tensor) return t.tensors[e.ref].numel;
  }
  return -1;
}

std::string list_text(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t k = 0; k < v.size(); ++k) s += (k ? "," : "") + std::to_string(v[k]);
  return s.empty() ? "none" : s;
}

struct Sized {
  int64_t in = 0, out = 0;
  std::vector<int64_t> in_splits, out_splits;
};

// The rows an all_to_all(v) of a placed role sends and receives, from its tensors after shape inference.
struct Exchange {
  size_t index = 0;                     // in Trace::collectives
  int64_t in_numel = 0, out_numel = 0;  // the tensors' elements as recorded
  int64_t in_rows = 0, out_rows = 0, in_width = 1, out_width = 1;
  bool in_changed = false, out_changed = false;
};

}  // namespace

void place_tables(Workspace& ws, const std::vector<int64_t>& plan, int64_t world_size, const std::string& where) {
  const int64_t n = ws.world_size(), m = world_size > 0 ? world_size : n;
  const std::string at = where + ": tables: ";
  if (m % n != 0)
    throw UserError(at + "world_size " + std::to_string(m) + " is not a multiple of the job's " + std::to_string(n) +
                    " ranks");
  if (!ws.infer_shapes)
    throw UserError(at + "placing tables needs shape inference on the meta device: use reprise-torch generate");
  const int64_t f = m / n;
  // Every source rank's tables: global table ids run over the ranks in order, each rank's in order of first use.
  std::vector<size_t> tables_of_role(ws.roles.size());
  std::string none;  // why the first role without tables has none (a table-batched lookup is named there)
  for (size_t r = 0; r < ws.roles.size(); ++r) {
    Trace probe = clone(ws.roles[r]);
    try {
      tables_of_role[r] = TableCut(probe).count_tables();
    } catch (const UserError& e) {
      tables_of_role[r] = 0;  // a rank that looks up nothing (every table placed elsewhere)
      if (none.empty()) none = e.what();
    }
  }
  std::vector<int64_t> first(static_cast<size_t>(n) + 1, 0);
  std::string held;
  for (int64_t s = 0; s < n; ++s) {
    const size_t count = tables_of_role[ws.role_of_rank[static_cast<size_t>(s)]];
    first[static_cast<size_t>(s) + 1] = first[static_cast<size_t>(s)] + static_cast<int64_t>(count);
    held += (s ? ", rank " : "rank ") + std::to_string(s) + ": " +
            (count ? std::to_string(first[static_cast<size_t>(s)]) + ".." +
                         std::to_string(first[static_cast<size_t>(s) + 1] - 1)
                   : std::string("none"));
  }
  const int64_t total = first.back();
  if (total == 0) throw UserError(at + none);
  if (static_cast<int64_t>(plan.size()) != total)
    throw UserError(at + "the plan places " + std::to_string(plan.size()) + " tables; the job has " +
                    std::to_string(total) + " (" + held + ")");
  std::vector<std::vector<int64_t>> holds(static_cast<size_t>(m));  // per new rank: global table ids
  for (size_t t = 0; t < plan.size(); ++t) {
    if (plan[t] < 0 || plan[t] >= m)
      throw UserError(at + "table " + std::to_string(t) + " is placed on rank " + std::to_string(plan[t]) +
                      ", not a rank of the " + std::to_string(m));
    holds[static_cast<size_t>(plan[t])].push_back(static_cast<int64_t>(t));
  }
  // Each new rank replays a source rank that holds all its tables: itself when it can (k mod n), else the first.
  auto covers = [&](int64_t s, const std::vector<int64_t>& ids) {
    const size_t count = tables_of_role[ws.role_of_rank[static_cast<size_t>(s)]];
    if (ids.empty()) return count == 0;
    return ids.front() >= first[static_cast<size_t>(s)] && ids.back() < first[static_cast<size_t>(s) + 1];
  };
  std::vector<int64_t> sources;
  for (int64_t k = 0; k < m; ++k) {
    const std::vector<int64_t>& ids = holds[static_cast<size_t>(k)];
    int64_t source = covers(k % n, ids) ? k % n : -1;
    for (int64_t s = 0; s < n && source < 0; ++s)
      if (covers(s, ids)) source = s;
    if (source >= 0) {
      sources.push_back(source);
      continue;
    }
    if (ids.empty())
      throw UserError(at + "rank " + std::to_string(k) +
                      " holds no table, and every source rank looks some up: a rank without tables replays a source "
                      "rank without them (" +
                      held + ")");
    throw UserError(at + "rank " + std::to_string(k) + " would hold tables " + list_text(ids) +
                    ", which no source rank holds together (" + held +
                    "): capture with every table on one rank (dlrm: --shards 0,0,...) to place them freely");
  }

  // How each all_to_all(v) is laid out, from the source: what a rank sends is the same for every peer (the pooled
  // embeddings: sender-uniform), or what it receives is (their gradients going back: receiver-uniform).
  std::map<size_t, std::pair<bool, bool>> layout;  // ordinal -> (sender-uniform, receiver-uniform)
  for (int64_t s = 0; s < n; ++s) {
    size_t ordinal = 0;
    for (const Collective& c : ws.roles[ws.role_of_rank[static_cast<size_t>(s)]].collectives) {
      if (c.is_wait || !is_all_to_all(c)) continue;
      auto [it, fresh] = layout.try_emplace(ordinal++, std::make_pair(true, true));
      it->second.first = it->second.first && uniform(c.in_splits);
      it->second.second = it->second.second && uniform(c.out_splits);
    }
  }

  resize_world(ws, sources, Scaling::Weak, where + ": tables");
  // Each (source role, tables held) is a role of its own.
  std::map<std::pair<uint32_t, std::vector<int64_t>>, uint32_t> role_of;
  std::vector<std::pair<uint32_t, int64_t>> made;  // (resized role, a new rank holding its tables)
  std::vector<uint32_t> role_of_rank;
  for (int64_t k = 0; k < m; ++k) {
    auto [it, fresh] = role_of.try_emplace({ws.role_of_rank[static_cast<size_t>(k)], holds[static_cast<size_t>(k)]},
                                           static_cast<uint32_t>(made.size()));
    if (fresh) made.push_back({ws.role_of_rank[static_cast<size_t>(k)], k});
    role_of_rank.push_back(it->second);
  }
  std::vector<DimChange> changes;
  if (m != n) changes.push_back({"world", n, m});
  std::vector<Trace> roles;
  std::vector<int64_t> source_rank;
  std::vector<std::vector<Exchange>> exchanges;
  for (size_t r = 0; r < made.size(); ++r) {
    const auto [old, rank] = made[r];
    const std::vector<int64_t>& ids = holds[static_cast<size_t>(rank)];
    const int64_t source = sources[static_cast<size_t>(rank)];
    const std::string role =
        "role " + std::to_string(r) + " (source rank " + std::to_string(source) + ", tables " + list_text(ids) + ")";
    Trace t = clone(ws.roles[old]);
    CutRole c;
    std::vector<Exchange> ex;
    for (const Collective& x : t.collectives)
      if (!x.is_wait && is_all_to_all(x)) {
        Exchange e;
        e.in_numel = first_numel(t, t.inputs(t.nodes[x.node]));
        e.out_numel = first_numel(t, t.outputs(t.nodes[x.node]));
        ex.push_back(e);
      }
    try {
      if (tables_of_role[old] > 0 || !ids.empty()) {
        const int64_t base = first[static_cast<size_t>(source)];
        c = cut_role(
            ws, t,
            [&](size_t table, size_t) {
              return std::binary_search(ids.begin(), ids.end(), base + static_cast<int64_t>(table));
            },
            f, changes);
      } else if (!changes.empty()) {
        const Trace recorded = clone(t);
        c.notes = ws.infer_shapes(recorded, t, changes);
      }
    } catch (const UserError& e) {
      throw UserError(at + role + ": " + e.what());
    }
    // The rows each all_to_all(v) now moves, from its tensors (the row width as resize_world kept it).
    size_t k = 0;
    for (size_t i = 0; i < t.collectives.size(); ++i) {
      const Collective& x = t.collectives[i];
      if (x.is_wait || !is_all_to_all(x)) continue;
      Exchange& e = ex.at(k++);
      e.index = i;
      const int64_t in = first_numel(t, t.inputs(t.nodes[x.node])), out = first_numel(t, t.outputs(t.nodes[x.node]));
      const Rows rin = rows_of(x.in_elems, x.in_splits, m), rout = rows_of(x.out_elems, x.out_splits, m);
      if (in < 0 || out < 0)
        throw UserError(at + role + ": its " + x.name + " #" + std::to_string(k) +
                        " records no tensors: what it moves cannot follow the tables");
      e.in_changed = in != e.in_numel;
      e.out_changed = out != e.out_numel;
      e.in_width = rin.width;
      e.out_width = rout.width;
      e.in_rows = in / rin.width;
      e.out_rows = out / rout.width;
    }
    ws.note("scale: tables: " + role + " holds " + std::to_string(ids.size()) + " of " + std::to_string(total) +
            " tables (" + std::to_string(c.removed) + " ops removed" +
            (f > 1 ? ", " + std::to_string(c.grown) + " lookup tensor(s) x" + std::to_string(f) : std::string()) + ")");
    for (const std::string& x : c.notes)
      if (ws.warn) ws.warn("scale: tables: " + role + ": " + x);
    roles.push_back(std::move(t));
    source_rank.push_back(ws.source_rank[old]);
    exchanges.push_back(std::move(ex));
  }
  // Re-laid exchanges: the uniform side from the rank's own tensors, the other from its peers'.
  for (size_t r = 0; r < roles.size(); ++r) {
    Trace& t = roles[r];
    std::vector<std::tuple<const Collective*, Sized, bool>> changes_of_role;
    for (size_t o = 0; o < exchanges[r].size(); ++o) {
      const Exchange& e = exchanges[r][o];
      const Collective& c = t.collectives[e.index];
      auto lay = layout.find(o);
      bool any_in = false, any_out = false;
      for (const std::vector<Exchange>& other : exchanges)
        if (o < other.size()) any_in |= other[o].in_changed, any_out |= other[o].out_changed;
      const bool sender = lay != layout.end() && lay->second.first && (!lay->second.second || any_in || !any_out);
      const bool receiver = !sender && lay != layout.end() && lay->second.second;
      const std::string what = c.name + " #" + std::to_string(o + 1);
      if (!sender && !receiver)
        throw UserError(at + "its " + what +
                        " sends and receives different rows to and from different peers: only exchanges where what "
                        "a rank sends (or receives) is the same for every peer follow the tables");
      Sized z;
      auto chunk = [&](size_t role) {
        const Exchange& x = exchanges[role].at(o);
        const int64_t rows = sender ? x.in_rows : x.out_rows;
        if (rows % m != 0)
          throw UserError(at + "role " + std::to_string(role) + ": its " + what + " moves " + std::to_string(rows) +
                          " rows, not a multiple of the " + std::to_string(m) + " ranks");
        return rows / m;
      };
      std::vector<int64_t>& own = sender ? z.in_splits : z.out_splits;
      std::vector<int64_t>& peers = sender ? z.out_splits : z.in_splits;
      own.assign(static_cast<size_t>(m), chunk(r));
      for (int64_t j = 0; j < m; ++j) peers.push_back(chunk(role_of_rank[static_cast<size_t>(j)]));
      int64_t in_rows = 0, out_rows = 0;
      for (int64_t x : z.in_splits) in_rows += x;
      for (int64_t x : z.out_splits) out_rows += x;
      const int64_t data = sender ? e.out_rows : e.in_rows, sum = sender ? out_rows : in_rows;
      if (data != sum)
        throw UserError(at + "role " + std::to_string(r) + ": its " + what + " would " +
                        (sender ? "receive " : "send ") + std::to_string(sum) +
                        " rows from its peers' tables, but its " + (sender ? "output" : "input") + " tensor holds " +
                        std::to_string(data));
      z.in = in_rows * e.in_width;
      z.out = out_rows * e.out_width;
      const bool even = uniform(z.in_splits) && uniform(z.out_splits) && z.in_splits.front() == z.out_splits.front();
      changes_of_role.emplace_back(&c, std::move(z), even);
    }
    for (auto& [c, z, even] : changes_of_role) {
      set_collective_sizes(t, *c, z.in, z.out, z.in_splits, z.out_splits);
      if (!even && c->name == "all_to_all") set_attr_string(t, c->node, "collective_name", "all_to_allv");
    }
    reindex(t);
  }
  ws.roles = std::move(roles);
  ws.source_rank = std::move(source_rank);
  ws.role_of_rank = std::move(role_of_rank);
  ws.work_changed();
}

}  // namespace reprise::gen
