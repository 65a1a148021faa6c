#include "node_reader.h"

#include "reader_internal.h"

namespace reprise::detail {

namespace od = simdjson::ondemand;

namespace {

// One node's reading. It has internal linkage, and the value tree is read here rather than in a file of its own,
// so the compiler may pass simdjson values to these functions in registers (IPA-SRA): passed in memory, they are
// spilled and reloaded in a way that stalls the CPU, and that cost a fifth of the reader's time. For the same
// reason read_value hands its argument to no other function.
struct NodeParse {
  Trace& t_;
  ErrorContext& errors_;
  JsonTree& tree_;
  std::vector<std::vector<JsonValue>>& levels_;
  ArgTrees& in_;
  ArgTrees& out_;
  std::vector<PendingAttr>& attrs_;
  Node node{};
  bool seen_id = false, seen_name = false, seen_parent = false;

  void read(od::object obj);
  void read_key(std::string_view key, od::value v);
  void read_args(od::value v, ArgTrees& a);
  void read_attr_list(od::value v);
  void set_attr(std::string_view name, std::string_view type, int32_t tree);
  void check_required() const;
  // Reads v and everything in it into the tree (strings interned); returns its index.
  int32_t read_value(od::value v, int depth = 0);

  // Callers pass v.get_int64() / v.get_string(), not v (see above).
  int64_t get_int(simdjson::simdjson_result<int64_t> v, std::string_view what) const;
  std::string_view get_str(simdjson::simdjson_result<std::string_view> v, std::string_view what) const;
  // Keeps a string valid for the rest of this node (simdjson's string buffer is reused per string).
  std::string_view keep(std::string_view s) { return t_.strings.str(t_.strings.intern(s)); }
};

void NodeParse::read(od::object obj) {
  for (auto field : obj) {
    std::string_view key = field.unescaped_key();
    od::value v = field.value();
    read_key(key, v);
  }
  check_required();
}

void NodeParse::read_key(std::string_view key, od::value v) {
  const KeyRule* rule = find_key_rule(key);
  if (!rule) {
    std::string_view k = keep(key);
    set_attr(k, {}, read_value(v));
    return;
  }
  ArgTrees& side = rule->outputs ? out_ : in_;
  switch (rule->role) {
    case KeyRole::Id:
      node.id = get_int(v.get_int64(), "id");
      seen_id = true;
      errors_.id = node.id;
      errors_.id_set = true;
      break;
    case KeyRole::Name:
      node.name = t_.strings.intern(get_str(v.get_string(), "name"));
      seen_name = true;
      break;
    case KeyRole::Parent:
      node.parent_id = get_int(v.get_int64(), rule->key);
      seen_parent = true;
      break;
    case KeyRole::Args:
      read_args(v, side);
      break;
    case KeyRole::ArgList:
      side.*(rule->list) = read_value(v);
      break;
    case KeyRole::AttrList:
      read_attr_list(v);
      break;
  }
}

// An object of lists (1.0.2+) or the values list itself (1.0.1).
void NodeParse::read_args(od::value v, ArgTrees& a) {
  if (v.type() != od::json_type::object) {
    a.values = read_value(v);
    return;
  }
  for (auto field : v.get_object()) {
    std::string_view key = field.unescaped_key();
    od::value list = field.value();
    if (int32_t ArgTrees::*which = arg_list_of(key)) a.*which = read_value(list);
  }
}

void NodeParse::read_attr_list(od::value v) {
  if (v.type() != od::json_type::array) errors_.node_fail("\"attrs\" is not a list");
  for (auto a : v.get_array()) {
    std::string_view name, type;
    int32_t value = -1;
    for (auto field : a.get_object()) {
      std::string_view key = field.unescaped_key();
      od::value fv = field.value();
      if (key == "name")
        name = keep(get_str(fv.get_string(), "attr name"));
      else if (key == "type")
        type = keep(get_str(fv.get_string(), "attr type"));
      else if (key == "value")
        value = read_value(fv);
    }
    if (name.empty()) errors_.node_fail("an attr has no name");
    if (value < 0) errors_.node_fail("attr " + std::string(name) + " has no value");
    set_attr(name, type, value);
  }
}

void NodeParse::set_attr(std::string_view name, std::string_view type, int32_t tree) {
  const NodeFieldRule* f = find_node_field(name);
  if (!f) {
    attrs_.push_back({name, type, tree});
    return;
  }
  const JsonValue& v = tree_[tree];
  if (f->set_int) {
    if (!is_int(&v)) errors_.node_fail("attr " + std::string(name) + " is not an integer");
    f->set_int(node, v.as_int());
  } else {
    if (v.t != JsonValue::Str) errors_.node_fail("attr " + std::string(name) + " is not a string");
    f->set_str(node, v.ref);
  }
  node.fields |= f->bit;
}

void NodeParse::check_required() const {
  if (!seen_id) errors_.node_fail("missing \"id\"");
  if (!seen_name) errors_.node_fail("missing \"name\"");
  if (!seen_parent) errors_.node_fail("missing \"ctrl_deps\"/\"parent\"");
}

int32_t NodeParse::read_value(od::value v, int depth) {
  if (depth > 64) errors_.node_fail("values nested more than 64 deep");
  std::vector<JsonValue>& pool = tree_.pool;
  JsonValue n;
  switch (v.type()) {
    case od::json_type::array: {
      // Elements are gathered per depth, then appended together, so an array's elements stay contiguous even
      // though each element's own children were appended while reading it.
      if (levels_.size() <= static_cast<size_t>(depth)) levels_.resize(depth + 1);
      size_t mark = levels_[depth].size();
      for (auto e : v.get_array()) {
        int32_t c = read_value(e.value(), depth + 1);
        JsonValue kid = pool[c];
        levels_[depth].push_back(kid);
        pool.pop_back();  // the child was appended last; its own children stay in the pool
      }
      n.t = JsonValue::Arr;
      n.ref = static_cast<uint32_t>(pool.size());
      n.count = static_cast<uint32_t>(levels_[depth].size() - mark);
      pool.insert(pool.end(), levels_[depth].begin() + static_cast<std::ptrdiff_t>(mark), levels_[depth].end());
      levels_[depth].resize(mark);
      break;
    }
    case od::json_type::object:
      n.t = JsonValue::Obj;
      n.ref = t_.strings.intern(v.get_object().value().raw_json().value());
      break;
    case od::json_type::number: {
      od::number num = v.get_number();
      n.t = num.is_int64() ? JsonValue::Int : num.is_uint64() ? JsonValue::UInt : JsonValue::Double;
      if (n.t == JsonValue::Int)
        n.i = num.get_int64();
      else if (n.t == JsonValue::UInt)
        n.u = num.get_uint64();
      else
        n.d = num.get_double();
      break;
    }
    case od::json_type::string:
      n.t = JsonValue::Str;
      n.ref = t_.strings.intern(v.get_string().value());
      break;
    case od::json_type::boolean:
      n.t = JsonValue::Bool;
      n.b = v.get_bool();
      break;
    case od::json_type::null:
      v.is_null();
      n.t = JsonValue::Null;
      break;
  }
  pool.push_back(n);
  return static_cast<int32_t>(pool.size() - 1);
}

int64_t NodeParse::get_int(simdjson::simdjson_result<int64_t> v, std::string_view what) const {
  int64_t x;
  if (std::move(v).get(x) != simdjson::SUCCESS) errors_.node_fail("\"" + std::string(what) + "\" is not an integer");
  return x;
}

std::string_view NodeParse::get_str(simdjson::simdjson_result<std::string_view> v, std::string_view what) const {
  std::string_view s;
  const simdjson::error_code e = std::move(v).get(s);
  if (e == simdjson::STRING_ERROR) errors_.string_fail("\"" + std::string(what) + "\"");
  if (e != simdjson::SUCCESS) errors_.node_fail("\"" + std::string(what) + "\" is not a string");
  return s;
}

}  // namespace

void ErrorContext::string_fail(const std::string& what) const {
  if (node_start && piece_data && node_start >= piece_data && node_start < piece_data + piece_size) {
    const size_t from = static_cast<size_t>(node_start - piece_data);
    std::string why;
    const size_t at = first_json_error(std::string_view(node_start, piece_size - from), why, true);
    if (at != std::string_view::npos)
      fail_at(piece_base + from + at, node_name() + ": " + what + ": invalid JSON: " + why);
  }
  node_fail(what + ": a string that is not valid JSON (a bad escape or surrogate)");
}

void NodeReader::read(od::object obj) {
  tree_.pool.clear();
  in_.reset();
  out_.reset();
  attrs_.clear();
  errors_.id_set = false;
  NodeParse p{t_, errors_, tree_, levels_, in_, out_, attrs_};
  p.read(obj);
  Node& n = p.node;
  binder_.bind_args(in_, n.inputs, n.num_inputs, "inputs");
  binder_.bind_args(out_, n.outputs, n.num_outputs, "outputs");
  n.attrs = static_cast<uint32_t>(t_.attrs.size());
  for (const PendingAttr& a : attrs_) binder_.bind_attr(a.name, a.type, a.tree);
  n.num_attrs = static_cast<uint32_t>(t_.attrs.size()) - n.attrs;
  t_.nodes.push_back(n);
  errors_.last_id = n.id;
  errors_.last_id_set = true;
}

}  // namespace reprise::detail
