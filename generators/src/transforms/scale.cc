// scale: the job's world size (weak or strong scaling, collective sizes recomputed by the rules in
// docs/configs.md; embedding tables resharded over the new world with tables: reshard, or placed by a sharding plan
// with tables: [ranks]), collective message sizes, and named dimensions of the tensors (dims).
#include <optional>
#include <regex>
#include <unordered_set>

#include "group_resize.h"
#include "reprise/common/error.h"
#include "reprise/comms/collective.h"
#include "reshard.h"
#include "transform.h"

namespace reprise::gen {
namespace {

struct ScaleSpec {
  int64_t world_size = 0;
  Scaling mode = Scaling::Weak;
  bool reshard = false;       // tables: reshard
  std::vector<int64_t> plan;  // tables: [rank of table 0, rank of table 1, ...]
  double messages = 0;
  std::string only;
  std::string where;
  struct Dim {
    DimChange change;
    std::string where;      // the dimension's YAML place
    std::string ops;        // only source tensors these ops read (regex over op names; empty: all)
    int64_t position = -1;  // only this dimension index of the source tensors (-1: any)
  };
  std::vector<Dim> dims;
};

// Source tensors: those whose first use is as an input and whose storage no earlier op wrote. Tensors autograd
// saved (new records on a produced storage) are not sources: shape inference derives them from their producers.
std::vector<bool> source_tensors(const Trace& t, const std::vector<ScaleSpec::Dim>& dims, size_t d) {
  std::vector<bool> produced(t.tensors.size(), false), source(t.tensors.size(), false);
  std::vector<bool> seen(t.tensors.size(), false);
  std::unordered_set<int64_t> written;
  std::optional<std::regex> ops;
  if (!dims[d].ops.empty()) ops.emplace(dims[d].ops);
  auto walk = [&](const Value& v, auto&& f, auto&& self) -> void {
    if (v.kind == ValueKind::Tensor) f(v.ref);
    if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple)
      for (const Value& e : t.items(v)) self(e, f, self);
  };
  for (const Node& n : t.nodes) {
    const bool selected = !ops || std::regex_search(std::string(t.name(n)), *ops);
    for (const Value& v : t.inputs(n))
      walk(
          v,
          [&](uint32_t r) {
            const Tensor& x = t.tensors[r];
            if (!seen[r] && !produced[r] && !(x.storage_id > 0 && written.count(x.storage_id)) && selected)
              source[r] = true;
            seen[r] = true;
          },
          walk);
    for (const Value& v : t.outputs(n))
      walk(
          v,
          [&](uint32_t r) {
            seen[r] = produced[r] = true;
            if (t.tensors[r].storage_id > 0) written.insert(t.tensors[r].storage_id);
          },
          walk);
  }
  return source;
}

// A source tensor's dimensions equal to `from` become `to`. A dimension's stride grows by the factors of the
// dimensions inside it (smaller strides), which keeps dense tensors dense and slices of a dense tensor slices.
bool rewrite_source(Trace& t, uint32_t r, const ScaleSpec::Dim& d) {
  Tensor& x = t.tensors[r];
  std::vector<int64_t> dims(t.dims(x).begin(), t.dims(x).end()), strides = t.strides(x);
  std::vector<int64_t> factor(dims.size(), 1);
  bool changed = false;
  for (size_t k = 0; k < dims.size(); ++k)
    if (dims[k] == d.change.from && (d.position < 0 || static_cast<size_t>(d.position) == k)) {
      dims[k] = d.change.to;
      factor[k] = d.change.to;  // a ratio: applied as * to / from below
      changed = true;
    }
  if (!changed) return false;
  std::vector<int64_t> new_strides = strides;
  for (size_t k = 0; k < dims.size(); ++k)
    for (size_t j = 0; j < dims.size(); ++j)
      if (factor[j] != 1 && (strides[j] < strides[k] || (strides[j] == strides[k] && j > k)))
        new_strides[k] = new_strides[k] * d.change.to / d.change.from;
  set_dims(t, x, dims);
  if (x.has_strides) {
    x.strides = static_cast<uint32_t>(t.ints.size());
    t.ints.insert(t.ints.end(), new_strides.begin(), new_strides.end());
  }
  return true;
}

int64_t tensor_elems(const Trace& t, Span<Value> values) {
  int64_t n = 0;
  for (const Value& v : values) {
    if (v.kind == ValueKind::Tensor) n += t.tensors[v.ref].numel;
    if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple) n += tensor_elems(t, t.items(v));
  }
  return n;
}

// Collectives whose recorded sizes were those of their tensors follow the tensors' new sizes.
void follow_collective_sizes(Trace& t, const std::vector<std::pair<int64_t, int64_t>>& before) {
  for (size_t k = 0; k < t.collectives.size(); ++k) {
    const Collective c = t.collectives[k];
    if (c.is_wait) continue;
    const Node& n = t.nodes[c.node];
    const int64_t in = tensor_elems(t, t.inputs(n)), out = tensor_elems(t, t.outputs(n));
    if (before[k].first != c.in_elems || before[k].second != c.out_elems || (in == c.in_elems && out == c.out_elems))
      continue;
    if (!c.in_splits.empty() || !c.out_splits.empty()) continue;  // all_to_allv splits are not guessed
    set_collective_sizes(t, c, in, out, c.in_splits, c.out_splits);
  }
}

void scale_dims(Workspace& ws, const ScaleSpec& s) {
  if (!ws.infer_shapes)
    throw UserError(s.where + ": scale: dims needs shape inference on the meta device: use reprise-torch generate");
  std::vector<DimChange> changes;
  for (const ScaleSpec::Dim& d : s.dims) changes.push_back(d.change);
  for (size_t role = 0; role < ws.roles.size(); ++role) {
    Trace& t = ws.roles[role];
    std::vector<std::pair<int64_t, int64_t>> before;
    for (const Collective& c : t.collectives)
      before.push_back({tensor_elems(t, t.inputs(t.nodes[c.node])), tensor_elems(t, t.outputs(t.nodes[c.node]))});
    const Trace recorded = clone(t);
    std::vector<int64_t> rewritten(s.dims.size(), 0);
    for (size_t d = 0; d < s.dims.size(); ++d) {
      const std::vector<bool> source = source_tensors(t, s.dims, d);
      for (uint32_t r = 0; r < t.tensors.size(); ++r) rewritten[d] += source[r] && rewrite_source(t, r, s.dims[d]);
      if (rewritten[d] == 0)
        throw UserError(s.dims[d].where + ": dims: " + s.dims[d].change.name + ": from " +
                        std::to_string(s.dims[d].change.from) + ": a dimension no source tensor of role " +
                        std::to_string(role) + " has");
    }
    std::vector<std::string> notes;
    try {
      notes = ws.infer_shapes(recorded, t, changes);
    } catch (const UserError& e) {
      throw UserError(s.where + ": scale: dims: role " + std::to_string(role) + ": " + e.what());
    }
    follow_collective_sizes(t, before);
    reindex(t);
    for (size_t d = 0; d < s.dims.size(); ++d)
      ws.note("scale: " + s.dims[d].change.name + " " + std::to_string(s.dims[d].change.from) + " -> " +
              std::to_string(s.dims[d].change.to) + " in " + std::to_string(rewritten[d]) +
              " source tensor(s) of role " + std::to_string(role) + ", propagated on meta");
    for (const std::string& n : notes)
      if (ws.warn) ws.warn("scale: dims: role " + std::to_string(role) + ": " + n);
  }
  // The same ops at other sizes: the host's gaps between them (Python, autograd, launches) are what they were, so the
  // op times stay for replay's --host-time (a host-bound step stays host-bound); the iteration times go.
  ws.work_changed(true);
}

void parse_dims(const YAML::Node& p, const YamlFile& f, ScaleSpec& s) {
  if (!p.IsMap() || p.size() == 0) f.fail(p, "dims: expected a map such as {batch: {from: 4, to: 8}}");
  for (const auto& kv : p) {
    const std::string name = kv.first.Scalar();
    const YAML::Node& d = kv.second;
    f.expect_map(d, "dims: " + name, {"from", "to", "factor", "ops", "dim"});
    ScaleSpec::Dim x;
    x.where = f.where(d);
    x.change.name = name;
    if (!d["from"]) f.fail(d, "dims: " + name + ": expected 'from' (the dimension's size in the trace)");
    x.change.from = f.integer(d["from"], "from", 2, int64_t{1} << 40);
    if (d["to"].IsDefined() == d["factor"].IsDefined())
      f.fail(d, "dims: " + name + ": expected one of 'to' (the new size) or 'factor'");
    if (d["to"]) x.change.to = f.integer(d["to"], "to", 1, int64_t{1} << 40);
    if (d["factor"]) {
      const double k = f.number(d["factor"], "factor", 1e-6, 1e6);
      const double to = static_cast<double>(x.change.from) * k;
      if (to < 1 || to != static_cast<double>(static_cast<int64_t>(to)))
        f.fail(d["factor"], "factor: " + std::to_string(x.change.from) + " x factor is not a whole size");
      x.change.to = static_cast<int64_t>(to);
    }
    if (d["ops"]) {
      x.ops = f.string(d["ops"], "ops");
      try {
        std::regex check(x.ops);
      } catch (const std::regex_error& e) {
        f.fail(d["ops"], "ops: not a regular expression: " + std::string(e.what()));
      }
    }
    if (d["dim"]) x.position = f.integer(d["dim"], "dim", 0, 64);
    s.dims.push_back(x);
  }
}

TransformStep parse_scale(const YAML::Node& p, const ConfigContext& cx) {
  const YamlFile& f = cx.file;
  f.expect_map(p, "scale", {"world_size", "mode", "tables", "messages", "collective", "dims"});
  auto s = std::make_shared<ScaleSpec>();
  s->where = f.where(p);
  if (p["dims"]) parse_dims(p["dims"], f, *s);
  if (p["world_size"]) s->world_size = f.integer(p["world_size"], "world_size", 1, 1 << 20);
  if (p["mode"])
    s->mode = f.choice(p["mode"], "mode", {"weak", "strong"}) == "strong" ? Scaling::Strong : Scaling::Weak;
  if (p["tables"] && p["tables"].IsSequence()) {
    for (const YAML::Node& x : p["tables"]) s->plan.push_back(f.integer(x, "tables", 0, 1 << 20));
    if (s->plan.empty()) f.fail(p["tables"], "tables: the plan is empty: one rank per table");
  } else if (p["tables"]) {
    s->reshard = f.choice(p["tables"], "tables", {"reshard", "keep"}) == "reshard";
  }
  if (p["messages"]) s->messages = f.number(p["messages"], "messages", 1e-6, 1e6);
  if (p["collective"]) {
    s->only = f.string(p["collective"], "collective");
    comms::Kind k;
    if (!comms::parse_kind(s->only, k)) f.fail(p["collective"], "collective: not a collective name: " + s->only);
    s->only = comms::describe(k).name;
  }
  if (p["tables"] && s->world_size == 0 && s->plan.empty())
    f.fail(p["tables"], "tables: goes with world_size (or is a plan: a list of one rank per table)");
  if (s->world_size == 0 && s->messages == 0 && s->dims.empty() && s->plan.empty())
    f.fail(p, "scale: expected world_size, tables, messages or dims");
  if (p["mode"] && s->world_size == 0) f.fail(p["mode"], "mode: goes with world_size");
  if ((s->reshard || !s->plan.empty()) && s->mode == Scaling::Strong)
    f.fail(p["tables"], std::string("tables: ") + (s->reshard ? "reshard" : "a plan") +
                            " keeps each rank's batch (weak scaling): drop mode: strong");
  if (p["collective"] && s->messages == 0) f.fail(p["collective"], "collective: goes with messages");
  return [s](Workspace& ws) {
    if (!s->plan.empty()) {
      const int old = ws.world_size();
      place_tables(ws, s->plan, s->world_size, s->where + ": scale");
      ws.note("scale: tables placed by the plan, world size " + std::to_string(old) + " -> " +
              std::to_string(ws.world_size()) + ", " + std::to_string(ws.roles.size()) + " role(s)");
    } else if (s->world_size > 0) {
      const int old = ws.world_size();
      if (s->reshard) {
        reshard_tables(ws, s->world_size, s->where + ": scale");
      } else {
        std::vector<int64_t> sources;
        for (int64_t k = 0; k < s->world_size; ++k) sources.push_back(k % old);
        resize_world(ws, sources, s->mode, s->where + ": scale");
      }
      ws.work_changed();
      ws.note("scale: world size " + std::to_string(old) + " -> " + std::to_string(s->world_size) + " (" +
              (s->mode == Scaling::Strong ? "strong" : "weak") + (s->reshard ? ", tables resharded" : "") + "), " +
              std::to_string(ws.roles.size()) + " role(s)");
    }
    if (s->messages > 0) {
      scale_messages(ws, s->messages, s->only);
      ws.work_changed();
    }
    if (!s->dims.empty()) scale_dims(ws, *s);
  };
}

}  // namespace

const TransformDescriptor kScale{
    "scale",
    "change the world size (weak or strong scaling, tables resharded or placed by a plan), collective message sizes "
    "or tensor dimensions",
    {"world_size", "mode", "tables", "messages", "collective", "dims"},
    parse_scale};

}  // namespace reprise::gen
