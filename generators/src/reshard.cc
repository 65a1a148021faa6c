#include "reshard.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "group_resize.h"
#include "reprise/common/error.h"
#include "reprise/trace/table_batched.h"
#include "table_cut.h"
#include "table_move.h"

namespace reprise::gen {
namespace {

// One new role: `t` (a source role, already resized) keeps the tables `keep` names (by index among its `tables`, in
// order of first use), its kept lookups cover an f times larger global batch, and shapes follow on meta. Throws
// UserError without a place.
struct CutRole {
  size_t tables = 0, removed = 0, grown = 0;
  std::vector<std::string> notes;
};
// `transplant`, when given, adds other ranks' tables after the cut (their lookups and row selects by node id).
using AddTables = std::function<void(Trace& t, std::vector<int64_t>& lookups, std::vector<int64_t>& selects)>;
CutRole cut_role(const Workspace& ws, Trace& t, const std::function<bool(size_t table, size_t tables)>& keep, int64_t f,
                 const std::vector<DimChange>& changes, const AddTables& transplant = {}) {
  CutRole c;
  const size_t collectives = collective_count(t);
  TableCut cut(t);
  c.tables = cut.count_tables();
  c.removed = cut.run([&](size_t table) { return keep(table, c.tables); });
  if (collective_count(t) != collectives)
    throw UserError("removing the other tables' ops removes " + std::to_string(collectives - collective_count(t)) +
                    " collective(s): only tables whose ops run no collectives of their own are moved");
  std::vector<int64_t> lookups = cut.kept_embeddings(), selects = cut.compacted_selects();
  if (transplant) transplant(t, lookups, selects);
  const Trace recorded = clone(t);
  if (f > 1) c.grown = grow_lookups(t, lookups, f);
  c.notes = ws.infer_shapes(recorded, t, changes);
  place_selects(t, selects);
  reindex(t);
  return c;
}

// fbgemm's lookups of sharded tables (split_*, ssd_*); dense_* looks up data-parallel tables, alike on every rank.
bool sharded_table_batched(std::string_view name) {
  return is_table_batched_lookup(name) && op_base_name(name) != "dense_embedding_codegen_lookup_function";
}

bool has_sharded_table_batched(const Trace& t) {
  return std::any_of(t.nodes.begin(), t.nodes.end(), [&](const Node& n) { return sharded_table_batched(t.name(n)); });
}

// The tensors a table-batched lookup holds its tables in: the weights' halves and the optimizer's state (momentum1's
// from the lookup's reading; momentum2's, Adam's and LAMB's, by the schema's names: a lookup recorded without its
// schema keeps its momentum2 whole).
std::vector<TableBatchedArg> table_batched_holdings(const Trace& t, const Node& n, const TableBatchedLookup& l) {
  std::vector<TableBatchedArg> held{l.dev_weights, l.uvm_weights, l.momentum1_dev, l.momentum1_uvm};
  if (n.op_schema == 0) return held;
  const std::vector<std::string> names = schema_argument_names(t.str(n.op_schema));
  for (size_t k = 0; k < names.size(); ++k) {
    const int input = static_cast<int>(k);
    if (names[k] == "momentum2_dev" || names[k] == "momentum2_uvm" || names[k] == "momentum2_host")
      held.push_back(TableBatchedArg{input});
    if (names[k] == "momentum2") held.insert(held.end(), {TableBatchedArg{input, 0}, TableBatchedArg{input, 1}});
  }
  return held;
}

struct BatchedShard {
  size_t lookups = 0;
  double bytes_before = 0, bytes_after = 0;
};

// Each lookup of sharded tables holds 1/f of its tables' rows, on a world f times larger: its weights and optimizer
// state shrink f times (rounded up). Its lookups stay as recorded: T/f tables over an f times larger global batch
// look up as many rows and pool them into as many elements. The trace records the tables' sizes only summed, so which
// tables or rows a rank keeps is not known, only how much. Throws UserError (without a place) for a lookup it cannot
// read.
BatchedShard shard_table_batched(Trace& t, int64_t f) {
  BatchedShard s;
  std::vector<bool> done(t.tensors.size(), false);  // a tensor two lookups read shrinks once
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (!sharded_table_batched(t.name(n))) continue;
    const std::string op = "node " + std::to_string(n.id) + " (" + std::string(t.name(n)) + ")";
    TableBatchedLookup l;
    std::string why;
    if (!read_table_batched_lookup(t, i, l, &why)) throw UserError(op + ": " + why);
    double before = 0;
    // The tables' row width when they share one (total_D / tables): a slice holds whole rows.
    const int64_t width = l.tables > 0 && l.total_dim % l.tables == 0 ? l.total_dim / l.tables : 0;
    for (const TableBatchedArg& a : table_batched_holdings(t, n, l)) {
      const Value v = table_batched_value(t, n, a);
      if (v.kind != ValueKind::Tensor || done[v.ref]) continue;
      done[v.ref] = true;
      Tensor& x = t.tensors[v.ref];
      if (x.rank == 0 || x.numel == 0) continue;
      before += static_cast<double>(x.bytes());
      std::vector<int64_t> dims(t.dims(x).begin(), t.dims(x).end());
      if (x.rank == 1 && width > 1 && dims[0] % width == 0)  // rows of the width, flattened (a row-wise state is not)
        dims[0] = (dims[0] / width + f - 1) / f * width;
      else
        dims[0] = (dims[0] + f - 1) / f;
      set_dims(t, x, dims);
      s.bytes_after += static_cast<double>(x.bytes());
    }
    if (before == 0 && l.table_bytes == 0) throw UserError(op + ": its tables' weights are not recorded");
    s.bytes_before += before;
    ++s.lookups;
  }
  return s;
}

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g GB", bytes / 1e9);
  return text;
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

  // Each (role, slice) becomes a role of its own. A role whose tables are all in table-batched lookups stays one:
  // its f slices hold as much, and which tables each holds is not recorded.
  std::vector<int64_t> slices(ws.roles.size(), f);
  for (size_t r = 0; r < ws.roles.size(); ++r) {
    Trace probe = clone(ws.roles[r]);
    try {
      TableCut(probe).count_tables();
    } catch (const UserError&) {
      if (has_sharded_table_batched(probe)) slices[r] = 1;
    }
  }
  std::map<std::pair<uint32_t, int64_t>, uint32_t> role_of;
  std::vector<std::pair<uint32_t, int64_t>> made;
  std::vector<uint32_t> role_of_rank;
  for (int64_t k = 0; k < world_size; ++k) {
    const uint32_t old = ws.role_of_rank[static_cast<size_t>(k)];
    const std::pair<uint32_t, int64_t> key{old, k % slices[old]};
    auto [it, fresh] = role_of.try_emplace(key, static_cast<uint32_t>(made.size()));
    if (fresh) made.push_back(key);
    role_of_rank.push_back(it->second);
  }
  std::vector<Trace> roles;
  std::vector<int64_t> source_rank;
  const std::vector<gen::DimChange> changes{{"world", n, world_size}};
  // The role's table-batched lookups hold 1/f of their tables, and the bundle's notes say so.
  auto shard_batched = [&](const std::string& role, Trace& t) {
    BatchedShard b;
    try {
      b = shard_table_batched(t, f);
    } catch (const UserError& e) {
      throw UserError(where + ": tables: reshard: " + role + ": " + e.what());
    }
    ws.note("scale: tables: " + role + ": " + std::to_string(b.lookups) + " table-batched lookup(s) hold 1/" +
            std::to_string(f) + " of their tables (weights and optimizer state " + gigabytes(b.bytes_before) + " -> " +
            gigabytes(b.bytes_after) + "), their lookups as recorded");
  };
  for (size_t r = 0; r < made.size(); ++r) {
    const auto [old, slice] = made[r];
    const std::string source = "role " + std::to_string(r) + " (source rank " + std::to_string(ws.source_rank[old]);
    Trace t = clone(ws.roles[old]);
    if (slices[old] == 1) {  // table-batched lookups only
      shard_batched(source + ")", t);
      roles.push_back(std::move(t));
      source_rank.push_back(ws.source_rank[old]);
      continue;
    }
    const std::string role = source + ", tables slice " + std::to_string(slice + 1) + " of " + std::to_string(f) + ")";
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
    if (has_sharded_table_batched(t)) shard_batched(role, t);  // per-table lookups beside table-batched ones
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
  // Else the one holding most of them, the others' ops moved in from the ranks that hold them (Transplant).
  auto holder = [&](int64_t id) {
    return static_cast<int64_t>(std::upper_bound(first.begin(), first.end(), id) - first.begin()) - 1;
  };
  std::vector<int64_t> sources;
  bool moves = false;
  for (int64_t k = 0; k < m; ++k) {
    const std::vector<int64_t>& ids = holds[static_cast<size_t>(k)];
    int64_t source = covers(k % n, ids) ? k % n : -1;
    for (int64_t s = 0; s < n && source < 0; ++s)
      if (covers(s, ids)) source = s;
    if (source < 0 && ids.empty())
      throw UserError(at + "rank " + std::to_string(k) +
                      " holds no table, and every source rank looks some up: a rank without tables replays a source "
                      "rank without them (" +
                      held + ")");
    if (source < 0) {
      std::vector<int64_t> count(static_cast<size_t>(n), 0);
      for (int64_t id : ids) ++count[static_cast<size_t>(holder(id))];
      source = k % n;
      for (int64_t s = 0; s < n; ++s)
        if (count[static_cast<size_t>(s)] > count[static_cast<size_t>(source)]) source = s;
      moves = true;
    }
    sources.push_back(source);
  }
  // What moving a table needs: the source roles as they were, and the ops they share (by node id).
  std::vector<Trace> before;
  std::vector<uint32_t> before_role(ws.role_of_rank.begin(), ws.role_of_rank.end());
  std::map<uint32_t, std::vector<int64_t>> shared;  // by role before
  auto shared_of = [&](int64_t s) -> const std::vector<int64_t>& {
    const uint32_t role = before_role[static_cast<size_t>(s)];
    auto it = shared.find(role);
    if (it != shared.end()) return it->second;
    if (tables_of_role[role] < 2)
      throw UserError("source rank " + std::to_string(s) + " holds " + std::to_string(tables_of_role[role]) +
                      " table(s): a table is moved between ranks that hold two or more (with one, its ops cannot be "
                      "told from the shared ones); capture with every table on one rank to place them freely");
    return shared[role] = skeleton_of(before[role], tables_of_role[role]);
  };
  if (moves)
    for (const Trace& r : ws.roles) before.push_back(clone(r));

  // How each all_to_all(v) is laid out, from the source: what a rank sends is the same for every peer (the pooled
  // embeddings: sender-uniform), or what it receives is (their gradients going back: receiver-uniform).
  struct Layout {
    bool sender = true, receiver = true;  // uniform on that side on every rank
    bool bare = true;                     // recorded without splits on every rank
  };
  std::map<size_t, Layout> layout;  // by ordinal among the all_to_all(v)s
  for (int64_t s = 0; s < n; ++s) {
    size_t ordinal = 0;
    for (const Collective& c : ws.roles[ws.role_of_rank[static_cast<size_t>(s)]].collectives) {
      if (c.is_wait || !is_all_to_all(c)) continue;
      Layout& l = layout[ordinal++];
      l.sender = l.sender && uniform(c.in_splits);
      l.receiver = l.receiver && uniform(c.out_splits);
      l.bare = l.bare && c.in_splits.empty() && c.out_splits.empty();
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
    const int64_t base = first[static_cast<size_t>(source)], end = first[static_cast<size_t>(source) + 1];
    std::vector<int64_t> foreign;  // tables another source rank held: moved in
    for (int64_t id : ids)
      if (id < base || id >= end) foreign.push_back(id);
    try {
      AddTables move_in;
      if (!foreign.empty())
        move_in = [&](Trace& tt, std::vector<int64_t>& lookups, std::vector<int64_t>& selects) {
          Transplant tp(tt, shared_of(source));
          int64_t seq = 0;
          for (const Node& x : tt.nodes) seq = std::max(seq, x.seq_id + 1);
          size_t position = ids.size() - foreign.size();
          for (int64_t id : foreign) {
            const int64_t donor = holder(id);
            const Trace& from = before[before_role[static_cast<size_t>(donor)]];
            tp.add(from, shared_of(donor), static_cast<size_t>(id - first[static_cast<size_t>(donor)]), position++,
                   seq);
            int64_t most = 0;
            for (const Node& x : from.nodes) most = std::max(most, x.seq_id + 1);
            seq += most;
          }
          tp.finish(lookups, selects);
        };
      if (end > base || !ids.empty()) {
        c = cut_role(
            ws, t,
            [&](size_t table, size_t) { return std::binary_search(ids.begin(), ids.end(), base + int64_t(table)); }, f,
            changes, move_in);
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
            (foreign.empty() ? std::string() : ", " + std::to_string(foreign.size()) + " moved in from other ranks") +
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
      const auto found = layout.find(o);
      const Layout lay = found != layout.end() ? found->second : Layout{false, false, false};
      bool any_in = false, any_out = false;
      for (const std::vector<Exchange>& other : exchanges)
        if (o < other.size()) any_in |= other[o].in_changed, any_out |= other[o].out_changed;
      const bool sender = lay.sender && (!lay.receiver || any_in || !any_out);
      const bool receiver = !sender && lay.receiver;
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
      if (even && c.name == "all_to_all" && lay.bare) {
        z.in_splits.clear();  // recorded without splits, as PyTorch records an even all_to_all
        z.out_splits.clear();
      }
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
