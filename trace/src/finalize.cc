#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "reader_internal.h"
#include "reprise/common/dtype.h"
#include "reprise/comms/collective.h"

namespace reprise::detail {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// RecordScope values PyTorch writes in "scope".
constexpr int kScopeBackwardFunction = 1;
constexpr int kScopeUserScope = 7;

NodeKind classify(const Trace& t, const Node& n) {
  std::string_view name = t.name(n);
  if (starts_with(name, "[pytorch|profiler|execution_")) {
    if (ends_with(name, "|process]")) return NodeKind::Root;
    if (ends_with(name, "|thread]")) return NodeKind::Thread;
  }
  if (name == "record_param_comms") return NodeKind::Collective;  // refined to Wait when decoded
  if (name == "c10d::wait" || name == "aten::wait" || name == "_c10d_functional::wait_tensor" ||
      name == "c10d_functional::wait_tensor")
    return NodeKind::Wait;
  if (starts_with(name, "c10d::") || starts_with(name, "_c10d_functional::") || starts_with(name, "c10d_functional::"))
    return NodeKind::CommOp;
  if (t.str(n.kernel_backend) == "triton" || starts_with(name, "triton_")) return NodeKind::TritonKernel;
  if (starts_with(name, "## ") || starts_with(name, "ProfilerStep#") || n.scope == kScopeUserScope ||
      starts_with(name, "nccl:"))
    return NodeKind::Annotation;
  if (starts_with(name, "autograd::") || starts_with(name, "torch::autograd::") || n.scope == kScopeBackwardFunction)
    return NodeKind::Autograd;
  if (n.op_schema != 0 || name.find("::") != std::string_view::npos) return NodeKind::Operator;
  return NodeKind::Other;
}

int64_t as_int(const Value& v) {
  if (v.kind == ValueKind::Int || v.kind == ValueKind::Bool) return v.i;
  if (v.kind == ValueKind::Double && v.d >= -9.2e18 && v.d <= 9.2e18) return static_cast<int64_t>(v.d);
  return -1;
}

std::vector<int64_t> int_list(const Trace& t, const Value& v) {
  std::vector<int64_t> out;
  if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple)
    for (const Value& e : t.items(v)) out.push_back(as_int(e));
  return out;
}

// Split sizes recorded as a string attribute: "[768, 768]".
std::vector<int64_t> parse_int_list_text(std::string_view s) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && !(s[i] == '-' || (s[i] >= '0' && s[i] <= '9'))) ++i;
    if (i >= s.size()) break;
    char* end = nullptr;
    std::string num(s.substr(i, 24));
    out.push_back(std::strtoll(num.c_str(), &end, 10));
    i += static_cast<size_t>(end - num.c_str());
  }
  return out;
}

void sum_tensors(const Trace& t, const Value& v, int64_t& elems, const Tensor*& first) {
  if (v.kind == ValueKind::Tensor) {
    const Tensor& x = t.tensors[v.ref];
    if (__builtin_add_overflow(elems, x.numel, &elems)) elems = INT64_MAX;  // check_collective_sizes reports it
    if (!first) first = &x;
  } else if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple) {
    for (const Value& e : t.items(v)) sum_tensors(t, e, elems, first);
  }
}

// torch dtype (as in ET type strings) -> the ScalarType name comm attrs use.
// A tensor's ET dtype as collectives name it: the ScalarType name ("c10::Half" -> "Half", "long int" -> "Long").
std::string comm_dtype(std::string_view d) {
  if (const Dtype* row = find_dtype(d)) return std::string(row->name);
  std::string s(d);  // unknown: capitalized, as ScalarType names are written
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}

// A group that no launch could have made is refused where it is described: replay would otherwise build it (and
// its collectives' buffers) from a negative size, or fail later naming the wrong cause.
void check_process_group(const Trace& t, const Node& n, const ProcessGroup& pg) {
  auto fail = [&](const std::string& why) {
    throw UserError(t.source + ": node " + std::to_string(n.id) + ": process group '" + pg.name + "': " + why);
  };
  if (pg.size < 0) fail("group_size " + std::to_string(pg.size) + " is negative");
  std::vector<int64_t> sorted = pg.ranks;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty() && sorted.front() < 0) fail("rank " + std::to_string(sorted.front()) + " is negative");
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i] == sorted[i - 1]) fail("rank " + std::to_string(sorted[i]) + " is listed twice");
  if (!pg.ranks.empty() && pg.size != static_cast<int64_t>(pg.ranks.size()))
    fail("group_size " + std::to_string(pg.size) + " but " + std::to_string(pg.ranks.size()) + " ranks listed");
}

void read_process_groups(Trace& t, const Node& n, const ReadOptions& opt) {
  auto in = t.inputs(n);
  if (in.empty() || in[0].kind != ValueKind::String) return;
  std::string_view text = t.str(in[0].ref);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    if (opt.warn) opt.warn(t.source + ": node " + std::to_string(n.id) + ": process group description is not JSON");
    return;
  }
  std::vector<nlohmann::json> groups;
  if (j.is_array()) {
    for (auto& g : j) groups.push_back(g);
  } else if (j.is_object()) {
    for (auto& [k, g] : j.items()) {
      if (g.is_object()) {
        if (!g.contains("pg_name")) g["pg_name"] = k;
        groups.push_back(g);
      }
    }
  }
  for (auto& g : groups) {
    if (!g.is_object()) continue;
    ProcessGroup pg;
    auto str = [&](const char* k) {
      if (!g.contains(k)) return std::string();
      return g[k].is_string() ? g[k].get<std::string>() : g[k].dump();
    };
    pg.name = str("pg_name");
    pg.desc = str("pg_desc");
    pg.backend = str("backend_config");
    if (g.contains("backend_id") && g["backend_id"].is_number_integer()) pg.backend_id = g["backend_id"].get<int64_t>();
    if (g.contains("ranks") && g["ranks"].is_array())
      for (auto& r : g["ranks"])
        if (r.is_number_integer()) pg.ranks.push_back(r.get<int64_t>());
    if (g.contains("group_size") && g["group_size"].is_number_integer())
      pg.size = g["group_size"].get<int64_t>();
    else if (g.contains("pg_size") && g["pg_size"].is_number_integer())
      pg.size = g["pg_size"].get<int64_t>();
    if (pg.size == 0) pg.size = static_cast<int64_t>(pg.ranks.size());
    check_process_group(t, n, pg);
    t.process_groups.push_back(std::move(pg));
  }
}

// Refuses the sizes no collective can have (replay sizes its buffers from them): negative element counts or
// splits, or byte counts past int64.
void check_collective_sizes(const Trace& t, const Collective& c) {
  auto fail = [&](const std::string& why) {
    throw UserError(t.source + ": node " + std::to_string(t.nodes[c.node].id) + ": collective " + c.raw_name + ": " +
                    why);
  };
  int64_t bytes = 0;
  for (auto [what, n] : {std::pair{"input", c.in_elems}, std::pair{"output", c.out_elems}}) {
    if (n < 0) fail(std::string(what) + " element count " + std::to_string(n) + " is negative");
    if (n == INT64_MAX || __builtin_mul_overflow(n, int64_t{c.itemsize}, &bytes))
      fail(std::string(what) + " of " + std::to_string(n) + " elements is past int64 bytes");
  }
  for (const std::vector<int64_t>* splits : {&c.in_splits, &c.out_splits}) {
    int64_t sum = 0;
    for (int64_t n : *splits) {
      if (n < 0) fail("split size " + std::to_string(n) + " is negative");
      if (__builtin_add_overflow(sum, n, &sum) || __builtin_mul_overflow(sum, int64_t{c.itemsize}, &bytes))
        fail("split sizes sum past int64 bytes");
    }
  }
}

}  // namespace

// The collective descriptors hold every spelling; what none of them names ("wait", "coalesced") keeps its name.
std::string normalize_collective_name(std::string_view raw) {
  while (!raw.empty() && raw[0] == '_') raw.remove_prefix(1);
  if (const comms::Descriptor* d = comms::find_trace_name(raw)) return d->name;
  return std::string(raw);
}

Collective decode_collective(const Trace& t, uint32_t idx) {
  const Node& n = t.nodes[idx];
  Collective c;
  c.node = idx;
  auto in = t.inputs(n);
  // Positional layout (every schema): [tensors?, seq, pg, rank, name, in_splits, out_splits, (grs, stride,)? size?]
  size_t k = in.size();
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].kind == ValueKind::String) {
      k = i;
      break;
    }
  if (k < in.size()) {
    c.raw_name = std::string(t.str(in[k].ref));
    if (k >= 1) c.rank = as_int(in[k - 1]);
    if (k >= 2) {
      const Value& pg = in[k - 2];
      if (pg.kind == ValueKind::Tuple || pg.kind == ValueKind::List) {
        auto parts = t.items(pg);
        if (parts.size() >= 1 && parts[0].kind == ValueKind::String) c.pg_name = std::string(t.str(parts[0].ref));
        if (parts.size() >= 2 && parts[1].kind == ValueKind::String) c.pg_desc = std::string(t.str(parts[1].ref));
      } else if (pg.kind == ValueKind::String) {
        c.pg_name = std::string(t.str(pg.ref));
      } else if (pg.kind == ValueKind::Int && pg.i != 0) {
        c.pg_name = std::to_string(pg.i);  // a backend id; resolved against process groups below
      }
    }
    if (k >= 3) {
      const Value& seq = in[k - 3];
      if (seq.kind == ValueKind::List || seq.kind == ValueKind::Tuple) {  // [seq, isP2P]
        auto parts = t.items(seq);
        if (parts.size() >= 1) c.seq = as_int(parts[0]);
        if (parts.size() >= 2) c.p2p = as_int(parts[1]) != 0, c.p2p_recorded = true;
      } else {
        c.seq = as_int(seq);
      }
    }
    if (k + 1 < in.size()) c.in_splits = int_list(t, in[k + 1]);
    if (k + 2 < in.size()) c.out_splits = int_list(t, in[k + 2]);
    size_t rest = in.size() - std::min(in.size(), k + 3);
    if (rest >= 3) {
      c.global_rank_start = as_int(in[k + 3]);
      c.global_rank_stride = as_int(in[k + 4]);
      c.pg_size = as_int(in[k + 5]);
    } else if (rest >= 1) {
      c.pg_size = as_int(in[k + 3]);
    }
  }
  const Tensor* first = nullptr;
  for (size_t i = 0; i < std::min(k, in.size()); ++i) sum_tensors(t, in[i], c.in_elems, first);
  const Tensor* first_out = nullptr;
  for (const Value& v : t.outputs(n)) sum_tensors(t, v, c.out_elems, first_out);
  if (!first) first = first_out;
  if (first) {
    c.dtype = comm_dtype(t.str(first->dtype));
    c.itemsize = first->itemsize;
  }
  // Attributes (1.1.0 on) are authoritative where present.
  for (const Attr& a : t.node_attrs(n)) {
    std::string_view name = t.str(a.name);
    const Value& v = t.values[a.value];
    std::string_view s = v.kind == ValueKind::String ? t.str(v.ref) : std::string_view();
    if (name == "collective_name")
      c.raw_name = std::string(s);
    else if (name == "dtype")
      c.dtype = std::string(s);
    else if (name == "in_msg_nelems")
      c.in_elems = as_int(v);
    else if (name == "out_msg_nelems")
      c.out_elems = as_int(v);
    else if (name == "in_split_size")
      c.in_splits = parse_int_list_text(s);
    else if (name == "out_split_size")
      c.out_splits = parse_int_list_text(s);
    else if (name == "global_rank_start")
      c.global_rank_start = as_int(v);
    else if (name == "global_rank_stride")
      c.global_rank_stride = as_int(v);
    else if (name == "pg_name")
      c.pg_name = std::string(s);
    else if (name == "pg_desc")
      c.pg_desc = std::string(s);
    else if (name == "pg_size")
      c.pg_size = as_int(v);
    else if (name == "isP2P" || name == "is_p2p")
      c.p2p = as_int(v) != 0, c.p2p_recorded = true;
  }
  if (c.itemsize == 0) c.itemsize = dtype_itemsize(c.dtype);
  c.name = normalize_collective_name(c.raw_name);
  c.is_wait = c.name == "wait";
  if (c.name == "send" || c.name == "recv") c.p2p = true;
  check_collective_sizes(t, c);
  return c;
}

void finalize_trace(Trace& t, const ReadOptions& opt) {
  std::stable_sort(t.nodes.begin(), t.nodes.end(), [](const Node& a, const Node& b) { return a.id < b.id; });
  const std::string& src = t.source;
  for (size_t i = 1; i < t.nodes.size(); ++i)
    if (t.nodes[i].id == t.nodes[i - 1].id)
      throw UserError(src + ": node " + std::to_string(t.nodes[i].id) + ": id appears twice");

  for (Node& n : t.nodes) {
    if (n.parent_id == n.id) {
      n.parent = kNone32;
      continue;
    }
    n.parent = t.find(n.parent_id);
    if (n.parent == kNone32 && n.parent_id != 0 && n.parent_id != -1)
      throw UserError(src + ": node " + std::to_string(n.id) + ": parent " + std::to_string(n.parent_id) +
                      " does not exist");
  }
  // Cycle check: 0 = unvisited, 1 = on the current path, 2 = reaches a root.
  std::vector<uint8_t> state(t.nodes.size(), 0);
  std::vector<uint32_t> path;
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    uint32_t p = i;
    path.clear();
    while (p != kNone32 && state[p] == 0) {
      state[p] = 1;
      path.push_back(p);
      p = t.nodes[p].parent;
    }
    if (p != kNone32 && state[p] == 1)
      throw UserError(src + ": node " + std::to_string(t.nodes[p].id) + ": its parents form a cycle");
    for (uint32_t q : path) state[q] = 2;
  }

  std::vector<uint32_t> counts(t.nodes.size() + 1, 0);
  for (const Node& n : t.nodes)
    if (n.parent != kNone32) ++counts[n.parent];
  uint32_t acc = 0;
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    t.nodes[i].children = acc;
    t.nodes[i].num_children = 0;
    acc += counts[i];
  }
  t.child_index.assign(acc, 0);
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    Node& n = t.nodes[i];
    if (n.parent == kNone32) continue;
    Node& p = t.nodes[n.parent];
    t.child_index[p.children + p.num_children++] = i;
  }

  t.collectives.clear();
  t.process_groups.clear();
  t.iterations.clear();
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    Node& n = t.nodes[i];
    n.kind = classify(t, n);
    std::string_view name = t.name(n);
    if (name == "## process_group:init ##") read_process_groups(t, n, opt);
    if (starts_with(name, "ProfilerStep#")) {
      Iteration it;
      it.name = std::string(name);
      it.node = i;
      it.profiler_step = true;
      it.step = std::strtoll(std::string(name.substr(13)).c_str(), nullptr, 10);
      t.iterations.push_back(it);
    } else if (starts_with(name, "## ") && ends_with(name, " ##") && name != "## process_group:init ##") {
      Iteration it;
      it.name = std::string(name);
      it.node = i;
      t.iterations.push_back(it);
    }
  }
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    Node& n = t.nodes[i];
    if (n.kind != NodeKind::Collective) continue;
    if (n.num_inputs == 0 && n.num_attrs == 0) continue;  // built from Kineto: nothing to decode
    Collective c = decode_collective(t, i);
    // Old traces name the group by its backend id; map it to the group's name.
    for (const ProcessGroup& pg : t.process_groups)
      if (pg.backend_id >= 0 && c.pg_name == std::to_string(pg.backend_id)) {
        c.pg_name = pg.name;
        if (c.pg_desc.empty()) c.pg_desc = pg.desc;
      }
    if (c.is_wait) {
      n.kind = NodeKind::Wait;
      for (size_t j = t.collectives.size(); j-- > 0;) {
        Collective& w = t.collectives[j];
        // PyTorch 2.x numbers collectives and p2p separately: a wait that says which it waits on matches only that.
        if (!w.is_wait && w.seq == c.seq && (c.pg_name.empty() || w.pg_name.empty() || w.pg_name == c.pg_name) &&
            (!c.p2p_recorded || !w.p2p_recorded || w.p2p == c.p2p)) {
          c.waits_for = static_cast<int32_t>(j);
          w.is_async = true;
          break;
        }
      }
    }
    n.collective = static_cast<int32_t>(t.collectives.size());
    t.collectives.push_back(std::move(c));
  }
}

}  // namespace reprise::detail

namespace reprise {

void reindex(Trace& t) { detail::finalize_trace(t, ReadOptions{}); }

void set_dims(Trace& t, Tensor& x, const std::vector<int64_t>& dims) {
  x.dims = static_cast<uint32_t>(t.ints.size());
  x.rank = static_cast<uint16_t>(dims.size());
  t.ints.insert(t.ints.end(), dims.begin(), dims.end());
  x.numel = 1;
  for (int64_t d : dims) x.numel *= d;
}

Trace clone(const Trace& t) {
  Trace c;
  c.source = t.source;
  c.schema = t.schema;
  c.from_kineto_only = t.from_kineto_only;
  c.rank = t.rank;
  c.metadata = t.metadata;
  for (StrId i = 1; i < t.strings.size(); ++i) c.strings.intern(t.strings.str(i));
  c.nodes = t.nodes;
  c.values = t.values;
  c.arg_types = t.arg_types;
  c.tensors = t.tensors;
  c.ints = t.ints;
  c.attrs = t.attrs;
  c.child_index = t.child_index;
  c.collectives = t.collectives;
  c.process_groups = t.process_groups;
  c.iterations = t.iterations;
  c.kineto = t.kineto;
  return c;
}

}  // namespace reprise
