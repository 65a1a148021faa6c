// Reads one ET node object, in any schema layout (schema_layout.h), into a Node of the trace.
#pragma once

#include <simdjson.h>

#include <string_view>
#include <vector>

#include "error_context.h"
#include "json_value.h"
#include "reprise/trace/trace.h"
#include "schema_layout.h"
#include "value_binder.h"

namespace reprise::detail {

class NodeReader {
 public:
  NodeReader(Trace& trace, ErrorContext& errors)
      : t_(trace), errors_(errors), tree_(trace.strings, errors), binder_(trace, tree_, errors) {}

  void read(simdjson::ondemand::object node);

 private:
  struct Seen {
    bool id = false, name = false, parent = false;
  };
  struct PendingAttr {
    std::string_view name, type;
    int32_t tree;
  };

  void read_key(std::string_view key, simdjson::ondemand::value v, Node& n, Seen& seen);
  void read_args(simdjson::ondemand::value v, ArgTrees& a);
  void read_attr_list(simdjson::ondemand::value v, Node& n);
  void set_attr(Node& n, std::string_view name, std::string_view type, int32_t tree);
  void finish(Node& n, const Seen& seen);

  int64_t get_int(simdjson::ondemand::value v, const char* what);
  std::string_view get_str(simdjson::ondemand::value v, const char* what);
  // Keeps a string valid for the rest of this node (simdjson's string buffer is reused per string).
  std::string_view keep(std::string_view s) { return t_.strings.str(t_.strings.intern(s)); }

  Trace& t_;
  ErrorContext& errors_;
  JsonTree tree_;
  ValueBinder binder_;
  ArgTrees in_, out_;
  std::vector<PendingAttr> attrs_;  // attributes without a Node field, bound after the arguments
};

}  // namespace reprise::detail
