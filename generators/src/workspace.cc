#include "workspace.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "reprise/generators/generate.h"

namespace reprise::gen {
namespace {

constexpr const char* kGroupInit = "## process_group:init ##";

Value string_value(Trace& t, std::string_view s) {
  Value v;
  v.kind = ValueKind::String;
  v.ref = t.strings.intern(s);
  return v;
}

void set_attr(Trace& t, uint32_t node, std::string_view name, std::string_view type, Value v) {
  Node& n = t.nodes[node];
  for (uint32_t a = n.attrs; a < n.attrs + n.num_attrs; ++a)
    if (t.str(t.attrs[a].name) == name) {
      t.attrs[a].value = static_cast<uint32_t>(t.values.size());
      t.attrs[a].type = t.strings.intern(type);
      t.values.push_back(v);
      return;
    }
  // Attributes are a node's contiguous range: move them to the end with the new one.
  const uint32_t first = static_cast<uint32_t>(t.attrs.size());
  for (uint32_t a = n.attrs; a < n.attrs + n.num_attrs; ++a) t.attrs.push_back(t.attrs[a]);
  Attr added;
  added.name = t.strings.intern(name);
  added.type = t.strings.intern(type);
  added.value = static_cast<uint32_t>(t.values.size());
  t.values.push_back(v);
  t.attrs.push_back(added);
  n.attrs = first;
  ++n.num_attrs;
}

}  // namespace

void keep_nodes(Trace& t, const std::vector<bool>& keep) {
  // 0 unknown, 1 kept, 2 dropped; a node goes when it or any ancestor is not kept.
  std::vector<uint8_t> state(t.nodes.size(), 0);
  std::vector<uint32_t> path;
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    path.clear();
    uint32_t p = i;
    while (p != kNone32 && state[p] == 0) {
      path.push_back(p);
      p = t.nodes[p].parent;
    }
    uint8_t s = p == kNone32 ? 1 : state[p];
    for (size_t k = path.size(); k-- > 0;) {
      if (s == 1 && !keep[path[k]]) s = 2;
      state[path[k]] = s;
    }
  }
  size_t out = 0;
  for (size_t i = 0; i < t.nodes.size(); ++i)
    if (state[i] == 1) t.nodes[out++] = t.nodes[i];
  t.nodes.resize(out);
  for (Node& n : t.nodes) n.collective = -1;
  reindex(t);
}

void set_attr_int(Trace& t, uint32_t node, std::string_view name, std::string_view type, int64_t v) {
  Value x;
  x.kind = ValueKind::Int;
  x.i = v;
  set_attr(t, node, name, type, x);
}

void set_attr_string(Trace& t, uint32_t node, std::string_view name, std::string_view v) {
  set_attr(t, node, name, "string", string_value(t, v));
}

std::string split_text(const std::vector<int64_t>& splits) {
  std::string s = "[";
  for (size_t i = 0; i < splits.size(); ++i) s += (i ? ", " : "") + std::to_string(splits[i]);
  return s + "]";
}

void set_collective_sizes(Trace& t, const Collective& c, int64_t in_elems, int64_t out_elems,
                          const std::vector<int64_t>& in_splits, const std::vector<int64_t>& out_splits) {
  set_attr_string(t, c.node, "collective_name", c.raw_name);
  if (!c.dtype.empty()) set_attr_string(t, c.node, "dtype", c.dtype);
  set_attr_int(t, c.node, "in_msg_nelems", "uint64", in_elems);
  set_attr_int(t, c.node, "out_msg_nelems", "uint64", out_elems);
  set_attr_string(t, c.node, "in_split_size", split_text(in_splits));
  set_attr_string(t, c.node, "out_split_size", split_text(out_splits));
}

std::string process_groups_json(const std::vector<ProcessGroup>& groups) {
  nlohmann::json list = nlohmann::json::array();
  for (const ProcessGroup& g : groups) {
    nlohmann::json j;
    j["pg_name"] = g.name;
    j["pg_desc"] = g.desc;
    j["backend_config"] = g.backend;
    j["ranks"] = g.ranks;
    j["group_size"] = g.size > 0 ? g.size : static_cast<int64_t>(g.ranks.size());
    list.push_back(j);
  }
  return list.dump();
}

void set_process_groups(Trace& t, const std::vector<ProcessGroup>& groups) {
  const std::string text = process_groups_json(groups);
  for (Node& n : t.nodes)
    if (t.name(n) == kGroupInit && n.num_inputs > 0 && t.values[n.inputs].kind == ValueKind::String) {
      t.values[n.inputs] = string_value(t, text);
      reindex(t);
      return;
    }
  // None recorded: one under the first thread (or root), as PyTorch's observer writes it.
  int64_t parent = 0, max_id = 0;
  for (const Node& n : t.nodes) {
    max_id = std::max(max_id, n.id);
    if (parent == 0 && (n.kind == NodeKind::Thread || n.kind == NodeKind::Root)) parent = n.id;
  }
  Node n;
  n.id = max_id + 1;
  n.parent_id = parent;
  n.name = t.strings.intern(kGroupInit);
  n.inputs = static_cast<uint32_t>(t.values.size());
  n.num_inputs = 1;
  t.values.push_back(string_value(t, text));
  t.arg_types.resize(t.values.size(), 0);
  t.arg_types[n.inputs] = t.strings.intern("String");
  n.outputs = static_cast<uint32_t>(t.values.size());
  t.nodes.push_back(n);
  reindex(t);
}

std::vector<int64_t> group_members(const Trace& t, const Collective& c, int world) {
  const ProcessGroup* pg = nullptr;
  for (const ProcessGroup& x : t.process_groups)
    if (x.name == c.pg_name) pg = &x;
  if (pg && !pg->ranks.empty()) return pg->ranks;
  std::vector<int64_t> out;
  if (c.global_rank_start >= 0 && c.pg_size > 0 && c.pg_size < world) {
    for (int64_t k = 0; k < c.pg_size; ++k)
      out.push_back(c.global_rank_start + k * std::max<int64_t>(c.global_rank_stride, 1));
    return out;
  }
  const int64_t n = pg && pg->size > 0 ? pg->size : (c.pg_size > 0 ? c.pg_size : world);
  for (int64_t r = 0; r < n; ++r) out.push_back(r);
  return out;
}

std::vector<IdRange> step_ranges(const Trace& t) {
  std::vector<IdRange> out;
  for (const StepSpan& s : profiler_steps(t))
    out.push_back({s.first_id, s.end_id == INT64_MAX ? INT64_MAX : s.end_id - 1});
  return out;
}

namespace {

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(uint64_t v) {
    for (int k = 0; k < 8; ++k) h = (h ^ ((v >> (8 * k)) & 0xff)) * 1099511628211ull;
  }
};

// `scalars`: whether integers count (a collective's sequence number grows every step).
void hash_value(const Trace& t, const Value& v, Fnv& f, bool scalars) {
  f.add(static_cast<uint64_t>(v.kind));
  switch (v.kind) {
    case ValueKind::Tensor: {
      const Tensor& x = t.tensors[v.ref];
      f.add(x.dtype);
      f.add(x.device);
      f.add(x.rank);
      for (int64_t d : t.dims(x)) f.add(static_cast<uint64_t>(d));
      if (x.has_strides)
        for (int64_t s : Span<int64_t>{t.ints.data() + x.strides, x.rank}) f.add(static_cast<uint64_t>(s));
      break;
    }
    case ValueKind::List:
    case ValueKind::Tuple:
      f.add(v.count);
      for (const Value& e : t.items(v)) hash_value(t, e, f, scalars);
      break;
    case ValueKind::String:
    case ValueKind::Device:
      f.add(v.ref);
      break;
    default:
      if (scalars) f.add(static_cast<uint64_t>(v.i));
  }
}

}  // namespace

std::vector<int64_t> distinct_steps(const Trace& t) {
  std::vector<int64_t> out;
  std::unordered_set<uint64_t> seen;
  size_t i = 0;
  for (const StepSpan& step : profiler_steps(t)) {
    const int64_t first = step.first_id, end = step.end_id;
    while (i < t.nodes.size() && t.nodes[i].id < first) ++i;
    Fnv f;
    for (; i < t.nodes.size() && t.nodes[i].id < end; ++i) {
      const Node& n = t.nodes[i];
      if (i == step.step->node) continue;  // ProfilerStep#N differs by its number
      f.add(n.name);
      f.add(n.op_schema);
      f.add(n.num_inputs);
      f.add(n.num_outputs);
      const bool scalars = n.collective < 0 && n.kind != NodeKind::CommOp;
      for (uint32_t a = n.inputs; a < n.inputs + n.num_inputs; ++a) {
        f.add(t.arg_types[a]);
        hash_value(t, t.values[a], f, scalars);
      }
      for (uint32_t a = n.outputs; a < n.outputs + n.num_outputs; ++a) hash_value(t, t.values[a], f, scalars);
    }
    if (seen.insert(f.h).second) out.push_back(step.step->step);
  }
  return out;
}

int spanned_world(const Trace& t) {
  int64_t world = 1;
  for (const ProcessGroup& g : t.process_groups) {
    world = std::max(world, g.size);
    for (int64_t r : g.ranks) world = std::max(world, r + 1);
  }
  for (const Collective& c : t.collectives) {
    world = std::max(world, c.pg_size);
    if (c.global_rank_start >= 0 && c.pg_size > 0)
      world = std::max(world, c.global_rank_start + std::max<int64_t>(c.global_rank_stride, 1) * (c.pg_size - 1) + 1);
  }
  return static_cast<int>(std::min<int64_t>(world, 1 << 20));
}

}  // namespace reprise::gen
