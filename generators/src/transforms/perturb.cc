// perturb: a variant of the same work: another floating dtype (fp32 -> bf16/fp16 across the trace), or ops dropped.
#include <regex>
#include <unordered_map>

#include "reprise/common/dtype.h"
#include "reprise/common/error.h"
#include "select_nodes.h"
#include "transform.h"

namespace reprise::gen {
namespace {

struct PerturbSpec {
  const Dtype* from = nullptr;
  const Dtype* to = nullptr;
  std::regex drop;
  std::string drop_text, drop_where;
};

// The names of a schema's arguments in order ("aten::to.dtype(Tensor(a) self, ScalarType dtype, ...) -> ..."),
// the keyword-only marker left out, as ET records one input per argument.
std::vector<std::string> argument_names(std::string_view schema) {
  std::vector<std::string> names;
  size_t open = schema.find('(');
  if (open == std::string_view::npos) return names;
  int depth = 0;
  std::string cur;
  auto flush = [&] {
    std::string a = cur;
    cur.clear();
    const size_t eq = a.find('=');
    if (eq != std::string::npos) a = a.substr(0, eq);
    while (!a.empty() && a.back() == ' ') a.pop_back();
    const size_t sp = a.rfind(' ');
    std::string name = sp == std::string::npos ? a : a.substr(sp + 1);
    if (!name.empty() && name != "*") names.push_back(name);
  };
  for (size_t i = open + 1; i < schema.size(); ++i) {
    const char ch = schema[i];
    if (depth == 0 && ch == ')') {
      flush();
      break;
    }
    if (ch == '(' || ch == '[') ++depth;
    if (ch == ')' || ch == ']') --depth;
    if (depth == 0 && ch == ',') {
      flush();
      continue;
    }
    cur += ch;
  }
  return names;
}

// "Tensor(float)" and "GenericList[Tensor(float),Int]" with `from` replaced by `to`.
std::string retyped(std::string_view type, const Dtype& from, const Dtype& to) {
  std::string s(type);
  for (std::string_view spelling : from.spellings) {
    if (spelling.empty()) continue;
    const std::string a = "Tensor(" + std::string(spelling) + ")";
    const std::string b = "Tensor(" + std::string(to.et_name) + ")";
    for (size_t at = s.find(a); at != std::string::npos; at = s.find(a, at + b.size())) s.replace(at, a.size(), b);
  }
  return s;
}

void change_dtype(Trace& t, const Dtype& from, const Dtype& to, Workspace& ws) {
  int64_t tensors = 0, args = 0;
  const StrId to_name = t.strings.intern(to.et_name);
  for (Tensor& x : t.tensors) {
    const Dtype* d = find_dtype(t.str(x.dtype));
    if (d != &from) continue;
    x.dtype = to_name;
    x.itemsize = to.itemsize;
    ++tensors;
  }
  std::unordered_map<StrId, StrId> types;
  for (StrId& ty : t.arg_types) {
    auto [it, fresh] = types.try_emplace(ty, ty);
    if (fresh) it->second = t.strings.intern(retyped(t.str(ty), from, to));
    ty = it->second;
  }
  // Explicit dtype arguments (aten::to, aten::empty, ...) that name `from`.
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (n.op_schema == 0) continue;
    const std::vector<std::string> names = argument_names(t.str(n.op_schema));
    for (size_t k = 0; k < names.size() && k < n.num_inputs; ++k) {
      Value& v = t.values[n.inputs + k];
      if ((names[k] == "dtype" || names[k] == "scalar_type") && v.kind == ValueKind::Int && v.i == from.scalar_type) {
        v.i = to.scalar_type;
        ++args;
      }
    }
  }
  for (const Collective& c : t.collectives)
    if (find_dtype(c.dtype) == &from) set_attr_string(t, c.node, "dtype", std::string(to.name));
  reindex(t);
  ws.note("perturb: " + t.source + ": " + std::to_string(tensors) + " tensors and " + std::to_string(args) +
          " dtype arguments " + std::string(from.name) + " -> " + std::string(to.name));
}

TransformStep parse_perturb(const YAML::Node& p, const ConfigContext& cx) {
  const YamlFile& f = cx.file;
  f.expect_map(p, "perturb", {"dtype", "drop"});
  auto s = std::make_shared<PerturbSpec>();
  if (p["dtype"]) {
    const YAML::Node d = p["dtype"];
    f.expect_map(d, "dtype", {"from", "to"});
    if (!d["to"]) f.fail(d, "dtype: expected 'to' (bf16, fp16, fp32, ...)");
    auto floating = [&](const YAML::Node& n, const char* key) {
      const Dtype* x = find_dtype_ignoring_case(f.string(n, key));
      if (!x) {
        static const std::unordered_map<std::string, std::string> short_names = {
            {"bf16", "BFloat16"}, {"fp16", "Half"}, {"fp32", "Float"}, {"fp64", "Double"}};
        auto it = short_names.find(n.Scalar());
        if (it != short_names.end()) x = find_dtype(it->second);
      }
      if (!x || !(x->name == "Float" || x->name == "Half" || x->name == "BFloat16" || x->name == "Double"))
        f.fail(n, std::string(key) + ": expected a floating dtype (fp32, fp16, bf16, fp64), not " + n.Scalar());
      return x;
    };
    s->to = floating(d["to"], "to");
    s->from = d["from"] ? floating(d["from"], "from") : find_dtype("Float");
    if (s->from == s->to) f.fail(d, "dtype: from and to are the same");
  }
  if (p["drop"]) {
    s->drop_text = f.string(p["drop"], "drop");
    s->drop_where = f.where(p["drop"]);
    try {
      s->drop = std::regex(s->drop_text, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      f.fail(p["drop"], "drop: not a regular expression: " + s->drop_text + " (" + e.what() + ")");
    }
  }
  if (!s->to && s->drop_text.empty()) f.fail(p, "perturb: expected dtype or drop");
  return [s](Workspace& ws) {
    ws.timing_valid = false;
    for (Trace& t : ws.roles) {
      if (s->to) change_dtype(t, *s->from, *s->to, ws);
      if (s->drop_text.empty()) continue;
      std::vector<bool> keep(t.nodes.size(), true);
      size_t dropped = 0;
      for (uint32_t i : outermost_ops(t))
        if (std::regex_search(std::string(t.name(t.nodes[i])), s->drop)) keep[i] = false, ++dropped;
      if (dropped == 0)
        throw UserError(s->drop_where + ": drop: '" + s->drop_text + "' matches no replayed op in " + t.source);
      keep_nodes(t, keep);
      ws.note("perturb: " + t.source + ": dropped " + std::to_string(dropped) + " ops matching " + s->drop_text);
    }
  };
}

}  // namespace

const TransformDescriptor kPerturb{"perturb", "another floating dtype across the trace (fp32 -> bf16, ...), or ops dropped",
                                   {"dtype", "drop"}, parse_perturb};

}  // namespace reprise::gen
