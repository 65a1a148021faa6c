#include "node_reader.h"

namespace reprise::detail {

namespace od = simdjson::ondemand;

void NodeReader::read(od::object obj) {
  Node n;
  tree_.clear();
  in_.reset();
  out_.reset();
  attrs_.clear();
  errors_.id_set = false;
  Seen seen;
  for (auto field : obj) {
    std::string_view key = field.unescaped_key();
    od::value v = field.value();
    read_key(key, v, n, seen);
  }
  finish(n, seen);
}

void NodeReader::read_key(std::string_view key, od::value v, Node& n, Seen& seen) {
  const KeyRule* rule = find_key_rule(key);
  if (!rule) {
    std::string_view k = keep(key);
    set_attr(n, k, {}, tree_.read(v));
    return;
  }
  ArgTrees& side = rule->outputs ? out_ : in_;
  switch (rule->role) {
    case KeyRole::Id:
      n.id = get_int(v, "id");
      seen.id = true;
      errors_.id = n.id;
      errors_.id_set = true;
      break;
    case KeyRole::Name:
      n.name = t_.strings.intern(get_str(v, "name"));
      seen.name = true;
      break;
    case KeyRole::Parent:
      n.parent_id = get_int(v, rule->key);
      seen.parent = true;
      break;
    case KeyRole::Args:
      read_args(v, side);
      break;
    case KeyRole::ArgList:
      side.*(rule->list) = tree_.read(v);
      break;
    case KeyRole::AttrList:
      read_attr_list(v, n);
      break;
  }
}

// An object of lists (1.0.2+) or the values list itself (1.0.1).
void NodeReader::read_args(od::value v, ArgTrees& a) {
  if (v.type() != od::json_type::object) {
    a.values = tree_.read(v);
    return;
  }
  for (auto field : v.get_object()) {
    std::string_view key = field.unescaped_key();
    od::value list = field.value();
    if (int32_t ArgTrees::*which = arg_list_of(key)) a.*which = tree_.read(list);
  }
}

void NodeReader::read_attr_list(od::value v, Node& n) {
  if (v.type() != od::json_type::array) errors_.node_fail("\"attrs\" is not a list");
  for (auto a : v.get_array()) {
    std::string_view name, type;
    int32_t value = -1;
    for (auto field : a.get_object()) {
      std::string_view key = field.unescaped_key();
      od::value fv = field.value();
      if (key == "name")
        name = keep(get_str(fv, "attr name"));
      else if (key == "type")
        type = keep(get_str(fv, "attr type"));
      else if (key == "value")
        value = tree_.read(fv);
    }
    if (name.empty()) errors_.node_fail("an attr has no name");
    if (value < 0) errors_.node_fail("attr " + std::string(name) + " has no value");
    set_attr(n, name, type, value);
  }
}

void NodeReader::set_attr(Node& n, std::string_view name, std::string_view type, int32_t tree) {
  const NodeFieldRule* f = find_node_field(name);
  if (!f) {
    attrs_.push_back({name, type, tree});
    return;
  }
  const JsonValue& v = tree_[tree];
  if (f->set_int) {
    if (!is_int(&v)) errors_.node_fail("attr " + std::string(name) + " is not an integer");
    f->set_int(n, v.as_int());
  } else {
    if (v.t != JsonValue::Str) errors_.node_fail("attr " + std::string(name) + " is not a string");
    f->set_str(n, v.ref);
  }
  n.fields |= f->bit;
}

void NodeReader::finish(Node& n, const Seen& seen) {
  if (!seen.id) errors_.node_fail("missing \"id\"");
  if (!seen.name) errors_.node_fail("missing \"name\"");
  if (!seen.parent) errors_.node_fail("missing \"ctrl_deps\"/\"parent\"");
  binder_.bind_args(in_, n.inputs, n.num_inputs, "inputs");
  binder_.bind_args(out_, n.outputs, n.num_outputs, "outputs");
  n.attrs = static_cast<uint32_t>(t_.attrs.size());
  for (const PendingAttr& a : attrs_) binder_.bind_attr(a.name, a.type, a.tree);
  n.num_attrs = static_cast<uint32_t>(t_.attrs.size()) - n.attrs;
  t_.nodes.push_back(n);
  errors_.last_id = n.id;
  errors_.last_id_set = true;
}

int64_t NodeReader::get_int(od::value v, const char* what) {
  int64_t x;
  if (v.get_int64().get(x) != simdjson::SUCCESS) errors_.node_fail(std::string("\"") + what + "\" is not an integer");
  return x;
}

std::string_view NodeReader::get_str(od::value v, const char* what) {
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) errors_.node_fail(std::string("\"") + what + "\" is not a string");
  return s;
}

}  // namespace reprise::detail
